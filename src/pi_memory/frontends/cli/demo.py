"""`pi-memory demo`: the demo archive built from the shipped sample sessions, searched once.

The user's own archive and shell are left alone: the demo archive is a file in the cache folder,
and every command printed after the search names it with `--db`.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from ...archive.demo import DEMO_QUERY, build_demo
from .shell import cli, echo

NEXT = ("sessions", "read r5/m1", "runs --project chat-gateway", "search nginx --scope summary")


def for_shell(path: Path) -> str:
    """The path as a user would type it: `~/...` under the home folder."""
    home = Path(os.path.expanduser("~"))
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


@cli.command()
@click.option("--query", default=DEMO_QUERY, show_default=True, help="What to search the demo archive for.")
@click.pass_context
def demo(ctx: click.Context, query: str) -> None:
    """Build the demo archive from the sample sessions shipped with pi-memory, and search it.

    The demo archive is ~/.cache/pi-memory/demo.db ($XDG_CACHE_HOME), never your own archive; the
    commands it prints next name it with --db. Running it again restores what was forgotten in it."""
    from .main import search

    try:
        path, report = build_demo()
    except (OSError, FileNotFoundError) as exc:
        raise click.ClickException(f"cannot build the demo archive: {exc}") from None
    db = for_shell(path)
    echo(f"demo archive: {db} ({len(report.sessions)} sample sessions, {report.added + report.skipped} messages)")
    echo(f'\n$ pi-memory --db {db} search "{query}"')
    ctx.ensure_object(dict)["db"] = str(path)
    ctx.invoke(search, query=query)
    echo("\nNext, on the same archive (your own archive was not touched):")
    for command in NEXT:
        echo(f"  pi-memory --db {db} {command}")
