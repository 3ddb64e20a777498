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
from . import runview
from .api import Archive, move_aside
from .errors import ArchiveError
from .progress import ImportProgress
from .search import timed

F = TypeVar("F", bound=Callable[..., Any])


def _db_option(fn: F) -> F:
    return click.option(
        "--db",
        "db",
        type=str,  # a file path or a postgresql:// URL
        envvar="PI_MEMORY_DB",
        help="Archive file or postgresql:// URL (default ~/.pi/memory/sessions.db, or $PI_MEMORY_DB).",
    )(fn)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@_db_option
@click.version_option(package_name="pi-memory")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """pi-memory: a local black box and long-term memory for coding agents."""
    ctx.obj = {"db": db}


@contextmanager
def open_archive(ctx: click.Context) -> Iterator[Archive]:
    """Open the archive named by --db (on the group or the command), reporting errors as one line."""
    obj = ctx.find_object(dict)
    db = obj.get("db") if obj else None
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

    def set_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value is not None:
            ctx.ensure_object(dict)["db"] = value

    return click.option(
        "--db",
        type=str,  # a file path or a postgresql:// URL
        expose_value=False,
        callback=set_db,
        is_eager=True,
        help="Archive file (same as the global --db).",
    )(fn)


def _emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=None))


AGENT_CHOICE = click.Choice(["pi", "claude", "codex"])


@cli.command("import")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--agent", type=AGENT_CHOICE, help="Only this agent's folders (or: read the given paths as this agent's)."
)
@click.option("--force", is_flag=True, help="Re-read files even if unchanged since the last import.")
@click.option("--include-forgotten", is_flag=True, help="Bring back what `forget` removed, if the files have it.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_pass_db
@click.pass_context
def import_cmd(
    ctx: click.Context,
    paths: tuple[Path, ...],
    agent: str | None,
    force: bool,
    include_forgotten: bool,
    as_json: bool,
) -> None:
    """Import session files or folders (default: every pi, Claude Code and Codex folder that exists)."""
    with open_archive(ctx) as archive:
        from .ingest import discover

        try:
            files = discover(list(paths) or archive.session_roots(agent))
        except ArchiveError as exc:
            raise click.ClickException(str(exc)) from None
        display = (
            ImportProgress(len(files), sys.stderr) if sys.stderr.isatty() and not as_json and len(files) > 1 else None
        )
        try:
            report = archive.import_paths(
                files, force=force, include_forgotten=include_forgotten, agent=agent, on_progress=display
            )
        finally:
            if display is not None:
                display.close()
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


@cli.command()
@click.argument("query")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 100), help="Most hits to return.")
@click.option("--project", help="Only this project (name or cwd).")
@click.option("--since", help="Only messages on or after this date (YYYY-MM-DD).")
@click.option("--session", help="Only this session (id or 8+ char prefix).")
@click.option(
    "--scope",
    type=click.Choice(["content", "summary"]),
    default="content",
    show_default=True,
    help="content: message text; summary: one line per run, from run summaries only.",
)
@click.option("--kind", "kinds", multiple=True, help="Only user, assistant, tool_call, tool_error or summary messages.")
@click.option("--path", help="Only messages (or runs) that read or changed this file.")
@click.option("--agent", type=AGENT_CHOICE, help="Only sessions of this agent.")
@click.option("--mine", is_flag=True, help="Team archive: only what my database role wrote (messages or runs).")
@click.option("--team", help="Team archive: only what members of this PostgreSQL role wrote.")
@click.option("--author", "authors", multiple=True, help="Team archive: only what this author wrote (repeatable).")
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
    scope: str,
    kinds: tuple[str, ...],
    path: str | None,
    agent: str | None,
    mine: bool,
    team: str | None,
    authors: tuple[str, ...],
    by_session: bool,
    as_json: bool,
) -> None:
    """Find messages by keywords in Chinese, English or both."""
    from .pg import team_search_options

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
        who = team_search_options(archive, mine=mine, team=team, authors=authors)
        local: dict[str, Any] = {k: v for k, v in (("kinds", kinds), ("path", path), ("agent", agent)) if v}
        if scope != "content":
            local["scope"] = scope
        hits, took = timed(
            archive.search, query, limit=limit, project=project, since=since, session=session, **local, **who
        )
    if as_json:
        _emit_json({"query": query, "scope": scope, "took_ms": round(took, 2), "hits": [h.to_dict() for h in hits]})
    elif scope == "summary":
        click.echo(runview.format_summary_hits(hits, query))
    else:
        click.echo(fmt.format_search(hits, query))


@cli.command()
@click.argument("session")
@click.option("--around", "around", type=int, help="Center on this msg_id (default: the last message).")
@click.option("--before", default=4, show_default=True, type=click.IntRange(0, 50))
@click.option("--after", default=6, show_default=True, type=click.IntRange(0, 50))
@click.option("--offset", default=0, type=click.IntRange(0), help="rN: first message to show; rN/mK: page cursor.")
@click.option("--raw", is_flag=True, help="rN/mK: the verbatim source entry JSON.")
@click.option("--thinking", is_flag=True, help="rN/mK: include thinking blocks.")
@click.option("--json", "as_json", is_flag=True, help="Print the window as JSON.")
@_pass_db
@click.pass_context
def read(
    ctx: click.Context,
    session: str,
    around: int | None,
    before: int,
    after: int,
    offset: int,
    raw: bool,
    thinking: bool,
    as_json: bool,
) -> None:
    """Read a session around one message, a run (r12) or one message in full (r12/m3)."""
    with open_archive(ctx) as archive:
        if archive.is_address(session):
            found = archive.read_address(session, offset=offset, raw=raw, thinking=thinking)
            _echo_address(found, as_json)
            return
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
    """Run SQLite's full integrity check; a damaged archive is moved aside (a team archive: recount its counters)."""
    with open_archive(ctx) as archive:
        errors = archive.check()
        if errors and archive.is_team:
            raise click.ClickException(f"team archive check failed: {'; '.join(errors)}")
        if errors:
            archive.close()
            moved = move_aside(archive.path)
            raise click.ClickException(
                f"integrity check failed ({errors[0]}); the archive was moved to {moved}: run `pi-memory import` to rebuild it"
            )
    click.echo("ok")


@cli.command()
@click.option("--cwd", "cwd", type=click.Path(file_okay=False, path_type=Path), help="Project folder (default: here).")
@click.option("--session", help="Report this session's windows (id or 8+ char prefix).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_pass_db
@click.pass_context
def status(ctx: click.Context, cwd: Path | None, session: str | None, as_json: bool) -> None:
    """Compaction and memory settings in effect, archive size, the last compaction (read-only)."""
    from .compact.status import format_status

    with open_archive(ctx) as archive:
        st = archive.compact_status(cwd or Path.cwd(), session)
    if as_json:
        _emit_json(st.to_dict())
    else:
        click.echo(format_status(st))


@cli.command()
@click.argument("session")
@click.argument("entry_ids", nargs=-1, required=True)
@click.option("--raw", is_flag=True, help="Show the verbatim session entries (in segments).")
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0), help="Raw segment start (chars).")
@click.option("--limit", default=4000, show_default=True, type=click.IntRange(1, 8000), help="Raw segment length.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_pass_db
@click.pass_context
def entries(
    ctx: click.Context, session: str, entry_ids: tuple[str, ...], raw: bool, offset: int, limit: int, as_json: bool
) -> None:
    """Read entries of a session by pi entry id (the ids a compaction checkpoint cites)."""
    from .compact.recall import format_entries

    with open_archive(ctx) as archive:
        found = archive.read_entries(session, list(entry_ids), raw=raw, offset=offset, limit=limit)
    if as_json:
        _emit_json(found.to_dict())
    else:
        click.echo(format_entries(found))


def _echo_address(found: Any, as_json: bool) -> None:
    if as_json:
        _emit_json(found.to_dict())
    elif hasattr(found, "next_offset"):
        click.echo(runview.format_detail(found))
    else:
        click.echo(runview.format_run_window(found))


@cli.command()
@click.option("--project", help="Only this project (name or cwd).")
@click.option("--since", help="Only runs started on or after this date (YYYY-MM-DD).")
@click.option("--session", help="Only this session (id or 8+ char prefix).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@click.option("--rebuild", is_flag=True, help="Re-segment and re-summarize every session first.")
@click.option("--json", "as_json", is_flag=True, help="Print runs as JSON.")
@_pass_db
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
    with open_archive(ctx) as archive:
        if rebuild:
            total = archive.rebuild_runs(session)
            click.echo(f"rebuilt {total} runs", err=True)
        found = archive.runs(project=project, since=since, session=session, limit=limit)
    if as_json:
        _emit_json({"runs": [r.to_dict() for r in found]})
    else:
        click.echo(runview.format_run_list(found))


@cli.command()
@click.argument("run")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@_pass_db
@click.pass_context
def show(ctx: click.Context, run: str, as_json: bool) -> None:
    """One run, readably: summary fields, then every message."""
    with open_archive(ctx) as archive:
        window = archive.read_address(archive.run(run).address)
    if as_json:
        _emit_json(window.to_dict())
    else:
        click.echo(runview.format_run_show(window))  # type: ignore[arg-type]


def _interactive() -> bool:
    return sys.stdin.isatty()


@cli.command()
@click.argument("target")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print what was forgotten as JSON.")
@_pass_db
@click.pass_context
def forget(ctx: click.Context, target: str, yes: bool, as_json: bool) -> None:
    """Delete a session (id or prefix), a run (rN) or a message (msg id) for good."""
    with open_archive(ctx) as archive:
        plan = archive.plan_forget(target)
        if not yes and _interactive():
            click.confirm(f"Forget {plan.describe()}? This cannot be undone", abort=True)
        done = archive.forget(target)
    if as_json:
        _emit_json(done.to_dict())
    else:
        click.echo(f"forgot {done.describe()}; {done.after_note()}")


@cli.command()
@_pass_db
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Serve session_search and session_read (and memory tools) to MCP clients over stdio."""
    try:
        from .mcp_server import serve_stdio
    except ImportError:
        raise click.ClickException("the MCP server needs the mcp extra: pip install 'pi-memory[mcp]'") from None
    try:
        serve_stdio((ctx.find_object(dict) or {}).get("db"))
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--agent", type=AGENT_CHOICE, help="Only this agent's folders.")
@_pass_db
@click.pass_context
def watch(ctx: click.Context, paths: tuple[Path, ...], agent: str | None) -> None:
    """Follow session folders (default: every agent's) and archive new lines as they are written."""
    try:
        from .watch import watch as follow
    except ImportError:
        raise click.ClickException("watching needs the watch extra: pip install 'pi-memory[watch]'") from None
    with open_archive(ctx) as archive:
        roots = list(paths) or archive.session_roots(agent, existing=False)
        follow(archive.follower(), roots, lambda line: click.echo(line, err=True))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_pass_db
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Warn about agent sessions that may be deleted before they are archived (Claude Code's cleanup)."""
    with open_archive(ctx) as archive:
        advice = archive.doctor()
    if as_json:
        _emit_json(advice.to_dict())
        return
    click.echo(f"Claude Code: {advice.files} session file(s), {advice.unarchived} not archived as they are now")
    click.echo(f"  cleanupPeriodDays = {advice.cleanup_days}{' (default)' if advice.cleanup_is_default else ''}")
    if advice.missing_sources:
        click.echo(f"{advice.missing_sources} archived session(s) no longer have a source file (kept in the archive)")
    for warning in advice.warnings:
        click.echo(f"warning: {warning}")
    if not advice.warnings:
        click.echo("ok")


@cli.command()
@click.option("--agent", type=AGENT_CHOICE, help="Only sessions of this agent.")
@click.option("--project", help="Only this project (name or cwd).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 500))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_pass_db
@click.pass_context
def sessions(ctx: click.Context, agent: str | None, project: str | None, limit: int, as_json: bool) -> None:
    """List archived sessions, most recently active first."""
    from .catalog import format_listing

    with open_archive(ctx) as archive:
        found = archive.sessions(agent=agent, project=project, limit=limit)
    if as_json:
        _emit_json([s.to_dict() for s in found])
    else:
        click.echo(format_listing(found))


@cli.command()
@_pass_db
@click.pass_context
def bridge(ctx: click.Context) -> None:
    """Serve the archive to the pi extension: one JSON request per line on stdin, one response per line on stdout."""
    from .bridge import serve

    db = (ctx.find_object(dict) or {}).get("db")
    stdin = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # unbuffered: the bridge selects on it
    sys.exit(serve(db, stdin, sys.stdout.buffer))


def main() -> None:
    cli(prog_name="pi-memory")


# --- long-term memory (`pi-memory memory ...`, plus the `remember`/`memories`/`forget-memory` aliases) ---


def _memory_options(fn: F) -> F:
    """--cwd (the workspace) and --session, shared by every memory command."""
    fn = click.option(
        "--session", "session_id", help="Your session id: needed to see or change session-scoped memories."
    )(fn)
    return click.option(
        "--cwd",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="The workspace: memories belong to the directory an agent was started in (default: here).",
    )(fn)


def _emit_or_echo(as_json: bool, value: Any, text: str) -> None:
    if as_json:
        _emit_json(value)
    else:
        click.echo(text)


@cli.group()
def memory() -> None:
    """Long-term memory: what you tell the agent to remember, as a tamper-evident log per workspace."""


@click.command("remember")
@click.argument("text", nargs=-1, required=True)
@click.option("--pin", is_flag=True, help="Pin it: pinned memories come first in the agent's prompt.")
@click.option(
    "--kind", type=click.Choice(["preference", "constraint", "decision", "fact", "note"]), help="Default: note."
)
@click.option("--scope", type=click.Choice(["workspace", "session"]), default="workspace", show_default=True)
@click.option("--priority", type=int, default=0, show_default=True, help="Higher comes first.")
@click.option("--supersede", help="Replace this memory (id or unique prefix) with the new text.")
@_memory_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_pass_db
@click.pass_context
def remember_cmd(
    ctx: click.Context,
    text: tuple[str, ...],
    pin: bool,
    kind: str | None,
    scope: str,
    priority: int,
    supersede: str | None,
    cwd: Path | None,
    session_id: str | None,
    as_json: bool,
) -> None:
    """Remember TEXT for this workspace (authoritative: it goes into the agent's prompt)."""
    from .memory.present import format_write

    with open_archive(ctx) as archive:
        done = archive.memory_remember(
            cwd,
            " ".join(text),
            kind=kind,
            scope=scope,
            session_id=session_id,
            priority=priority,
            pin=pin,
            supersede=supersede,
        )
    _emit_or_echo(as_json, done.to_dict(), format_write(done))


@click.command("list")
@click.argument("query", nargs=-1)
@click.option("--status", type=click.Choice(["active", "provisional", "superseded", "resolved", "pinned", "all"]))
@click.option("--kind", type=click.Choice(["preference", "constraint", "decision", "fact", "note"]))
@_memory_options
@click.option("--json", "as_json", is_flag=True, help="Print the memories as JSON.")
@_pass_db
@click.pass_context
def memories_cmd(
    ctx: click.Context,
    query: tuple[str, ...],
    status: str | None,
    kind: str | None,
    cwd: Path | None,
    session_id: str | None,
    as_json: bool,
) -> None:
    """List or search this workspace's memories (default: pinned, active and recent proposals)."""
    from .memory.present import format_listing

    with open_archive(ctx) as archive:
        listing = archive.memory_list(cwd, " ".join(query), status=status, kind=kind, session_id=session_id)
    _emit_or_echo(as_json, listing.to_dict(), format_listing(listing))


def _memory_change(action: str, help_text: str) -> click.Command:
    """forget / confirm / pin / unpin: one memory id, one event."""

    @click.argument("ref", metavar="ID")
    @_memory_options
    @click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
    @_pass_db
    @click.pass_context
    def command(
        ctx: click.Context, /, ref: str, cwd: Path | None, session_id: str | None, as_json: bool, **extra: Any
    ) -> None:
        from .memory.present import format_write

        with open_archive(ctx) as archive:
            if action == "forget":
                done = archive.memory_forget(cwd, ref, session_id=session_id)
            elif action == "confirm":
                done = archive.memory_confirm(cwd, ref, session_id=session_id, pin=bool(extra.get("pin")))
            else:
                done = archive.memory_pin(cwd, ref, session_id=session_id, pinned=action == "pin")
        _emit_or_echo(as_json, done.to_dict(), format_write(done))

    command.__doc__ = help_text
    if action == "confirm":
        command = click.option("--pin", is_flag=True, help="Pin it too.")(command)
    return click.command(action)(command)


forget_cmd = _memory_change(
    "forget", "Forget a memory: it is marked resolved (the log keeps it; `--status resolved` shows it)."
)
memory.add_command(_memory_change("confirm", "Confirm a model's provisional proposal: it becomes your active memory."))
memory.add_command(_memory_change("pin", "Pin an active memory."))
memory.add_command(_memory_change("unpin", "Unpin a memory."))


@click.command("show")
@click.argument("ref", metavar="ID")
@_memory_options
@click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
@_pass_db
@click.pass_context
def memory_show(ctx: click.Context, ref: str, cwd: Path | None, session_id: str | None, as_json: bool) -> None:
    """Show one memory in full."""
    from .memory.present import format_record

    with open_archive(ctx) as archive:
        record = archive.memory_get(cwd, ref, session_id=session_id)
    _emit_or_echo(as_json, record.to_dict(), format_record(record))


@memory.command("verify")
@click.option(
    "--cwd", type=click.Path(file_okay=False, path_type=Path), default=None, help="The workspace (default: here)."
)
@click.option("--all", "all_workspaces", is_flag=True, help="Verify the chain of every workspace.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@_pass_db
@click.pass_context
def memory_verify(ctx: click.Context, cwd: Path | None, all_workspaces: bool, as_json: bool) -> None:
    """Re-check every hash of the memory log; exit 1 if a chain is broken."""
    from .memory.present import format_report

    with open_archive(ctx) as archive:
        reports = archive.memory_verify(cwd, all_workspaces=all_workspaces)
    if as_json:
        _emit_json([{"workspace": ws, **r.to_dict()} for ws, r in reports])
    else:
        for ws, report in reports:
            click.echo(format_report(ws, report))
    if not all(r.ok for _ws, r in reports):
        ctx.exit(1)


@memory.command("export")
@click.option(
    "--cwd", type=click.Path(file_okay=False, path_type=Path), default=None, help="The workspace (default: here)."
)
@click.option("--raw", is_flag=True, help="Every stored row, including those after a break (for inspection).")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file (default: stdout)."
)
@_pass_db
@click.pass_context
def memory_export(ctx: click.Context, cwd: Path | None, raw: bool, output: Path | None) -> None:
    """Write the workspace's memory log as JSONL (one event per line, with its hash)."""
    from .memory.present import chain_warning

    with open_archive(ctx) as archive:
        lines, report = archive.memory_export(cwd, raw=raw)
    text = "".join(line + "\n" for line in lines)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
    if not report.ok:
        click.echo(
            chain_warning(report) + ("" if raw else " (exported the trusted events only; --raw for all)"), err=True
        )


@memory.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option(
    "--cwd", type=click.Path(file_okay=False, path_type=Path), default=None, help="The workspace (default: here)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_pass_db
@click.pass_context
def memory_import(ctx: click.Context, file: Any, cwd: Path | None, as_json: bool) -> None:
    """Read an exported memory log (verified first) into the workspace: a new chain, or the rest of this one."""
    lines = file.read().splitlines()
    with open_archive(ctx) as archive:
        result = archive.memory_import(cwd, lines)
    if as_json:
        _emit_json(result.to_dict())
        return
    click.echo(f"{result.workspace}: {result.added} events added, {result.already} already there")
    if result.skipped_torn_line:
        click.echo("warning: the file's last line was incomplete and was skipped", err=True)
    if result.ignored:
        click.echo(f"warning: events {result.ignored} break the memory rules and are ignored when replaying", err=True)


@memory.command("repair")
@click.option(
    "--cwd", type=click.Path(file_okay=False, path_type=Path), default=None, help="The workspace (default: here)."
)
@click.option(
    "--from", "source", type=click.File("r", encoding="utf-8"), help="Start from this verified export instead."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_pass_db
@click.pass_context
def memory_repair(ctx: click.Context, cwd: Path | None, source: Any, as_json: bool) -> None:
    """Continue a broken memory log in a new chain from its trusted events; the broken rows are kept."""
    lines = source.read().splitlines() if source is not None else None
    with open_archive(ctx) as archive:
        result = archive.memory_repair(cwd, lines)
    if as_json:
        _emit_json(result.to_dict())
        return
    click.echo(
        f"{result.workspace}: new chain {result.new_chain} with {result.kept} events; chain {result.old_chain} "
        f"(broken at event {result.broken_at}: {result.reason}) is kept read-only with {result.left_behind} "
        "untrusted events: re-remember what you still want"
    )


@memory.command("inject")
@click.option(
    "--cwd", type=click.Path(file_okay=False, path_type=Path), default=None, help="The workspace (default: here)."
)
@click.option("--session", "session_id", help="Include this session's own memories.")
@click.option("--budget", type=click.IntRange(0, 50_000), default=4000, show_default=True, help="Most characters.")
@_pass_db
@click.pass_context
def memory_inject(ctx: click.Context, cwd: Path | None, session_id: str | None, budget: int) -> None:
    """Print the exact text the pi extension appends to the system prompt."""
    with open_archive(ctx) as archive:
        text = archive.memory_injection_text(cwd, session_id, budget)
    click.echo(text, nl=bool(text))


memory.add_command(remember_cmd, "remember")
memory.add_command(memories_cmd, "list")
memory.add_command(forget_cmd, "forget")
memory.add_command(memory_show, "show")
cli.add_command(remember_cmd, "remember")
cli.add_command(memories_cmd, "memories")
cli.add_command(forget_cmd, "forget-memory")


@cli.command("recall")
@click.argument("query", nargs=-1)
@click.option("--session", help="The session (id or 8+ char prefix).")
@click.option("--scope", type=click.Choice(["branch", "session", "all"]), help="Default: branch with --branch-ids.")
@click.option("--branch-ids", help="The current branch: comma list of entry ids, a file of them, or the session file.")
@click.option("--entry-ids", help="Read exactly these entries (comma list), in session order.")
@click.option("--file", "file_path", help="Only records that read or changed this file.")
@click.option("--kind", type=click.Choice(["user", "assistant", "tool_call", "tool_result", "bash", "custom"]))
@click.option("--source-class", type=click.Choice(["primary", "derived", "all"]), default="all", show_default=True)
@click.option("--list", "list_mode", is_flag=True, help="The newest records in scope; no query needed.")
@click.option("--page", default=1, show_default=True, type=click.IntRange(1, 200))
@click.option("--limit", default=8, show_default=True, type=click.IntRange(1, 30), help="Records per page.")
@click.option("--raw", is_flag=True, help="The verbatim session entry JSON, in segments.")
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0), help="Segment start (chars).")
@click.option("--raw-limit", default=4000, show_default=True, type=click.IntRange(1, 12000), help="Segment length.")
@click.option("--thinking", is_flag=True, help="Include thinking in the full text of read entries.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_pass_db
@click.pass_context
def recall_cmd(ctx: click.Context, /, query: tuple[str, ...], **options: Any) -> None:
    """Search, list or read back a session's records by branch, file, kind and entry id."""
    from .recall import branch_ids_from

    as_json = options.pop("as_json")
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
    with open_archive(ctx) as archive:
        result = archive.recall(params, text=not as_json)
    if as_json:
        _emit_json(result)
    else:
        click.echo(result["text"])


@cli.command("pg-roles")
def pg_roles() -> None:
    """Print the SQL that creates the team archive's reader, writer and admin roles."""
    from .pg import roles_sql

    click.echo(roles_sql(), nl=False)


@cli.command()
@click.option("--from", "source", help="Local SQLite archive to copy (default ~/.pi/memory/sessions.db).")
@click.option("--to", "target", required=True, help="The team archive: a postgresql:// URL.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def push(source: str | None, target: str, as_json: bool) -> None:
    """Copy a local archive to the team archive (idempotent; an interrupted push resumes)."""
    from .pg import pg_url
    from .pg.archive import PgArchive
    from .store import default_db_path

    if pg_url(target) is None:
        raise click.ClickException("--to must be a postgresql:// URL")
    local_path = source or (None if pg_url(None) else str(default_db_path()))
    if local_path is None:
        raise click.ClickException("PI_MEMORY_DB is a URL: name the local archive with --from PATH")
    if not Path(local_path).expanduser().is_file():
        raise click.ClickException(f"no local archive at {local_path}")
    try:
        with Archive.open(local_path) as local, Archive.open(target) as team:
            assert isinstance(team, PgArchive)
            report = team.push_from(local)
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        _emit_json(report.to_dict())
        return
    click.echo(
        f"{report.sessions} sessions ({report.unchanged} already complete): "
        f"{report.added} messages added, {report.skipped} already on the team archive"
    )
