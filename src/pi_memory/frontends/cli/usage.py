"""`pi-memory usage`: tokens, cache hits and dollars by day, week, month, session, model, project;
`usage statusline` (today, one line) and `usage ledger SESSION` (what pi-memory added and saved)."""

from __future__ import annotations

import click

from .shell import AGENT_CHOICE, answer, cli, pass_db

VIEWS = ("daily", "weekly", "monthly", "session", "model", "project")


def _view_command(name: str) -> None:
    @usage.command(name)
    @click.option("--since", help="From this day on (YYYY-MM-DD, in the time zone).")
    @click.option("--until", help="Up to this day, inclusive (YYYY-MM-DD).")
    @click.option("--agent", type=AGENT_CHOICE, help="Only sessions of this agent.")
    @click.option("--project", help="Only this project (name or cwd).")
    @click.option("--session", help="Only this session (id or 8+ character prefix).")
    @click.option("--tz", help="Time zone of the days (IANA name; default: this machine's).")
    @click.option("--json", "as_json", is_flag=True, help="Print the rows and the total as JSON.")
    @pass_db
    @click.pass_context
    def view(
        ctx: click.Context,
        since: str | None,
        until: str | None,
        agent: str | None,
        project: str | None,
        session: str | None,
        tz: str | None,
        as_json: bool,
    ) -> None:
        from ...archive.present import format_usage

        answer(
            ctx,
            lambda archive: archive.usage(name, since, until, agent, project, session, tz),
            as_json,
            format_usage,
        )

    view.__doc__ = (
        f"Token usage and cost per {'day week month'.split()[VIEWS.index(name)] if name in VIEWS[:3] else name}."
    )


@cli.group("usage", invoke_without_command=True)
@click.option("--since", help="From this day on (YYYY-MM-DD, in the time zone).")
@click.option("--until", help="Up to this day, inclusive (YYYY-MM-DD).")
@click.option("--agent", type=AGENT_CHOICE, help="Only sessions of this agent.")
@click.option("--tz", help="Time zone of the days (IANA name; default: this machine's).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows and the total as JSON.")
@pass_db
@click.pass_context
def usage(
    ctx: click.Context, since: str | None, until: str | None, agent: str | None, tz: str | None, as_json: bool
) -> None:
    """Tokens, cache-hit rate and dollars per day (or week, month, session, model, project)."""
    if ctx.invoked_subcommand is not None:
        return
    from ...archive.present import format_usage

    answer(ctx, lambda archive: archive.usage("daily", since, until, agent, None, None, tz), as_json, format_usage)


for _name in VIEWS:
    _view_command(_name)


@usage.command("statusline")
@click.option("--tz", help="Time zone of today (IANA name; default: this machine's).")
@click.option("--json", "as_json", is_flag=True, help="Print today's figures as JSON.")
@pass_db
@click.pass_context
def statusline(ctx: click.Context, tz: str | None, as_json: bool) -> None:
    """Today's tokens, dollars and cache-hit rate on one line (a shell prompt, tmux)."""
    from ...archive.present import format_statusline

    answer(ctx, lambda archive: archive.usage_today(tz), as_json, format_statusline)


@usage.command("ledger")
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="Print the events and totals as JSON.")
@pass_db
@click.pass_context
def ledger(ctx: click.Context, session: str, as_json: bool) -> None:
    """What pi-memory added to a session's requests (memories, recall results) and what its folds
    and compactions removed: tokens per request, prefix-cache share around each fold, dollars."""
    from ...archive.present import format_ledger

    answer(ctx, lambda archive: archive.usage_ledger(session), as_json, format_ledger)
