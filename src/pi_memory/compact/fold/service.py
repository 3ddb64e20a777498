"""The three moments fold decides, as the bridge calls them; addresses come in through a callable.

- `on_context`: every request pi is about to send. At a run start the auto stubs (and a merge)
  may be decided; then the records, old and new, become edits of the message list.
- `fold_now`: the model's `fold` tool (a block with its summary) or `/fold` (auto stubs now).
- `status`: the records counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .apply import apply_records
from .plan import FoldSettings, plan_auto, plan_block, plan_merge
from .records import FoldRecord, parse_records
from .status import fold_status, format_fold_status
from .view import ContextView, view_from_entries, view_from_messages

Lookup = Callable[[list[str]], dict[str, str]]


def _foldable_ids(view: ContextView) -> list[str]:
    return [i for i, m in zip(view.ids, view.messages, strict=True) if i and m.get("role") in ("toolResult", "user")]


def _decide(
    view: ContextView, records: list[FoldRecord], cfg: FoldSettings, lookup: Lookup, now: int, force: bool
) -> list[FoldRecord]:
    """Auto stubs, then at most one merge; each appended to `records` as it is decided."""
    addresses = lookup(_foldable_ids(view))
    new: list[FoldRecord] = []
    auto = plan_auto(view, records, cfg, addresses, now, force=force)
    if auto is not None:
        records.append(auto)
        new.append(auto)
    merge = plan_merge(view, records, cfg, addresses, now, idle=force and not view.at_run_start)
    if merge is not None:
        records.append(merge)
        new.append(merge)
    return new


def on_context(
    messages: Sequence[dict[str, Any]],
    entries: Sequence[dict[str, Any]],
    folds: Any,
    cfg: FoldSettings,
    lookup: Lookup,
    now: int,
) -> dict[str, Any]:
    """`{edits, records}`: the new records (to persist) and the edits that fold this request."""
    if not cfg.enabled:
        return {"edits": [], "records": []}
    view = view_from_messages(messages, entries)
    records = parse_records(folds)
    new = _decide(view, records, cfg, lookup, now, force=False) if cfg.auto and view.at_run_start else []
    edits = apply_records(view, records)
    return {"edits": [e.to_dict() for e in edits], "records": [r.to_dict() for r in new]}


def fold_now(
    entries: Sequence[dict[str, Any]],
    folds: Any,
    cfg: FoldSettings,
    lookup: Lookup,
    now: int,
    summary: str | None = None,
    keep_last: int = 0,
) -> dict[str, Any]:
    """With a summary: the model's block (and a merge if due). Without: `/fold`, every old output stubbed now."""
    if not cfg.enabled:
        return {"records": [], "text": "pi-memory: folding is off (fold.enabled in .pi/pi-memory.json)"}
    view = view_from_entries(entries)
    records = parse_records(folds)
    if summary is None:
        new = _decide(view, records, cfg, lookup, now, force=True)
        return {"records": [r.to_dict() for r in new], "text": _said(new, "nothing to fold: no old tool output")}
    block = plan_block(view, records, cfg, lookup(_foldable_ids(view)), summary, now, keep_last)
    if isinstance(block, str):
        return {"records": [], "text": block}
    records.append(block)
    new = [block]
    merge = plan_merge(view, records, cfg, lookup(_foldable_ids(view)), now)
    if merge is not None:
        new.append(merge)
    return {"records": [r.to_dict() for r in new], "text": _said(new, "")}


def _said(new: Sequence[FoldRecord], nothing: str) -> str:
    if not new:
        return nothing
    parts = []
    for r in new:
        what = f"{len(r.stubs)} tool outputs stubbed" if r.kind == "stubs" else f"{len(r.items)} entries in one block"
        parts.append(f"{r.id} ({r.kind}, level {r.level}): {what}, ~{r.saved_tokens:,} tokens saved")
    return "Folded: " + "; ".join(parts) + ". Folded entries stay readable with session_read by address."


def status(folds: Any, compacted: int, cfg: FoldSettings) -> dict[str, Any]:
    st = fold_status(parse_records(folds), compacted)
    return {"text": format_fold_status(st, cfg.enabled, cfg.auto), "status": st.to_dict()}
