"""`pi-memory serve`: a local web viewer of the archive (search, sessions, runs, the memory log).

Design idea: one more thin front end on the `Archive` facade (no SQL here),
server-rendered HTML with one small script for search-as-you-type, closed by
default: loopback only unless a token is given, read-only unless `--write`.
Needs the `web` extra (Starlette, Jinja2, uvicorn).

May import: the facade, its presenters, the pure core, `pi_memory.errors`.
"""

from __future__ import annotations

from .serve import MissingExtra, serve

__all__ = ["MissingExtra", "serve"]
