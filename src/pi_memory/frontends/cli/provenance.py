"""From history to code and back: `blame`, `files`, `history`, `export`, `resume`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ...archive import Archive
from ...archive.provenance import Blame, ChangedFiles, History
from .shell import UsageProblem, answer, cli, emit_json, open_archive, pass_db, say_err


def _progress(archive: Archive) -> None:
    """An archive from before the edit table reads its messages' edits once: say so on stderr."""

    def tell(done: int, total: int) -> None:
        if done == 1 or done == total or done % 500 == 0:
            say_err(f"reading the edits of archived sessions, once: {done}/{total} sessions")

    archive.edits_progress = tell


@cli.command()
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print every line with who wrote it as JSON.")
@pass_db
@click.pass_context
def blame(ctx: click.Context, target: str, as_json: bool) -> None:
    """Which run wrote each line of a file as it is now: PATH[:LINE[-LINE]], relative to here.

    A line is shown with the address of the message that wrote it (`pi-memory read` opens it), its
    date, agent and session, and the runs below with what the user asked; `·` marks a line no
    archived session wrote (there before, typed by hand, or written by a command).
    """
    from ...archive.present import format_blame

    def call(archive: Archive) -> Blame:
        _progress(archive)
        return archive.blame(target)

    answer(ctx, call, as_json, format_blame)


@cli.command()
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
@pass_db
@click.pass_context
def files(ctx: click.Context, target: str, as_json: bool) -> None:
    """What a session (short id, id or prefix) or a run (rN) changed, file by file."""
    from ...archive.present import format_files

    def call(archive: Archive) -> ChangedFiles:
        _progress(archive)
        return archive.changed_files(target)

    answer(ctx, call, as_json, format_files)


@cli.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@pass_db
@click.pass_context
def history(ctx: click.Context, path: str, as_json: bool) -> None:
    """Every run that changed a file (PATH relative to here), oldest first, with each change."""
    from ...archive.present import format_history

    def call(archive: Archive) -> History:
        _progress(archive)
        return archive.file_history(path)

    answer(ctx, call, as_json, format_history)


@cli.command()
@click.argument("target")
@click.option("--format", "fmt", type=click.Choice(["md", "html", "json"]), default="md", show_default=True)
@click.option("--thinking", is_flag=True, help="Include the model's thinking (left out by default).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file.")
@pass_db
@click.pass_context
def export(ctx: click.Context, target: str, fmt: str, thinking: bool, output: Path | None) -> None:
    """A session (short id, id or prefix) or a run (rN) as Markdown, one self-contained HTML file, or JSON."""
    with open_archive(ctx) as archive:
        text = archive.export(target, fmt=fmt, thinking=thinking)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror}") from None
    say_err(f"wrote {output} ({len(text.encode('utf-8')):,} bytes)")


@cli.command()
@click.argument("session")
@click.option("--exec", "run", is_flag=True, help="Run the command (in the session's folder) instead of printing it.")
@click.option("--json", "as_json", is_flag=True, help="Print the command as JSON.")
@pass_db
@click.pass_context
def resume(ctx: click.Context, session: str, run: bool, as_json: bool) -> None:
    """The agent's own command that continues a session: pi --session FILE, claude --resume ID, codex resume ID."""
    with open_archive(ctx) as archive:
        how = archive.resume(session)
    if as_json:
        emit_json(how.to_dict())
        return
    if not how.available:
        raise click.ClickException(how.reason)
    if not run:
        click.echo(how.command)
        return
    if how.cwd and not os.path.isdir(how.cwd):
        raise UsageProblem(f"the session's folder {how.cwd} is gone: cd somewhere and run {' '.join(how.argv)}")
    sys.stdout.flush()
    if how.cwd:
        os.chdir(how.cwd)
    try:
        os.execvp(how.argv[0], how.argv)
    except OSError as exc:
        raise click.ClickException(f"cannot run {how.argv[0]}: {exc.strerror}") from None
