"""`pi-memory`: the command line for people. A thin shell over `Archive`.

Each command opens the archive, calls one library method and prints the
result (text for people, `--json` for scripts). Library errors become one
line on stderr and a non-zero exit, never a traceback: 2 for a usage error
(a bad option or value, like click's own), 1 for anything else.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import apsw
import click

from ...archive import runview
from ...archive.api import Archive, move_aside
from ...core import format as fmt
from ...core.format import plural
from ...errors import ArchiveError, BadInput
from ...runsearch import KINDS
from ...search import timed
from ...text import HIT_CLOSE, HIT_OPEN
from .progress import ImportProgress

F = TypeVar("F", bound=Callable[..., Any])


def _db_option(fn: F) -> F:
    return click.option(
        "--db",
        "db",
        type=str,  # a file path or a postgresql:// URL
        envvar="PI_MEMORY_DB",
        help="Archive file or postgresql:// URL (default ~/.pi/memory/sessions.db, or $PI_MEMORY_DB).",
    )(fn)


# Run by the pi extension, MCP clients and database owners rather than typed by people: the
# top-level help lists them apart. Every other command (new ones too) is listed as a user command.
INTERNAL_COMMANDS = frozenset({"bridge", "entries", "mcp", "pg-roles"})


class UsageProblem(click.ClickException):
    """A bad option or value the library found (a date, a kind, an ambiguous id): exit 2, like click's."""

    exit_code = 2


class _Grouped(click.Group):
    """Top-level help in two groups, each description whole (click cuts them at ~45 characters);
    each command's help ends with its examples (EXAMPLES)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        path = " ".join([*ctx.command_path.split()[1:], cmd_name])  # `memory verify`: EXAMPLES key by path
        if command is not None and not command.epilog and path in EXAMPLES:
            command.epilog = "\b\nExamples:\n" + "\n".join("  " + line for line in EXAMPLES[path])
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: dict[bool, list[tuple[str, str]]] = {False: [], True: []}
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows[name in INTERNAL_COMMANDS].append((name, command.get_short_help_str(limit=1000)))
        titles = {False: "Commands", True: "Internal commands (run by the pi extension, MCP clients, database owners)"}
        for internal in (False, True):
            if rows[internal]:
                with formatter.section(titles[internal]):
                    formatter.write_dl(rows[internal])


@click.group(
    cls=_Grouped,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Exit codes: 0 done, 1 failed (not found, damaged or busy archive), 2 usage error. "
    "`pi-memory COMMAND --help` shows each command's options and examples.",
)
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
    except BadInput as exc:
        raise UsageProblem(str(exc)) from None
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
KIND_CHOICE = click.Choice(list(KINDS))  # one vocabulary for search and recall


def _colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def _echo_marked(text: str) -> None:
    """Print text whose hits are marked ⟦like this⟧: in colour instead on a terminal (unless NO_COLOR)."""
    if _colour():
        text = text.replace(HIT_OPEN, "\x1b[1;31m").replace(HIT_CLOSE, "\x1b[0m")
    click.echo(text)


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
        from ...ingest import discover

        try:
            files = discover(list(paths) or archive.session_roots(agent))
        except ArchiveError as exc:
            raise click.ClickException(str(exc)) from None
        # a terminal gets the redrawn progress line; a pipe or a log, a line every PROGRESS_EVERY files
        display = (
            ImportProgress(len(files), sys.stderr) if sys.stderr.isatty() and not as_json and len(files) > 1 else None
        )
        lines = _progress_lines(len(files)) if display is None else None
        try:
            report = archive.import_paths(
                files,
                force=force,
                include_forgotten=include_forgotten,
                agent=agent,
                progress=(lambda _p: lines.update(1)) if lines is not None else None,
                on_progress=display,
            )
        finally:
            if display is not None:
                display.close()
    if as_json:
        _emit_json(report.to_dict())
        return
    click.echo(
        f"{plural(report.files, 'file')} ({report.unchanged} unchanged), {plural(len(report.sessions), 'session')}: "
        f"{plural(report.added, 'message')} added, {report.skipped} already archived"
    )
    _print_import_errors(report.errors)


def _print_import_errors(errors: list[Any]) -> None:
    by_file: dict[str, list[Any]] = {}
    for e in errors:
        by_file.setdefault(e.path, []).append(e)
    for path, errs in by_file.items():
        lines = ", ".join(str(e.line) for e in errs[:10]) + (" …" if len(errs) > 10 else "")
        click.echo(f"{path}: skipped {len(errs)} bad line(s) (line {lines}): {errs[0].error}", err=True)


PROGRESS_EVERY = 200  # files between two progress lines when stderr is not a terminal


class _progress_lines:
    """Progress without a terminal (a pipe, a log): one line on stderr every PROGRESS_EVERY files."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0

    def __enter__(self) -> _progress_lines:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        self.done += n
        if self.done % PROGRESS_EVERY == 0 and self.done < self.total:
            click.echo(f"importing: {self.done}/{self.total} files", err=True)


@cli.command()
@click.argument("query")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 100), help="Most hits to return.")
@click.option("--project", help="Only this project (name or cwd).")
@click.option("--since", help="Only messages on or after this date (YYYY-MM-DD).")
@click.option("--session", help="Only this session (short id as listed, full id, or 8+ char prefix).")
@click.option(
    "--scope",
    type=click.Choice(["content", "summary"]),
    default="content",
    show_default=True,
    help="content: message text; summary: one line per run, from run summaries only.",
)
@click.option("--kind", "kinds", multiple=True, type=KIND_CHOICE, help="Only messages of this kind (repeatable).")
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
    """Find messages by keywords in Chinese, English or both.

    \b
    How a query works:
    - Its words are OR-ed: a message with any of them can be a hit. Messages with
      more of them, and with the rarer ones, rank first (a rare word weighs more
      than a common one); holding the whole query in order ranks higher still.
    - Chinese has no spaces, so it is matched by pairs of characters: 缓存索引
      looks for 缓存, 存索 and 索引; single characters count too but weigh less
      (a one-character query finds that character). Traditional and simplified
      are folded: 寶玉 finds 宝玉.
    - English and identifiers: case does not matter, a word matches whole words,
      and identifiers are split: `api key` finds OPENAI_API_KEY and apiKey.
    - Quotes, AND, OR, NEAR, *, ^ and chars: are plain text, never syntax.
    Hits show every occurrence of the query's words, in colour on a terminal and
    between ⟦ ⟧ otherwise (also in --json snippets).
    """
    from ...pg import team_search_options

    if not query.strip():
        raise UsageProblem("the query is empty: give one or more words (pi-memory search --help explains queries)")
    if by_session:
        if session:
            raise click.UsageError("--sessions ranks whole sessions: it cannot be combined with --session")
        with open_archive(ctx) as archive:
            found, took = timed(archive.search_sessions, query, limit=limit, project=project, since=since)
        if as_json:
            _emit_json({"query": query, "took_ms": round(took, 2), "sessions": [s.to_dict() for s in found]})
        else:
            _echo_marked(fmt.format_sessions(found, query))
        return
    with open_archive(ctx) as archive:
        who = team_search_options(archive, mine=mine, team=team, authors=authors)
        local: dict[str, Any] = {k: v for k, v in (("kinds", kinds), ("path", path), ("agent", agent)) if v}
        if scope != "content":
            local["scope"] = scope
        hits, took = timed(
            archive.search, query, limit=limit, project=project, since=since, session=session, **local, **who
        )
        addresses = archive.addresses(h.msg_id for h in hits) if scope == "content" and not as_json else {}
    if as_json:
        _emit_json({"query": query, "scope": scope, "took_ms": round(took, 2), "hits": [h.to_dict() for h in hits]})
    elif scope == "summary":
        _echo_marked(runview.format_summary_hits(hits, query))
    else:
        _echo_marked(fmt.format_search(hits, query, addresses=addresses))


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
        click.echo(fmt.format_read(window, short_ids=True))


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
@click.option("--session", help="Report this session's windows (short id, id or 8+ char prefix).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_pass_db
@click.pass_context
def status(ctx: click.Context, cwd: Path | None, session: str | None, as_json: bool) -> None:
    """Compaction and memory settings in effect, archive size, the last compaction (read-only)."""
    from ...compact.status import format_status

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
    from ...compact.recall import format_entries

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
@click.option("--session", help="Only this session (short id as listed, full id, or 8+ char prefix).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000), help="Most runs to list.")
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
            click.echo(f"rebuilt {plural(total, 'run')}", err=True)
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
@click.option("--yes", is_flag=True, help="Do not ask; needed when stdin is not a terminal (scripts, pipes).")
@click.option("--json", "as_json", is_flag=True, help="Print what was forgotten as JSON.")
@_pass_db
@click.pass_context
def forget(ctx: click.Context, target: str, yes: bool, as_json: bool) -> None:
    """Delete a session (short id, id or prefix), a run (rN) or a message (msg id) for good.

    It asks first. Without a terminal to ask on it refuses unless --yes is given.
    """
    with open_archive(ctx) as archive:
        plan = archive.plan_forget(target)
        if not yes:
            if not _interactive():
                raise UsageProblem(f"not forgetting {plan.describe()}: use --yes to forget without a terminal")
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
        from ..mcp_server import serve_stdio
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
        from ..watch import watch as follow
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
    """Check the installation (extras, pi and pi-memory on PATH, the pi extension) and warn about
    agent sessions that may be deleted before they are archived (Claude Code's cleanup)."""
    from .install import format_checks, gather_facts, installation_checks, problems

    checks = installation_checks(gather_facts())
    with open_archive(ctx) as archive:
        advice = archive.doctor()
    if as_json:
        _emit_json({**advice.to_dict(), "install": [c.to_dict() for c in checks]})
        return
    click.echo("installation:")
    for line in format_checks(checks):
        click.echo(line)
    for check in problems(checks):
        advice.warnings.append(f"{check.name}: {check.detail}")
    click.echo(f"Claude Code: {plural(advice.files, 'session file')}, {advice.unarchived} not archived as they are now")
    click.echo(f"  cleanupPeriodDays = {advice.cleanup_days}{' (default)' if advice.cleanup_is_default else ''}")
    if advice.missing_sources:
        click.echo(
            f"{plural(advice.missing_sources, 'archived session')} no longer "
            f"{'has' if advice.missing_sources == 1 else 'have'} a source file (kept in the archive)"
        )
    for warning in advice.warnings:
        click.echo(f"warning: {warning}")
    if not advice.warnings:
        click.echo("ok")


@cli.command()
@click.option("--agent", type=AGENT_CHOICE, help="Only sessions of this agent.")
@click.option("--project", help="Only this project (name or cwd).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000), help="Most sessions to list.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_pass_db
@click.pass_context
def sessions(ctx: click.Context, agent: str | None, project: str | None, limit: int, as_json: bool) -> None:
    """List archived sessions, most recently active first."""
    from ...runs.catalog import format_listing

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
    from ..bridge.server import serve

    db = (ctx.find_object(dict) or {}).get("db")
    stdin = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # unbuffered: the bridge selects on it
    sys.exit(serve(db, stdin, sys.stdout.buffer))


@cli.command()
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on; past loopback needs --token."
)
@click.option(
    "--token", envvar="PI_MEMORY_WEB_TOKEN", help="Require this token from every browser (asked on a login page)."
)
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in the default browser.")
@click.option("--write", is_flag=True, help="Allow changes (confirm or forget memories); read-only without it.")
@_pass_db
@click.pass_context
def serve(ctx: click.Context, port: int, host: str, token: str | None, open_browser: bool, write: bool) -> None:
    """Browse the archive in a web browser: search, sessions, runs, the memory log (needs the web extra)."""
    from ..web import serve as run_server

    with open_archive(ctx) as archive:
        run_server(archive, host, port, token=token, write=write, open_browser=open_browser, announce=_say_err)


def _say_err(line: str) -> None:
    click.echo(line, err=True)


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


@cli.group(cls=_Grouped)
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
    from ...memory.present import format_write

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
    from ...memory.present import format_listing

    with open_archive(ctx) as archive:
        listing = archive.memory_list(cwd, " ".join(query), status=status, kind=kind, session_id=session_id)
    if as_json:
        _emit_json(listing.to_dict())
    else:
        _echo_marked(format_listing(listing))


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
        from ...memory.present import format_write

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
    from ...memory.present import format_record

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
    from ...memory.present import format_report

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
    from ...memory.present import chain_warning

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
    click.echo(f"{result.workspace}: {plural(result.added, 'event')} added, {result.already} already there")
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
        f"{result.workspace}: new chain {result.new_chain} with {plural(result.kept, 'event')}; chain {result.old_chain} "
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


# Examples shown under each command's --help (llm / sqlite-utils style). The short ids, runs and
# entry ids are those of the demo archive (`pi-memory import examples/sessions`); a test runs
# every example against it, except those of the commands in tests/test_cli_help.py's NOT_RUN.
EXAMPLES: dict[str, tuple[str, ...]] = {
    "import": ("pi-memory import", "pi-memory import examples/sessions", "pi-memory import --agent claude --json"),
    "search": (
        'pi-memory search "缓存索引 方案"',
        "pi-memory search nginx --session 6aa2dbdd",
        "pi-memory search 寶玉 --since 2026-01-01",
        "pi-memory search nginx --scope summary",
        "pi-memory search 响应式 --sessions",
        "pi-memory search legacy --kind tool_error --json",
    ),
    "read": (
        "pi-memory read 5ac092eb",
        "pi-memory read 5ac092eb --around 15 --before 2 --after 2",
        "pi-memory read r4",
        "pi-memory read r4/m1 --raw",
    ),
    "runs": ("pi-memory runs", "pi-memory runs --project chat-gateway", "pi-memory runs --session 6aa2dbdd --json"),
    "show": ("pi-memory show r6",),
    "forget": ("pi-memory forget 36b88c10 --yes", "pi-memory forget r6 --yes", "pi-memory forget 23 --yes"),
    "stats": ("pi-memory stats", "pi-memory stats --json"),
    "check": ("pi-memory check",),
    "status": ("pi-memory status", "pi-memory status --session 6aa2dbdd --json"),
    "entries": ("pi-memory entries 6aa2dbdd 85a2d914", "pi-memory entries 6aa2dbdd 85a2d914 --raw"),
    "sessions": ("pi-memory sessions", "pi-memory sessions --agent pi --limit 50", "pi-memory sessions --json"),
    "recall": (
        "pi-memory recall nginx",
        "pi-memory recall --session 6aa2dbdd --scope session nginx timeout",
        "pi-memory recall --session 6aa2dbdd --scope session --list --kind tool_call",
        "pi-memory recall --session 6aa2dbdd --scope session --file deploy/nginx.conf",
        "pi-memory recall nginx --page 2 --limit 5",
    ),
    "doctor": ("pi-memory doctor", "pi-memory doctor --json"),
    "remember": (
        'pi-memory remember --pin "use pnpm, never npm"',
        'pi-memory remember --kind decision "Redis routes queries"',
    ),
    "memories": ("pi-memory memories", "pi-memory memories pnpm --status all"),
    "forget-memory": ("pi-memory forget-memory 3f2a",),
    "memory": ("pi-memory memory list", "pi-memory memory verify --all", "pi-memory memory export -o memories.jsonl"),
    "memory remember": ('pi-memory memory remember --scope session --session 5ac092eb "try the LRU first"',),
    "memory list": ("pi-memory memory list", "pi-memory memory list --status provisional"),
    "memory show": ("pi-memory memory show 3f2a",),
    "memory forget": ("pi-memory memory forget 3f2a",),
    "memory confirm": ("pi-memory memory confirm 3f2a --pin",),
    "memory pin": ("pi-memory memory pin 3f2a",),
    "memory unpin": ("pi-memory memory unpin 3f2a",),
    "memory verify": ("pi-memory memory verify", "pi-memory memory verify --all --json"),
    "review": ("pi-memory review", "pi-memory review --since 2026-01-01 --min-count 2", "pi-memory review --json"),
    "review link": ("pi-memory review link 3 sig_1a2b3c4d",),
    "serve": ("pi-memory serve", "pi-memory serve --port 8765 --open", "pi-memory serve --write"),
    "memory export": ("pi-memory memory export -o memories.jsonl", "pi-memory memory export --raw"),
    "memory import": ("pi-memory memory import memories.jsonl",),
    "memory repair": ("pi-memory memory repair", "pi-memory memory repair --from memories.jsonl"),
    "memory inject": ("pi-memory memory inject", "pi-memory memory inject --budget 2000"),
    "watch": ("pi-memory watch", "pi-memory watch ~/.pi/agent/sessions --agent pi"),
    "mcp": ("pi-memory mcp", "claude mcp add pi-memory -- pi-memory mcp"),
    "bridge": ('PI_MEMORY_BRIDGE="python3 -m pi_memory bridge" pi',),
    "pg-roles": ("pi-memory pg-roles | psql postgresql://owner@db.internal/pi_memory",),
    "push": ("pi-memory push --to postgresql://me@db.internal/pi_memory",),
}


memory.add_command(remember_cmd, "remember")
memory.add_command(memories_cmd, "list")
memory.add_command(forget_cmd, "forget")
memory.add_command(memory_show, "show")
cli.add_command(remember_cmd, "remember")
cli.add_command(memories_cmd, "memories")
cli.add_command(forget_cmd, "forget-memory")


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
@_pass_db
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
    with open_archive(ctx) as archive:
        result = archive.recall(params, text=not as_json)
    if as_json:
        _emit_json(result)
    else:
        _echo_marked(result["text"])


# --- self-review (`pi-memory review`, `pi-memory review link`) ------------------------------


@cli.group("review", invoke_without_command=True)
@click.option("--since", help="Only runs started on or after this date (YYYY-MM-DD).")
@click.option("--until", help="Only runs started up to this date, inclusive (YYYY-MM-DD).")
@click.option("--project", help="Only this project (name or cwd).")
@click.option("--agent", type=AGENT_CHOICE, help="Only sessions of this agent.")
@click.option(
    "--min-count",
    default=3,
    show_default=True,
    type=click.IntRange(1),
    help="Draft a rule for findings seen this often.",
)
@click.option(
    "--cwd",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The memories' workspace (default: here).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_pass_db
@click.pass_context
def review(
    ctx: click.Context,
    since: str | None,
    until: str | None,
    project: str | None,
    agent: str | None,
    min_count: int,
    cwd: Path | None,
    as_json: bool,
) -> None:
    """Recurring failures, user corrections, cost of work, draft rules, and whether memories helped."""
    if ctx.invoked_subcommand is not None:
        return
    from ...review import format_report

    with open_archive(ctx) as archive:
        report = archive.review(since=since, until=until, project=project, agent=agent, min_count=min_count, cwd=cwd)
    _emit_or_echo(as_json, report.to_dict(), format_report(report))


@review.command("link", context_settings={"ignore_unknown_options": True})  # a command's own flags (-q) are words
@click.argument("memory_id", metavar="MEM_ID")
@click.argument("signature", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option(
    "--cwd",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The memory's workspace (default: here).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the link as JSON.")
@_pass_db
@click.pass_context
def review_link(
    ctx: click.Context, memory_id: str, signature: tuple[str, ...], cwd: Path | None, as_json: bool
) -> None:
    """Link a memory to a finding (its signature, its sig_ key, or the command): the ledger then counts it."""
    with open_archive(ctx) as archive:
        done = archive.review_link(memory_id, " ".join(signature), cwd=cwd)
    state = "linked" if done["added"] else "already linked"
    _emit_or_echo(as_json, done, f"{state}: {done['memory_id']} -> {done['signature'] or done['key']} [{done['key']}]")


@cli.command("pg-roles")
def pg_roles() -> None:
    """Print the SQL that creates the team archive's reader, writer and admin roles."""
    from ...pg import roles_sql

    click.echo(roles_sql(), nl=False)


@cli.command()
@click.option("--from", "source", help="Local SQLite archive to copy (default ~/.pi/memory/sessions.db).")
@click.option("--to", "target", required=True, help="The team archive: a postgresql:// URL.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def push(source: str | None, target: str, as_json: bool) -> None:
    """Copy a local archive to the team archive (idempotent; an interrupted push resumes)."""
    from ...archive.team import PgArchive
    from ...pg import pg_url
    from ...store import default_db_path

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
        f"{plural(report.sessions, 'session')} ({report.unchanged} already complete): "
        f"{plural(report.added, 'message')} added, {report.skipped} already on the team archive"
    )
