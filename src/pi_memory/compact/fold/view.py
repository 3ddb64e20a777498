"""The context as fold sees it: the messages pi is about to send, each tied to its session entry.

pi's `context` event hands extensions the messages without entry ids. The shim sends the active
branch's entries in slim form (`{id, type, role, ts, call}`); a message is matched to its entry
by role and timestamp, and the tool call id for a tool result (pi copies the message object into
the entry, so all agree). A message with no entry yet (the current turn, not persisted) gets
None and is never folded.

Ids are never trusted to be unique: providers reuse tool call ids within a session (`call_1`
every turn; seen with pi 1.6.0), and matching by the id alone once tied a fresh result to an
older entry, so the older entry's stub replaced it. So a message is tied to an entry only when
its whole key names exactly one entry and one message, a result is paired with the nearest
earlier call of its id that is still unanswered (never with two open calls of one id: those
never fold), and an entry id met twice in one context is nobody's. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ...core.tokens import estimate_tokens, family_of
from ..boundary import context_message, context_start

Message = dict[str, Any]
FOLD_TOOLS = frozenset({"fold", "compress"})


def message_key(msg: Message) -> tuple[str, str, str]:
    call = str(msg.get("toolCallId") or "") if msg.get("role") == "toolResult" else ""
    return (str(msg.get("role")), str(msg.get("timestamp")), call)


def slim_key(entry: dict[str, Any]) -> tuple[str, str, str] | None:
    role = entry.get("role")
    if not isinstance(role, str):
        return None
    call = str(entry.get("call") or "") if role == "toolResult" else ""
    return (role, str(entry.get("ts")), call)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")


def content_chars(msg: Message) -> int:
    """Size of what a message puts in the request (its content as JSON): the unit of the accounting."""
    return len(json.dumps(msg.get("content", ""), ensure_ascii=False))


MESSAGE_TOKENS = 4  # what a provider's chat format adds per message (role, separators), about


def content_tokens(msg: Message, family: str = "openai") -> int:
    """Tokens a message's content costs the model (`core.tokens`): its texts, thinking, and tool
    calls' names and arguments (what the provider tokenizes, not the JSON around it)."""
    content = msg.get("content", "")
    if isinstance(content, str):
        return estimate_tokens(content, family)
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "toolCall":
            parts.append(f"{block.get('name', '')} {json.dumps(block.get('arguments'), ensure_ascii=False)}")
        else:
            parts.append(str(block.get("text") or block.get("thinking") or ""))
    return estimate_tokens("\n".join(parts), family)


def message_tokens(msg: Message, family: str = "openai") -> int:
    return content_tokens(msg, family) + MESSAGE_TOKENS


def tokens(chars: int) -> int:
    """pi's own estimate: four characters a token (for sizes known only in characters)."""
    return (chars + 3) // 4


@dataclass
class ContextView:
    messages: list[Message]
    ids: list[str | None]
    start: int = 0  # first message after a compaction summary
    user_at: list[int] = field(default_factory=list)  # indices of user messages (run starts)
    # result index -> (its call's assistant message index, the toolCall block): paired by position
    paired: dict[int, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    # assistant message index -> its calls' result indices, None where a call is unanswered or ambiguous
    answers: dict[int, list[int | None]] = field(default_factory=dict)
    at: dict[str, int] = field(default_factory=dict)  # entry id -> message index (ids met once)

    def __post_init__(self) -> None:
        seen: dict[str, int] = {}
        for entry_id in self.ids:
            if entry_id is not None:
                seen[entry_id] = seen.get(entry_id, 0) + 1
        self.ids = [i if i is not None and seen[i] == 1 else None for i in self.ids]
        self.at = {entry_id: i for i, entry_id in enumerate(self.ids) if entry_id is not None}
        open_calls: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}  # call id -> unanswered calls
        for i, msg in enumerate(self.messages):
            role = msg.get("role")
            if role == "compactionSummary":
                self.start = i + 1
            elif role == "user":
                self.user_at.append(i)
            elif role == "assistant":
                self._open(i, msg, open_calls)
            elif role == "toolResult" and msg.get("toolCallId"):
                self._answer(i, str(msg["toolCallId"]), open_calls)

    def _open(self, i: int, msg: Message, open_calls: dict[str, list[tuple[int, int, dict[str, Any]]]]) -> None:
        blocks = [b for b in msg.get("content") or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
        self.answers[i] = [None] * len(blocks)
        for k, block in enumerate(blocks):
            if block.get("id"):
                open_calls.setdefault(str(block["id"]), []).append((i, k, block))

    def _answer(self, i: int, call_id: str, open_calls: dict[str, list[tuple[int, int, dict[str, Any]]]]) -> None:
        waiting = open_calls.pop(call_id, [])
        if len(waiting) == 1:  # the one unanswered call of this id: its result
            at, k, block = waiting[0]
            self.paired[i] = (at, block)
            self.answers[at][k] = i
        # none: a result without its call in the context; several: which one it answers is unknowable,
        # so none of them is ever whole (their slots stay None) and the result is nobody's

    def index_of(self, entry_id: str) -> int | None:
        return self.at.get(entry_id)

    @cached_property
    def family(self) -> str:
        """The tokenizer family of the model answering (its newest assistant message's)."""
        for msg in reversed(self.messages):
            if msg.get("role") == "assistant" and msg.get("model"):
                return family_of(str(msg.get("model")), str(msg.get("provider") or ""))
        return "openai"

    @property
    def current_run(self) -> int:
        """Index of the last user message: the run in progress starts there (len when none)."""
        return self.user_at[-1] if self.user_at else len(self.messages)

    @property
    def run_in_progress(self) -> bool:
        """A run is under way: the context does not end with the final answer of its last run."""
        last = self.messages[-1] if self.messages else None
        return last is not None and not (last.get("role") == "assistant" and last.get("stopReason") != "toolUse")

    @property
    def at_run_start(self) -> bool:
        """The request a new prompt starts: the last message is the user's."""
        return bool(self.messages) and self.messages[-1].get("role") == "user"

    def runs_after(self, index: int) -> int:
        return sum(1 for u in self.user_at if u > index)

    def call_of(self, result_index: int) -> tuple[int | None, dict[str, Any]]:
        """The assistant message index and toolCall block a result answers; (None, {}) if unpaired."""
        at, block = self.paired.get(result_index, (None, {}))
        return at, block

    def group_end(self, assistant_index: int) -> int | None:
        """Last result index of an assistant message's calls; None when one is unanswered."""
        results = self.answers.get(assistant_index, [])
        if any(r is None for r in results):
            return None
        return max([-1, *(r for r in results if r is not None)])


def view_from_messages(messages: Sequence[Message], entries: Sequence[dict[str, Any]]) -> ContextView:
    """The `context` event's messages, tied to the slim branch entries the shim sent: a message to
    an entry only when their key names exactly one of each (never a guess between two)."""
    by_key: dict[tuple[str, str, str], list[str]] = {}
    for entry in entries:
        key = slim_key(entry)
        if key is not None and isinstance(entry.get("id"), str):
            by_key.setdefault(key, []).append(entry["id"])
    msgs = [dict(m) for m in messages if isinstance(m, dict)]
    keys = [message_key(m) for m in msgs]
    twice = {k for k in keys if keys.count(k) > 1} if len(set(keys)) < len(keys) else set()
    ids = [found[0] if len(found := by_key.get(k, [])) == 1 and k not in twice else None for k in keys]
    return ContextView(msgs, ids)


def view_from_entries(entries: Sequence[dict[str, Any]]) -> ContextView:
    """The persisted context of a branch (full entries, root to leaf): what pi rebuilds on reload."""
    msgs: list[Message] = []
    ids: list[str | None] = []
    for entry in entries[context_start(entries) :]:
        msg = context_message(entry)
        if msg is not None and entry.get("type") != "compaction":
            msgs.append(msg)
            ids.append(entry.get("id") if isinstance(entry.get("id"), str) else None)
    return ContextView(msgs, ids)
