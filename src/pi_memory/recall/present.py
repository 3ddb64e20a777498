"""Recall as text for a model (pure): the evidence header, whole records, within 16,000 characters."""

from __future__ import annotations

from ..core.format import EVIDENCE_HEADER, local_time, plural, short_id
from .model import HEADER_RESERVE, RECALL_MAX_CHARS, RecallItem, RecallResult


def fit_budget(result: RecallResult, budget: int = RECALL_MAX_CHARS) -> None:
    """Keep whole records within the budget (the first always fits); name the ones left out."""
    used = HEADER_RESERVE
    kept: list[RecallItem] = []
    for item in result.items:
        size = len(item_block(item)) + 1
        if kept and used + size > budget:
            result.omitted.append(item.label)
            continue
        kept.append(item)
        used += size
    result.items = kept


# --- text for the model (pure) ---------------------------------------------------------


def item_block(item: RecallItem) -> str:
    """`[entry] rN/mK kind · time · msg N: snippet`, or the head and one segment of the body."""
    head = f"[{item.label}]" + (f" {item.address}" if item.address else "") + f" {item.kind}"
    if item.source_class == "derived":
        head += " (derived summary)"
    head += f" · {local_time(item.ts, True)}" + (f" · msg {item.msg_id}" if item.msg_id else "")
    head += f" · session {short_id(item.session_id)}"
    if item.body is None:
        return f"{head}: {item.snippet}"
    end = item.offset + len(item.body)
    span = f"{item.body_format} chars {item.offset}-{end} of {item.total_chars}"
    more = f"; more: offset {item.next_offset}" if item.next_offset is not None else ""
    return f"{head} · {span}{more}\n{item.body}"


def _title(result: RecallResult) -> str:
    what = f"{result.action} {result.query!r}" if result.query else result.action
    where = f"scope {result.scope}" + (f" (session {short_id(result.session_id)})" if result.session_id else "")
    page = f"page {result.page}" + (f", next page {result.next_page}" if result.next_page else "")
    return f"recall {what} · {where} · {page} · {plural(len(result.items), 'record')}"


def format_recall(result: RecallResult, cap: int = RECALL_MAX_CHARS) -> str:
    """The text a model reads: evidence header, whole records, what is missing or left out; within `cap`."""
    lines = [EVIDENCE_HEADER, _title(result)]
    if not result.items:
        lines.append("(no records)")
    tail = []
    if result.missing:
        tail.append("not found in scope: " + ", ".join(result.missing))
    if result.omitted:
        tail.append("left out to stay within the output budget (read them by entry_ids): " + ", ".join(result.omitted))
    if result.note:
        tail.append(result.note)
    if any(i.next_offset is not None for i in result.items):
        tail.append("(a body continues: recall again with the same entry_ids and the offset shown)")
    room = cap - sum(len(x) + 1 for x in lines + tail)
    for item in result.items:
        block = item_block(item)
        if len(block) + 1 > room:
            tail.insert(0, f"(output capped at {cap} chars; not shown: {item.label} and after)")
            break
        lines.append(block)
        room -= len(block) + 1
    return "\n".join(lines + tail)[:cap]
