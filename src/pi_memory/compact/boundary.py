"""Safe compaction boundary: never hand the provider a tool result without its call.

Design idea: pi proposes `firstKeptEntryId`; everything before it (back to the
previous compaction's kept tail) is replaced by our checkpoint. The kept tail
must be a context a provider accepts: every tool result follows its call, every
ordinary tool call has its result (an assistant turn that ended in `error` or
`aborted` may leave calls unanswered; pi drops those). If pi's cut breaks a
pair we walk back, one valid cut point at a time, inside the compaction window
(from the previous compaction's kept tail on); if nothing is safe, or the request was
aborted, we cancel. Never an LLM fallback. All functions are pure: entries are
pi session entries as dicts, root to leaf, exactly as `getBranch()` returns them.

pi 1.x `context_edit` entries ({targetId, replacement: null | content}) are
honoured when simple: a null replacement omits the target message, a string or
list replacement swaps its content. Anything else is ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Entry = dict[str, Any]
Message = dict[str, Any]

# Roles pi accepts as the first kept message (never a toolResult).
CUT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary"})
# Roles that start a turn: a kept tail starting elsewhere splits a turn.
TURN_START_ROLES = frozenset({"user", "bashExecution", "custom", "branchSummary"})
# Assistant turns that may leave tool calls without results.
UNFINISHED_STOPS = frozenset({"error", "aborted"})
UNANSWERED = "has no result in the kept tail"
NOTHING_TO_COMPACT = "nothing before the boundary to compact"


def context_message(entry: Entry) -> Message | None:
    """The message an entry contributes to the model's context, if any."""
    kind = entry.get("type")
    if kind == "message" and isinstance(entry.get("message"), dict):
        return dict(entry["message"])
    if kind == "custom_message":
        return {"role": "custom", "content": entry.get("content"), "customType": entry.get("customType")}
    if kind == "branch_summary":
        return {"role": "branchSummary", "summary": entry.get("summary")}
    return None


def _simple_edit(entry: Entry) -> tuple[str, Any] | None:
    target = entry.get("targetId")
    replacement = entry.get("replacement", ...)
    if entry.get("type") != "context_edit" or not isinstance(target, str):
        return None
    if replacement is None or isinstance(replacement, (str, list)):
        return target, replacement
    return None


def context_edits(entries: Sequence[Entry]) -> dict[str, Any]:
    """Target entry id -> replacement content (None = omitted); later edits win."""
    edits: dict[str, Any] = {}
    for entry in entries:
        edit = _simple_edit(entry)
        if edit is not None:
            edits[edit[0]] = edit[1]
    return edits


def visible_messages(entries: Sequence[Entry], edits: dict[str, Any] | None = None) -> list[tuple[str, Message]]:
    """(entry id, message) for every entry the model would see, edits applied."""
    edits = context_edits(entries) if edits is None else edits
    out: list[tuple[str, Message]] = []
    for entry in entries:
        msg = context_message(entry)
        entry_id = entry.get("id")
        if msg is None or not isinstance(entry_id, str):
            continue
        if entry_id in edits:
            if edits[entry_id] is None:
                continue
            msg["content"] = edits[entry_id]
        out.append((entry_id, msg))
    return out


def tool_call_ids(msg: Message) -> list[str]:
    content = msg.get("content")
    if msg.get("role") != "assistant" or not isinstance(content, list):
        return []
    return [str(b.get("id")) for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def pairing_problems(messages: Sequence[tuple[str, Message]]) -> list[str]:
    """Why this message sequence would be rejected by a provider; empty when it is sound."""
    problems: list[str] = []
    seen: set[str] = set()
    pending: dict[str, str] = {}
    for entry_id, msg in messages:
        role = msg.get("role")
        if role == "assistant":
            calls = tool_call_ids(msg)
            seen.update(calls)
            if msg.get("stopReason") not in UNFINISHED_STOPS:
                pending.update((c, entry_id) for c in calls)
        elif role == "toolResult":
            call_id = str(msg.get("toolCallId"))
            if call_id not in seen:
                problems.append(f"tool result {entry_id} has no call before it in the kept tail")
            pending.pop(call_id, None)
    problems.extend(f"tool call {c} in {e} {UNANSWERED}" for c, e in pending.items())
    return problems


def last_compaction_index(entries: Sequence[Entry]) -> int:
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].get("type") == "compaction":
            return i
    return -1


def context_start(entries: Sequence[Entry]) -> int:
    """First entry whose message is still in the model's context (the previous kept tail, if any)."""
    prev = last_compaction_index(entries)
    if prev < 0:
        return 0
    kept = entries[prev].get("firstKeptEntryId")
    for i in range(prev):
        if entries[i].get("id") == kept:
            return i
    return prev + 1


@dataclass
class Boundary:
    """Where the kept tail starts, or why no safe place exists."""

    ok: bool
    reason: str = ""
    kept_index: int = -1
    kept_entry_id: str = ""
    proposed_entry_id: str = ""
    moved: bool = False
    is_split_turn: bool = False
    compact_start: int = 0
    problems: list[str] = field(default_factory=list)


def _index_of(entries: Sequence[Entry], entry_id: str) -> int:
    for i, entry in enumerate(entries):
        if entry.get("id") == entry_id:
            return i
    return -1


def check_cut(entries: Sequence[Entry], index: int, start: int, edits: dict[str, Any]) -> list[str]:
    """Problems with keeping entries[index:] after compacting entries[start:index]; empty = safe."""
    tail = visible_messages(entries[index:], edits)
    if not tail:
        return ["the kept tail has no message"]
    first_role = tail[0][1].get("role")
    if first_role not in CUT_ROLES:
        return [f"the kept tail starts with a {first_role} message ({tail[0][0]})"]
    compacted = [m for m in visible_messages(entries[start:index], edits) if m[1].get("role") != "compactionSummary"]
    if not compacted:
        return [NOTHING_TO_COMPACT]
    return pairing_problems(tail)


def is_split_turn(entries: Sequence[Entry], index: int, edits: dict[str, Any] | None = None) -> bool:
    """True when the kept tail starts inside a turn, not at a user (or other turn-starting) message."""
    tail = visible_messages(entries[index:], edits)
    return bool(tail) and tail[0][1].get("role") not in TURN_START_ROLES


def _is_cut_point(entry: Entry, edits: dict[str, Any]) -> bool:
    msg = context_message(entry)
    if msg is None or msg.get("role") not in CUT_ROLES:
        return False
    entry_id = entry.get("id")
    return isinstance(entry_id, str) and not (entry_id in edits and edits[entry_id] is None)


def choose_boundary(entries: Sequence[Entry], proposed_id: str, aborted: bool = False) -> Boundary:
    """pi's proposed cut if it is safe, else the nearest earlier safe cut in the window, else a cancel."""
    if aborted:
        return Boundary(False, "the compaction request was aborted", proposed_entry_id=proposed_id)
    proposed = _index_of(entries, proposed_id)
    # pi's window (0.73 and 1.x alike) starts at the previous compaction's kept tail, so a cut
    # may fall before the previous compaction entry; that entry itself is never a cut point
    start, edits = context_start(entries), context_edits(entries)
    window_start = start
    if proposed < window_start:
        return Boundary(
            False, f"proposed boundary {proposed_id!r} is not in the compaction window", proposed_entry_id=proposed_id
        )
    first_problems = check_cut(entries, proposed, start, edits)
    if not first_problems:
        return _accepted(entries, proposed, proposed_id, start, edits, [])
    # an earlier cut only adds older messages: it can give an orphan result its call, never an
    # unanswered call its result, so that case cancels at once instead of walking the window
    # (and a window with nothing to compact only shrinks further)
    hopeless = [p for p in pairing_problems(visible_messages(entries[proposed:], edits)) if UNANSWERED in p]
    hopeless += [p for p in first_problems if p == NOTHING_TO_COMPACT]
    if hopeless:
        first_problems = hopeless
    else:
        for index in range(proposed - 1, window_start - 1, -1):
            if _is_cut_point(entries[index], edits) and not check_cut(entries, index, start, edits):
                return _accepted(entries, index, proposed_id, start, edits, first_problems)
    return Boundary(
        False,
        "no safe boundary in the compaction window: " + first_problems[0],
        proposed_entry_id=proposed_id,
        compact_start=start,
        problems=first_problems,
    )


def _accepted(
    entries: Sequence[Entry], index: int, proposed_id: str, start: int, edits: dict[str, Any], problems: list[str]
) -> Boundary:
    kept_id = str(entries[index].get("id"))
    return Boundary(
        ok=True,
        kept_index=index,
        kept_entry_id=kept_id,
        proposed_entry_id=proposed_id,
        moved=kept_id != proposed_id,
        is_split_turn=is_split_turn(entries, index, edits),
        compact_start=start,
        problems=problems,
    )
