"""A message -> the markdown text that is indexed and shown (pure functions).

Design idea (spec 000 §5.2): what the archive indexes is what a person or a
model can read at a glance, not raw JSON. User text keeps `[image]`
placeholders, assistant text drops thinking and shows tool calls as
`→ tool({...})` with arguments clipped, a failed tool result becomes
`✗ tool: <first 500 chars>`. A successful tool result is kept (short preview,
full output in the verbatim copy) but not indexed: it is most of the bytes and
the least of the meaning. Every indexed text is capped at 20,000 chars.

The content hash that makes writes idempotent is computed here too, from what
a message *is* (role, timestamp, rendered text), never from where it came from,
so live capture and a later import of the same file meet on the same key.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

TOOL_ARGS_CLIP = 300
TOOL_ERROR_CLIP = 500
TOOL_RESULT_PREVIEW = 300
BASH_OUTPUT_CLIP = 500
INDEXED_TEXT_CAP = 20_000

# Roles in the archive (the `role` column).
USER, ASSISTANT, TOOL_RESULT, TOOL_ERROR = "user", "assistant", "tool_result", "tool_error"
BASH, SUMMARY, CUSTOM, OTHER = "bash", "summary", "custom", "other"
ROLES = (USER, ASSISTANT, TOOL_RESULT, TOOL_ERROR, BASH, SUMMARY, CUSTOM, OTHER)


@dataclass
class Rendered:
    """One archived message: what is shown and indexed, plus facts about it."""

    role: str
    text: str
    ts: int  # unix ms
    indexed: bool
    meta: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def hash(self) -> str:
        # asked several times per message on the import path (dedupe, the worker's cuts, the
        # writer's plan): computed once, and carried with the rest when a worker sends it back
        return message_hash(self.role, self.ts, self.text)


def message_hash(role: str, ts: int, text: str) -> str:
    """Spec 000 §5.3 without the session id: the same message in a fork is the same message."""
    inner = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
    return hashlib.sha1(f"{role}:{ts}:{inner}".encode()).hexdigest()[:16]


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False, default=str)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _cap(text: str, meta: dict[str, Any]) -> str:
    if len(text) <= INDEXED_TEXT_CAP:
        return text
    meta["truncated"] = len(text)
    return text[:INDEXED_TEXT_CAP] + f"\n…[truncated, {len(text) - INDEXED_TEXT_CAP} more chars]"


def _block_text(block: Any) -> str:
    """Text of one user/tool content block; images and unknown blocks as placeholders."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "image":
        return "[image]"
    return f"[{kind}]" if isinstance(kind, str) else ""


def content_text(content: Any) -> str:
    """User / tool / custom content: a string, or a list of text and image blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_block_text(b) for b in content]
        return "\n".join(p for p in parts if p)
    return ""


def tool_call_text(name: str, arguments: Any) -> str:
    args = arguments if isinstance(arguments, str) else compact_json(arguments)
    return f"→ {name}({_clip(args, TOOL_ARGS_CLIP)})"


def _assistant_parts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "toolCall":
            parts.append(tool_call_text(str(block.get("name", "?")), block.get("arguments", {})))
        elif kind in ("thinking", "redacted_thinking"):
            continue  # thinking is not indexed (spec 000 §5.2); the verbatim copy keeps it
        elif isinstance(kind, str):
            parts.append(f"[{kind}]")
    return [p for p in parts if p]


def render_assistant(msg: dict[str, Any], ts: int) -> Rendered:
    meta: dict[str, Any] = {}
    for key in ("model", "provider", "stopReason"):
        if msg.get(key):
            meta[key] = msg[key]
    usage = msg.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("totalTokens"), int):
        meta["tokens"] = usage["totalTokens"]
    calls = [b for b in msg.get("content") or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
    if calls:
        meta["tools"] = [str(b.get("name", "?")) for b in calls]
    parts = _assistant_parts(msg.get("content"))
    if msg.get("stopReason") in ("error", "aborted"):
        parts.append(f"✗ {msg['stopReason']}: {_clip(str(msg.get('errorMessage') or ''), TOOL_ERROR_CLIP)}")
    text = _cap("\n".join(parts), meta)
    return Rendered(ASSISTANT, text, ts, bool(text.strip()), meta)


def render_tool_result(msg: dict[str, Any], ts: int) -> Rendered:
    name = str(msg.get("toolName") or "tool")
    output = content_text(msg.get("content"))
    meta: dict[str, Any] = {"tool": name, "output_chars": len(output)}
    if msg.get("toolCallId"):
        meta["toolCallId"] = msg["toolCallId"]
    if msg.get("isError"):
        return Rendered(TOOL_ERROR, f"✗ {name}: {_clip(output, TOOL_ERROR_CLIP)}", ts, True, meta)
    return Rendered(TOOL_RESULT, f"✓ {name}: {_clip(output, TOOL_RESULT_PREVIEW)}", ts, False, meta)


def render_bash(msg: dict[str, Any], ts: int) -> Rendered:
    command = str(msg.get("command", ""))
    output = str(msg.get("output", ""))
    code = msg.get("exitCode")
    meta: dict[str, Any] = {"exitCode": code, "output_chars": len(output)}
    head = f"$ {command}" + (f"  [exit {code}]" if code not in (0, None) else "")
    if msg.get("cancelled"):
        head += "  [cancelled]"
    text = head + ("\n" + _clip(output, BASH_OUTPUT_CLIP) if output else "")
    return Rendered(BASH, text, ts, True, meta)


def render_text_role(role: str, content: Any, ts: int, meta: dict[str, Any] | None = None) -> Rendered:
    meta = dict(meta or {})
    text = _cap(content_text(content), meta)
    return Rendered(role, text, ts, bool(text.strip()), meta)


def render_message(msg: dict[str, Any], ts: int) -> Rendered | None:
    """Any pi agent message (as in a `message` entry or a `message_end` event)."""
    role = msg.get("role")
    if role == "user":
        return render_text_role(USER, msg.get("content"), ts)
    if role == "assistant":
        return render_assistant(msg, ts)
    if role == "toolResult":
        return render_tool_result(msg, ts)
    if role == "bashExecution":
        return render_bash(msg, ts)
    if role in ("custom", "hookMessage"):
        return render_text_role(CUSTOM, msg.get("content"), ts, {"customType": msg.get("customType")})
    if role in ("compactionSummary", "branchSummary"):
        return render_text_role(SUMMARY, msg.get("summary", ""), ts, {"kind": role})
    if role == "system":
        return None  # the system prompt patch of pi 1.x: kept verbatim, never indexed
    if isinstance(role, str):
        return render_text_role(OTHER, msg.get("content"), ts, {"sourceRole": role})
    return None
