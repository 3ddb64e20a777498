"""Fold records: what one fold did, as stored in the session (custom entry `pi-memory-fold`).

A record carries its rendered text, frozen at fold time: applying a record never re-renders,
so a later change of the renderer (or of an archive address) cannot move bytes that were
already sent. Unknown or malformed records are skipped, never fatal: a session written by a
newer build still loads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

CUSTOM_TYPE = "pi-memory-fold"
VERSION = 1
KINDS = ("stubs", "block", "merge")


@dataclass
class Item:
    """One folded entry as a block lists it."""

    entry: str
    role: str  # "toolResult" | "user"
    address: str | None = None  # r12/m4 when the archive had it at fold time
    tool: str = ""
    args: str = ""  # clipped, one line
    chars: int = 0
    error: bool = False
    text: str = ""  # user messages: the opening of what was said

    @property
    def where(self) -> str:
        return self.address or f"entry {self.entry}"


@dataclass
class Stub:
    entry: str  # the toolResult entry whose content is replaced
    text: str


@dataclass
class FoldRecord:
    id: str  # f1, f2, ... in branch order
    kind: str
    level: int  # stubs 0, block 1, merge 2+
    ts: int  # ms; the block message's timestamp (fixed, so its bytes are too)
    first: str = ""  # span (block, merge): first and last entry id, inclusive
    last: str = ""
    text: str = ""  # the block's rendered text
    summary: str = ""
    stubs: list[Stub] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    summaries: list[dict[str, str]] = field(default_factory=list)  # merge: [{id, text}] of what it merged
    covers: list[str] = field(default_factory=list)  # merge: record ids it replaced
    before_chars: int = 0  # context chars of the span before this fold
    after_chars: int = 0
    before_tokens: int = 0  # the same in tokens (`core.tokens`, the model's tokenizer family); 0: an older record
    after_tokens: int = 0
    trigger: str = ""  # auto: "age" | "budget" | "command"; block: "tool"; merge: "budget" | "fanout"
    v: int = VERSION

    @property
    def is_span(self) -> bool:
        return self.kind in ("block", "merge")

    @property
    def saved_chars(self) -> int:
        return max(0, self.before_chars - self.after_chars)

    @property
    def saved_tokens(self) -> int:
        """Tokens this fold took out of every later request (a record made before tokens were kept:
        its characters / 4)."""
        if self.before_tokens or self.after_tokens:
            return max(0, self.before_tokens - self.after_tokens)
        return (self.saved_chars + 3) // 4

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _items(raw: Any) -> list[Item]:
    out = []
    for r in raw if isinstance(raw, list) else []:
        if isinstance(r, dict) and isinstance(r.get("entry"), str):
            known = {k: r[k] for k in Item.__dataclass_fields__ if k in r}
            out.append(Item(**known))
    return out


def record_from_dict(data: Any) -> FoldRecord | None:
    """A record from a custom entry's data, or None when it is not one this build understands."""
    if not isinstance(data, dict) or data.get("kind") not in KINDS or not isinstance(data.get("id"), str):
        return None
    try:
        rec = FoldRecord(
            id=data["id"],
            kind=data["kind"],
            level=int(data.get("level", 0)),
            ts=int(data.get("ts", 0)),
            first=str(data.get("first", "")),
            last=str(data.get("last", "")),
            text=str(data.get("text", "")),
            summary=str(data.get("summary", "")),
            stubs=[Stub(str(s["entry"]), str(s["text"])) for s in data.get("stubs") or []],
            items=_items(data.get("items")),
            summaries=[dict(s) for s in data.get("summaries") or [] if isinstance(s, dict)],
            covers=[str(c) for c in data.get("covers") or []],
            before_chars=int(data.get("before_chars", 0)),
            after_chars=int(data.get("after_chars", 0)),
            before_tokens=int(data.get("before_tokens", 0)),
            after_tokens=int(data.get("after_tokens", 0)),
            trigger=str(data.get("trigger", "")),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return rec


def parse_records(folds: Any) -> list[FoldRecord]:
    """Records from a list of custom-entry data (or whole custom entries), in order, bad ones skipped."""
    out = []
    for raw in folds if isinstance(folds, list) else []:
        data = raw.get("data") if isinstance(raw, dict) and raw.get("customType") == CUSTOM_TYPE else raw
        rec = record_from_dict(data)
        if rec is not None:
            out.append(rec)
    return out
