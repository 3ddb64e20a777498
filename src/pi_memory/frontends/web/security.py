"""Who may look, and who may change anything: the access token, the CSRF token, the Host check.

Design idea: the viewer shows everything an agent ever saw (keys included), so it is
closed by default. It listens on loopback; any other address needs `--token`, and
then every request must carry it (a cookie set by the login form). Pages are
read-only unless the server was started with `--write`; a change is a POST that
carries the per-process CSRF token (a page of another site cannot read it) after a
confirmation page. The Host header must name this server, which closes DNS
rebinding (a hostile name that resolves to 127.0.0.1 would otherwise be same-origin).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable

TOKEN_COOKIE = "pi_memory_token"
OPEN_PATHS = ("/login", "/static/")  # reachable before the token is given


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost`: only this machine can connect."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> str | None:
    """Why the server must not start with these options, or None."""
    if not is_loopback(host) and not token:
        return f"listening on {host} (not loopback) needs --token: anyone who can reach it would read the archive"
    if token is not None and len(token) < 8:
        return "the token is too short: use at least 8 characters"
    return None


def same(given: str | None, expected: str) -> bool:
    """Constant-time comparison (a token is a secret; timing must not reveal its prefix)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """Host header values a loopback server answers to; None (any) past loopback, where the token guards.

    (A rebinding page cannot send the token: the browser keeps the cookie for the real host name.)
    """
    if not is_loopback(host):
        return None
    names = {host, "127.0.0.1", "localhost", "[::1]"}
    return {n for name in names for n in (name, f"{name}:{port}")}


def host_ok(header: str | None, allowed: Iterable[str] | None) -> bool:
    """No list means any host (the test client; a server past loopback, which needs its token)."""
    if allowed is None:
        return True
    return header is not None and header.lower() in allowed


def is_open_path(path: str) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in OPEN_PATHS)
