"""`pi-memory memory ...`: the long-term memory log, plus the `remember`, `memories` and
`forget-memory` aliases at the top level."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from .shell import F, Grouped, UsageProblem, answer, cli, cwd_option, echo, emit_json, open_archive, pass_db


def _memory_options(fn: F) -> F:
    """--cwd (the workspace) and --session, shared by every memory command."""
    fn = click.option(
        "--session", "session_id", help="Your session id: needed to see or change session-scoped memories."
    )(fn)
    return cwd_option("The workspace: memories belong to the directory an agent was started in (default: here).")(fn)


@cli.group(cls=Grouped)
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
@pass_db
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
    from ...archive.present import format_write

    options = {"kind": kind, "scope": scope, "session_id": session_id, "priority": priority, "pin": pin}
    answer(
        ctx,
        lambda archive: archive.memory_remember(cwd, " ".join(text), supersede=supersede, **options),
        as_json,
        format_write,
    )


@click.command("list")
@click.argument("query", nargs=-1)
@click.option("--status", type=click.Choice(["active", "provisional", "superseded", "resolved", "pinned", "all"]))
@click.option("--kind", type=click.Choice(["preference", "constraint", "decision", "fact", "note"]))
@click.option(
    "--mode",
    type=click.Choice(["lexical", "hybrid", "semantic"]),
    help="With a query: words only, words and meaning fused, or meaning only "
    "(default: hybrid once `pi-memory embed` has embedded the memories, else lexical).",
)
@_memory_options
@click.option("--json", "as_json", is_flag=True, help="Print the memories as JSON.")
@pass_db
@click.pass_context
def memories_cmd(
    ctx: click.Context,
    query: tuple[str, ...],
    status: str | None,
    kind: str | None,
    mode: str | None,
    cwd: Path | None,
    session_id: str | None,
    as_json: bool,
) -> None:
    """List or search this workspace's memories (default: pinned, active and recent proposals)."""
    from ...archive.present import format_memories as format_listing

    text = " ".join(query)
    answer(
        ctx,
        lambda archive: archive.memory_list(
            cwd, text, mode=mode if text.strip() else None, status=status, kind=kind, session_id=session_id
        ),
        as_json,
        format_listing,
        marked=True,
    )


def _memory_change(action: str, help_text: str) -> click.Command:
    """forget / confirm / pin / unpin: one memory id, one event."""

    @click.argument("ref", metavar="ID")
    @_memory_options
    @click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
    @pass_db
    @click.pass_context
    def command(
        ctx: click.Context, /, ref: str, cwd: Path | None, session_id: str | None, as_json: bool, **extra: Any
    ) -> None:
        from ...archive.present import format_write

        def change(archive: Any) -> Any:
            if action == "forget":
                return archive.memory_forget(cwd, ref, session_id=session_id)
            if action == "confirm":
                return archive.memory_confirm(cwd, ref, session_id=session_id, pin=bool(extra.get("pin")))
            return archive.memory_pin(cwd, ref, session_id=session_id, pinned=action == "pin")

        answer(ctx, change, as_json, format_write)

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
@pass_db
@click.pass_context
def memory_show(ctx: click.Context, ref: str, cwd: Path | None, session_id: str | None, as_json: bool) -> None:
    """Show one memory in full."""
    from ...archive.present import format_record

    answer(ctx, lambda archive: archive.memory_get(cwd, ref, session_id=session_id), as_json, format_record)


@memory.command("verify")
@cwd_option()
@click.option("--all", "all_workspaces", is_flag=True, help="Verify the chain of every workspace.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@pass_db
@click.pass_context
def memory_verify(ctx: click.Context, cwd: Path | None, all_workspaces: bool, as_json: bool) -> None:
    """Re-check every hash of the memory log; exit 1 if a chain is broken."""
    from ...archive.present import format_report

    with open_archive(ctx) as archive:
        reports = archive.memory_verify(cwd, all_workspaces=all_workspaces)
    if as_json:
        emit_json([{"workspace": ws, **r.to_dict()} for ws, r in reports])
    else:
        for ws, report in reports:
            echo(format_report(ws, report))
    if not all(r.ok for _ws, r in reports):
        ctx.exit(1)


@memory.command("export")
@cwd_option()
@click.option("--raw", is_flag=True, help="Every stored row, including those after a break (for inspection).")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file (default: stdout)."
)
@pass_db
@click.pass_context
def memory_export(ctx: click.Context, cwd: Path | None, raw: bool, output: Path | None) -> None:
    """Write the workspace's memory log as JSONL (one event per line, with its hash)."""
    from ...archive.present import chain_warning

    with open_archive(ctx) as archive:
        lines, report = archive.memory_export(cwd, raw=raw)
    text = "".join(line + "\n" for line in lines)
    if output is None:
        echo(text, nl=False)
    else:
        _write_private(output, text)
    if not report.ok:
        echo(chain_warning(report) + ("" if raw else " (exported the trusted events only; --raw for all)"), err=True)


def _write_private(path: Path, text: str) -> None:
    """An export holds the user's memories: mode 0600 whatever the umask (0666 under umask 000),
    an existing file made so too."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def _export_lines(file: Any) -> list[str]:
    """The lines of an exported memory log; a file that is not UTF-8 text is one usage error."""
    data = file.read()
    try:
        return str(data.decode("utf-8")).splitlines()
    except UnicodeDecodeError as exc:
        raise UsageProblem(f"{file.name} is not a memory export: not UTF-8 text (byte {exc.start + 1})") from None


@memory.command("import")
@click.argument("file", type=click.File("rb"))
@cwd_option()
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_db
@click.pass_context
def memory_import(ctx: click.Context, file: Any, cwd: Path | None, as_json: bool) -> None:
    """Read an exported memory log (verified first) into the workspace: a new chain, or the rest of this one."""
    from ...archive.present import plural

    lines = _export_lines(file)
    with open_archive(ctx) as archive:
        result = archive.memory_import(cwd, lines)
    if as_json:
        emit_json(result.to_dict())
        return
    echo(f"{result.workspace}: {plural(result.added, 'event')} added, {result.already} already there")
    if result.skipped_torn_line:
        echo("warning: the file's last line was incomplete and was skipped", err=True)
    if result.ignored:
        echo(f"warning: events {result.ignored} break the memory rules and are ignored when replaying", err=True)


@memory.command("repair")
@cwd_option()
@click.option("--from", "source", type=click.File("rb"), help="Start from this verified export instead.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_db
@click.pass_context
def memory_repair(ctx: click.Context, cwd: Path | None, source: Any, as_json: bool) -> None:
    """Continue a broken memory log in a new chain from its trusted events; the broken rows are kept."""
    from ...archive.present import plural

    lines = _export_lines(source) if source is not None else None
    with open_archive(ctx) as archive:
        result = archive.memory_repair(cwd, lines)
    if as_json:
        emit_json(result.to_dict())
        return
    echo(
        f"{result.workspace}: new chain {result.new_chain} with {plural(result.kept, 'event')}; chain {result.old_chain} "
        f"(broken at event {result.broken_at}: {result.reason}) is kept read-only with {result.left_behind} "
        "untrusted events: re-remember what you still want"
    )


@memory.command("inject")
@cwd_option()
@click.option("--session", "session_id", help="Include this session's own memories.")
@click.option("--budget", type=click.IntRange(0, 50_000), default=4000, show_default=True, help="Most characters.")
@pass_db
@click.pass_context
def memory_inject(ctx: click.Context, cwd: Path | None, session_id: str | None, budget: int) -> None:
    """Print the exact text the pi extension appends to the system prompt."""
    with open_archive(ctx) as archive:
        text = archive.memory_injection_text(cwd, session_id, budget)
    echo(text, nl=bool(text))


memory.add_command(remember_cmd, "remember")
memory.add_command(memories_cmd, "list")
memory.add_command(forget_cmd, "forget")
memory.add_command(memory_show, "show")
cli.add_command(remember_cmd, "remember")
cli.add_command(memories_cmd, "memories")
cli.add_command(forget_cmd, "forget-memory")
