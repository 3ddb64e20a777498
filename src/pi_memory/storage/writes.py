"""The one write path (import, live capture, watch, push): sessions in short packed transactions.

Design idea: every message reaches the database through `write_sessions`, so
idempotency (content hashes), transaction size and the after-write work are
decided once. Nothing but SQL runs inside a transaction: messages arrive
tokenized. Transactions hold at most `BATCH` messages and about `INDEX_BUDGET`
characters of tokens (`pack`), short enough for a live writer waiting on the
lock. After the messages are in, each hook in `AFTER_WRITE` runs with the new
ids per session (the runs component registers its own: `runs.table`), or waits
for the owner's idle moment on a deferring store (the bridge).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import NewEntry, NewMessage, SessionRow, Store

BATCH = 200
INDEX_BUDGET = 200_000  # characters of token text per write transaction (see `pack`)

# Run after each write with (store, session id -> new msg ids, planned work per new session: see
# `SessionWrite.planned`); components above storage register here.
AFTER_WRITE: list[Callable[[Store, dict[str, list[int]], dict[str, tuple[Any, list[int]]]], None]] = []


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
    # message position): handed to the hooks with the ids the messages got, when every message was
    # added and the session was still new inside the transaction; otherwise the hooks read it back.
    planned: Any = None
    added: list[int] = field(default_factory=list)  # the ids its new messages got, in order (set by the write)


def write_sessions(store: Store, units: list[SessionWrite]) -> tuple[int, int]:
    """The one write path (import, live capture, watch). Returns (added, duplicates).

    Messages must be `prepare()`d (tokenized) already: nothing but SQL runs
    inside a transaction. Units are packed into transactions of about `BATCH`
    messages: few enough to keep the lock short for a live writer, many enough
    that FTS5 writes one segment per transaction instead of one per session.
    The last transaction also sets the first user message of the sessions that
    got one (a live write is one transaction). After the messages are in, each
    hook in `AFTER_WRITE` runs with the ids that were added, per session, in
    its own transaction (runs hang off this).
    """
    skipped = 0
    txns = pack(units)
    for i, txn in enumerate(txns):
        with store.write():
            totals: dict[str, int] = {}
            for unit, chunk, first, _last in txn:
                skipped += _write_chunk(store, unit, chunk, first, totals)
            store.add_to_counters(totals)
            if i == len(txns) - 1:
                _update_first_users(store, units)
    added_ids: dict[str, list[int]] = {}
    for unit in units:
        if unit.added:
            added_ids.setdefault(unit.session_id, []).extend(unit.added)
    added = sum(len(v) for v in added_ids.values())
    for unit in units:
        if unit.unfinished:
            added_ids.setdefault(unit.session_id, []).extend(unit.unfinished)
    if added_ids:
        after_messages_added(store, added_ids, _planned(store, units))
    _record_sources(store, units)
    return added, skipped


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
        now = int(time.time() * 1000)
        with store.write():
            for i, unit in enumerate(sources):
                assert unit.source is not None
                # a ms apart, in import order: "the last imports" stay in the order they were made
                store.record_source_file(unit.source[0], unit.session_id, unit.source[1], unit.source[2], now + i)


def _planned(store: Store, units: list[SessionWrite]) -> dict[str, tuple[Any, list[int]]]:
    """Planned work of the units written whole, with their message ids in file order: every message
    was added, and the session holds nothing else (a live writer may have added to it meanwhile;
    then the hooks read the session back instead)."""
    units_of = Counter(u.session_id for u in units)
    whole = [
        u
        for u in units
        if u.planned is not None
        and len(u.added) == len(u.messages) > 0
        and not u.unfinished
        and units_of[u.session_id] == 1
    ]
    if not whole:
        return {}
    counts = store.message_counts([u.session_id for u in whole])
    return {u.session_id: (u.planned, u.added) for u in whole if counts.get(u.session_id) == len(u.messages)}


def after_messages_added(
    store: Store, added_ids: dict[str, list[int]], planned: dict[str, tuple[Any, list[int]]] | None = None
) -> None:
    """Run the `AFTER_WRITE` hooks for new messages (session id -> ids), or keep them for later
    (a deferring store keeps only the ids: its hooks read the messages back when they run)."""
    if store.deferred_hooks is not None:
        for session_id, ids in added_ids.items():
            store.deferred_hooks.setdefault(session_id, []).extend(ids)
    else:
        _run_hooks(store, added_ids, planned or {})


def _run_hooks(store: Store, added_ids: dict[str, list[int]], planned: dict[str, tuple[Any, list[int]]]) -> None:
    for hook in AFTER_WRITE:
        hook(store, added_ids, planned)


def run_deferred_hooks(store: Store) -> bool:
    """Index the messages and run the after-write hooks a live writer put off (see `Store.defer_hooks`);
    True if anything ran."""
    indexed = store.index_pending() > 0
    if not store.deferred_hooks:
        return indexed
    pending, store.deferred_hooks = store.deferred_hooks, {}
    _run_hooks(store, pending, {})
    return True


def _write_chunk(store: Store, unit: SessionWrite, chunk: list[NewMessage], first: bool, totals: dict[str, int]) -> int:
    """One session's part of a transaction (the ids it adds go to `unit.added`); returns how many
    messages were already there."""
    if first and unit.row is not None:
        store.ensure_session(unit.row)
    added: list[NewMessage] = []
    for m in chunk:
        msg_id = store.insert_message(m)
        if msg_id is not None:
            unit.added.append(msg_id)
            added.append(m)
    store.finish_batch(unit.session_id, added, totals)
    if first:
        for e in unit.entries:
            store.insert_entry(e)
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


def _chunks(messages: list[NewMessage]) -> list[list[NewMessage]]:
    """A session's messages cut where BATCH or INDEX_BUDGET would be passed (an empty session: one empty chunk)."""
    chunks: list[list[NewMessage]] = [[]]
    cost = 0
    for m in messages:
        c = _index_cost(m)
        if chunks[-1] and (len(chunks[-1]) >= BATCH or cost + c > INDEX_BUDGET):
            chunks.append([])
            cost = 0
        chunks[-1].append(m)
        cost += c
    return chunks


def _index_cost(m: NewMessage) -> int:
    return len(m.chars) + len(m.grams) + 200  # + the row, the verbatim copy and their indexes


def write_messages(
    store: Store, session_id: str, messages: list[NewMessage], entries: list[NewEntry] | None = None
) -> tuple[int, int]:
    """Write one session's messages (the session row must exist): live capture's path."""
    return store.write_sessions([SessionWrite(session_id, messages, list(entries or []))])
