"""A team archive on PostgreSQL behind the same `Archive` API (issue 9).

Design idea: only storage and candidate retrieval differ from the SQLite
archive. Parsing (`sources/`), rendering, tokenizing, ranking and formatting
are the same pure functions, so the same query finds the same messages in the
same order on either backend. This package is chosen by a URL
(`postgresql://...` or `postgres://...`) wherever a database path is accepted;
the driver (`psycopg`, extra `pi-memory[pg]`) is imported only then.

Here: `store` (`PgStore`: connection, reads, the run index), `writes` (its
write path), `sql` (psycopg-style SQL, lexemes, tsqueries), `schema` and
`roles.sql`. Candidate retrieval is `search.pg`, copying a local archive
`ingest.push`, and the `Archive` subclass over it the facade's `archive.team`.

May import: the core, the rest of `pi_memory.storage` (shared SQL, rows, the
write path) and `pi_memory.errors`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

URL_SCHEMES = ("postgresql://", "postgres://")


def pg_url(target: Path | str | None) -> str | None:
    """The PostgreSQL URL named by a database argument (or `PI_MEMORY_DB` when None), else None."""
    if target is None:
        target = os.environ.get("PI_MEMORY_DB") or None
    if isinstance(target, str) and target.strip().lower().startswith(URL_SCHEMES):
        return target.strip()
    return None


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*):[^@\s]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact(text: str, secret: str | None = None) -> str:
    """Text with any password (in a URL, a `password=` pair, or the given secret) replaced by ***."""
    text = _URL_PASSWORD.sub(r"\1:***@", text)
    text = _KV_PASSWORD.sub(r"\1***", text)
    if secret:
        text = text.replace(secret, "***")
    return text


def roles_sql() -> str:
    """The GRANTs for reader, writer and admin roles (`pg/roles.sql`), to run as the archive's owner."""
    from importlib.resources import files

    return files(__package__).joinpath("roles.sql").read_text(encoding="utf-8")
