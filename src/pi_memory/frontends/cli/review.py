"""`pi-memory review` (the self-review report) and `pi-memory review link`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .shell import AGENT_CHOICE, answer, cli, cwd_option, pass_db


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
@cwd_option("The memories' workspace (default: here).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_db
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
    from ...archive.present import format_review

    answer(
        ctx,
        lambda archive: archive.review(
            since=since, until=until, project=project, agent=agent, min_count=min_count, cwd=cwd
        ),
        as_json,
        format_review,
    )


@review.command("link", context_settings={"ignore_unknown_options": True})  # a command's own flags (-q) are words
@click.argument("memory_id", metavar="MEM_ID")
@click.argument("signature", nargs=-1, required=True, type=click.UNPROCESSED)
@cwd_option("The memory's workspace (default: here).")
@click.option("--json", "as_json", is_flag=True, help="Print the link as JSON.")
@pass_db
@click.pass_context
def review_link(
    ctx: click.Context, memory_id: str, signature: tuple[str, ...], cwd: Path | None, as_json: bool
) -> None:
    """Link a memory to a finding (its signature, its sig_ key, or the command): the ledger then counts it."""
    answer(
        ctx,
        lambda archive: archive.review_link(memory_id, " ".join(signature), cwd=cwd),
        as_json,
        _link_line,
        to_json=dict,
    )


def _link_line(done: dict[str, Any]) -> str:
    state = "linked" if done["added"] else "already linked"
    return f"{state}: {done['memory_id']} -> {done['signature'] or done['key']} [{done['key']}]"
