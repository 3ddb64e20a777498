"""`compact_plan`: pi's `session_before_compact` question answered in one pure call.

Design idea: the extension sends `{branchEntries, preparation}` and returns
whatever comes back. We either cancel with a reason or return the compaction
pi will persist: our checkpoint as `summary`, the (possibly moved) safe
boundary as `firstKeptEntryId`, pi's own `tokensBefore`, and `details` that let
the window manifest and status be rebuilt later from the committed entry alone
(nothing is written at plan time, so a cancelled or failed compaction leaves
nothing behind). `timed_plan` is the bridge-facing wrapper that adds the
elapsed time and the trigger reason to the details.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.tokens import family_of
from .boundary import Boundary, Entry, choose_boundary, context_start, last_compaction_index, visible_messages
from .checkpoint import Checkpoint, CheckpointInput, build_checkpoint
from .config import DEFAULTS
from .facts import collect_facts
from .fold.apply import context_tokens
from .fold.plan import text_tokens
from .fold.records import parse_records

COMPACTOR = "pi-memory"
MAX_SOURCE_IDS = 200  # details stay small; the range and hash identify the rest


def _cancel(reason: str) -> dict[str, Any]:
    return {"cancel": True, "reason": reason}


def _setting(config: Mapping[str, Any] | None, key: str, sub: str | None = None) -> Any:
    source: Mapping[str, Any] = config if config is not None else DEFAULTS
    if sub is None:
        return source.get(key, DEFAULTS[key])
    return source.get(key, {}).get(sub, DEFAULTS[key][sub])


def compacted_entries(entries: Sequence[Entry], boundary: Boundary) -> list[Entry]:
    """The entries the checkpoint replaces: from the context start to the kept boundary, compactions left out."""
    return [e for e in entries[boundary.compact_start : boundary.kept_index] if e.get("type") != "compaction"]


def _previous(entries: Sequence[Entry], preparation: Mapping[str, Any]) -> tuple[str, str]:
    prev = last_compaction_index(entries)
    prev_id = str(entries[prev].get("id")) if prev >= 0 else ""
    summary = preparation.get("previousSummary")
    if not isinstance(summary, str):
        summary = str(entries[prev].get("summary") or "") if prev >= 0 else ""
    return summary, prev_id


def compact_plan(
    branch_entries: Sequence[Entry],
    preparation: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    aborted: bool = False,
    session_id: str = "",
) -> dict[str, Any]:
    """`{"cancel": True, "reason"}` or `{"compaction": {summary, firstKeptEntryId, tokensBefore, details}}`."""
    if not isinstance(branch_entries, Sequence) or not all(isinstance(e, dict) for e in branch_entries):
        return _cancel("branchEntries must be a list of session entries")
    proposed = preparation.get("firstKeptEntryId")
    if not isinstance(proposed, str) or not proposed:
        return _cancel("preparation.firstKeptEntryId is missing")
    boundary = choose_boundary(branch_entries, proposed, aborted=aborted)
    if not boundary.ok:
        return _cancel(boundary.reason)
    compacted = compacted_entries(branch_entries, boundary)
    messages = [m for m in visible_messages(compacted) if m[1].get("role") != "system"]
    previous_summary, previous_id = _previous(branch_entries, preparation)
    checkpoint = build_checkpoint(
        CheckpointInput(
            compacted=compacted,
            messages=messages,
            facts=collect_facts(messages),
            kept_entry_id=boundary.kept_entry_id,
            is_split_turn=boundary.is_split_turn,
            previous_summary=previous_summary,
            previous_compaction_id=previous_id,
            summary_max_chars=int(_setting(config, "summaryMaxChars")),
            session_summary_max_chars=int(_setting(config, "sessionSummary", "maxChars")),
            session_id=session_id,
        )
    )
    details = _details(compacted, checkpoint, boundary, previous_id)
    details.update(_context_tokens(branch_entries, boundary, previous_summary, checkpoint.text))
    tokens = preparation.get("tokensBefore")
    return {
        "compaction": {
            "summary": checkpoint.text,
            "firstKeptEntryId": boundary.kept_entry_id,
            "tokensBefore": tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0,
            "details": details,
        }
    }


def _details(
    compacted: Sequence[Entry], checkpoint: Checkpoint, boundary: Boundary, previous_id: str
) -> dict[str, Any]:
    """The compaction entry's `details`: where the checkpoint came from, for a later window check."""
    ids = [str(e["id"]) for e in compacted if isinstance(e.get("id"), str)]
    return {
        "compactor": COMPACTOR,
        "version": 1,
        "sourceEntryIds": ids[:MAX_SOURCE_IDS],
        "sourceEntryIdsTruncated": len(ids) > MAX_SOURCE_IDS,
        "firstSourceEntryId": ids[0] if ids else None,
        "lastSourceEntryId": ids[-1] if ids else None,
        "sourceCount": checkpoint.source_count,
        "messageCount": checkpoint.message_count,
        "sourceHash": checkpoint.source_hash,
        "keptEntryId": boundary.kept_entry_id,
        "proposedKeptEntryId": boundary.proposed_entry_id,
        "movedBoundary": boundary.moved,
        "isSplitTurn": boundary.is_split_turn,
        "previousCompactionId": previous_id or None,
        "checkpointChars": len(checkpoint.text),
        "summaryChars": checkpoint.summary_chars,
        "itemsKept": checkpoint.items_kept,
        "itemsDropped": checkpoint.items_dropped,
    }


def _family(entries: Sequence[Entry]) -> str:
    for entry in reversed(entries):
        msg = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(msg, dict) and msg.get("role") == "assistant" and msg.get("model"):
            return family_of(str(msg["model"]), str(msg.get("provider") or ""))
    return "openai"


def _context_tokens(entries: Sequence[Entry], boundary: Boundary, previous: str, checkpoint: str) -> dict[str, Any]:
    """The context's tokens just before this compaction (the previous summary and every message, as
    folded) and just after (the checkpoint and the kept tail, as folded): what it removes from every
    later request, for the context ledger (`pi-memory usage ledger`)."""
    family = _family(entries)
    folds = parse_records(list(entries))
    before = context_tokens(entries[context_start(entries) :], folds, family)
    after = context_tokens(entries[boundary.kept_index :], folds, family)
    return {
        "tokenFamily": family,
        "contextTokensBefore": before + (text_tokens(previous, family) if previous else 0),
        "contextTokensAfter": after + text_tokens(checkpoint, family),
    }


def timed_plan(params: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The bridge's `compact_plan` method: params `{branchEntries, preparation, aborted?, reason?, sessionId?}`.

    Adds `planMs` and `reason` to the details (so they reach the committed
    compaction entry and, from there, `status`); the checkpoint text stays pure.
    """
    started = time.perf_counter()
    preparation = params.get("preparation")
    if not isinstance(preparation, Mapping):
        return _cancel("preparation is missing")
    session_id = params.get("sessionId")
    plan = compact_plan(
        params.get("branchEntries") or [],
        preparation,
        config,
        bool(params.get("aborted")),
        session_id if isinstance(session_id, str) else "",
    )
    if "compaction" in plan:
        details = plan["compaction"]["details"]
        reason = params.get("reason")
        details["reason"] = reason if isinstance(reason, str) else None
        details["planMs"] = round((time.perf_counter() - started) * 1000, 3)
    return plan
