"""The team archive's write path: packed short transactions, seqs allocated under the session row's lock.

A mixin of `PgStore` (the connection, `write()`, `scalar()`, `rows()` and
`errors()` are its): kept apart so the store reads by topic. Rules as in the
module docstring of `store`: at most `BATCH` messages a transaction, only SQL
inside it, `ON CONFLICT DO NOTHING` on the content hash, deadlocks retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from ...errors import ArchiveError
from ..store import NewEntry, NewMessage, SessionRow, compress
from ..writes import SessionWrite, after_messages_added, pack
from .sql import DEADLOCK_RETRIES, T, driver, message_tokens, meta_json, pg_text

if TYPE_CHECKING:
    import psycopg

    from ..store import Store


Chunk = tuple[SessionWrite, list[NewMessage], bool, bool]


class PgWrites:
    """`write_sessions` and its steps, for `PgStore`."""

    conn: psycopg.Connection[Any]
    author: str | None
    host: str

    if TYPE_CHECKING:

        def write(self) -> AbstractContextManager[None]: ...

        def errors(self) -> AbstractContextManager[None]: ...

        def scalar(self, sql: str, params: Any = ()) -> Any: ...

        def rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]: ...

    # --- the write path -------------------------------------------------------------

    def write_sessions(self, units: list[SessionWrite]) -> tuple[int, int]:
        """Write sessions in packed short transactions. Returns (added, duplicates)."""
        with self.errors():
            return self._write_sessions(units)

    def _write_sessions(self, units: list[SessionWrite]) -> tuple[int, int]:
        added_ids: dict[str, list[int]] = {}
        skipped = 0
        for txn in pack(units):
            # every writer locks session rows in id order, then the counter row: no lock cycles
            txn.sort(key=lambda chunk: chunk[0].session_id)
            new = self._retry(partial(self._write_txn, txn))
            for (unit, chunk, _first, _last), inserted in zip(txn, new, strict=True):
                skipped += len(chunk) - len(inserted)
                if inserted:
                    unit.added.extend(msg_id for _m, msg_id in inserted)
                    added_ids.setdefault(unit.session_id, []).extend(msg_id for _m, msg_id in inserted)
        if added_ids:
            with self.write():
                self._update_first_user(sorted(added_ids))
            # runs (the `AFTER_WRITE` hooks), built from the new messages as on the SQLite store
            after_messages_added(cast("Store", self), added_ids)
        return sum(len(v) for v in added_ids.values()), skipped

    def _write_txn(self, txn: list[Chunk]) -> list[list[tuple[NewMessage, int]]]:
        with self.write():
            new = [self._write_chunk(unit, chunk, first, last) for unit, chunk, first, last in txn]
            indexed = [m for inserted in new for m, _id in inserted if m.indexed]
            if indexed:
                self.conn.execute(
                    "UPDATE counter SET indexed_docs = indexed_docs + %s, indexed_chars = indexed_chars + %s",
                    (len(indexed), sum(len(m.text) for m in indexed)),
                )
        return new

    def _retry(self, fn: Callable[[], T]) -> T:
        """Run one transaction, again if PostgreSQL chose it as a deadlock victim (it was rolled back whole)."""
        psycopg = driver()
        for attempt in range(DEADLOCK_RETRIES):
            try:
                return fn()
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                if attempt == DEADLOCK_RETRIES - 1:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def _write_chunk(
        self, unit: SessionWrite, chunk: list[NewMessage], first: bool, last: bool
    ) -> list[tuple[NewMessage, int]]:
        sid = unit.session_id
        if first and unit.row is not None:
            self._ensure_session(unit.row)
        elif self.scalar("SELECT 1 FROM session WHERE id=%s FOR UPDATE", (sid,)) is None:
            raise ArchiveError(f"no session {sid!r} in the team archive: write its session row first")
        new = self._new_messages(sid, chunk)
        ids = self._insert_messages(sid, new)
        self._insert_raw(sid, [(m, ids[m.hash]) for m in new if m.hash in ids and m.raw is not None])
        if first and unit.entries:
            self._insert_entries(unit.entries)
        if first and unit.usage:
            self.insert_usage(unit.usage)  # type: ignore[attr-defined]  # PgStore's (storage.usage.UsageStore)
        inserted = [(m, ids[m.hash]) for m in new if m.hash in ids]
        if inserted:
            self.conn.execute(
                "UPDATE session SET last_at = greatest(last_at, %s) WHERE id=%s", (max(m.ts for m, _ in inserted), sid)
            )
        if last and unit.source is not None:
            self._record_source_file(unit.source, sid)
        return inserted

    def _ensure_session(self, row: SessionRow) -> None:
        self.conn.execute(
            """
            INSERT INTO session(id, agent, cwd, project, started_at, last_at, name, parent_session, source_path,
                                author, host)
            VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)
            ON CONFLICT (id) DO UPDATE SET
              cwd = CASE WHEN excluded.cwd <> '' THEN excluded.cwd ELSE session.cwd END,
              project = CASE WHEN excluded.project <> '' THEN excluded.project ELSE session.project END,
              started_at = least(session.started_at, excluded.started_at),
              last_at = greatest(session.last_at, excluded.last_at),
              name = coalesce(excluded.name, session.name),
              parent_session = coalesce(excluded.parent_session, session.parent_session),
              source_path = coalesce(excluded.source_path, session.source_path)
            """,
            (
                row.id,
                row.agent,
                pg_text(row.cwd),
                pg_text(row.project),
                row.started_at,
                row.last_at,
                pg_text(row.name) if row.name else None,
                row.parent_session,
                pg_text(row.source_path) if row.source_path else None,
                self.author,
                self.host,
            ),
        )

    def _new_messages(self, sid: str, chunk: list[NewMessage]) -> list[NewMessage]:
        """The chunk's messages not yet archived (first copy of a repeated hash only); fills missing entry ids."""
        existing = {
            str(h): bool(missing)
            for h, missing in self.rows(
                "SELECT hash, entry_id IS NULL FROM msg WHERE session_id=%s AND hash = ANY(%s)",
                (sid, [m.hash for m in chunk]),
            )
        }
        new: list[NewMessage] = []
        seen: set[str] = set()
        for m in chunk:
            if m.hash in existing:
                if existing[m.hash] and m.entry_id:
                    self._reconcile_entry_id(sid, m)
            elif m.hash not in seen:
                seen.add(m.hash)
                new.append(m)
        return new

    def _insert_messages(self, sid: str, new: list[NewMessage]) -> dict[str, int]:
        """Insert with consecutive seqs after the session's last one; returns hash -> new id."""
        if not new:
            return {}
        base = int(self.scalar("SELECT coalesce(max(seq), 0) FROM msg WHERE session_id=%s", (sid,)) or 0)
        params = [
            (
                sid,
                base + i,
                m.ts,
                m.role,
                pg_text(m.text),
                len(m.text),
                m.indexed,
                m.entry_id,
                m.parent_id,
                meta_json(m.meta),
                m.hash,
                int(m.echo),
                message_tokens(m),
                self.author,
                self.host,
            )
            for i, m in enumerate(new, start=1)
        ]
        ids: dict[str, int] = {}
        with self.conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO msg(session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, meta, hash,
                                   echo, tokens, author, host)
                   VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,array_to_tsvector(%s::text[]),%s,%s)
                   ON CONFLICT (session_id, hash) DO NOTHING RETURNING id, hash""",
                params,
                returning=True,
            )
            while True:
                row = cur.fetchone()
                if row is not None:
                    ids[str(row[1])] = int(row[0])
                if not cur.nextset():
                    break
        return ids

    def _insert_raw(self, sid: str, pairs: list[tuple[NewMessage, int]]) -> None:
        if not pairs:
            return
        with self.conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw, author, host)
                   VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (session_id, entry_key) DO NOTHING""",
                [
                    (
                        sid,
                        "msg:" + m.hash,
                        m.entry_id,
                        m.entry_type,
                        m.ts,
                        msg_id,
                        compress(m.raw or b""),
                        self.author,
                        self.host,
                    )
                    for m, msg_id in pairs
                ],
            )

    def _insert_entries(self, entries: list[NewEntry]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw, author, host)
                   VALUES (%s,%s,%s,%s,%s,NULL,%s,%s,%s) ON CONFLICT (session_id, entry_key) DO NOTHING""",
                [
                    (e.session_id, e.key, e.entry_id, e.type, e.ts, compress(e.raw), self.author, self.host)
                    for e in entries
                ],
            )

    def _reconcile_entry_id(self, sid: str, m: NewMessage) -> None:
        """A message captured live (no entry id) and later imported from its file gets its entry id."""
        row = self.conn.execute(
            "UPDATE msg SET entry_id=%s, parent_id=%s WHERE session_id=%s AND hash=%s AND entry_id IS NULL RETURNING id",
            (m.entry_id, m.parent_id, sid, m.hash),
        ).fetchone()
        if row is not None and m.raw is not None:
            self.conn.execute(
                "UPDATE entry SET raw=%s, entry_id=%s, type=%s WHERE msg_id=%s",
                (compress(m.raw), m.entry_id, m.entry_type, row[0]),
            )

    def _record_source_file(self, source: tuple[str, int, int], sid: str) -> None:
        path, size, mtime_ns = source
        self.conn.execute(
            """INSERT INTO source_file(host, path, session_id, size, mtime_ns, imported_at, author)
               VALUES (%s,%s,%s,%s,%s,%s,%s)
               ON CONFLICT (host, path) DO UPDATE SET session_id=excluded.session_id, size=excluded.size,
                 mtime_ns=excluded.mtime_ns, imported_at=excluded.imported_at""",
            (self.host, pg_text(path), sid, size, mtime_ns, int(time.time() * 1000), self.author),
        )

    def update_first_user(self, session_id: str) -> None:
        self._update_first_user([session_id])

    def _update_first_user(self, session_ids: list[str]) -> None:
        self.conn.execute(
            """UPDATE session SET first_user = (
                 SELECT substr(text, 1, 200) FROM msg WHERE session_id = session.id AND role = 'user'
                 ORDER BY ts, seq LIMIT 1)
               WHERE id = ANY(%s)""",
            (session_ids,),
        )
