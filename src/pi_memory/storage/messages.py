"""The message side of the store: sessions, messages, their verbatim lines, counters and headlines.

A mixin of `Store` (its connection, `scalar`, `rows`, the packing dictionary): the primitives the
one write path (`writes.write_sessions`) calls inside its transactions. Design idea: a message is
its row, its index entries and its verbatim line, written together; an import's piece of a
session is one statement a table for all its messages (`insert_messages`), a live write the same
for one (`insert_message`), and nothing here tokenizes or packs what a parse worker already did.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.echo import with_echo_token
from ..core.text import surface_text
from . import codec
from .codec import compress, decode_text, encode_text
from .pending import INDEX_PENDING
from .rows import NewEntry, NewMessage, SessionRow, meta_json

if TYPE_CHECKING:
    import apsw


# A new message's row, its seq the session's max + 1 (a duplicate consumes none). Finding that max
# reads every index entry of the session (`msg_session_order` is ordered by ts, not seq): ~0.1 ms
# at 2,000 messages, on every live write. So a writer that knows the seq it gave the session's last
# message passes the next one (`Store._next_seq`, `_INSERT_MSG_AT`); otherwise the statement finds it.
_INSERT_MSG = """
INSERT OR IGNORE INTO msg(session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, meta, hash, echo)
VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM msg WHERE session_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
RETURNING id, seq"""
_INSERT_MSG_AT = """
INSERT OR IGNORE INTO msg(session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, meta, hash, echo)
VALUES (?1, ?12, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
RETURNING id, seq"""
_INSERT_MSG_WITH_ID = """
INSERT OR IGNORE INTO msg(session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, meta, hash, echo, id)
VALUES (?1, ?12, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?13)"""
_SESSION_NEXT_SEQ = "SELECT coalesce(max(seq), 0) + 1 FROM msg WHERE session_id = ?"
_INSERT_ENTRY = """
INSERT OR IGNORE INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw) VALUES (?,?,?,?,?,?,?)"""
# ... and that seq is still the session's max while the row that got it is the newest of the whole
# table (max(id): one page): any later row would have a larger id. Anything else (another writer,
# a rollback, a message forgotten) takes the scan. A statement of its own: SQLite computes a scalar
# subquery of constant inputs before the rest, even in a CASE branch or coalesce() not taken.
_SEQ_STILL_MAX = """
SELECT (SELECT max(id) FROM msg) = ?1 AND EXISTS (SELECT 1 FROM msg WHERE id = ?1 AND session_id = ?2 AND seq = ?3)"""


def typed_column(typed: str | bytes, echo: bool) -> str | bytes:
    """`msg_typed`'s column: the characters as typed, and `ECHO_TOKEN` for an echo that has any."""
    return with_echo_token(typed, echo) if typed else typed


def _packed_now(m: NewMessage) -> bytes:
    """The verbatim line of a message that is already archived, compressed (an existing row is not
    pending: nothing would compress a plain line later)."""
    if m.packed_raw is not None and codec.plain_line(m.packed_raw) is None:
        return m.packed_raw
    assert m.raw is not None
    return compress(m.raw, m.text)


class MessageWrites:
    """`insert_messages`, `insert_message`, `ensure_session`, `finish_batch` and the rest a write takes."""

    conn: apsw.Connection
    text_dict_id: int
    index_deferred: bool
    pending_index: bool
    own_pending: list[int]
    _first_users: dict[str, tuple[int, str]]
    _last_seq: dict[str, tuple[int, int, int]]
    _txn: int

    if TYPE_CHECKING:

        def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

        def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def index_typed(self, msg_id: int, text: str, typed: str | bytes | None = None, echo: bool = False) -> None: ...

    def ensure_session(self, row: SessionRow) -> None:
        """Create the session or widen its time range; a later non-empty cwd/name wins."""
        self.conn.execute(
            """
            INSERT INTO session(id, agent, cwd, project, started_at, last_at, name, parent_session, source_path)
            VALUES (?,?,?,?,?,?,?,?,?)
            ON CONFLICT(id) DO UPDATE SET
              cwd = CASE WHEN excluded.cwd != '' THEN excluded.cwd ELSE session.cwd END,
              project = CASE WHEN excluded.project != '' THEN excluded.project ELSE session.project END,
              started_at = min(session.started_at, excluded.started_at),
              last_at = max(session.last_at, excluded.last_at),
              name = coalesce(excluded.name, session.name),
              parent_session = coalesce(excluded.parent_session, session.parent_session),
              source_path = coalesce(excluded.source_path, session.source_path)
            """,
            (
                row.id,
                row.agent,
                row.cwd,
                row.project,
                row.started_at,
                row.last_at,
                row.name,
                row.parent_session,
                row.source_path,
            ),
        )

    def raw_blob(self, raw: bytes, text: str) -> bytes:
        return compress(raw, text)

    def stored_text(self, value: str) -> str | bytes:
        return encode_text(value, self.text_dict_id, codec.FIELDS_LEVEL)

    def insert_message(self, m: NewMessage) -> int | None:
        """Insert unless present; returns the new msg id, or None for a duplicate.

        Three statements for a new message (row, index, verbatim copy); the seq
        is taken in the same INSERT, so a duplicate consumes none (see `_INSERT_MSG`). Counters and
        the session's last_at are settled once per batch by `finish_batch`. A
        message captured live (no entry id) and later imported from the file
        gets its entry id filled in here.
        """
        # a live message's text is packed with its index entry, at the idle moment (`index_pending`)
        row = self._message_row(m, 0)[:-1]
        seq = self._next_seq(m.session_id)
        added = self.rows(_INSERT_MSG, row) if seq is None else self.rows(_INSERT_MSG_AT, (*row, seq))
        if not added:
            self._reconcile_entry_id(m)
            return None
        msg_id, seq = int(added[0][0]), int(added[0][1])
        self._remember_seq(m.session_id, msg_id, seq)
        if m.index_waits:
            self.pending_index = True
            self.own_pending.append(msg_id)
        elif m.indexed:
            self.conn.execute(
                "INSERT INTO msg_fts(rowid, chars, grams) VALUES (?,?,?)",
                (msg_id, with_echo_token(m.chars, m.echo), m.grams),
            )
            self.index_typed(msg_id, m.text, m.typed, m.echo)
        if m.has_line:
            self.conn.execute(
                _INSERT_ENTRY, (m.session_id, "msg:" + m.hash, m.entry_id, m.entry_type, m.ts, msg_id, m.packed_raw)
            )
        return msg_id

    def insert_messages(self, messages: list[NewMessage]) -> list[int | None]:
        """Insert one session's messages unless present, as `insert_message` does each (inside a
        write transaction); their new ids, None for each duplicate.

        An import's chunk of a session: each table gets one statement run over all its rows
        (`executemany`), instead of three or four statements a message, each a call from Python.
        The seqs follow the session's last one; a message already there consumes none (the rows
        after it move up, which only a live writer racing the import ever causes).
        """
        if len(messages) < 2:
            return [self.insert_message(m) for m in messages]
        session_id = messages[0].session_id
        first_seq = self._next_seq(session_id)
        if first_seq is None:
            first_seq = int(self.scalar(_SESSION_NEXT_SEQ, (session_id,)))
        # the ids the rows get, given (this transaction holds the lock): no RETURNING, whose rows SQLite
        # gathers in a table of their own before handing the first back
        first_id = int(self.scalar("SELECT coalesce(max(id), 0) + 1 FROM msg"))
        rows = [(*self._message_row(m, first_seq + k), first_id + k) for k, m in enumerate(messages)]
        before = self.conn.total_changes()
        self.conn.executemany(_INSERT_MSG_WITH_ID, rows)
        ids: list[int | None] = list(range(first_id, first_id + len(rows)))
        if self.conn.total_changes() - before < len(rows):  # some were there already: which rows went in
            present = {int(i) for (i,) in self.rows("SELECT id FROM msg WHERE id >= ?", (first_id,))}
            ids = [i if i in present else None for i in ids]
        added = [(msg_id, m) for msg_id, m in zip(ids, messages, strict=True) if msg_id is not None]
        if len(added) < len(messages):
            for m in (m for msg_id, m in zip(ids, messages, strict=True) if msg_id is None):
                self._reconcile_entry_id(m)
            self.conn.executemany(  # a duplicate consumes no seq
                "UPDATE msg SET seq = ? WHERE id = ?", [(first_seq + k, msg_id) for k, (msg_id, _m) in enumerate(added)]
            )
        if added:
            self._remember_seq(session_id, added[-1][0], first_seq + len(added) - 1)
            self._index_and_keep(added)
        return ids

    def _message_row(self, m: NewMessage, seq: int) -> tuple[Any, ...]:
        """`_INSERT_MSG_AT`'s values for a message, its text packed (or left for the idle moment)."""
        meta = m.meta_json if m.meta_json is not None else meta_json(m.meta)
        m.index_waits = m.indexed and self.index_deferred and not m.chars and not m.grams
        m.pack(self.text_dict_id, later=m.index_waits)
        indexed = INDEX_PENDING if m.index_waits else int(m.indexed)
        return (
            *(m.session_id, m.ts, m.role, m.packed, len(m.text), indexed, m.entry_id, m.parent_id, meta, m.hash),
            int(m.echo),
            seq,
        )

    def _remember_seq(self, session_id: str, msg_id: int, seq: int) -> None:
        if len(self._last_seq) > 1000:
            self._last_seq.clear()
        self._last_seq[session_id] = (msg_id, seq, self._txn)

    def _index_and_keep(self, added: list[tuple[int, NewMessage]]) -> None:
        """The index entries and verbatim copies of new messages, one statement a table."""
        if any(m.index_waits for _, m in added):
            self.pending_index = True
            self.own_pending += [msg_id for msg_id, m in added if m.index_waits]
        indexed = [(msg_id, m) for msg_id, m in added if m.indexed and not m.index_waits]
        self.conn.executemany(
            "INSERT INTO msg_fts(rowid, chars, grams) VALUES (?,?,?)",
            [(i, with_echo_token(m.chars, m.echo), m.grams) for i, m in indexed],
        )
        typed = [
            (i, typed_column(m.typed if m.typed is not None else surface_text(m.text), m.echo)) for i, m in indexed
        ]
        self.conn.executemany("INSERT INTO msg_typed(rowid, typed) VALUES (?, ?)", [t for t in typed if t[1]])
        self.conn.executemany(
            _INSERT_ENTRY,
            [
                (m.session_id, "msg:" + m.hash, m.entry_id, m.entry_type, m.ts, msg_id, m.packed_raw)
                for msg_id, m in added
                if m.has_line
            ],
        )

    def _next_seq(self, session_id: str) -> int | None:
        """The session's next seq when this connection added its last message and nothing was added
        since: sure inside the same write transaction (an import's session), else asked of the
        table (`_SEQ_STILL_MAX`, a live write); None: the insert finds it."""
        last = self._last_seq.get(session_id)
        if last is None:
            return None
        msg_id, seq, txn = last
        if (txn != self._txn or not self.conn.in_transaction) and not self.scalar(
            _SEQ_STILL_MAX, (msg_id, session_id, seq)
        ):
            return None
        return seq + 1

    def _reconcile_entry_id(self, m: NewMessage) -> None:
        if not m.entry_id:
            return
        rows = self.rows(
            "SELECT id FROM msg WHERE session_id=? AND hash=? AND entry_id IS NULL", (m.session_id, m.hash)
        )
        if not rows:
            return
        msg_id = rows[0][0]
        self.conn.execute("UPDATE msg SET entry_id=?, parent_id=? WHERE id=?", (m.entry_id, m.parent_id, msg_id))
        if m.has_line:
            self.conn.execute(
                "UPDATE entry SET raw=?, entry_id=?, type=? WHERE msg_id=?",
                (_packed_now(m), m.entry_id, m.entry_type, msg_id),
            )

    def finish_batch(self, session_id: str, added: list[NewMessage], totals: dict[str, int] | None = None) -> None:
        """Counters the ranking needs, and the session's newest time, once per batch.

        With `totals`, the counter deltas are added there, for the caller to write once per transaction.
        """
        indexed = [m for m in added if m.indexed and not m.index_waits]  # waiting ones count when indexed
        if indexed:
            deltas = {"indexed_docs": len(indexed), "indexed_chars": sum(len(m.text) for m in indexed)}
            if totals is None:
                self.add_to_counters(deltas)
            else:
                for name, delta in deltas.items():
                    totals[name] = totals.get(name, 0) + delta
        if added:
            self.conn.execute(
                "UPDATE session SET last_at = max(last_at, ?) WHERE id=?", (max(m.ts for m in added), session_id)
            )

    def add_to_counters(self, deltas: dict[str, int]) -> None:
        """One single-row UPDATE per counter (inside a write transaction).

        A statement that may change several rows and abort midway needs a statement
        journal, and opening one makes FTS5 flush its pending inserts into a new
        segment: a two-row UPDATE after every insert would cost one segment each.
        """
        for name, delta in deltas.items():
            self.conn.execute("UPDATE counter SET value = value + ? WHERE name = ?", (delta, name))

    def insert_entries(self, entries: list[NewEntry]) -> None:
        """Non-message lines kept verbatim, one statement for all (inside a write transaction)."""
        self.conn.executemany(
            "INSERT OR IGNORE INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw) VALUES (?,?,?,?,?,NULL,?)",
            [(e.session_id, e.key, e.entry_id, e.type, e.ts, e.packed_raw or compress(e.raw)) for e in entries],
        )

    def set_first_user(self, session_id: str, msg_id: int, hash_: str, text: str) -> None:
        """The headline of a session whose first user message the writer knows (a new session
        written whole): what `update_first_user` would find, without reading it back."""
        self.conn.execute("UPDATE session SET first_user = ? WHERE id = ?", (text[:200], session_id))
        if len(self._first_users) > 1000:
            self._first_users.clear()
        self._first_users[session_id] = (msg_id, hash_)

    def insert_entry(self, e: NewEntry) -> bool:
        self.conn.execute(
            "INSERT OR IGNORE INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw) VALUES (?,?,?,?,?,NULL,?)",
            (e.session_id, e.key, e.entry_id, e.type, e.ts, e.packed_raw or compress(e.raw)),
        )
        return self.conn.changes() > 0

    def update_first_user(self, session_id: str) -> None:
        """The session's headline: its first user message, cut. Decoded only when that message changed
        (a live session calls this for every user message; decoding a packed text costs ~10-50 us)."""
        rows = self.rows(
            "SELECT id, hash, text FROM msg WHERE session_id = ? AND role = 'user' ORDER BY ts, seq LIMIT 1",
            (session_id,),
        )
        first = (int(rows[0][0]), str(rows[0][1])) if rows else None
        if first is not None and self._first_users.get(session_id) == first:
            return
        value = decode_text(rows[0][2])[:200] if rows else None
        self.conn.execute("UPDATE session SET first_user = ? WHERE id = ?", (value, session_id))
        if first is not None:
            if len(self._first_users) > 1000:
                self._first_users.clear()
            self._first_users[session_id] = first

    def record_source_file(
        self, path: str, session_id: str | None, size: int, mtime_ns: int, imported_at: int | None = None
    ) -> None:
        self.conn.execute(
            """INSERT INTO source_file(path, session_id, size, mtime_ns, imported_at) VALUES (?,?,?,?,?)
               ON CONFLICT(path) DO UPDATE SET session_id=excluded.session_id, size=excluded.size,
                 mtime_ns=excluded.mtime_ns, imported_at=excluded.imported_at""",
            (path, session_id, size, mtime_ns, imported_at if imported_at is not None else int(time.time() * 1000)),
        )

    def source_file_state(self, path: str) -> tuple[int, int] | None:
        rows = self.rows("SELECT size, mtime_ns FROM source_file WHERE path=?", (path,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None
