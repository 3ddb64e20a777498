"""The one write path (import, live capture, watch, push): sessions in short packed transactions.

Design idea: every message reaches the database through `write_sessions`, so
idempotency (content hashes), transaction size and the after-write work are
decided once. Nothing but SQL runs inside a transaction: messages arrive
tokenized. Each transaction takes pieces of the write while it is expected to
end within `TXN_TARGET_S` (cut by time: short enough for a live writer waiting
on the lock, as large as the machine allows). A session the archive did not
have, written whole, gets its planned runs, headline and source file in the
transaction of its last messages (`WRITE_PLANNED`); for everything else, after
the messages are in, each hook in `AFTER_WRITE` runs with the new ids per
session (the runs component registers both: `runs.planned`, `runs.table`), or waits for the
owner's idle moment on a deferring store (the bridge).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .echoes import echoes_after_write

if TYPE_CHECKING:
    from .store import NewEntry, NewMessage, SessionRow, Store

BATCH = 200
INDEX_BUDGET = 200_000  # characters of token text per write transaction (see `pack`; the team archive's)
# How long a write transaction may hold the lock, its commit included: what a live writer beside an
# import waits out at most. Transactions are cut by time, not by size: each takes pieces of the
# write while the time they are expected to take (their `_index_cost` at the pace the store's last
# transactions went, `Store.write_pace`: the runs they complete and the commit, where FTS5 writes
# their segments, included) stays within this. So they stay as short on a slow or busy machine and
# grow as large as they can on a fast one (fewer, larger segments to write and merge).
TXN_TARGET_S = 0.03
# ... while live writers wait for the lock (`Store.contended`): their p99 is about the longest
# transaction they wait out (8 writers beside an import: 27 ms at p90 with 30 ms, bench/contention.py)
CONTENDED_TXN_S = 0.004
FIRST_PACE_S = 2e-7  # seconds per unit of `_index_cost` before any transaction was timed (~40 ms for 200k)
# units of token text (`_index_cost`) in one piece of a session (a transaction takes whole pieces): ~2 ms
# at the pace of this machine, so a transaction cut short for a waiting writer is short too
CHUNK_BUDGET = 10_000
# How often a bulk writer's transaction, between its pieces, looks whether another writer waits for
# the lock (`Store.writer_waiting`): one that does gets it once the piece under way and the commit
# are done, not at the end of the transaction (a live pi session beside a first import).
WAITER_LOOK_S = 0.002

# Run after each write with (store, session id -> new msg ids); components above storage register here,
# after the store's own: the echo marks of the runs the new messages fall in (`echoes`).
AFTER_WRITE: list[Callable[[Store, dict[str, list[int]]], None]] = [echoes_after_write]
# Run inside the write transaction that completes sessions the archive did not have, written whole
# with planned work (`SessionWrite.planned`): (store, [(session id, planned work, its message ids in
# file order)], counter deltas to add to) -> the sessions whose work it wrote. Such a session's
# messages, runs, headline and source file go in together: one transaction instead of three, and a
# kill -9 leaves the file wholly imported or not at all. The runs component registers here.
WRITE_PLANNED: list[Callable[[Store, list[tuple[str, Any, list[int]]], dict[str, int]], set[str]]] = []


@dataclass
class SessionWrite:
    """Everything one session contributes to a write: its row, new messages, other entries."""

    session_id: str
    messages: list[NewMessage]
    entries: list[NewEntry] = field(default_factory=list)
    row: SessionRow | None = None  # created or widened in the same transaction
    source: tuple[str, int, int] | None = None  # (path, size, mtime_ns), recorded once its runs are built
    unfinished: list[int] = field(default_factory=list)  # archived messages still without a run (a killed import)
    # Work planned from the whole file for a session the archive did not have (its runs, numbered by
    # message position): written with the ids the messages got (`WRITE_PLANNED`), when every message
    # was added and the session was still new inside the transaction; otherwise the hooks read it back.
    planned: Any = None
    added: list[int] = field(default_factory=list)  # the ids its new messages got, in order (set by the write)
    usage: list[Any] = field(default_factory=list)  # the model requests its lines record, priced (`usage.row_of`)


def write_sessions(store: Store, units: list[SessionWrite]) -> tuple[int, int]:
    """The one write path (import, live capture, watch). Returns (added, duplicates).

    Messages must be `prepare()`d (tokenized) already: nothing but SQL runs
    inside a transaction. Units are cut into pieces (`CHUNK_BUDGET`) and each
    transaction takes pieces while it is expected to end within `TXN_TARGET_S`:
    short enough for a live writer waiting on the lock, long enough that FTS5
    writes one segment per transaction instead of one per session. New sessions
    written whole get their planned work with their last piece (`_complete_new`);
    the last transaction sets the first user message of the other sessions that
    got one (a live write is one transaction). After that, each hook in
    `AFTER_WRITE` runs with the ids added to the other sessions, in its own
    transactions (runs hang off this), and their source files are recorded.
    """
    skipped = 0
    pieces = _pieces(units)
    sessions_of = Counter(u.session_id for u in units)
    completed: set[int] = set()  # units written whole with their planned work (`_complete_new`), by id()
    at = 0
    while at < len(pieces):
        with store.write():
            started, totals = time.perf_counter(), dict[str, int]()
            at, cost, duplicates, finished = _take_pieces(store, pieces, at, started, totals)
            skipped += duplicates
            completed |= _complete_new(store, finished, sessions_of, totals)
            store.add_to_counters(totals)
            if at == len(pieces):
                _update_first_users(store, [u for u in units if id(u) not in completed])
        _timed(store, started, cost)
    added = sum(len(u.added) for u in units)
    rest = [u for u in units if id(u) not in completed]
    added_ids: dict[str, list[int]] = {}
    for unit in rest:
        if unit.added or unit.unfinished:
            added_ids.setdefault(unit.session_id, []).extend(unit.added + unit.unfinished)
    if added_ids:
        after_messages_added(store, added_ids)
    _record_sources(store, rest)
    return added, skipped


def _take_pieces(
    store: Store, pieces: list[Piece], at: int, started: float, totals: dict[str, int]
) -> tuple[int, int, int, list[SessionWrite]]:
    """Inside the open transaction, write pieces from `at` on while it is expected to end in time
    and no other writer waits for the lock (looked at every `WAITER_LOOK_S`), at least one.
    Returns (the next piece, the `_index_cost` written, the duplicates, the units it finished)."""
    cost = duplicates = 0
    finished: list[SessionWrite] = []
    looked = started
    while at < len(pieces):
        unit, chunk, first, last = pieces[at]
        piece_cost = sum(_index_cost(m) for m in chunk)
        if cost and not _fits(store, started, cost + piece_cost):
            break
        if cost and time.perf_counter() - looked >= WAITER_LOOK_S:
            looked = time.perf_counter()
            if store.writer_waiting():
                break
        at += 1
        duplicates += _write_chunk(store, unit, chunk, first, totals)
        cost += piece_cost
        if last:
            finished.append(unit)
    return at, cost, duplicates, finished


def _fits(store: Store, started: float, cost: int) -> bool:
    """Whether a transaction of this `_index_cost` is expected to end within `TXN_TARGET_S` (and
    has not taken most of it already)."""
    target = CONTENDED_TXN_S if getattr(store, "contended", False) else TXN_TARGET_S
    if time.perf_counter() - started > target * 0.7:
        return False
    return cost * (store.write_pace or FIRST_PACE_S) <= target


def _timed(store: Store, started: float, cost: int) -> None:
    """Learn the pace of the transaction just committed (seconds per unit of `_index_cost`)."""
    if cost >= 10_000:  # a live write's few hundred units are mostly the commit's fixed cost
        pace = (time.perf_counter() - started) / cost
        store.write_pace = pace if not store.write_pace else 0.7 * store.write_pace + 0.3 * pace


def _complete_new(
    store: Store, finished: list[SessionWrite], sessions_of: Counter[str], totals: dict[str, int]
) -> set[int]:
    """Inside the transaction that wrote the last messages of `finished`: the planned work, headline
    and source file of those that are new sessions written whole (`WRITE_PLANNED`); their id()s.

    Whole and new: every message was added, the session is in this write once, and it holds exactly
    these messages (a live writer may have added to it since the importer looked)."""
    whole = [
        u
        for u in finished
        if u.planned is not None
        and len(u.added) == len(u.messages) > 0
        and not u.unfinished
        and sessions_of[u.session_id] == 1
    ]
    if not whole or not WRITE_PLANNED:
        return set()
    counts = store.message_counts([u.session_id for u in whole])
    whole = [u for u in whole if counts.get(u.session_id) == len(u.messages)]
    items = [(u.session_id, u.planned, u.added) for u in whole]
    written = set.intersection(*(hook(store, items, totals) for hook in WRITE_PLANNED)) if items else set()
    done: set[int] = set()
    for unit in whole:
        if unit.session_id in written:
            _set_headline(store, unit)
            if unit.source is not None:
                path, size, mtime_ns = unit.source
                store.record_source_file(path, unit.session_id, size, mtime_ns, _import_stamp())
            done.add(id(unit))
    return done


def _set_headline(store: Store, unit: SessionWrite) -> None:
    """A new session's first user message (display order: time, then file order), as its headline."""
    users = [(m.ts, k) for k, m in enumerate(unit.messages) if m.role == "user"]
    if users:
        _, k = min(users)
        store.set_first_user(unit.session_id, unit.added[k], unit.messages[k].hash, unit.messages[k].text)


_last_stamp = 0


def _import_stamp() -> int:
    """A file's `imported_at`: now in ms, a ms after the previous one at least, so "the last
    imports" stay in the order they were made."""
    global _last_stamp
    _last_stamp = max(int(time.time() * 1000), _last_stamp + 1)
    return _last_stamp


def _update_first_users(store: Store, units: list[SessionWrite]) -> None:
    """A session's headline, for the sessions that got a new user message (only one can become
    its first): inside the write's last transaction, after every message of the write is in."""
    sessions = {u.session_id for u in units if u.added and any(m.role == "user" for m in u.messages)}
    for session_id in sorted(sessions):
        store.update_first_user(session_id)


def _record_sources(store: Store, units: list[SessionWrite]) -> None:
    """A file counts as imported only once its messages and their runs are in: a kill -9 before
    this leaves it to be read again, and the re-read finds the messages whose runs are missing."""
    sources = [u for u in units if u.source is not None]
    if sources:
        with store.write():
            for unit in sources:
                assert unit.source is not None
                store.record_source_file(
                    unit.source[0], unit.session_id, unit.source[1], unit.source[2], _import_stamp()
                )


def after_messages_added(store: Store, added_ids: dict[str, list[int]]) -> None:
    """Run the `AFTER_WRITE` hooks for new messages (session id -> ids), or keep them for later
    (a deferring store keeps only the ids: its hooks read the messages back when they run)."""
    if store.deferred_hooks is not None:
        for session_id, ids in added_ids.items():
            store.deferred_hooks.setdefault(session_id, []).extend(ids)
    else:
        _run_hooks(store, added_ids)


def _run_hooks(store: Store, added_ids: dict[str, list[int]]) -> None:
    for hook in AFTER_WRITE:
        hook(store, added_ids)


def run_deferred_hooks(store: Store) -> bool:
    """Index the messages and run the after-write hooks a live writer put off (see `Store.defer_hooks`),
    and learn the archive's dictionary once it is due (its writes do not); True if anything ran."""
    store.text_codec()
    indexed = store.index_own_pending() > 0
    if not store.deferred_hooks:
        return indexed
    pending, store.deferred_hooks = store.deferred_hooks, {}
    _run_hooks(store, pending)
    return True


def _write_chunk(store: Store, unit: SessionWrite, chunk: list[NewMessage], first: bool, totals: dict[str, int]) -> int:
    """One session's part of a transaction (the ids it adds go to `unit.added`); returns how many
    messages were already there."""
    if first and unit.row is not None:
        store.ensure_session(unit.row)
    ids = store.insert_messages(chunk)
    added = [m for msg_id, m in zip(ids, chunk, strict=True) if msg_id is not None]
    unit.added += [msg_id for msg_id in ids if msg_id is not None]
    store.finish_batch(unit.session_id, added, totals)
    if first and unit.entries:
        store.insert_entries(unit.entries)
    if first and unit.usage:
        store.insert_usage(unit.usage)
    return len(chunk) - len(added)


def pack(units: list[SessionWrite]) -> list[list[tuple[SessionWrite, list[NewMessage], bool, bool]]]:
    """Split units into chunks and group the chunks into transactions of at most BATCH messages
    and about INDEX_BUDGET characters of tokens (the FTS5 inserts are most of a transaction's time:
    200 long Chinese messages would hold the lock ~75 ms, 40-50 ms is the aim)."""
    txns: list[list[tuple[SessionWrite, list[NewMessage], bool, bool]]] = [[]]
    size = cost = 0
    for unit in units:
        chunks = _chunks(unit.messages)
        for i, chunk in enumerate(chunks):
            chunk_cost = sum(_index_cost(m) for m in chunk)
            if size and (size + len(chunk) > BATCH or cost + chunk_cost > INDEX_BUDGET):
                txns.append([])
                size = cost = 0
            txns[-1].append((unit, chunk, i == 0, i == len(chunks) - 1))
            size, cost = size + len(chunk), cost + chunk_cost
    return [t for t in txns if t]


# (the unit, a piece of its messages, its first piece?, its last?)
Piece = tuple["SessionWrite", list["NewMessage"], bool, bool]


def _pieces(units: list[SessionWrite]) -> list[Piece]:
    """Each unit's messages in pieces of at most `CHUNK_BUDGET` (unit, piece, first?, last?), in order."""
    out = []
    for unit in units:
        chunks = _chunks(unit.messages, CHUNK_BUDGET)
        out += [(unit, chunk, i == 0, i == len(chunks) - 1) for i, chunk in enumerate(chunks)]
    return out


def _chunks(messages: list[NewMessage], budget: int = INDEX_BUDGET) -> list[list[NewMessage]]:
    """A session's messages cut where BATCH or `budget` would be passed (an empty session: one empty chunk)."""
    chunks: list[list[NewMessage]] = [[]]
    cost = 0
    for m in messages:
        c = _index_cost(m)
        if chunks[-1] and (len(chunks[-1]) >= BATCH or cost + c > budget):
            chunks.append([])
            cost = 0
        chunks[-1].append(m)
        cost += c
    return chunks


def _index_cost(m: NewMessage) -> int:
    """What writing a message is expected to cost: its token text (characters, or bytes where a parse
    worker sent UTF-8: ~2x for Chinese; the pace each transaction learns is per unit of whichever a
    store's writes bring), plus the row, the verbatim copy and their indexes."""
    return len(m.chars) + len(m.grams) + 200


def write_messages(
    store: Store,
    session_id: str,
    messages: list[NewMessage],
    entries: list[NewEntry] | None = None,
    usage: list[Any] | None = None,
) -> tuple[int, int]:
    """Write one session's messages (the session row must exist): live capture's path."""
    return store.write_sessions([SessionWrite(session_id, messages, list(entries or []), usage=list(usage or []))])
