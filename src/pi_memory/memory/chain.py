"""The hash chain of a memory log: canonical event JSON, hashes, verification (pure).

Design idea: an event is a small JSON object; its canonical form (sorted keys,
no whitespace, UTF-8) is what is stored and what is hashed, so the same event
always has the same bytes and the same hash on every machine. Each event
carries its `seq` (1, 2, 3, ... per chain) and the `prev_hash` of the event
before it, so editing, deleting, reordering or inserting any stored event
breaks the chain at that point. `verify_chain` walks the rows once and
returns the trusted prefix: everything before the first bad row.

What a chain alone cannot prove: someone who can write the file can append an
event with a correct hash, or rewrite one and recompute every hash after it.
The keyed seals and the pinned head (`seal.py`) are what catch those.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core import jsonline
from .caches import BoundedCache

GENESIS = "0" * 64  # the prev_hash of event 1
EVENT_VERSION = 1


def canonical(event: dict[str, Any]) -> str:
    """The one text form of an event: sorted keys, no whitespace, non-ASCII kept."""
    return json.dumps(event, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def event_hash(event_text: str) -> str:
    return hashlib.sha256(event_text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ChainRow:
    """One stored event: the columns and the canonical text they were derived from."""

    seq: int
    prev_hash: str
    hash: str
    event: str

    def to_line(self) -> str:
        """The export form: the event with its hash, still canonical."""
        return canonical({**jsonline.loads(self.event), "hash": self.hash})


def make_row(seq: int, prev_hash: str, body: dict[str, Any]) -> ChainRow:
    """Seal an event body (type, ts, data...) at a position in the chain."""
    event = {**body, "v": EVENT_VERSION, "seq": seq, "prev_hash": prev_hash}
    text = canonical(event)
    return ChainRow(seq, prev_hash, event_hash(text), text)


@dataclass
class ChainReport:
    """The result of walking a chain: how many rows, how many are trusted, and why not the rest."""

    rows: int
    trusted: int
    broken_at: int | None = None  # seq of the first bad row
    reason: str | None = None
    head_hash: str = GENESIS  # hash of the last trusted event
    events: list[dict[str, Any]] = field(default_factory=list, repr=False)  # the trusted events, parsed
    sealed: bool = False  # its events carry keyed seals (`seal.py`); False: not checked or not sealed yet
    pinned: bool = False  # its head is pinned outside the archive (`seal.py`)
    restore_from: int | None = None  # the chain a replaced log was pinned at (`MemoryLog.repair` restores it)

    def cut(self, trusted: int, reason: str, head_hash: str) -> None:
        """Trust only the first `trusted` events (a seal or the pin failed after them)."""
        self.broken_at, self.reason = trusted + 1, reason
        self.trusted, self.head_hash = trusted, head_hash
        del self.events[trusted:]

    @property
    def ok(self) -> bool:
        return self.broken_at is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "rows": self.rows,
            "trusted": self.trusted,
            "broken_at": self.broken_at,
            "reason": self.reason,
            "head_hash": self.head_hash,
            "sealed": self.sealed,
            "pinned": self.pinned,
        }


def row_problem(row: ChainRow, expected_seq: int, expected_prev: str) -> tuple[str | None, dict[str, Any] | None]:
    """Why a row cannot be trusted at this position (None if it can), and its parsed event."""
    if row.seq != expected_seq:
        return f"seq {row.seq} where {expected_seq} was expected", None
    if row.prev_hash != expected_prev:
        return "prev_hash does not match the previous event's hash", None
    problem, event = _CHECKED.remembered(row, _content_problem)
    return problem, (dict(event) if event is not None else None)


# Every read and write verifies the whole chain again, so a long-lived process (the bridge, `watch`)
# checks the same rows over and over: what a row's own bytes say about it is kept, keyed by those
# bytes (all four columns), so a row changed in any way is checked afresh. ~4 MB of event text.
_CHECKED: BoundedCache[ChainRow, tuple[str | None, dict[str, Any] | None]] = BoundedCache(
    4_000_000, lambda row, _: len(row.event) + 200
)


def _content_problem(row: ChainRow) -> tuple[str | None, dict[str, Any] | None]:
    try:
        event = jsonline.loads(row.event)
    except ValueError:
        return "event is not valid JSON", None
    if not isinstance(event, dict):
        return "event is not a JSON object", None
    if canonical(event) != row.event:
        return "event text is not in canonical form (edited by hand?)", None
    if event.get("seq") != row.seq or event.get("prev_hash") != row.prev_hash:
        return "event's seq/prev_hash differ from the row's", None
    if event_hash(row.event) != row.hash:
        return "hash does not match the event (the event was altered)", None
    return None, event


def clear_cache() -> None:
    _CHECKED.clear()


def verify_chain(rows: Iterable[ChainRow]) -> ChainReport:
    """Walk the rows in seq order; stop at the first one that breaks the chain."""
    report = ChainReport(rows=0, trusted=0)
    prev, expected = GENESIS, 1
    for row in rows:
        report.rows += 1
        if report.broken_at is not None:
            continue
        problem, event = row_problem(row, expected, prev)
        if problem is not None or event is None:
            report.broken_at, report.reason = expected, problem
            continue
        report.events.append(event)
        report.trusted += 1
        prev, expected = row.hash, expected + 1
    report.head_hash = prev
    return report


def parse_line(line: str) -> ChainRow:
    """An exported line back into a row; ValueError with a reason if it is not one."""
    obj = jsonline.loads(line)
    if not isinstance(obj, dict) or not isinstance(obj.get("hash"), str):
        raise ValueError("not an exported memory event (no hash)")
    hash_ = obj.pop("hash")
    seq, prev = obj.get("seq"), obj.get("prev_hash")
    if not isinstance(seq, int) or not isinstance(prev, str):
        raise ValueError("not an exported memory event (no seq/prev_hash)")
    return ChainRow(seq, prev, hash_, canonical(obj))
