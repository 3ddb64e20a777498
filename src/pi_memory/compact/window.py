"""Window manifest: one immutable row per committed pi compaction, hash-chained per session.

Design idea: nothing is written when we plan a compaction; only pi's
`session_compact` event (the entry pi actually persisted) creates a window, so
a cancelled or failed compaction leaves no trace. The window id is derived from
(session id, compaction entry id), so a duplicate event finds its row and
writes nothing. Each row carries the hash of the session's previous window;
`verify_windows` recomputes the chain. Everything else a status report needs
(reason, plan time, checkpoint size) is read from the entry's own details.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput
from ..storage.store import Store

COLUMNS = (
    "session_id, seq, window_id, compaction_entry_id, parent_window_id, kept_entry_id, source_count, "
    "source_hash, prev_hash, hash, recorded_at, compactor, reason, plan_ms, checkpoint_chars, tokens_before, derived_count"
)


@dataclass
class WindowRecord:
    session_id: str
    seq: int
    window_id: str
    compaction_entry_id: str
    parent_window_id: str | None
    kept_entry_id: str
    source_count: int | None
    source_hash: str | None
    prev_hash: str | None
    hash: str
    recorded_at: int
    compactor: str | None = None
    reason: str | None = None
    plan_ms: float | None = None
    checkpoint_chars: int | None = None
    tokens_before: int | None = None
    derived_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def window_id_for(session_id: str, compaction_entry_id: str) -> str:
    return "w-" + hashlib.sha256(f"{session_id}\n{compaction_entry_id}".encode()).hexdigest()[:16]


def chain_hash(w: WindowRecord) -> str:
    """sha256 over the fields that identify a window and its place in the chain (not the stats)."""
    body = {
        "sessionId": w.session_id,
        "seq": w.seq,
        "windowId": w.window_id,
        "compactionEntryId": w.compaction_entry_id,
        "parentWindowId": w.parent_window_id,
        "keptEntryId": w.kept_entry_id,
        "sourceCount": w.source_count,
        "sourceHash": w.source_hash,
        "prevHash": w.prev_hash,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def details_of(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    details = entry.get("details")
    return details if isinstance(details, Mapping) else {}


def previous_compaction_id(entry: Mapping[str, Any], branch: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The compaction before this one on its branch: from our details, else from the branch entries."""
    details = details_of(entry)
    if "previousCompactionId" in details:
        return _str(details.get("previousCompactionId"))
    before: str | None = None
    for e in branch or ():
        if e.get("id") == entry.get("id"):
            return before
        if e.get("type") == "compaction":
            before = _str(e.get("id"))
    return None


def new_window(
    session_id: str, entry: Mapping[str, Any], parent_window_id: str | None, seq: int, prev_hash: str | None
) -> WindowRecord:
    """The row for a committed compaction entry (pure; the hash is filled in)."""
    details = details_of(entry)
    plan_ms = details.get("planMs")
    record = WindowRecord(
        session_id=session_id,
        seq=seq,
        window_id=window_id_for(session_id, str(entry["id"])),
        compaction_entry_id=str(entry["id"]),
        parent_window_id=parent_window_id,
        kept_entry_id=str(entry.get("firstKeptEntryId") or ""),
        source_count=_int(details.get("sourceCount")),
        source_hash=_str(details.get("sourceHash")),
        prev_hash=prev_hash,
        hash="",
        recorded_at=int(time.time() * 1000),
        compactor=_str(details.get("compactor")) or ("extension" if entry.get("fromHook") else "pi"),
        reason=_str(details.get("reason")),
        plan_ms=float(plan_ms) if isinstance(plan_ms, (int, float)) and not isinstance(plan_ms, bool) else None,
        checkpoint_chars=len(entry["summary"]) if isinstance(entry.get("summary"), str) else None,
        tokens_before=_int(entry.get("tokensBefore")),
    )
    record.hash = chain_hash(record)
    return record


def _validate(session_id: str, entry: Any) -> None:
    if not isinstance(session_id, str) or not session_id.strip():
        raise BadInput("a window needs the session id")
    if not isinstance(entry, Mapping) or entry.get("type") != "compaction" or not _str(entry.get("id")):
        raise BadInput("a window needs a compaction entry (type 'compaction' with an id)")


def find_window(store: Store, session_id: str, compaction_entry_id: str) -> WindowRecord | None:
    rows = store.rows(
        f"SELECT {COLUMNS} FROM compact_window WHERE session_id=? AND compaction_entry_id=?",
        (session_id, compaction_entry_id),
    )
    return WindowRecord(*rows[0]) if rows else None


def record_window(
    store: Store,
    session_id: str,
    entry: Mapping[str, Any],
    branch: Sequence[Mapping[str, Any]] | None = None,
    derived_count: int = 0,
    reason: str | None = None,
) -> tuple[WindowRecord, bool]:
    """(the window, whether it was written now). A duplicate event returns the existing row."""
    _validate(session_id, entry)
    previous_id = previous_compaction_id(entry, branch)
    with store.write():
        existing = find_window(store, session_id, str(entry["id"]))
        if existing is not None:
            return existing, False
        last = store.rows(
            "SELECT seq, hash FROM compact_window WHERE session_id=? ORDER BY seq DESC LIMIT 1", (session_id,)
        )
        seq, prev_hash = (int(last[0][0]) + 1, str(last[0][1])) if last else (1, None)
        parent = window_id_for(session_id, previous_id) if previous_id else None
        if parent is not None and not store.scalar("SELECT 1 FROM compact_window WHERE window_id=?", (parent,)):
            parent = None  # the previous compaction was never recorded (manifest off, or before install)
        record = new_window(session_id, entry, parent, seq, prev_hash)
        record.derived_count = derived_count
        record.reason = record.reason or _str(reason)  # pi 1.x names the trigger on the event itself
        values = tuple(record.__dict__.values())
        store.execute(f"INSERT INTO compact_window ({COLUMNS}) VALUES ({', '.join('?' * len(values))})", values)
    return record, True


def list_windows(store: Store, session_id: str) -> list[WindowRecord]:
    rows = store.rows(f"SELECT {COLUMNS} FROM compact_window WHERE session_id=? ORDER BY seq", (session_id,))
    return [WindowRecord(*r) for r in rows]


def verify_chain(windows: Sequence[WindowRecord]) -> list[str]:
    """Problems in one session's chain (pure); empty when every hash and link holds."""
    problems: list[str] = []
    prev: WindowRecord | None = None
    for w in windows:
        expected_seq = prev.seq + 1 if prev else 1
        if w.seq != expected_seq:
            problems.append(f"window {w.window_id}: seq {w.seq}, expected {expected_seq}")
        if w.prev_hash != (prev.hash if prev else None):
            problems.append(
                f"window {w.window_id}: previous hash does not match window {prev.window_id if prev else '-'}"
            )
        if chain_hash(w) != w.hash:
            problems.append(f"window {w.window_id}: hash does not match its fields")
        prev = w
    return problems


def last_window(store: Store, session_id: str | None = None) -> WindowRecord | None:
    """The most recently recorded window (of one session, or of any)."""
    where, params = ("WHERE session_id=?", (session_id,)) if session_id else ("", ())
    rows = store.rows(
        f"SELECT {COLUMNS} FROM compact_window {where} ORDER BY recorded_at DESC, seq DESC LIMIT 1", params
    )
    return WindowRecord(*rows[0]) if rows else None
