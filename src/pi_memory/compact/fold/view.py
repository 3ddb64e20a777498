"""The context as fold sees it: the messages pi is about to send, each tied to its session entry.

pi's `context` event hands extensions the messages without entry ids. The shim sends the active
branch's entries in slim form (`{id, type, role, ts, call}`); a message is matched to its entry
by the tool call id (tool results) or by role and timestamp (pi copies the message object into
the entry, so both agree). A message with no entry yet (the current turn, not persisted) gets
None and is never folded. Pure.
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


def message_key(msg: Message) -> tuple[str, str]:
    if msg.get("role") == "toolResult" and msg.get("toolCallId"):
        return ("toolResult", str(msg["toolCallId"]))
    return (str(msg.get("role")), str(msg.get("timestamp")))


def slim_key(entry: dict[str, Any]) -> tuple[str, str] | None:
    role = entry.get("role")
    if not isinstance(role, str):
        return None
    if role == "toolResult" and entry.get("call"):
        return ("toolResult", str(entry["call"]))
    return (role, str(entry.get("ts")))


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
    call_at: dict[str, int] = field(default_factory=dict)  # tool call id -> assistant message index
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool call id -> toolCall block
    result_at: dict[str, int] = field(default_factory=dict)  # tool call id -> toolResult index
    at: dict[str, int] = field(default_factory=dict)  # entry id -> message index

    def __post_init__(self) -> None:
        self.at = {entry_id: i for i, entry_id in enumerate(self.ids) if entry_id is not None}
        for i, msg in enumerate(self.messages):
            role = msg.get("role")
            if role == "compactionSummary":
                self.start = i + 1
            elif role == "user":
                self.user_at.append(i)
            elif role == "assistant":
                for block in msg.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "toolCall" and block.get("id"):
                        self.call_at[str(block["id"])] = i
                        self.calls[str(block["id"])] = block
            elif role == "toolResult" and msg.get("toolCallId"):
                self.result_at[str(msg["toolCallId"])] = i

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
    def at_run_start(self) -> bool:
        """The request a new prompt starts: the last message is the user's."""
        return bool(self.messages) and self.messages[-1].get("role") == "user"

    def runs_after(self, index: int) -> int:
        return sum(1 for u in self.user_at if u > index)

    def call_of(self, result_index: int) -> tuple[int | None, dict[str, Any]]:
        call_id = str(self.messages[result_index].get("toolCallId"))
        return self.call_at.get(call_id), self.calls.get(call_id, {})

    def group_end(self, assistant_index: int) -> int | None:
        """Last result index of an assistant message's calls; None when one is unanswered."""
        ends = [-1]
        for block in self.messages[assistant_index].get("content") or []:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                at = self.result_at.get(str(block.get("id")))
                if at is None:
                    return None
                ends.append(at)
        return max(ends)


def view_from_messages(messages: Sequence[Message], entries: Sequence[dict[str, Any]]) -> ContextView:
    """The `context` event's messages, tied to the slim branch entries the shim sent."""
    by_key: dict[tuple[str, str], str] = {}
    for entry in entries:
        key = slim_key(entry)
        if key is not None and isinstance(entry.get("id"), str):
            by_key.setdefault(key, entry["id"])
    msgs = [dict(m) for m in messages if isinstance(m, dict)]
    return ContextView(msgs, [by_key.get(message_key(m)) for m in msgs])


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
