"""Codex CLI rollout files -> the same records as pi (pure functions, one small stateful reader).

Design idea: a rollout (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) is a
linear log of `{timestamp, type, payload}` lines (older files: a bare
`{id, timestamp}` header, then bare Responses items). Every line becomes an
`Entry` in a linear chain (Codex has no entry ids: the id is a hash of the
line). Responses items are translated into
pi's message shapes and rendered by the pi rules: a `function_call` is an
assistant `→ name({...})`, its output (paired by `call_id`) a tool result that
is indexed only when it failed, `compacted` is a summary. Reasoning is not
rendered (its `encrypted_content` is never shown; the verbatim copy keeps it).

Messages come from `response_item`s; `event_msg` user/agent messages repeat
them, but some files have only the events (an archived session, a sub-agent's
own turn). So an event message counts unless its twin (same role and text)
was already seen, and a response item is dropped when its twin event was
already taken: each message is kept once, whichever of the two comes first,
and the result does not depend on how the file was cut into chunks (the
`CodexReader` carries the counts across the watcher's appends). A sub-agent or
forked thread first replays its parent's lines, dated before its own start:
they are kept verbatim, but as the parent's messages, not the thread's. Injected context blocks in
user messages (`<environment_context>`, `# AGENTS.md instructions`,
`<user_instructions>`) are not the user's words and are dropped.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import jsonline
from ..render import ASSISTANT, SUMMARY, USER, Rendered, content_text, render_message, render_text_role
from ..usage import CodexTotal, codex_request
from .pi import Entry, Header, ParsedSession, Skipped, decode_line, iter_file_lines, parse_iso_ms

AGENT = "codex"
WRAPPED_TYPES = frozenset({"session_meta", "response_item", "event_msg", "compacted", "turn_context"})
INJECTED_PREFIXES = (
    "<environment_context>",
    "# AGENTS.md instructions",
    "<user_instructions>",
    "<permissions instructions>",
    "<developer_instructions>",
)
EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")
CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


@dataclass
class CodexReader:
    """Parses one rollout, possibly in consecutive chunks."""

    fallback_id: str | None = None
    header: Header | None = None
    legacy: bool = False
    previous_id: str | None = None
    call_names: dict[str, str] = field(default_factory=dict)
    responses_seen: Counter[tuple[str, str]] = field(default_factory=Counter)
    events_taken: Counter[tuple[str, str]] = field(default_factory=Counter)
    model: str = ""  # the model of the turn under way (`turn_context`)
    provider: str = ""  # the thread's `model_provider` (`session_meta`)
    total: CodexTotal | None = None  # the running token total of the last `token_count` event

    def parse(self, lines: Iterable[bytes], start_line: int = 1) -> ParsedSession:
        result = ParsedSession(header=self.header)
        for line_no, raw in enumerate(lines, start=start_line):
            raw = raw.rstrip(b"\r\n")
            if not raw.strip():
                continue
            notes: list[str] = []
            try:
                data = decode_line(raw, notes)
            except ValueError as exc:
                result.skipped.append(Skipped(line_no, str(exc)))
                continue
            result.skipped += [Skipped(line_no, note) for note in notes]  # reported, and kept
            if self.header is None and self._take_header(data):
                continue
            if self.header is None:
                self._fallback_header(data)
                if self.header is None:
                    result.skipped.append(Skipped(line_no, "no Codex session id in the file"))
                    return result
            result.entries.append(self._entry(line_no, data, raw))
        result.header = self.header
        return result

    # --- header --------------------------------------------------------------------

    def _take_header(self, data: dict[str, Any]) -> bool:
        """The first line names the session: `session_meta`, or a bare legacy `{id, timestamp}`."""
        payload = data.get("payload")
        if data.get("type") == "session_meta" and isinstance(payload, dict) and isinstance(payload.get("id"), str):
            ts = parse_iso_ms(payload.get("timestamp")) or parse_iso_ms(data.get("timestamp"))
            self.header = Header(payload["id"], str(payload.get("cwd") or ""), ts, 0, parent_of(payload), AGENT)
            self.provider = str(payload.get("model_provider") or "")
            return True
        if "type" not in data and isinstance(data.get("id"), str):
            self.legacy = True
            self.header = Header(
                data["id"], str(data.get("cwd") or ""), parse_iso_ms(data.get("timestamp")), 0, None, AGENT
            )
            return True
        return False

    def _fallback_header(self, data: dict[str, Any]) -> None:
        if self.fallback_id:
            self.legacy = not ("payload" in data and data.get("type") in WRAPPED_TYPES)
            self.header = Header(self.fallback_id, "", parse_iso_ms(data.get("timestamp")), 0, None, AGENT)

    # --- lines ---------------------------------------------------------------------

    def _entry(self, line_no: int, data: dict[str, Any], raw: bytes) -> Entry:
        if self.legacy and "payload" not in data:
            kind, payload = "response_item", data
            # legacy items carry no time: order them after the session start by line number
            ts = parse_iso_ms(data.get("timestamp")) or (self.header.started_at + line_no if self.header else 0)
        else:
            kind = str(data.get("type") or "unknown")
            payload = _dict(data.get("payload"))
            ts = parse_iso_ms(data.get("timestamp"))
        entry_id = "cx-" + hashlib.sha1(raw).hexdigest()[:16]
        sub = payload.get("type") if isinstance(payload.get("type"), str) else None
        entry = Entry(line_no, f"{kind}:{sub}" if sub else kind, entry_id, self.previous_id, ts, data, raw)
        self.previous_id = entry_id
        replayed = self._replayed(ts)
        if not replayed:
            entry.rendered = self._render(kind, payload, ts)
        self._follow_usage(entry, kind, sub, payload, replayed)
        return entry

    def _follow_usage(self, entry: Entry, kind: str, sub: str | None, payload: dict[str, Any], replayed: bool) -> None:
        """The model of the turn, and a `token_count` event's request (none for a replayed parent's)."""
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            self.model = payload["model"]
        elif kind == "event_msg" and sub == "token_count":
            key = entry.entry_id or entry.key
            usage, self.total = codex_request(payload.get("info"), self.total, key, entry.ts, self.provider, self.model)
            entry.usage = None if replayed else usage

    def _replayed(self, ts: int) -> bool:
        """A sub-agent or forked thread starts by replaying its parent's lines, dated before its own start."""
        h = self.header
        return h is not None and h.parent_session is not None and 0 < ts < h.started_at

    def _render(self, kind: str, payload: dict[str, Any], ts: int) -> Rendered | None:
        if kind == "response_item":
            return self._response_item(payload, ts)
        if kind == "event_msg":
            return self._event(payload, ts)
        if kind == "compacted":
            text = str(payload.get("message") or "")
            shown = text or "(context compacted; the summary is not readable)"
            return Rendered(SUMMARY, shown, ts, bool(text.strip()), {"kind": "compacted"})
        return None

    def _response_item(self, item: dict[str, Any], ts: int) -> Rendered | None:
        kind = item.get("type")
        if kind == "message":
            return self._message(item, ts)
        if kind in CALL_TYPES:
            return self._call(item, ts)
        if kind in OUTPUT_TYPES:
            return self._output(item, ts)
        return None  # reasoning, ghost snapshots, encrypted compaction, newer kinds: verbatim only

    def _message(self, item: dict[str, Any], ts: int) -> Rendered | None:
        role = item.get("role")
        if role not in ("user", "assistant"):
            return None  # developer / system instructions: kept verbatim, never indexed
        text = message_text(item.get("content"), drop_injected=role == "user")
        if not text.strip():
            return None
        twin = (str(role), text.strip())
        if self.events_taken[twin]:
            self.events_taken[twin] -= 1
            return None
        self.responses_seen[twin] += 1
        return render_text_role(USER, text, ts) if role == "user" else render_message(_assistant(text), ts)

    def _event(self, payload: dict[str, Any], ts: int) -> Rendered | None:
        kind = payload.get("type")
        if kind not in ("user_message", "agent_message") or not isinstance(payload.get("message"), str):
            return None
        role = USER if kind == "user_message" else ASSISTANT
        text = payload["message"]
        images = payload.get("images")
        if isinstance(images, list) and images:
            text += "\n" + "\n".join("[image]" for _ in images)
        twin = (role, text.strip())
        if not twin[1]:
            return None
        if self.responses_seen[twin]:
            self.responses_seen[twin] -= 1
            return None
        self.events_taken[twin] += 1
        meta = {"from": "event_msg"}
        return (
            render_text_role(USER, text, ts, meta)
            if role == USER
            else _with_meta(render_message(_assistant(text), ts), meta)
        )

    def _call(self, item: dict[str, Any], ts: int) -> Rendered | None:
        name, arguments = call_name_and_args(item)
        call_id = item.get("call_id") or item.get("id")
        if isinstance(call_id, str):
            self.call_names[call_id] = name
        msg = {"role": "assistant", "content": [{"type": "toolCall", "name": name, "arguments": arguments}]}
        rendered = render_message(msg, ts)
        if rendered is not None and isinstance(call_id, str):
            rendered.meta["call_id"] = call_id
        return rendered

    def _output(self, item: dict[str, Any], ts: int) -> Rendered | None:
        call_id = str(item.get("call_id") or "")
        text, failed = output_text(item.get("output"))
        msg = {
            "role": "toolResult",
            "toolName": self.call_names.get(call_id, "tool"),
            "toolCallId": call_id,
            "content": text,
            "isError": failed,
        }
        return render_message(msg, ts)


def parent_of(meta: dict[str, Any]) -> str | None:
    """A sub-agent thread names its parent thread; a fork names the rollout it was forked from."""
    source = meta.get("source")
    if isinstance(source, dict):
        spawn = (source.get("subagent") or {}).get("thread_spawn") if isinstance(source.get("subagent"), dict) else None
        if isinstance(spawn, dict) and isinstance(spawn.get("parent_thread_id"), str):
            return str(spawn["parent_thread_id"])
    forked = meta.get("forked_from_id")
    return forked if isinstance(forked, str) and forked else None


def message_text(content: Any, drop_injected: bool) -> str:
    if isinstance(content, str):
        blocks: list[Any] = [{"type": "input_text", "text": content}]
    else:
        blocks = content if isinstance(content, list) else []
    parts: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("input_text", "output_text", "text"):
            text = str(block.get("text") or "")
            if drop_injected and text.lstrip().startswith(INJECTED_PREFIXES):
                continue
            parts.append(text)
        elif kind in ("input_image", "image"):
            parts.append("[image]")
    return "\n".join(p for p in parts if p)


def call_name_and_args(item: dict[str, Any]) -> tuple[str, Any]:
    kind = item.get("type")
    if kind == "local_shell_call":
        action = _dict(item.get("action"))
        return "shell", {"command": action.get("command")}
    if kind == "web_search_call":
        return "web_search", item.get("action") or {}
    name = str(item.get("name") or "tool")
    raw_args = item.get("arguments") if kind == "function_call" else item.get("input")
    if isinstance(raw_args, str):
        try:
            return name, jsonline.loads(raw_args)
        except ValueError:
            return name, raw_args
    return name, raw_args if raw_args is not None else {}


def output_text(output: Any) -> tuple[str, bool]:
    """A tool output's text and whether it failed (`success: false`, a non-zero exit code)."""
    if isinstance(output, dict):
        body = output.get("content")
        text = body if isinstance(body, str) else content_text(_as_text_blocks(body))
        return text, output.get("success") is False
    if isinstance(output, list):
        return content_text(_as_text_blocks(output)), False
    text = str(output or "")
    try:
        wrapped = jsonline.loads(text)
    except ValueError:
        wrapped = None
    if isinstance(wrapped, dict) and "output" in wrapped and isinstance(wrapped.get("metadata"), dict):
        code = wrapped["metadata"].get("exit_code")
        return str(wrapped["output"]), isinstance(code, int) and code != 0
    match = EXIT_CODE.search(text[:2000])
    return text, bool(match and int(match.group(1)) != 0)


def _as_text_blocks(blocks: Any) -> list[Any]:
    if not isinstance(blocks, list):
        return []
    out: list[Any] = []
    for b in blocks:
        if isinstance(b, dict) and b.get("type") in ("output_text", "input_text"):
            out.append({"type": "text", "text": b.get("text", "")})
        elif isinstance(b, dict) and b.get("type") in ("input_image", "output_image"):
            out.append({"type": "image"})
        else:
            out.append(b)
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _with_meta(rendered: Rendered | None, meta: dict[str, Any]) -> Rendered | None:
    if rendered is not None:
        rendered.meta.update(meta)
    return rendered


# --- files ----------------------------------------------------------------------------

ROLLOUT_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")


def reader_for(path: Path) -> CodexReader:
    match = ROLLOUT_ID.search(path.name)
    return CodexReader(fallback_id=match.group(1) if match else path.stem)


def parse_lines(lines: Iterable[bytes], fallback_id: str | None = None) -> ParsedSession:
    return CodexReader(fallback_id=fallback_id).parse(lines)


def read_session_file(path: Path) -> ParsedSession:
    return reader_for(path).parse(iter_file_lines(path))
