"""`pi-memory`: the command line for people. A thin shell over `Archive`.

Each command opens the archive, calls one library method and prints the
result (text for people, `--json` for scripts) through `shell.answer`. This
module holds the archive's own commands (import, search, read, stats, check,
status, entries, sessions, doctor) and `main`; each other group has a module
of its own (runs, memory, review, services, team), registered by the package's `__init__`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ...archive import Archive, MessageDetail, RunWindow, find_files, move_aside, timed, tune_own_process
from ...core.format import plural
from .examples import EXAMPLES
from .progress import ImportProgress
from .shell import (
    AGENT_CHOICE,
    INTERNAL_COMMANDS,
    KIND_CHOICE,
    UsageProblem,
    answer,
    cli,
    cwd_option,
    echo,
    echo_marked,
    emit_json,
    open_archive,
    pass_db,
    say_err,
)

__all__ = ["EXAMPLES", "INTERNAL_COMMANDS", "cli", "main"]


def main() -> None:
    tune_own_process()  # the process is the CLI's: before any archive is opened
    cli(prog_name="pi-memory")


@cli.command("import")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--agent", type=AGENT_CHOICE, help="Only this agent's folders (or: read the given paths as this agent's)."
)
@click.option("--force", is_flag=True, help="Re-read files even if unchanged since the last import.")
@click.option("--include-forgotten", is_flag=True, help="Bring back what `forget` removed, if the files have it.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_db
@click.pass_context
def import_cmd(
    ctx: click.Context,
    paths: tuple[Path, ...],
    agent: str | None,
    force: bool,
    include_forgotten: bool,
    as_json: bool,
) -> None:
    """Import session files or folders (default: every pi, Claude Code and Codex folder that exists).

    Exits 1 when any file could not be read or had bad lines (each said on stderr, and listed in
    `--json` as `failed`); every good file, and every good line of those files, is imported."""
    from ...archive.present import plural

    with open_archive(ctx) as archive:
        found = find_files(list(paths) if paths else archive.session_roots(agent))
        options = {"force": force, "include_forgotten": include_forgotten, "agent": agent}
        report = _import_with_progress(archive, found.files, terminal=sys.stderr.isatty() and not as_json, **options)
    report.errors[:0] = found.errors
    if as_json:
        emit_json(report.to_dict())
    else:
        echo(
            f"{plural(report.files, 'file')} ({report.unchanged} unchanged), {plural(len(report.sessions), 'session')}: "
            f"{plural(report.added, 'message')} added, {report.skipped} already archived"
        )
        if paths and not found.files and not found.errors:
            say_err(f"no session files (*.jsonl) in {', '.join(map(str, paths))}: nothing imported")
    _print_import_errors(report.errors)
    if report.errors:
        ctx.exit(1)


def _import_with_progress(archive: Archive, files: list[Path], terminal: bool, **options: Any) -> Any:
    """A terminal gets the redrawn progress line; a pipe, a log or `--json`, nothing (stderr then
    holds only what went wrong, for whoever reads it)."""
    display = ImportProgress(len(files), sys.stderr) if terminal and len(files) > 1 else None
    try:
        return archive.import_paths(files, on_progress=display, **options)
    finally:
        if display is not None:
            display.close()


def _print_import_errors(errors: list[Any]) -> None:
    """One line a file on stderr: why it could not be read, or its bad lines (skipped, or kept
    with their invalid UTF-8 replaced: the reason says which)."""
    by_file: dict[str, list[Any]] = {}
    for e in errors:
        by_file.setdefault(e.path, []).append(e)
    for path, errs in by_file.items():
        if errs[0].line == 0:
            say_err(f"{path}: {errs[0].error}")
            continue
        lines = ", ".join(str(e.line) for e in errs[:10]) + (" …" if len(errs) > 10 else "")
        say_err(f"{path}: {plural(len(errs), 'bad line')} (line {lines}): {errs[0].error}")


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
@click.option(
    "--mode",
    type=click.Choice(["lexical", "hybrid", "semantic"]),
    default=None,
    help="lexical: words only; hybrid: words and meaning fused; semantic: meaning only "
    "(default: hybrid once `pi-memory embed` has run with the semantic extra, else lexical).",
)
@click.option(
    "--include-echoes",
    is_flag=True,
    help="Also rank what the archive's own tools put into sessions (recall calls, their results, "
    "turns that only asked the archive); left out by default.",
)
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON.")
@pass_db
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
    mode: str | None,
    include_echoes: bool,
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
    between ⟦ ⟧ otherwise (also in --json snippets). Earlier recall (calls to the
    archive's tools, their results, turns that only asked the archive) is left
    out unless --include-echoes.
    - With the semantic extra (pip install 'pi-memory[semantic]', then
      `pi-memory embed`), messages that say the same in other words are found
      too: --mode hybrid (the default then) fuses both, --mode semantic uses
      meaning alone, --mode lexical words alone.
    """
    from ...archive.present import format_search, format_summary_hits

    if not query.strip():
        raise UsageProblem("the query is empty: give one or more words (pi-memory search --help explains queries)")
    if by_session:
        if session:
            raise click.UsageError("--sessions ranks whole sessions: it cannot be combined with --session")
        _search_sessions(
            ctx, query, as_json, limit=limit, project=project, since=since, include_echoes=include_echoes, mode=mode
        )
        return
    with open_archive(ctx) as archive:
        who = archive.writer_filters(mine=mine, team=team, authors=authors)
        pairs = (("kinds", kinds), ("path", path), ("agent", agent), ("include_echoes", include_echoes), ("mode", mode))
        local: dict[str, Any] = {k: v for k, v in pairs if v}
        if scope != "content":
            local["scope"] = scope
        hits, took = timed(
            archive.search, query, limit=limit, project=project, since=since, session=session, **local, **who
        )
        addresses = archive.addresses(h.msg_id for h in hits) if scope == "content" and not as_json else {}
    if as_json:
        emit_json({"query": query, "scope": scope, "took_ms": round(took, 2), "hits": [h.to_dict() for h in hits]})
    elif scope == "summary":
        echo_marked(format_summary_hits(hits, query))
    else:
        echo_marked(format_search(hits, query, addresses=addresses))


def _search_sessions(ctx: click.Context, query: str, as_json: bool, **options: Any) -> None:
    """`search --sessions`: whole sessions ranked, with the time the search took."""
    from ...archive.present import format_sessions

    with open_archive(ctx) as archive:
        found, took = timed(archive.search_sessions, query, **options)
    if as_json:
        emit_json({"query": query, "took_ms": round(took, 2), "sessions": [s.to_dict() for s in found]})
    else:
        echo_marked(format_sessions(found, query))


@cli.command()
@click.argument("session")
@click.option("--around", "around", type=int, help="Center on this msg_id (default: the last message).")
@click.option("--before", default=4, show_default=True, type=click.IntRange(0, 50))
@click.option("--after", default=6, show_default=True, type=click.IntRange(0, 50))
@click.option("--offset", default=0, type=click.IntRange(0), help="rN: first message to show; rN/mK: page cursor.")
@click.option("--raw", is_flag=True, help="rN/mK: the verbatim source entry JSON.")
@click.option("--thinking", is_flag=True, help="rN/mK: include thinking blocks.")
@click.option("--json", "as_json", is_flag=True, help="Print the window as JSON.")
@pass_db
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
    from ...archive.present import format_detail, format_read, format_run_window

    def read_one(archive: Archive) -> Any:
        if archive.is_address(session):
            return archive.read_address(session, offset=offset, raw=raw, thinking=thinking)
        return archive.read(session, around=around, before=before, after=after)

    resume = ""

    def read_and_resume(archive: Archive) -> Any:
        nonlocal resume
        found = read_one(archive)
        if not isinstance(found, MessageDetail | RunWindow) and not as_json:
            how = archive.resume(found.session.id)  # how to continue it, while its agent still can
            resume = f"\nresume: {how.command}" if how.available else ""
        return found

    def text(found: Any) -> str:
        if isinstance(found, MessageDetail):
            return format_detail(found)
        if isinstance(found, RunWindow):
            return format_run_window(found)
        return format_read(found, short_ids=True) + resume

    answer(ctx, read_and_resume, as_json, text)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_db
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Size and contents of the archive."""
    from ...archive.present import format_stats

    answer(ctx, lambda archive: archive.stats(), as_json, format_stats)


@cli.command()
@pass_db
@click.pass_context
def check(ctx: click.Context) -> None:
    """Run SQLite's full integrity check; a damaged archive is moved aside (a team archive: recount its counters).

    Prints one line: `ok`, or on stderr what failed and where the damaged file went."""
    with open_archive(ctx, warn=False) as archive:
        if archive.recovery_reason is not None:  # damage found on opening: moved aside already
            where = (
                f"it was moved to {archive.recovered_from}" if archive.recovered_from else "another process moved it"
            )
            raise click.ClickException(
                f"integrity check failed ({archive.recovery_reason}); {where} and a fresh archive was made: "
                "run `pi-memory import` to rebuild it"
            )
        errors = archive.check()
        if errors and archive.is_team:
            raise click.ClickException(f"team archive check failed: {'; '.join(errors)}")
        if errors:
            archive.close()
            moved = move_aside(archive.path)
            raise click.ClickException(
                f"integrity check failed ({errors[0]}); the archive was moved to {moved}: run `pi-memory import` to rebuild it"
            )
    echo("ok")


@cli.command()
@cwd_option("Project folder (default: here).")
@click.option("--session", help="Report this session's windows (short id, id or 8+ char prefix).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_db
@click.pass_context
def status(ctx: click.Context, cwd: Path | None, session: str | None, as_json: bool) -> None:
    """Compaction and memory settings in effect, archive size, the last compaction (read-only)."""
    from ...archive.present import format_status

    answer(ctx, lambda archive: archive.compact_status(cwd or Path.cwd(), session), as_json, format_status)


@cli.command()
@click.argument("session")
@click.argument("entry_ids", nargs=-1, required=True)
@click.option("--raw", is_flag=True, help="Show the verbatim session entries (in segments).")
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0), help="Raw segment start (chars).")
@click.option("--limit", default=4000, show_default=True, type=click.IntRange(1, 8000), help="Raw segment length.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_db
@click.pass_context
def entries(
    ctx: click.Context, session: str, entry_ids: tuple[str, ...], raw: bool, offset: int, limit: int, as_json: bool
) -> None:
    """Read entries of a session by pi entry id (the ids a compaction checkpoint cites)."""
    from ...archive.present import format_entries

    answer(
        ctx,
        lambda archive: archive.read_entries(session, list(entry_ids), raw=raw, offset=offset, limit=limit),
        as_json,
        format_entries,
    )


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_db
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Check the installation (extras, pi and pi-memory on PATH, the pi extension), warn about
    agent sessions that may be deleted before they are archived (Claude Code's cleanup) and about
    memory logs not trusted in full (a missing key after a move to another machine)."""
    from ...archive.present import plural
    from ...memory.present import health as memory_health
    from .install import format_checks, gather_facts, installation_checks, problems

    checks = installation_checks(gather_facts())
    with open_archive(ctx) as archive:
        advice = archive.doctor()
        semantic = archive.semantic_state()
        chains = archive.memory_verify(all_workspaces=True)
    if as_json:
        memory = {"workspaces": len(chains), "broken": [{"workspace": w, **r.to_dict()} for w, r in chains if not r.ok]}
        emit_json(
            {
                **advice.to_dict(),
                "install": [c.to_dict() for c in checks],
                "semantic": semantic.to_dict(),
                "memory": memory,
            }
        )
        return
    echo("installation:")
    for line in format_checks(checks):
        echo(line)
    echo(semantic.line)
    memory_line, memory_warnings = memory_health(chains)
    echo(memory_line)
    advice.warnings.extend(memory_warnings)
    for check in problems(checks):
        advice.warnings.append(f"{check.name}: {check.detail}")
    echo(f"Claude Code: {plural(advice.files, 'session file')}, {advice.unarchived} not archived as they are now")
    echo(f"  cleanupPeriodDays = {advice.cleanup_days}{' (default)' if advice.cleanup_is_default else ''}")
    if advice.missing_sources:
        echo(
            f"{plural(advice.missing_sources, 'archived session')} no longer "
            f"{'has' if advice.missing_sources == 1 else 'have'} a source file (kept in the archive)"
        )
    for warning in advice.warnings:
        echo(f"warning: {warning}")
    if not advice.warnings:
        echo("ok")


@cli.command()
@click.option("--agent", type=AGENT_CHOICE, help="Only sessions of this agent.")
@click.option("--project", help="Only this project (name or cwd).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000), help="Most sessions to list.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_db
@click.pass_context
def sessions(ctx: click.Context, agent: str | None, project: str | None, limit: int, as_json: bool) -> None:
    """List archived sessions, most recently active first."""
    from ...archive.present import format_session_list

    answer(
        ctx,
        lambda archive: archive.sessions(agent=agent, project=project, limit=limit),
        as_json,
        format_session_list,
        to_json=lambda found: [s.to_dict() for s in found],
    )
