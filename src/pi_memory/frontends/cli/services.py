"""Long-running services over the archive: `mcp`, `watch`, `bridge` (for the pi extension), `serve` (the web viewer).

Each needs an extra or a client on its other end; the command only starts it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ...errors import ArchiveError
from .shell import AGENT_CHOICE, cli, db_of, open_archive, pass_db, say_err


@cli.command()
@pass_db
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Serve session_search and session_read (and memory tools) to MCP clients over stdio."""
    try:
        from ..mcp_server import serve_stdio
    except ImportError:
        raise click.ClickException("the MCP server needs the mcp extra: pip install 'pi-memory[mcp]'") from None
    try:
        serve_stdio(db_of(ctx))
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--agent", type=AGENT_CHOICE, help="Only this agent's folders.")
@pass_db
@click.pass_context
def watch(ctx: click.Context, paths: tuple[Path, ...], agent: str | None) -> None:
    """Follow session folders (default: every agent's) and archive new lines as they are written.

    With the semantic extra, messages are also embedded a few at a time while nothing changes.

    Exits 1 (once stopped) when any file could not be read or had bad lines, each said on stderr
    as it was met; the watcher goes on with the other files meanwhile."""
    try:
        from ..watch import watch as follow
    except ImportError:
        raise click.ClickException("watching needs the watch extra: pip install 'pi-memory[watch]'") from None
    with open_archive(ctx) as archive:
        roots = list(paths) or archive.session_roots(agent, existing=False)

        def when_idle() -> bool:
            # the archive's idle work (a team archive's word counts, on its server), then, with the
            # semantic extra, what is new is embedded between file events (one core, small batches);
            # a team archive's server without pgvector is said once
            archive.checkpoint()
            return archive.embed_when_idle(say_err)

        failed = follow(archive.follower(), roots, say_err, idle=when_idle)
    if failed:
        say_err(f"{len(failed)} file(s) could not be read or had bad lines: {', '.join(sorted(failed))}")
        ctx.exit(1)


@cli.command()
@pass_db
@click.pass_context
def bridge(ctx: click.Context) -> None:
    """Serve the archive to the pi extension: one JSON request per line on stdin, one response per line on stdout."""
    from ..bridge.server import serve

    stdin = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # unbuffered: the bridge selects on it
    sys.exit(serve(db_of(ctx), stdin, sys.stdout.buffer))


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
@pass_db
@click.pass_context
def serve(ctx: click.Context, port: int, host: str, token: str | None, open_browser: bool, write: bool) -> None:
    """Browse the archive in a web browser: search, sessions, runs, the memory log (needs the web extra)."""
    from ..web import serve as run_server

    with open_archive(ctx) as archive:
        run_server(archive, host, port, token=token, write=write, open_browser=open_browser, announce=say_err)
