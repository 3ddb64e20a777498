"""The team archive's write path: COPY into staging tables, one set-based INSERT per table a transaction.

A mixin of `PgStore` (the connection, `write()`, `scalar()`, `rows()` and
`errors()` are its): kept apart so the store reads by topic. Rules as in the
module docstring of `store`: at most `BATCH` messages a transaction, only SQL
inside it, `ON CONFLICT DO NOTHING` on the content hash, deadlocks retried.

Design idea: a round trip and a statement per row cost more than the row.
Each transaction sends its messages (and their verbatim lines, and the runs a
parse worker planned) with one binary `COPY` each into temporary staging
tables, then moves them with one `INSERT ... SELECT ... ON CONFLICT DO
NOTHING RETURNING` per table, so a replay still adds nothing and the ids come
back in one answer. Everything the rows need is computed before the
transaction: tokens as one space-separated line (PostgreSQL's
`array_to_tsvector` sorts and dedups them), the verbatim lines compressed by
the parse worker. A new session written whole gets the runs its parse worker
planned in the transaction of its last messages, as on SQLite
(`storage.writes.WRITE_PLANNED`), instead of reading its messages back to cut
them; every other write runs the `AFTER_WRITE` hooks as before. The token
indexes keep a pending list (`fastupdate`, schema m011): inserts append to
it and PostgreSQL merges it into the index in sorted batches, which a bulk
writer finishes at its end (`flush_token_indexes`).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from ...core.echo import ECHO_TOKEN
from ...core.text import surface_text
from ...errors import ArchiveError
from ..codec import decode_text
from ..store import NewEntry, NewMessage, SessionRow, compress
from ..writes import SessionWrite, after_messages_added, pack
from .sql import DEADLOCK_RETRIES, MAX_LEXEME_BYTES, TYPED_PREFIX, T, driver, indexable, meta_json, pg_text, token_text

if TYPE_CHECKING:
    import psycopg

    from ..store import Store


Chunk = tuple[SessionWrite, list[NewMessage], bool, bool]

# Per connection, emptied at every commit: what a transaction's COPYs fill and its INSERTs read.
STAGING = """
CREATE TEMP TABLE IF NOT EXISTS pi_memory_stage_msg (
  ord integer, session_id text, seq integer, ts bigint, role text, text text, nchars integer, indexed boolean,
  entry_id text, parent_id text, meta text, hash text, echo smallint, toks text, ntokens integer
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS pi_memory_stage_entry (
  session_id text, entry_key text, entry_id text, type text, ts bigint, msg_id bigint, raw bytea
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS pi_memory_stage_run (
  ord integer, session_id text, first_msg bigint, start_ts bigint, end_ts bigint, status text, n_msgs integer,
  tool_calls integer, tool_errors integer, fields text, indexed_chars integer, toks text, ntokens integer
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS pi_memory_stage_run_msg (msg_id bigint, run_id bigint, pos integer)
  ON COMMIT DELETE ROWS;
"""
STAGE_MSG_TYPES = ["int4", "text", "int4", "int8", "text", "text", "int4", "bool"]
STAGE_MSG_TYPES += ["text", "text", "text", "text", "int2", "text", "int4"]
STAGE_ENTRY_TYPES = ["text", "text", "text", "text", "int8", "int8", "bytea"]
STAGE_RUN_TYPES = [
    "int4",
    "text",
    "int8",
    "int8",
    "int8",
    "text",
    "int4",
    "int4",
    "int4",
    "text",
    "int4",
    "text",
    "int4",
]
RUN_MSG_TYPES = ["int8", "int8", "int4"]

MOVE_MESSAGES = """
INSERT INTO msg(session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, meta, hash, echo, tokens,
                ntokens, author, host)
SELECT session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, meta, hash, echo,
       array_to_tsvector(string_to_array(toks, ' ')), ntokens, %s, %s
FROM pi_memory_stage_msg ORDER BY ord
ON CONFLICT (session_id, hash) DO NOTHING RETURNING id, session_id, hash"""
MOVE_ENTRIES = """
INSERT INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw, author, host)
SELECT session_id, entry_key, entry_id, type, ts, msg_id, raw, %s, %s FROM pi_memory_stage_entry
ON CONFLICT (session_id, entry_key) DO NOTHING"""
MOVE_RUNS = """
INSERT INTO run(session_id, first_msg, start_ts, end_ts, status, n_msgs, tool_calls, tool_errors, summary, fields,
                indexed_chars, tokens, ntokens, author, host)
SELECT session_id, first_msg, start_ts, end_ts, status, n_msgs, tool_calls, tool_errors, '', fields, indexed_chars,
       array_to_tsvector(string_to_array(toks, ' ')), ntokens, %s, %s
FROM pi_memory_stage_run ORDER BY ord
ON CONFLICT (session_id, first_msg) DO NOTHING RETURNING id, session_id, first_msg"""
MOVE_RUN_MSGS = """
INSERT INTO run_msg(msg_id, run_id, pos, author, host) SELECT msg_id, run_id, pos, %s, %s FROM pi_memory_stage_run_msg
ON CONFLICT (msg_id) DO UPDATE SET run_id = excluded.run_id, pos = excluded.pos"""
INSERT_RUN_FILE = "INSERT INTO run_file(path, run_id, msg_id, action) VALUES (%s,%s,%s,%s) ON CONFLICT DO NOTHING"

_LONG_TOKEN = re.compile(rf"\S{{{MAX_LEXEME_BYTES // 4 + 1}}}")  # a token that may pass the lexeme limit


def token_line(*parts: str | bytes | None) -> str:
    """Tokens as one space-separated line (`array_to_tsvector(string_to_array(...))` dedups them),
    without those too long for a lexeme (a pasted blob without separators)."""
    line = " ".join(p for p in (token_text(x) for x in parts if x) if p)
    if _LONG_TOKEN.search(line):
        line = " ".join(t for t in line.split() if indexable(t))
    return line


def token_count(grams: str | bytes) -> int:
    """A text's length for BM25 (`ranking.doc_tokens`): its tokens in the `grams` channel, as FTS5
    counts them into its docsize on SQLite."""
    return len(grams.split())


def message_token_line(m: NewMessage) -> str:
    """The distinct tokens of both channels (one set answers what the two FTS columns answer), the
    characters typed in a script that folds to another as typed (`t:構`; SQLite: msg_typed), and an
    echo's `ECHO_TOKEN`, as SQLite writes it into both of its indexes."""
    if not m.indexed:
        return ""
    typed = m.typed if m.typed is not None else surface_text(m.text)
    typed_line = " ".join(TYPED_PREFIX + ch for ch in token_text(typed).split()) if typed else ""
    return token_line(m.chars, m.grams, typed_line, ECHO_TOKEN if m.echo else "")


@dataclass
class TxnResult:
    """What one transaction wrote, applied to the units only once it committed."""

    inserted: list[list[tuple[NewMessage, int]]] = field(default_factory=list)  # per chunk, in chunk order
    completed: set[int] = field(default_factory=set)  # id() of units written whole with their planned runs


class PgWrites:
    """`write_sessions` and its steps, for `PgStore`."""

    conn: psycopg.Connection[Any]
    url: str
    author: str | None
    host: str
    _staged = False  # the staging tables exist on this connection

    if TYPE_CHECKING:

        def write(self) -> AbstractContextManager[None]: ...

        def errors(self) -> AbstractContextManager[None]: ...

        def scalar(self, sql: str, params: Any = ()) -> Any: ...

        def rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]: ...

        def insert_usage(self, rows: Any) -> int: ...

    # --- the write path -------------------------------------------------------------

    def write_sessions(self, units: list[SessionWrite]) -> tuple[int, int]:
        """Write sessions in packed short transactions. Returns (added, duplicates)."""
        with self.errors():
            return self._write_sessions(units)

    def _write_sessions(self, units: list[SessionWrite]) -> tuple[int, int]:
        self._ensure_staging()
        skipped = 0
        completed: set[int] = set()
        sessions_of = Counter(u.session_id for u in units)
        for txn in pack(units):
            # the messages are numbered in the order given, as on SQLite (the mean length's sample and
            # recency ties read ids); the sessions' rows are locked in id order (`_lock_sessions`)
            result = self._retry(partial(self._write_txn, txn, sessions_of))
            for (unit, chunk, _first, _last), inserted in zip(txn, result.inserted, strict=True):
                skipped += len(chunk) - len(inserted)
                unit.added.extend(msg_id for _m, msg_id in inserted)
            completed |= result.completed
            self._wrote(sum(len(inserted) for inserted in result.inserted))
        rest = [u for u in units if id(u) not in completed]
        added_ids: dict[str, list[int]] = {}
        for unit in rest:
            if unit.added or unit.unfinished:
                added_ids.setdefault(unit.session_id, []).extend(unit.added + unit.unfinished)
        if added_ids:
            with self.write():
                self._update_first_user(sorted(s for s, ids in added_ids.items() if ids))
            # runs (the `AFTER_WRITE` hooks), built from the new messages as on the SQLite store
            after_messages_added(cast("Store", self), added_ids)
        sources = [u for u in rest if u.source is not None]
        if sources:  # a file counts as imported once its messages and their runs are in
            with self.write():
                self._record_source_files(sources)
        return sum(len(u.added) for u in units), skipped

    def _ensure_staging(self) -> None:
        if not self._staged:
            self.conn.execute(STAGING, prepare=False)  # several statements: never prepared
            self._staged = True

    def _write_txn(self, txn: list[Chunk], sessions_of: Counter[str] | None = None) -> TxnResult:
        """One transaction: the sessions' rows locked, then the counter row (its lock held until commit,
        so message ids are given in commit order), the new messages and lines copied in, the planned
        runs of the sessions it completes whole, the counters last."""
        result = TxnResult()
        with self.write():
            self._lock_sessions(txn)
            new = self._new_messages(txn)
            if any(new):  # ids in commit order: the counts kept up to an id stay exact (m018)
                self.conn.execute("SELECT FROM counter FOR NO KEY UPDATE")
            ids = self._insert_messages(txn, new)
            result.inserted = [
                [(m, ids[(u.session_id, m.hash)]) for m in n if (u.session_id, m.hash) in ids]
                for (u, _c, _f, _l), n in zip(txn, new, strict=True)
            ]
            self._insert_lines(txn, result.inserted)
            for unit, _chunk, first, _last in txn:
                if first and unit.usage:
                    self.insert_usage(unit.usage)
            self._touch_sessions(result.inserted, txn)
            indexed = [m for inserted in result.inserted for m, _id in inserted if m.indexed]
            totals = {"indexed_docs": len(indexed), "indexed_chars": sum(len(m.text) for m in indexed)}
            result.completed = self._complete_new(txn, result.inserted, sessions_of or Counter(), totals)
            if any(totals.values()):  # last: the one counter row's lock is held only until commit
                self.conn.execute(
                    """UPDATE counter SET indexed_docs = indexed_docs + %s, indexed_chars = indexed_chars + %s,
                                          run_docs = run_docs + %s, run_chars = run_chars + %s""",
                    (
                        totals["indexed_docs"],
                        totals["indexed_chars"],
                        totals.get("run_docs", 0),
                        totals.get("run_chars", 0),
                    ),
                )
        return result

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

    # --- inside the transaction ------------------------------------------------------

    def _lock_sessions(self, txn: list[Chunk]) -> None:
        """Create or widen the rows of sessions starting here, lock the others' (each in id order: every
        writer locks session rows so, then the counter row, so no two wait on each other in a cycle)."""
        rows = sorted((u.row for u, _c, first, _l in txn if first and u.row is not None), key=lambda r: r.id)
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(ENSURE_SESSION, [self._session_params(r) for r in rows])
        others = sorted({u.session_id for u, _c, first, _l in txn if not (first and u.row is not None)})
        if others:
            found = {
                str(r[0])
                for r in self.rows("SELECT id FROM session WHERE id = ANY(%s) ORDER BY id FOR UPDATE", (others,))
            }
            missing = [sid for sid in others if sid not in found]
            if missing:
                raise ArchiveError(f"no session {missing[0]!r} in the team archive: write its session row first")

    def _ensure_session(self, row: SessionRow) -> None:
        self.conn.execute(ENSURE_SESSION, self._session_params(row))

    def _session_params(self, row: SessionRow) -> tuple[Any, ...]:
        return (
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
        )

    def _new_messages(self, txn: list[Chunk]) -> list[list[NewMessage]]:
        """Per chunk, its messages not yet archived (first copy of a repeated hash only); fills in the
        entry ids of archived messages captured live without one."""
        sessions = sorted({u.session_id for u, _c, _f, _l in txn})
        hashes = sorted({m.hash for _u, chunk, _f, _l in txn for m in chunk})
        existing = (
            {
                (str(s), str(h)): bool(missing)
                for s, h, missing in self.rows(
                    "SELECT session_id, hash, entry_id IS NULL FROM msg WHERE session_id = ANY(%s) AND hash = ANY(%s)",
                    (sessions, hashes),
                )
            }
            if hashes
            else {}
        )
        seen: set[tuple[str, str]] = set()
        out: list[list[NewMessage]] = []
        for unit, chunk, _first, _last in txn:
            new: list[NewMessage] = []
            for m in chunk:
                key = (unit.session_id, m.hash)
                if key in existing:
                    if existing[key] and m.entry_id:
                        self._reconcile_entry_id(unit.session_id, m)
                elif key not in seen:
                    seen.add(key)
                    new.append(m)
            out.append(new)
        return out

    def _insert_messages(self, txn: list[Chunk], new: list[list[NewMessage]]) -> dict[tuple[str, str], int]:
        """COPY the new messages, with consecutive seqs after each session's last one, and move them
        into `msg`; returns (session id, hash) -> new id."""
        sessions = sorted({u.session_id for (u, _c, _f, _l), n in zip(txn, new, strict=True) if n})
        if not sessions:
            return {}
        seqs = {
            str(s): int(n)
            for s, n in self.rows(
                "SELECT session_id, max(seq) FROM msg WHERE session_id = ANY(%s) GROUP BY session_id", (sessions,)
            )
        }
        ord_ = 0
        with self.conn.cursor() as cur:
            with cur.copy(
                "COPY pi_memory_stage_msg(ord, session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, "
                "meta, hash, echo, toks, ntokens) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(STAGE_MSG_TYPES)
                for (unit, _c, _f, _l), chunk in zip(txn, new, strict=True):
                    sid = unit.session_id
                    for m in chunk:
                        seqs[sid] = seq = seqs.get(sid, 0) + 1
                        ord_ += 1
                        copy.write_row(
                            (
                                ord_,
                                sid,
                                seq,
                                m.ts,
                                m.role,
                                pg_text(m.text),
                                len(m.text),
                                m.indexed,
                                m.entry_id,
                                m.parent_id,
                                m.meta_json if m.meta_json is not None else meta_json(m.meta),
                                m.hash,
                                int(m.echo),
                                message_token_line(m),
                                token_count(m.grams) if m.indexed else None,
                            )
                        )
            cur.execute(MOVE_MESSAGES, (self.author, self.host))
            return {(str(r[1]), str(r[2])): int(r[0]) for r in cur.fetchall()}

    def _insert_lines(self, txn: list[Chunk], inserted: list[list[tuple[NewMessage, int]]]) -> None:
        """The verbatim lines: of each new message (keyed by its hash), and the session's other lines."""
        rows: list[tuple[Any, ...]] = []
        for (unit, _chunk, first, _last), pairs in zip(txn, inserted, strict=True):
            for m, msg_id in pairs:
                if m.raw is not None or m.packed_raw is not None:
                    rows.append((unit.session_id, "msg:" + m.hash, m.entry_id, m.entry_type, m.ts, msg_id, _line(m)))
            if first:
                rows += [(e.session_id, e.key, e.entry_id, e.type, e.ts, None, _entry_line(e)) for e in unit.entries]
        if not rows:
            return
        with self.conn.cursor() as cur:
            with cur.copy(
                "COPY pi_memory_stage_entry(session_id, entry_key, entry_id, type, ts, msg_id, raw) "
                "FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(STAGE_ENTRY_TYPES)
                for row in rows:
                    copy.write_row(row)
            cur.execute(MOVE_ENTRIES, (self.author, self.host))

    def _touch_sessions(self, inserted: list[list[tuple[NewMessage, int]]], txn: list[Chunk]) -> None:
        """Each session's newest time, widened by its new messages (one statement for all)."""
        newest: dict[str, int] = {}
        for (unit, _c, _f, _l), pairs in zip(txn, inserted, strict=True):
            for m, _id in pairs:
                newest[unit.session_id] = max(newest.get(unit.session_id, m.ts), m.ts)
        if newest:
            ids = sorted(newest)
            self.conn.execute(
                """UPDATE session s SET last_at = greatest(s.last_at, v.ts)
                   FROM unnest(%s::text[], %s::bigint[]) AS v(id, ts) WHERE s.id = v.id""",
                (ids, [newest[s] for s in ids]),
            )

    def _complete_new(
        self,
        txn: list[Chunk],
        inserted: list[list[tuple[NewMessage, int]]],
        sessions_of: Counter[str],
        totals: dict[str, int],
    ) -> set[int]:
        """The planned runs, headline and source file of the sessions this transaction completes that
        are new and written whole (as `storage.writes._complete_new` does on SQLite); their id()s.

        Whole and new: every message was added (in this transaction or before), the session is in
        this write once, holds exactly these messages, has no run yet, and its messages got
        consecutive ids (the planned fields count message ids from each run's first)."""
        candidates: list[tuple[SessionWrite, list[int]]] = []
        for (unit, _chunk, _first, last), pairs in zip(txn, inserted, strict=True):
            if not last or unit.planned is None or unit.unfinished or sessions_of.get(unit.session_id, 0) != 1:
                continue
            ids = unit.added + [msg_id for _m, msg_id in pairs]
            if len(ids) == len(unit.messages) > 0 and ids[-1] - ids[0] == len(ids) - 1:
                candidates.append((unit, ids))
        if not candidates:
            return set()
        sids = [u.session_id for u, _ids in candidates]
        counts = {
            str(s): int(n)
            for s, n in self.rows(
                "SELECT session_id, count(*) FROM msg WHERE session_id = ANY(%s) GROUP BY session_id", (sids,)
            )
        }
        with_runs = {
            str(r[0]) for r in self.rows("SELECT DISTINCT session_id FROM run WHERE session_id = ANY(%s)", (sids,))
        }
        whole = [
            (u, ids)
            for u, ids in candidates
            if counts.get(u.session_id) == len(u.messages) and u.session_id not in with_runs
        ]
        if not whole:
            return set()
        self._insert_planned_runs(whole, totals)
        self._set_headlines([u for u, _ids in whole], {id(u): ids for u, ids in whole})
        self._record_source_files([u for u, _ids in whole if u.source is not None])
        return {id(u) for u, _ids in whole}

    def _insert_planned_runs(self, whole: list[tuple[SessionWrite, list[int]]], totals: dict[str, int]) -> None:
        """The runs the parse workers planned (`runs.planned.PlannedRun`, by message position), with
        the ids the messages got: COPY, one INSERT returning their ids, then their messages and files."""
        planned = [(u.session_id, run, ids) for u, ids in whole for run in u.planned]
        if not planned:
            return
        with self.conn.cursor() as cur:
            with cur.copy(
                "COPY pi_memory_stage_run(ord, session_id, first_msg, start_ts, end_ts, status, n_msgs, tool_calls, "
                "tool_errors, fields, indexed_chars, toks, ntokens) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(STAGE_RUN_TYPES)
                for k, (sid, run, ids) in enumerate(planned):
                    copy.write_row(
                        (
                            k,
                            sid,
                            ids[run.positions[0]],
                            run.start_ts,
                            run.end_ts,
                            run.status,
                            len(run.positions),
                            run.tool_calls,
                            run.tool_errors,
                            pg_text(decode_text(run.fields)),
                            run.search_chars,
                            token_line(run.chars, run.grams),
                            token_count(run.grams),
                        )
                    )
            cur.execute(MOVE_RUNS, (self.author, self.host))
            run_ids = {(str(s), int(first)): int(rid) for rid, s, first in cur.fetchall()}
            placed = [
                (run_ids[(sid, ids[run.positions[0]])], run, ids)
                for sid, run, ids in planned
                if (sid, ids[run.positions[0]]) in run_ids
            ]
            # (staged too: COPY into a table with row-level security is refused to the roles it binds)
            with cur.copy("COPY pi_memory_stage_run_msg(msg_id, run_id, pos) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(RUN_MSG_TYPES)
                for run_id, run, ids in placed:
                    for k, p in enumerate(run.positions, start=1):
                        copy.write_row((ids[p], run_id, k))
            cur.execute(MOVE_RUN_MSGS, (self.author, self.host))
            files = [(path, run_id, ids[p], action) for run_id, run, ids in placed for path, p, action in run.files]
            if files:
                cur.executemany(INSERT_RUN_FILE, [(pg_text(f[0]), *f[1:]) for f in files])
        totals["run_docs"] = totals.get("run_docs", 0) + len(placed)
        totals["run_chars"] = totals.get("run_chars", 0) + sum(run.search_chars for _r, run, _i in placed)

    def _set_headlines(self, units: list[SessionWrite], ids_of: dict[int, list[int]]) -> None:
        """A new session's first user message (display order: time, then file order), as its headline."""
        heads: list[tuple[str, str]] = []
        for unit in units:
            users = [(m.ts, k) for k, m in enumerate(unit.messages) if m.role == "user"]
            if users:
                _, k = min(users)
                heads.append((unit.session_id, pg_text(unit.messages[k].text[:200])))
        if heads:
            self.conn.execute(
                """UPDATE session s SET first_user = v.head
                   FROM unnest(%s::text[], %s::text[]) AS v(id, head) WHERE s.id = v.id""",
                ([h[0] for h in heads], [h[1] for h in heads]),
            )

    def _reconcile_entry_id(self, sid: str, m: NewMessage) -> None:
        """A message captured live (no entry id) and later imported from its file gets its entry id."""
        row = self.conn.execute(
            "UPDATE msg SET entry_id=%s, parent_id=%s WHERE session_id=%s AND hash=%s AND entry_id IS NULL RETURNING id",
            (m.entry_id, m.parent_id, sid, m.hash),
        ).fetchone()
        if row is not None and (m.raw is not None or m.packed_raw is not None):
            self.conn.execute(
                "UPDATE entry SET raw=%s, entry_id=%s, type=%s WHERE msg_id=%s",
                (_line(m), m.entry_id, m.entry_type, row[0]),
            )

    def _record_source_files(self, units: Iterable[SessionWrite]) -> None:
        rows = []
        for unit in units:
            assert unit.source is not None
            path, size, mtime_ns = unit.source
            rows.append((self.host, pg_text(path), unit.session_id, size, mtime_ns, _import_stamp(), self.author))
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(
                    """INSERT INTO source_file(host, path, session_id, size, mtime_ns, imported_at, author)
                       VALUES (%s,%s,%s,%s,%s,%s,%s)
                       ON CONFLICT (host, path) DO UPDATE SET session_id=excluded.session_id, size=excluded.size,
                         mtime_ns=excluded.mtime_ns, imported_at=excluded.imported_at""",
                    rows,
                )

    def update_first_user(self, session_id: str) -> None:
        self._update_first_user([session_id])

    def _update_first_user(self, session_ids: list[str]) -> None:
        if not session_ids:
            return
        self.conn.execute(
            """UPDATE session SET first_user = (
                 SELECT substr(text, 1, 200) FROM msg WHERE session_id = session.id AND role = 'user'
                 ORDER BY ts, seq LIMIT 1)
               WHERE id = ANY(%s)""",
            (session_ids,),
        )

    # --- batched index maintenance ----------------------------------------------------

    @contextmanager
    def merging_in_steps(self) -> Iterator[None]:
        """Around a bulk write (an import, a push): the token indexes' pending lists merged as it goes,
        by a second connection (`PendingMerger`: the server merges on one core while this one writes
        on the other), and once more at its end, so the searches after it read sorted posting lists
        only (see `flush_token_indexes`). The second connection is opened once `MERGE_EVERY`
        messages were written: an import of a few files (the bridge's, a `watch` catch-up) never
        opens it."""
        before = self.conn.execute(
            "SELECT current_setting('gin_pending_list_limit'), current_setting('work_mem')"
        ).fetchone()
        self.conn.execute(BULK_SETTINGS)
        self._bulk, self._unmerged = True, 0
        try:
            yield
        finally:
            self._bulk = False
            merger, self._merger = self._merger, None
            if merger is not None:
                merger.close()
            self.conn.execute(BULK_RESET, before)
            self.flush_token_indexes()

    _bulk = False  # inside `merging_in_steps`
    _merger: PendingMerger | None = None
    _unmerged = 0  # messages written since the merger was last woken

    def _wrote(self, messages: int) -> None:
        """After a committed write transaction: wake the merger every `MERGE_EVERY` messages."""
        self._unmerged += messages
        if self._bulk and self._unmerged >= MERGE_EVERY:
            if self._merger is None:
                self._merger = PendingMerger.start(self.url)
            if self._merger is not None:
                self._merger.wake()
            self._unmerged = 0

    def flush_token_indexes(self) -> int:
        """Merge the GIN pending lists of `msg.tokens` and `run.tokens` into their indexes (the
        owner's `pi_memory_flush_tokens`, which any writer may call); pages merged."""
        with self.errors():
            return int(self.scalar("SELECT pi_memory_flush_tokens()") or 0)


MERGE_EVERY = 2_000  # messages a bulk writer writes between two merges of the pending lists


class PendingMerger:
    """A thread with its own connection that runs `pi_memory_flush_tokens()` when woken. The thread
    only waits on the server, so the writer's Python goes on; a failure stops it quietly (the
    writer's final flush still merges everything)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="pi-memory-merge", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, url: str) -> PendingMerger | None:
        try:
            conn = driver().connect(url, autocommit=True, application_name="pi-memory merge")
        except Exception:
            return None  # no second connection (a full server): the writer's final flush does it all
        return cls(conn)

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            try:
                self.conn.execute("SELECT pi_memory_flush_tokens()")
            except Exception:
                return

    def close(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()
        self.conn.close()


# A bulk writer's pending lists merge in larger sorted batches: a token met by many of the batch's
# rows is looked up in the index once per batch (the merge collects up to `work_mem` of entries)
BULK_SETTINGS = "SELECT set_config('gin_pending_list_limit', '64MB', false), set_config('work_mem', '64MB', false)"
BULK_RESET = "SELECT set_config('gin_pending_list_limit', %s, false), set_config('work_mem', %s, false)"

ENSURE_SESSION = """
INSERT INTO session(id, agent, cwd, project, started_at, last_at, name, parent_session, source_path, author, host)
VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)
ON CONFLICT (id) DO UPDATE SET
  cwd = CASE WHEN excluded.cwd <> '' THEN excluded.cwd ELSE session.cwd END,
  project = CASE WHEN excluded.project <> '' THEN excluded.project ELSE session.project END,
  started_at = least(session.started_at, excluded.started_at),
  last_at = greatest(session.last_at, excluded.last_at),
  name = coalesce(excluded.name, session.name),
  parent_session = coalesce(excluded.parent_session, session.parent_session),
  source_path = coalesce(excluded.source_path, session.source_path)
"""


_ALONE = compress(b"")[:1]  # the format mark of a line compressed alone (`codec.compress` without text)


def _line(m: NewMessage) -> bytes:
    """A message's verbatim line as the team archive keeps it: compressed alone (by the parse worker
    or the pusher, outside the transaction; here otherwise)."""
    if m.packed_raw is not None and (m.raw is None or m.packed_raw[:1] == _ALONE):
        return m.packed_raw
    return compress(m.raw or b"")


def _entry_line(e: NewEntry) -> bytes:
    return e.packed_raw if e.packed_raw is not None else compress(e.raw)


_last_stamp = 0


def _import_stamp() -> int:
    """A file's `imported_at`: now in ms, a ms after the previous one at least."""
    global _last_stamp
    _last_stamp = max(int(time.time() * 1000), _last_stamp + 1)
    return _last_stamp
