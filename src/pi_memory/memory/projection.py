"""Current memory state = a pure replay of the events (the projection).

Design idea: nothing but the events is stored, so the state can never drift
from the log, and the same events always give the same state (records in
creation order, every field a function of the events). Each event is judged by
`policy.event_problem` against the state so far; an event that breaks a rule
(it could only come from a hand-made or forged import) is skipped and its
seq recorded in `ignored`, never half-applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .caches import BoundedCache
from .model import SCOPE_ALIASES, MemoryRecord
from .policy import event_problem


@dataclass
class MemoryState:
    records: dict[str, MemoryRecord] = field(default_factory=dict)  # creation order
    last_seq: int = 0
    ignored: list[int] = field(default_factory=list)  # seqs of events that broke a rule


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _new_record(event: Mapping[str, Any]) -> MemoryRecord:
    seq, ts = _int(event.get("seq")), _int(event.get("ts"))
    scope = str(event.get("scope"))
    author = str(event.get("author"))
    ids = event.get("source_entry_ids")
    return MemoryRecord(
        id=str(event["id"]),
        body=str(event["body"]),
        kind=str(event["kind"]),
        scope=SCOPE_ALIASES.get(scope, scope),
        session_id=event.get("session_id") if scope == "session" else None,
        author=author,
        priority=_int(event.get("priority")),
        pinned=bool(event.get("pinned")) and author == "user",
        status="active" if author == "user" else "provisional",
        confirmed=False,
        created_seq=seq,
        created_ts=ts,
        updated_seq=seq,
        updated_ts=ts,
        supersedes=str(event["supersedes"]) if event.get("supersedes") else None,
        source_entry_ids=tuple(str(i) for i in ids) if isinstance(ids, list) else (),
    )


def _changed(record: MemoryRecord, event: Mapping[str, Any]) -> MemoryRecord:
    """The record after a pin/unpin/resolve/edit/confirm event."""
    kind = event.get("type")
    if kind in ("pin", "unpin"):
        changed = replace(record, pinned=kind == "pin")
    elif kind == "resolve":
        changed = replace(record, status="resolved")
    elif kind == "edit":
        changed = replace(record, body=str(event["body"]), edits=record.edits + 1)
    else:  # confirm: the user adopts a proposal; it is authoritative from now on
        changed = replace(record, status="active", confirmed=True, pinned=bool(event.get("pin")))
    return replace(changed, updated_seq=_int(event.get("seq")), updated_ts=_int(event.get("ts")))


def apply(state: MemoryState, event: Mapping[str, Any]) -> None:
    """Apply one event in place (or record it as ignored)."""
    state.last_seq = _int(event.get("seq"), state.last_seq)
    if event_problem(state.records, event) is not None:
        state.ignored.append(state.last_seq)
        return
    kind = event.get("type")
    if kind in ("create", "supersede"):
        record = _new_record(event)
        state.records[record.id] = record
        if record.supersedes:
            old = state.records[record.supersedes]
            state.records[old.id] = replace(
                old,
                status="superseded",
                superseded_by=record.id,
                updated_seq=record.created_seq,
                updated_ts=record.created_ts,
            )
        return
    target = state.records[str(event["id"])]
    state.records[target.id] = _changed(target, event)


def project(events: Iterable[Mapping[str, Any]]) -> MemoryState:
    state = MemoryState()
    for event in events:
        apply(state, event)
    return state


class Projections:
    """The states of verified chains, kept by the hash of their last event.

    Every read and write replays the whole chain; in a long-lived process most replays repeat the
    last one, or extend it by an event. A hash-chained event carries the hash of the one before
    it, so the hash of a verified prefix names exactly the events in it: a state found under it is
    the replay of those events, and only the events after it are applied. States are kept for the
    process (a front end opens the log anew for each call), whatever archive they came from, up to
    `budget` records in all. Callers get a copy (they apply to it)."""

    def __init__(self, budget: int = 20_000) -> None:
        self._states: BoundedCache[str, MemoryState] = BoundedCache(budget, lambda _, state: len(state.records) + 1)

    def project(self, events: Sequence[Mapping[str, Any]], head_hash: str) -> MemoryState:
        start, base = self._longest_known(events, head_hash)
        state = _copy(base)
        for event in events[start:]:
            apply(state, event)
        self._states.put(head_hash, _copy(state))
        return state

    def clear(self) -> None:
        self._states.clear()

    def __len__(self) -> int:
        return len(self._states)

    def _longest_known(self, events: Sequence[Mapping[str, Any]], head_hash: str) -> tuple[int, MemoryState]:
        for end in range(len(events), 0, -1):
            key = head_hash if end == len(events) else str(events[end].get("prev_hash"))
            found = self._states.get(key)
            if found is not None:
                return end, found
        return 0, MemoryState()


PROJECTIONS = Projections()  # the process's own


def _copy(state: MemoryState) -> MemoryState:
    """Records are immutable: a new dict of the same records is a full copy."""
    return MemoryState(dict(state.records), state.last_seq, list(state.ignored))
