"""Starting the viewer: option checks, the app, and uvicorn on the chosen address."""

from __future__ import annotations

import socket
import threading
import webbrowser
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...errors import BadInput

if TYPE_CHECKING:
    from ...archive.api import Archive

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765


class MissingExtra(BadInput):
    """The web extra is not installed."""


def serve(
    archive: Archive,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    write: bool = False,
    open_browser: bool = False,
    announce: Callable[[str], object] = print,
) -> None:
    """Serve until interrupted. Refuses a non-loopback address without a token (one clear line)."""
    from . import security

    problem = security.check_bind(host, token)
    if problem:
        raise BadInput(problem)
    try:
        import uvicorn

        from .app import Settings, create_app
    except ImportError as exc:
        raise MissingExtra(f"the viewer needs the web extra ({exc.name}): pip install 'pi-memory[web]'") from None
    sock = bind(host, port)
    port = int(sock.getsockname()[1])  # the real one when 0 asked for any free port
    settings = Settings(write=write, token=token, allowed_hosts=security.allowed_hosts(host, port))
    app = create_app(archive, settings, warm=True)
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"
    mode = "read-write" if write else "read-only"
    announce(f"pi-memory viewer on {url} ({mode}{', token required' if token else ''}); Ctrl-C stops it")
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before uvicorn starts so a taken port is one clear error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BadInput(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
