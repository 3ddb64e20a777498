"""Records -> edits of the message list: the only thing the shim does with a context.

Records apply in order. A stub replaces one tool result's content; a span record (block,
merge) replaces its messages with one user message holding its frozen text, and swallows
whatever earlier spans or stubs lie inside it. A record whose last entry is not in the context
(cut away by a compaction, or on another branch) does not apply; one whose first entry was cut
away applies from the start of the kept context. Pure: same messages and records, same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..boundary import context_message
from .records import FoldRecord
from .view import ContextView, Message, message_tokens


@dataclass
class Edit:
    """Replace messages[start:end] by `message`."""

    start: int
    end: int
    message: Message

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "message": self.message}


@dataclass
class Applied:
    """Where the records land in one context: spans (start, end inclusive, record) and stubs."""

    spans: list[tuple[int, int, FoldRecord]] = field(default_factory=list)
    stubs: dict[int, tuple[str, FoldRecord]] = field(default_factory=dict)

    def covered(self, index: int) -> bool:
        return any(s <= index <= e for s, e, _r in self.spans)

    def span_end(self) -> int:
        """Index after the last span (the fold line), or -1."""
        return max((e for _s, e, _r in self.spans), default=-1)

    def top_records(self) -> list[FoldRecord]:
        spans = [r for _s, _e, r in self.spans]
        stubs = {id(r): r for _t, r in self.stubs.values()}
        return spans + list(stubs.values())


def _add_span(applied: Applied, start: int, end: int, rec: FoldRecord) -> None:
    kept = []
    for s, e, r in applied.spans:
        if start <= s and e <= end:
            continue  # merged into the new span
        if s <= end and start <= e:
            return  # a partial overlap cannot be built by plan: the newer record is ignored
        kept.append((s, e, r))
    applied.spans = sorted([*kept, (start, end, rec)], key=lambda t: t[0])
    applied.stubs = {i: v for i, v in applied.stubs.items() if not start <= i <= end}


def locate(view: ContextView, records: Sequence[FoldRecord]) -> Applied:
    """Where each record lands. Auto stubs and merges are decided at moments outside the run in
    progress, so one that would land in it is a mismatch (a reused id): it does not apply there."""
    applied = Applied()
    for rec in records:
        if rec.kind in ("stubs", "merge") and view.run_in_progress:
            rec = _outside_run(view, rec)
        if rec.is_span:
            end = view.index_of(rec.last)
            if end is None:
                continue
            first = view.index_of(rec.first)
            start = first if first is not None else view.start
            if start <= end:
                _add_span(applied, start, end, rec)
            continue
        for stub in rec.stubs:
            at = view.index_of(stub.entry)
            if at is not None and not applied.covered(at):
                applied.stubs[at] = (stub.text, rec)
    return applied


def _outside_run(view: ContextView, rec: FoldRecord) -> FoldRecord:
    """The record without what would land in the run in progress (a span ending there: nothing)."""
    run = view.current_run
    if rec.is_span:
        end = view.index_of(rec.last)
        return rec if end is None or end < run else replace(rec, first="", last="")
    stubs = [s for s in rec.stubs if (at := view.index_of(s.entry)) is None or at < run]
    return rec if len(stubs) == len(rec.stubs) else replace(rec, stubs=stubs)


def block_message(rec: FoldRecord) -> Message:
    return {"role": "user", "content": [{"type": "text", "text": rec.text}], "timestamp": rec.ts}


def stub_message(original: Message, text: str) -> Message:
    return {**original, "content": [{"type": "text", "text": text}]}


def apply_records(view: ContextView, records: Sequence[FoldRecord]) -> list[Edit]:
    """The edits, in message order; applying them from the back gives the folded context."""
    applied = locate(view, records)
    edits = [Edit(s, e + 1, block_message(r)) for s, e, r in applied.spans]
    edits += [Edit(i, i + 1, stub_message(view.messages[i], t)) for i, (t, _r) in applied.stubs.items()]
    return sorted(edits, key=lambda e: e.start)


def folded_messages(view: ContextView, records: Sequence[FoldRecord]) -> list[Message]:
    """The context with the edits applied (what the shim sends on)."""
    out = list(view.messages)
    for edit in reversed(apply_records(view, records)):
        out[edit.start : edit.end] = [edit.message]
    return out


def context_tokens(entries: Sequence[dict[str, Any]], records: Sequence[FoldRecord], family: str) -> int:
    """Tokens the messages of some branch entries cost a request, folded by the records as the
    shim would fold them (`core.tokens` estimates): a compaction's context before and after."""
    msgs: list[Message] = []
    ids: list[str | None] = []
    for entry in entries:
        msg = context_message(entry)
        if msg is not None and entry.get("type") != "compaction":
            msgs.append(msg)
            ids.append(entry.get("id") if isinstance(entry.get("id"), str) else None)
    view = ContextView(msgs, ids)
    return sum(message_tokens(m, family) for m in folded_messages(view, records))
