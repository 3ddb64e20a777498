"""Which entries fold, and when: auto stubs, the model's block, level merges. Pure.

Rules shared by all three:
- only whole tool call/result pairs fold: a span never ends between an assistant's tool calls
  and their last result, and never starts at a result (the compaction's pairing check is reused);
- a message without an entry id (not persisted yet) never folds;
- auto stubs and merges never touch the run in progress (from the last user message on), and
  stubs never replace user messages;
- a decision is made only at a moment that is already a byte change or a run start (the first
  request of a new prompt, the model's `fold` call, `/fold`), and is persisted at once, so
  between decisions every request only appends.

Auto stubs are batched (LSM level 0 -> 1): nothing folds until the oldest unfolded output is
`afterRuns` runs old or the unfolded outputs pass `budgetTokens`; then all of them fold in one
record, so the prefix changes once per batch instead of once per run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.tokens import estimate_tokens
from ..boundary import UNFINISHED_STOPS, tool_call_ids
from .apply import Applied, locate
from .records import FoldRecord, Item, Stub
from .render import args_text, block_text, merge_text, stub_text
from .view import FOLD_TOOLS, MESSAGE_TOKENS, ContextView, Message, content_chars, message_tokens, text_of

FANOUT = 4  # this many top-level merge blocks of one level merge into one a level higher
USER_CHARS_BLOCK = 1000  # a user message inside a model's fold keeps this much of its text


@dataclass(frozen=True)
class FoldSettings:
    enabled: bool = True
    auto: bool = True
    after_runs: int = 3
    budget_tokens: int = 12000
    min_chars: int = 1000
    merge_tokens: int = 8000
    args_max_chars: int = 80
    summary_max_chars: int = 2000

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> FoldSettings:
        return cls(
            enabled=bool(values.get("enabled", True)),
            auto=bool(values.get("auto", True)),
            after_runs=int(values.get("afterRuns", 3)),
            budget_tokens=int(values.get("budgetTokens", 12000)),
            min_chars=int(values.get("minChars", 1000)),
            merge_tokens=int(values.get("mergeTokens", 8000)),
            args_max_chars=int(values.get("argsMaxChars", 80)),
            summary_max_chars=int(values.get("summaryMaxChars", 2000)),
        )


def next_id(records: Sequence[FoldRecord]) -> str:
    return f"f{len(records) + 1}"


def result_item(view: ContextView, index: int, addresses: Mapping[str, str], cfg: FoldSettings) -> Item:
    msg = view.messages[index]
    _at, call = view.call_of(index)
    entry = view.ids[index] or ""
    return Item(
        entry=entry,
        role="toolResult",
        address=addresses.get(entry),
        tool=str(msg.get("toolName") or call.get("name") or "tool"),
        args=args_text(call.get("arguments"), cfg.args_max_chars),
        chars=len(text_of(msg.get("content"))),
        error=bool(msg.get("isError")),
    )


def user_item(view: ContextView, index: int, addresses: Mapping[str, str]) -> Item:
    entry = view.ids[index] or ""
    text = text_of(view.messages[index].get("content"))
    return Item(entry=entry, role="user", address=addresses.get(entry), chars=len(text), text=text[:2000])


def _rendered(
    view: ContextView,
    applied: Applied,
    start: int,
    end: int,
    span_size: Callable[[str], int],
    stub_size: Callable[[str], int],
    msg_size: Callable[[Message], int],
) -> int:
    """Size of messages[start..end] as the last request had them (folds applied): a span's block
    and a stub by their text, any other message whole."""
    total = 0
    spans = [(s, e, r) for s, e, r in applied.spans if start <= s and e <= end]
    for i in range(start, end + 1):
        inside = [r for s, e, r in spans if s <= i <= e]
        if inside:
            total += span_size(inside[0].text) if any(s == i for s, _e, _r in spans) else 0
        elif i in applied.stubs:
            total += stub_size(applied.stubs[i][0])
        else:
            total += msg_size(view.messages[i])
    return total


def rendered_chars(view: ContextView, applied: Applied, start: int, end: int) -> int:
    """Context chars of messages[start..end] as the last request had them (30: a stub's JSON around it)."""
    return _rendered(view, applied, start, end, len, lambda text: len(text) + 30, content_chars)


def rendered_tokens(view: ContextView, applied: Applied, start: int, end: int) -> int:
    """The same in tokens for the view's model (`core.tokens`)."""
    family = view.family
    size = lambda text: text_tokens(text, family)  # noqa: E731
    return _rendered(view, applied, start, end, size, size, lambda m: message_tokens(m, family))


def text_tokens(text: str, family: str) -> int:
    """A fold's text (a block, a stub) as one message: its tokens and the message's framing."""
    return estimate_tokens(text, family) + MESSAGE_TOKENS


# --- auto stubs ---------------------------------------------------------------------------


def _stub_candidates(view: ContextView, applied: Applied, limit: int, cfg: FoldSettings) -> list[int]:
    out = []
    for at, (call_at, _block) in view.paired.items():
        msg = view.messages[at]
        whole = view.start <= call_at < at < limit
        if not whole or view.ids[at] is None or msg.get("isError") or at in applied.stubs or applied.covered(at):
            continue
        if str(msg.get("toolName")) in FOLD_TOOLS or len(text_of(msg.get("content"))) < cfg.min_chars:
            continue
        out.append(at)
    return sorted(out)


def _auto_trigger(view: ContextView, candidates: list[int], cfg: FoldSettings, force: bool) -> str:
    if force:
        return "command"
    if view.runs_after(candidates[0]) >= cfg.after_runs:
        return "age"
    # tokens by kind of text (`core.tokens`): Chinese output reaches the budget at ~half the characters
    if (
        sum(estimate_tokens(text_of(view.messages[i].get("content")), view.family) for i in candidates)
        > cfg.budget_tokens
    ):
        return "budget"
    return ""


def plan_auto(
    view: ContextView,
    records: Sequence[FoldRecord],
    cfg: FoldSettings,
    addresses: Mapping[str, str],
    now: int,
    force: bool = False,
) -> FoldRecord | None:
    """At a run start (or `/fold`, force): one `stubs` record for every unfolded old output, or None."""
    if not force and not view.at_run_start:
        return None
    applied = locate(view, records)
    limit = len(view.messages) if force and not view.at_run_start else view.current_run
    candidates = _stub_candidates(view, applied, limit, cfg)
    trigger = _auto_trigger(view, candidates, cfg, force) if candidates else ""
    if not trigger:
        return None
    items = [result_item(view, i, addresses, cfg) for i in candidates]
    stubs = [Stub(item.entry, stub_text(item)) for item in items]
    return FoldRecord(
        id=next_id(records),
        kind="stubs",
        level=0,
        ts=now,
        stubs=stubs,
        items=items,
        before_chars=sum(content_chars(view.messages[i]) for i in candidates),
        after_chars=sum(len(s.text) + 30 for s in stubs),  # 30: the JSON around the stub text
        before_tokens=sum(message_tokens(view.messages[i], view.family) for i in candidates),
        after_tokens=sum(text_tokens(s.text, view.family) for s in stubs),
        trigger=trigger,
    )


# --- the model's block --------------------------------------------------------------------


def complete_ends(view: ContextView, start: int, limit: int) -> list[int]:
    """Indices e in [start, limit) where messages[start..e] holds only whole call/result groups."""
    ends: list[int] = []
    pending: set[int] = set()  # the results still to come, by index (call ids are not unique)
    for i in range(start, limit):
        msg = view.messages[i]
        if msg.get("role") == "assistant" and msg.get("stopReason") not in UNFINISHED_STOPS and tool_call_ids(msg):
            results = view.answers.get(i, [])
            if any(r is None for r in results):
                return ends  # a call unanswered, or of an id open twice: no later end can be whole
            pending.update(r for r in results if r is not None)
        elif msg.get("role") == "toolResult":
            call_at, _block = view.call_of(i)
            if call_at is None or call_at < start:
                return ends  # a result whose call is outside the span: no later end can be whole
            pending.discard(i)
            if not pending and view.ids[i] is not None:
                ends.append(i)
    return ends


def _span_items(
    view: ContextView, applied: Applied, start: int, end: int, addresses: Mapping[str, str], cfg: FoldSettings
) -> list[Item]:
    """Items of messages[start..end] in order: earlier folds' items, then raw results and user messages."""
    items: list[Item] = []
    by_entry = {i.entry: i for r in applied.top_records() if r.kind == "stubs" for i in r.items}
    i = start
    while i <= end:
        span = next(((s, e, r) for s, e, r in applied.spans if s == i and e <= end), None)
        if span is not None:
            items.extend(span[2].items)
            i = span[1] + 1
            continue
        role = view.messages[i].get("role")
        if i in applied.stubs and view.ids[i] in by_entry:
            items.append(by_entry[str(view.ids[i])])
        elif role == "toolResult" and view.ids[i] is not None:
            items.append(result_item(view, i, addresses, cfg))
        elif role == "user" and view.ids[i] is not None:
            items.append(user_item(view, i, addresses))
        i += 1
    return items


def plan_block(
    view: ContextView,
    records: Sequence[FoldRecord],
    cfg: FoldSettings,
    addresses: Mapping[str, str],
    summary: str,
    now: int,
    keep_last: int = 0,
) -> FoldRecord | str:
    """The model's `fold`: everything since the fold line up to the last whole pair (minus `keep_last`
    pairs) as one block; or why nothing can fold."""
    applied = locate(view, records)
    start = max(view.start, applied.span_end() + 1)
    while start < len(view.messages) and view.ids[start] is None:
        start += 1
    ends = complete_ends(view, start, len(view.messages))
    if len(ends) <= keep_last:
        return "nothing to fold: no completed tool call/result pair since the last fold"
    end = ends[-1 - keep_last]
    items = _span_items(view, applied, start, end, addresses, cfg)
    fold_id = next_id(records)
    before = rendered_chars(view, applied, start, end)
    text = block_text(fold_id, summary[: cfg.summary_max_chars], items, before, USER_CHARS_BLOCK)
    return FoldRecord(
        id=fold_id,
        kind="block",
        level=1,
        ts=now,
        first=str(view.ids[start]),
        last=str(view.ids[end]),
        text=text,
        summary=summary[: cfg.summary_max_chars],
        items=items,
        before_chars=before,
        after_chars=len(text),
        before_tokens=rendered_tokens(view, applied, start, end),
        after_tokens=text_tokens(text, view.family),
        trigger="tool",
    )


# --- level merges -------------------------------------------------------------------------


def _whole_end(view: ContextView, start: int, end: int) -> int | None:
    """Grow `end` until every call in messages[start..end] has its result inside; None if it cannot."""
    grown = end
    i = start
    while i <= grown:
        if view.messages[i].get("role") == "assistant" and view.messages[i].get("stopReason") not in UNFINISHED_STOPS:
            last = view.group_end(i)
            if last is None:
                return None
            grown = max(grown, last)
        i += 1
    return grown


def _merge_range(view: ContextView, applied: Applied, cfg: FoldSettings, limit: int) -> tuple[int, int, str] | None:
    merges = [(s, e, r) for s, e, r in applied.spans if r.kind == "merge"]
    line = max((e for _s, e, _r in merges), default=view.start - 1)
    fresh_spans = [(s, e, r) for s, e, r in applied.spans if r.kind != "merge" and s > line and e < limit]
    fresh_stubs = [i for i in applied.stubs if line < i < limit]
    cost = sum(estimate_tokens(r.text, view.family) for _s, _e, r in fresh_spans)
    cost += sum(estimate_tokens(applied.stubs[i][0], view.family) for i in fresh_stubs)
    if fresh_spans or fresh_stubs:
        if cost > cfg.merge_tokens:
            return line + 1, max([e for _s, e, _r in fresh_spans] + fresh_stubs), "budget"
    for level in sorted({r.level for _s, _e, r in merges}):
        same = [(s, e) for s, e, r in merges if r.level == level]
        if len(same) >= FANOUT:
            return same[0][0], same[-1][1], "fanout"
    return None


def _summaries(applied: Applied, start: int, end: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for s, e, r in applied.spans:
        if start <= s and e <= end:
            out.extend(r.summaries if r.kind == "merge" else [{"id": r.id, "text": r.summary}])
    return [s for s in out if s.get("text")]


def _covers(applied: Applied, start: int, end: int) -> list[str]:
    ids = [r.id for s, e, r in applied.spans if start <= s and e <= end]
    ids += sorted({r.id for i, (_t, r) in applied.stubs.items() if start <= i <= end})
    return ids


def plan_merge(
    view: ContextView,
    records: Sequence[FoldRecord],
    cfg: FoldSettings,
    addresses: Mapping[str, str],
    now: int,
    idle: bool = False,
) -> FoldRecord | None:
    """One level merge when fold text passes `mergeTokens` (or FANOUT blocks share a level), else None."""
    applied = locate(view, records)
    limit = len(view.messages) if idle else view.current_run
    found = _merge_range(view, applied, cfg, limit)
    if found is None:
        return None
    start, end, trigger = found
    while start <= end and view.ids[start] is None:
        start += 1
    whole = _whole_end(view, start, end)
    if whole is None or whole >= limit or start > whole or view.ids[whole] is None:
        return None
    covered = [r for s, e, r in applied.spans if start <= s and e <= whole]
    level = max([r.level for r in covered] + [1]) + 1
    items = _span_items(view, applied, start, whole, addresses, cfg)
    fold_id = next_id(records)
    before = rendered_chars(view, applied, start, whole)
    summaries = _summaries(applied, start, whole)
    text = merge_text(fold_id, level, items, summaries, before)
    if len(text) >= before:
        return None  # a merge that would not shrink the context is not worth a prefix change
    return FoldRecord(
        id=fold_id,
        kind="merge",
        level=level,
        ts=now,
        first=str(view.ids[start]),
        last=str(view.ids[whole]),
        text=text,
        items=items,
        summaries=summaries,
        covers=_covers(applied, start, whole),
        before_chars=before,
        after_chars=len(text),
        before_tokens=rendered_tokens(view, applied, start, whole),
        after_tokens=text_tokens(text, view.family),
        trigger=trigger,
    )
