"""`pi-memory`: the command line for people. A thin shell over `Archive`.

Each command opens the archive, calls one library method and prints the
result (text for people, `--json` for scripts). Library errors become one
line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import apsw
import click

from . import format as fmt
from .api import Archive, move_aside
from .errors import ArchiveError
from .search import timed

F = TypeVar("F", bound=Callable[..., Any])


def _db_option(fn: F) -> F:
    return click.option(
        "--db",
        "db",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="PI_MEMORY_DB",
        help="Archive file (default ~/.pi/memory/sessions.db, or $PI_MEMORY_DB).",
    )(fn)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@_db_option
@click.version_option(package_name="pi-memory")
@click.pass_context
def cli(ctx: click.Context, db: Path | None) -> None:
    """pi-memory: a local black box and long-term memory for coding agents."""
    ctx.obj = {"db": db}


@contextmanager
def open_archive(ctx: click.Context) -> Iterator[Archive]:
    """Open the archive named by --db (on the group or the command), reporting errors as one line."""
    db = ctx.find_object(dict).get("db") if ctx.find_object(dict) else None
    try:
        archive = Archive.open(db)
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None
    if archive.recovered_from is not None:
        click.echo(
            f"warning: the archive was damaged ({archive.recovery_reason}); it was moved to "
            f"{archive.recovered_from} and a fresh one was created: run `pi-memory import` to fill it again",
            err=True,
        )
    try:
        yield archive
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None
    except apsw.CorruptError as exc:
        archive.close()
        moved = move_aside(archive.path)
        raise click.ClickException(
            f"the archive is damaged ({exc}); it was moved to {moved}: run `pi-memory import` to rebuild it"
        ) from None
    except apsw.BusyError:
        raise click.ClickException("the archive is busy (another process holds a long write); try again") from None
    finally:
        try:
            archive.close()
        except apsw.Error:
            pass


def _pass_db(fn: F) -> F:
    """Accept --db after the command name too (`pi-memory search x --db f`)."""

    def set_db(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
        if value is not None:
            ctx.ensure_object(dict)["db"] = value

    return click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        expose_value=False,
        callback=set_db,
        is_eager=True,
        help="Archive file (same as the global --db).",
    )(fn)


def _emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=None))


@cli.command("import")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Re-read files even if unchanged since the last import.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_pass_db
@click.pass_context
def import_cmd(ctx: click.Context, paths: tuple[Path, ...], force: bool, as_json: bool) -> None:
    """Import session files or folders (default: the pi sessions folder)."""
    with open_archive(ctx) as archive:
        from .ingest import discover
        from .sources.pi import default_sessions_dir

        targets = list(paths) or [default_sessions_dir()]
        try:
            files = discover(targets)
        except ArchiveError as exc:
            raise click.ClickException(str(exc)) from None
        show_bar = sys.stderr.isatty() and not as_json and len(files) > 1
        with click.progressbar(length=len(files), label="importing", file=sys.stderr) if show_bar else _null_bar() as bar:
            report = archive.import_paths(files, force=force, progress=lambda _p: bar.update(1))
    if as_json:
        _emit_json(report.to_dict())
        return
    click.echo(
        f"{report.files} files ({report.unchanged} unchanged), {len(report.sessions)} sessions: "
        f"{report.added} messages added, {report.skipped} already archived"
    )
    _print_import_errors(report.errors)


def _print_import_errors(errors: list[Any]) -> None:
    by_file: dict[str, list[Any]] = {}
    for e in errors:
        by_file.setdefault(e.path, []).append(e)
    for path, errs in by_file.items():
        lines = ", ".join(str(e.line) for e in errs[:10]) + (" …" if len(errs) > 10 else "")
        click.echo(f"{path}: skipped {len(errs)} bad line(s) (line {lines}): {errs[0].error}", err=True)


class _null_bar:
    def __enter__(self) -> _null_bar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        return None


@cli.command()
@click.argument("query")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 100), help="Most hits to return.")
@click.option("--project", help="Only this project (name or cwd).")
@click.option("--since", help="Only messages on or after this date (YYYY-MM-DD).")
@click.option("--session", help="Only this session (id or 8+ char prefix).")
@click.option("--sessions", "by_session", is_flag=True, help="Rank whole sessions, not messages.")
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON.")
@_pass_db
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    limit: int,
    project: str | None,
    since: str | None,
    session: str | None,
    by_session: bool,
    as_json: bool,
) -> None:
    """Find messages by keywords in Chinese, English or both."""
    if by_session:
        if session:
            raise click.UsageError("--sessions ranks whole sessions: it cannot be combined with --session")
        with open_archive(ctx) as archive:
            found, took = timed(archive.search_sessions, query, limit=limit, project=project, since=since)
        if as_json:
            _emit_json({"query": query, "took_ms": round(took, 2), "sessions": [s.to_dict() for s in found]})
        else:
            click.echo(fmt.format_sessions(found, query))
        return
    with open_archive(ctx) as archive:
        hits, took = timed(archive.search, query, limit=limit, project=project, since=since, session=session)
    if as_json:
        _emit_json({"query": query, "took_ms": round(took, 2), "hits": [h.to_dict() for h in hits]})
    else:
        click.echo(fmt.format_search(hits, query))


@cli.command()
@click.argument("session")
@click.option("--around", "around", type=int, help="Center on this msg_id (default: the last message).")
@click.option("--before", default=4, show_default=True, type=click.IntRange(0, 50))
@click.option("--after", default=6, show_default=True, type=click.IntRange(0, 50))
@click.option("--json", "as_json", is_flag=True, help="Print the window as JSON.")
@_pass_db
@click.pass_context
def read(ctx: click.Context, session: str, around: int | None, before: int, after: int, as_json: bool) -> None:
    """Read a session around one message."""
    with open_archive(ctx) as archive:
        window = archive.read(session, around=around, before=before, after=after)
    if as_json:
        _emit_json(window.to_dict())
    else:
        click.echo(fmt.format_read(window))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_pass_db
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Size and contents of the archive."""
    with open_archive(ctx) as archive:
        st = archive.stats()
    if as_json:
        _emit_json(st.to_dict())
    else:
        click.echo(fmt.format_stats(st))


@cli.command()
@_pass_db
@click.pass_context
def check(ctx: click.Context) -> None:
    """Run SQLite's full integrity check; a damaged archive is moved aside."""
    with open_archive(ctx) as archive:
        errors = archive.check()
        if errors:
            archive.close()
            moved = move_aside(archive.path)
            raise click.ClickException(
                f"integrity check failed ({errors[0]}); the archive was moved to {moved}: run `pi-memory import` to rebuild it"
            )
    click.echo("ok")


def main() -> None:
    cli(prog_name="pi-memory")
