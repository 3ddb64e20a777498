"""Semantic recall's rows on a team archive: pgvector where the server has it, nothing otherwise.

Design idea: the same rows as the SQLite archive's `vec` (kind, ref, session number, time, role,
the text's hash, the model, the int8 vector and its scale: the shared code counts and rescores
them), plus `emb`, the model's float vector as pgvector's `vector`, which the server scans for a
search's nearest units (`vectors.pg`). Whether an archive has it is one question asked once per
connection (`vector_home`): the extension's schema when `vec.emb` exists, else None, and the
archive is searched lexically exactly as before.

A batch is written in one statement (`unnest` of the batch's columns) after the model has run:
the old vectors of the same units are deleted first, as SQLite's `INSERT OR REPLACE` does, so a
replaced vector gets a new id (the run summaries' cache notices a change by its ids). A unit whose
message or run went while its vector was computed is not written.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .schema import PGVECTOR_COLUMN

if TYPE_CHECKING:
    import psycopg

RECHECK_S = 60.0  # a connection without pgvector asks again after this long (an embed may add it)
EMBED_LOCK = "pi_memory_embed"  # one embedder per archive (schema) at a time, as SQLite's writer lock
UNKNOWN = "?"  # `vector_home` not asked yet on this connection

VECTOR_HOME = """SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                 WHERE e.extname = 'vector' AND EXISTS (
                   SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass('vec')
                   AND a.attname = 'emb' AND NOT a.attisdropped)"""


def vector_literal(values: Iterable[float]) -> str:
    """pgvector's text form of a vector: `[0.1,-0.2,...]` (float32 precision kept)."""
    return "[" + ",".join(f"{float(v):.8g}" for v in values) + "]"


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class PgVectors:
    """The `PgStore` calls of semantic recall (a mixin: `conn` is the store's connection)."""

    conn: psycopg.Connection[Any]
    _vector_home: str | None = UNKNOWN
    _vector_index: bool | None = None
    _vector_asked = 0.0  # when `vector_home` last found no column

    def vector_home(self) -> str | None:
        """The pgvector extension's schema, when this archive's `vec` has its column; None: lexical.
        Found, it is kept for the connection; not found, asked again after `RECHECK_S` (a long-lived
        bridge or MCP server sees the column another process's first `embed` added)."""
        if self._vector_home == UNKNOWN or (
            self._vector_home is None and time.monotonic() - self._vector_asked > RECHECK_S
        ):
            row = self.conn.execute(VECTOR_HOME).fetchone()
            self._vector_home = str(row[0]) if row else None
            self._vector_asked = time.monotonic()
        return self._vector_home

    def has_vector_index(self) -> bool:
        """Whether the messages' vectors have their HNSW index (`vec_emb`: pgvector 0.5 or later)."""
        if self._vector_index is None:
            self._vector_index = bool(self.conn.execute("SELECT to_regclass('vec_emb') IS NOT NULL").fetchone()[0])  # type: ignore[index]
        return self._vector_index

    def vector_type(self) -> str:
        """`"schema".vector`, for casts (the archive's `search_path` may not hold the extension)."""
        home = self.vector_home()
        if home is None:
            raise RuntimeError("no pgvector column on this archive")
        return f"{quoted(home)}.vector"

    def distance_operator(self) -> str:
        """pgvector's cosine distance, named with its schema."""
        home = self.vector_home()
        assert home is not None
        return f"OPERATOR({quoted(home)}.<=>)"

    def pgvector_offered(self) -> bool:
        """Whether the server has the extension at all (installed in the database or not)."""
        row = self.conn.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')")
        return bool(row.fetchone()[0])  # type: ignore[index]

    def enable_vectors(self) -> str | None:
        """Add `vec.emb` if the extension is there now (created since the archive was made); the
        extension's schema, or None. Needs the tables' owner when the column is missing."""
        if self.vector_home() is None:
            with self.conn.transaction():
                self.conn.execute(PGVECTOR_COLUMN.encode(), prepare=False)
            self._vector_home, self._vector_index = UNKNOWN, None
        return self.vector_home()

    @contextmanager
    def embed_lock(self, wait: bool = True) -> Iterator[bool]:
        """The archive's embedder lock (a session-level advisory lock): whether this process got it."""
        key = (f"{EMBED_LOCK}:",)
        if wait:
            self.conn.execute("SELECT pg_advisory_lock(hashtext(%s || current_schema()))", key)
            got = True
        else:
            row = self.conn.execute("SELECT pg_try_advisory_lock(hashtext(%s || current_schema()))", key).fetchone()
            got = bool(row and row[0])
        try:
            yield got
        finally:
            if got:
                self.conn.execute("SELECT pg_advisory_unlock(hashtext(%s || current_schema()))", key)

    def vec_session_numbers(self, session_ids: Sequence[str]) -> dict[str, int]:
        """`vec_session` numbers of these sessions, made for the new ones (inside a write transaction)."""
        self.conn.execute(
            "INSERT INTO vec_session(session_id) SELECT unnest(%s::text[]) ON CONFLICT DO NOTHING",
            (list(session_ids),),
        )
        rows = self.conn.execute(
            "SELECT session_id, ord FROM vec_session WHERE session_id = ANY(%s)", (list(session_ids),)
        ).fetchall()
        return {str(s): int(o) for s, o in rows}

    def write_vec_rows(self, model: str, rows: list[tuple[Any, ...]], unit_table: str | None) -> int:
        """Rows of (kind, ref, session number, ts, role, hash, int8 bytes, scale, float vector), the
        old vectors of the same units replaced; a unit whose row in `unit_table` (msg, run) is gone
        is skipped. Returns how many were written (inside a write transaction)."""
        if not rows:
            return 0
        columns = list(zip(*rows, strict=True))
        kinds, refs = list(columns[0]), list(columns[1])
        self.conn.execute(
            "DELETE FROM vec WHERE (kind, ref) IN (SELECT * FROM unnest(%s::int[], %s::bigint[]))", (kinds, refs)
        )
        exists = "TRUE" if unit_table is None else f"EXISTS (SELECT 1 FROM {unit_table} t WHERE t.id = u.ref)"
        sql = f"""INSERT INTO vec(kind, ref, sess, ts, role, hash, model, vec, scale, emb)
                  SELECT u.kind, u.ref, u.sess, u.ts, u.role, u.hash, %s, u.vec, u.scale, u.emb::{self.vector_type()}
                  FROM unnest(%s::int[], %s::bigint[], %s::int[], %s::bigint[], %s::int[], %s::text[],
                              %s::bytea[], %s::real[], %s::text[])
                       AS u(kind, ref, sess, ts, role, hash, vec, scale, emb)
                  WHERE {exists}"""
        params = [model, *[list(c) for c in columns[:8]], [vector_literal(v) for v in columns[8]]]
        return int(self.conn.execute(sql.encode(), params).rowcount)
