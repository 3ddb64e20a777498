"""Runs and records: `runs`, `show`, `forget`, `recall`."""

from __future__ import annotations

from typing import Any

import click

from ...archive import Archive, RunWindow
from . import shell
from .shell import KIND_CHOICE, UsageProblem, answer, cli, echo, emit_json, open_archive, pass_db


@cli.command()
@click.option("--project", help="Only this project (name or cwd).")
@click.option("--since", help="Only runs started on or after this date (YYYY-MM-DD).")
@click.option("--session", help="Only this session (short id as listed, full id, or 8+ char prefix).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000), help="Most runs to list.")
@click.option("--rebuild", is_flag=True, help="Re-segment and re-summarize every session first.")
@click.option("--json", "as_json", is_flag=True, help="Print runs as JSON.")
@pass_db
@click.pass_context
def runs(
    ctx: click.Context,
    project: str | None,
    since: str | None,
    session: str | None,
    limit: int,
    rebuild: bool,
    as_json: bool,
) -> None:
    """Recent runs (one user message to the final reply) with their summaries."""
    from ...archive.present import format_run_list, plural

    with open_archive(ctx) as archive:
        if rebuild:
            total = archive.rebuild_runs(session)
            echo(f"rebuilt {plural(total, 'run')}", err=True)
        found = archive.runs(project=project, since=since, session=session, limit=limit)
    if as_json:
        emit_json({"runs": [r.to_dict() for r in found]})
    else:
        echo(format_run_list(found))


@cli.command()
@click.argument("run")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@pass_db
@click.pass_context
def show(ctx: click.Context, run: str, as_json: bool) -> None:
    """One run, readably: summary fields, then every message."""
    from ...archive.present import format_run_show

    def read_run(archive: Archive) -> RunWindow:
        window = archive.read_address(archive.run(run).address)
        assert isinstance(window, RunWindow)  # a run's address reads the whole run
        return window

    answer(ctx, read_run, as_json, format_run_show)


@cli.command()
@click.argument("target")
@click.option("--yes", is_flag=True, help="Do not ask; needed when stdin is not a terminal (scripts, pipes).")
@click.option("--json", "as_json", is_flag=True, help="Print what was forgotten as JSON.")
@pass_db
@click.pass_context
def forget(ctx: click.Context, target: str, yes: bool, as_json: bool) -> None:
    """Delete a session (short id, id or prefix), a run (rN) or a message (msg id) for good.

    It asks first. Without a terminal to ask on it refuses unless --yes is given.
    """
    with open_archive(ctx) as archive:
        plan = archive.plan_forget(target)
        if not yes:
            shell.confirm(
                f"Forget {plan.describe()}? This cannot be undone",
                f"not forgetting {plan.describe()}: use --yes to forget without a terminal",
            )
        done = archive.forget(target)
    if as_json:
        emit_json(done.to_dict())
    else:
        echo(f"forgot {done.describe()}; {done.after_note()}")


@cli.command("recall")
@click.argument("query", nargs=-1)
@click.option("--session", help="The session (short id as listed, full id, or 8+ char prefix).")
@click.option("--scope", type=click.Choice(["branch", "session", "all"]), help="Default: branch with --branch-ids.")
@click.option("--branch-ids", help="The current branch: comma list of entry ids, a file of them, or the session file.")
@click.option("--entry-ids", help="Read exactly these entries (comma list), in session order.")
@click.option("--file", "file_path", help="Only records that read or changed this file.")
@click.option("--kind", type=KIND_CHOICE, help="Only records of this kind.")
@click.option("--source-class", type=click.Choice(["primary", "derived", "all"]), default="all", show_default=True)
@click.option("--list", "list_mode", is_flag=True, help="The newest records in scope; no query needed.")
@click.option("--page", default=1, show_default=True, type=click.IntRange(1, 200))
@click.option("--limit", default=8, show_default=True, type=click.IntRange(1, 30), help="Records per page.")
@click.option("--raw", is_flag=True, help="The verbatim session entry JSON, in segments.")
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0), help="Segment start (chars).")
@click.option("--raw-limit", default=4000, show_default=True, type=click.IntRange(1, 12000), help="Segment length.")
@click.option("--thinking", is_flag=True, help="Include thinking in the full text of read entries.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_db
@click.pass_context
def recall_cmd(ctx: click.Context, /, query: tuple[str, ...], **options: Any) -> None:
    """Search, list or read back a session's records by branch, file, kind and entry id."""
    from ...recall import branch_ids_from

    as_json = options.pop("as_json")
    if not (" ".join(query).strip() or options["file_path"] or options["entry_ids"] or options["list_mode"]):
        raise UsageProblem("give a query, --file or --entry-ids (or --list for the newest records)")
    params = {
        "query": " ".join(query),
        "session": options["session"],
        "scope": options["scope"],
        "branch_ids": branch_ids_from(options["branch_ids"]) if options["branch_ids"] else [],
        "entry_ids": options["entry_ids"] or [],
        "file": options["file_path"],
        "kind": options["kind"],
        "source_class": options["source_class"],
        "action": "list" if options["list_mode"] else None,
        "page": options["page"],
        "limit": options["limit"],
        "raw": options["raw"],
        "offset": options["offset"],
        "raw_limit": options["raw_limit"],
        "include_thinking": options["thinking"],
    }
    answer(ctx, lambda archive: archive.recall(params, text=not as_json), as_json, _text, to_json=_same, marked=True)


def _text(result: dict[str, Any]) -> str:
    return str(result["text"])


def _same(result: dict[str, Any]) -> dict[str, Any]:
    return result
