"""Claude Code session files -> the same records as pi (pure functions, one small stateful reader).

Design idea: a Claude Code transcript (`~/.claude/projects/<cwd>/<sessionId>.jsonl`)
is a DAG of lines linked by `uuid` / `parentUuid`, like a pi tree, so each line
becomes an `Entry` with that id and parent and the pi rendering rules apply
unchanged: we translate Claude's blocks into pi's message shapes (`tool_use` ->
`toolCall`, `tool_result` -> a `toolResult` message) and call `render_message`.

Three Claude specifics:
- Streaming writes one assistant content block per line; lines sharing
  `message.id` are merged into one message (at the first line's place, raw
  lines joined by newlines so the verbatim copy is still exact).
- Compaction is a `system`/`compact_boundary` line (its parent is the
  `logicalParentUuid`, so the DAG stays continuous) followed by a user line
  with `isCompactSummary`, which becomes a `summary` message; the older
  `{"type":"summary"}` lines are summaries too.
- Sub-agents: a file whose lines are all sidechain lines of one `agentId`
  (`<sessionId>/subagents/agent-*.jsonl`, or the older `agent-*.jsonl` next to
  the session) is its own session `<sessionId>/agent-<agentId>`, linked to the
  parent through `parent_session`. Sidechain lines inside a main file stay in
  that session, marked `sidechain` in their meta.

Harness bookkeeping (progress, file-history snapshots, queue operations,
attachments) is neither indexed nor kept. A `ClaudeReader` carries what a later
chunk of the same file needs (session identity, tool names by id), so the
watcher can feed it appended lines only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import jsonline
from ..render import CUSTOM, SUMMARY, USER, Rendered, render_message, render_text_role
from ..usage import from_claude
from .pi import Entry, Header, ParsedSession, Skipped, decode_line, iter_file_lines, parse_iso_ms

AGENT = "claude"
SKIPPED_TYPES = frozenset({"file-history-snapshot", "file-history-delta", "queue-operation", "attachment", "progress"})
TITLE_KEYS = {"custom-title": "customTitle", "ai-title": "aiTitle"}


@dataclass
class _Line:
    line_no: int
    data: dict[str, Any]
    raw: bytes

    @property
    def message(self) -> dict[str, Any]:
        msg = self.data.get("message")
        return msg if isinstance(msg, dict) else {}

    @property
    def group_key(self) -> str | None:
        """Assistant lines of one streamed API message share this key."""
        if self.data.get("type") != "assistant":
            return None
        mid = self.message.get("id")
        return mid if isinstance(mid, str) and mid else None


@dataclass
class ClaudeReader:
    """Parses one Claude Code file, possibly in consecutive chunks (the watcher's appends)."""

    fallback_id: str | None = None  # the file name's stem, when no line names the session
    name: str | None = None  # e.g. a sub-agent's description from its .meta.json
    header: Header | None = None
    subagent: bool = False
    tool_names: dict[str, str] = field(default_factory=dict)
    title: str | None = None

    def parse(self, lines: Iterable[bytes], start_line: int = 1) -> ParsedSession:
        decoded, skipped = _decode_all(lines, start_line)
        if self.header is None:
            self.header = self._identify(decoded)
        result = ParsedSession(header=self.header, skipped=skipped)
        if self.header is None:
            if decoded:
                result.skipped.append(Skipped(decoded[0].line_no, "no Claude Code session id in the file"))
            return result
        result.entries = self._entries(decoded)
        result.name = self.title or self.name
        return result

    # --- identity ------------------------------------------------------------------

    def _identify(self, decoded: list[_Line]) -> Header | None:
        first = next((d for d in decoded if isinstance(d.data.get("sessionId"), str)), None)
        session_id = first.data["sessionId"] if first else self.fallback_id
        if not session_id:
            return None
        cwd = next((d.data["cwd"] for d in decoded if isinstance(d.data.get("cwd"), str)), "")
        started = next((ts for ts in (parse_iso_ms(d.data.get("timestamp")) for d in decoded) if ts), 0)
        parent = None
        if first is not None and first.data.get("isSidechain") and isinstance(first.data.get("agentId"), str):
            self.subagent = True
            parent, session_id = session_id, f"{session_id}/agent-{first.data['agentId']}"
        return Header(session_id=session_id, cwd=cwd, started_at=started, version=0, parent_session=parent, agent=AGENT)

    # --- entries -------------------------------------------------------------------

    def _entries(self, decoded: list[_Line]) -> list[Entry]:
        groups: dict[str, list[_Line]] = {}
        for d in decoded:
            if d.group_key:
                groups.setdefault(d.group_key, []).append(d)
        entries: list[Entry] = []
        for d in decoded:
            kind = d.data.get("type")
            if not isinstance(kind, str) or kind in SKIPPED_TYPES:
                continue
            if d.group_key:
                group = groups.pop(d.group_key, None)
                if group is not None:  # first line of its group: the merged message
                    entries.append(self._assistant(group))
                continue
            entries.append(self._entry(d, kind))
        return entries

    def _entry(self, d: _Line, kind: str) -> Entry:
        data = d.data
        ts = parse_iso_ms(data.get("timestamp"))
        parent = _str(data.get("parentUuid"))
        entry_type = kind
        rendered: Rendered | None = None
        if kind == "user":
            rendered = self._user(d, ts)
        elif kind == "system" and data.get("subtype") == "compact_boundary":
            entry_type = "compact_boundary"
            parent = parent or _str(data.get("logicalParentUuid"))  # keep the DAG continuous across it
        elif kind == "summary":
            # old compaction/title record: no uuid, no time; keyed by the leaf it summarizes
            text = str(data.get("summary") or "")
            rendered = render_text_role(SUMMARY, text, 0, {"kind": "summary"})
            leaf = _str(data.get("leafUuid"))
            return Entry(d.line_no, kind, f"summary:{leaf}" if leaf else None, leaf, 0, data, d.raw, rendered)
        elif kind in TITLE_KEYS and isinstance(data.get(TITLE_KEYS[kind]), str):
            if kind == "custom-title" or self.title is None:
                self.title = data[TITLE_KEYS[kind]].strip() or self.title
        entry = Entry(d.line_no, entry_type, _str(data.get("uuid")), parent, ts, data, d.raw, rendered)
        if rendered is not None and data.get("isSidechain") and not self.subagent:
            rendered.meta["sidechain"] = True
        return entry

    def _user(self, d: _Line, ts: int) -> Rendered | None:
        content = d.message.get("content")
        if d.data.get("isCompactSummary"):
            return render_text_role(SUMMARY, content, ts, {"kind": "compact_summary"})
        results = (
            [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            if isinstance(content, list)
            else []
        )
        if results:
            return self._tool_results(results, ts)
        if d.data.get("isMeta"):
            return render_text_role(CUSTOM, content, ts, {"customType": "claude-meta"})
        return render_text_role(USER, content, ts)

    def _tool_results(self, blocks: list[dict[str, Any]], ts: int) -> Rendered | None:
        parts = []
        for block in blocks:
            call_id = str(block.get("tool_use_id") or "")
            pi_msg = {
                "role": "toolResult",
                "toolName": self.tool_names.get(call_id, "tool"),
                "toolCallId": call_id,
                "content": block.get("content"),
                "isError": bool(block.get("is_error")),
            }
            rendered = render_message(pi_msg, ts)
            if rendered is not None:
                parts.append(rendered)
        return combine_results(parts)

    def _assistant(self, group: list[_Line]) -> Entry:
        first = group[0]
        blocks: list[Any] = []
        for d in group:
            for block in _blocks(d.message.get("content")):
                if block not in blocks:  # some versions repeat earlier blocks on later lines
                    blocks.append(block)
        for block in blocks:
            if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
                self.tool_names[str(block.get("id"))] = str(block.get("name") or "tool")
        last = group[-1].message
        pi_msg = {
            "role": "assistant",
            "content": [_pi_block(b) for b in blocks],
            "model": last.get("model"),
            "provider": "anthropic",
            "stopReason": last.get("stop_reason"),
            "usage": {"totalTokens": usage_total(last.get("usage"))},
        }
        ts = parse_iso_ms(first.data.get("timestamp"))
        rendered = render_message(pi_msg, ts)
        if rendered is not None and first.data.get("isSidechain") and not self.subagent:
            rendered.meta["sidechain"] = True
        raw = b"\n".join(d.raw for d in group)
        data = dict(first.data, message=dict(first.message, content=blocks))
        parent = _str(first.data.get("parentUuid"))
        entry = Entry(first.line_no, "assistant", _str(first.data.get("uuid")), parent, ts, data, raw, rendered)
        # one API request: the last streamed line's numbers (earlier lines may hold partial output counts)
        fallback = rendered.hash if rendered is not None else entry.key
        entry.usage = from_claude(last, group[-1].data.get("requestId"), ts, fallback)
        return entry

    def open_tail(self, lines: list[bytes]) -> int:
        """How many trailing lines may still grow into a longer message (one streamed assistant message)."""
        last: str | None = None
        n = 0
        for raw in reversed(lines):  # only the tail is decoded, however long the chunk
            key = _Line(0, _quiet_decode(raw), raw).group_key
            if key is None or (last is not None and key != last):
                break
            last, n = key, n + 1
        return n


def combine_results(parts: list[Rendered]) -> Rendered | None:
    """Several tool results on one line: one message, an error if any of them failed."""
    if len(parts) <= 1:
        return parts[0] if parts else None
    failed = [p for p in parts if p.indexed]
    lead = failed[0] if failed else parts[0]
    meta = dict(lead.meta, tools=[p.meta.get("tool") for p in parts])
    return Rendered(lead.role, "\n".join(p.text for p in failed or parts), lead.ts, bool(failed), meta)


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return content if isinstance(content, list) else []


def _pi_block(block: Any) -> Any:
    if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
        return {"type": "toolCall", "name": block.get("name") or "tool", "arguments": block.get("input", {})}
    return block


def usage_total(usage: Any) -> int | None:
    if not isinstance(usage, dict):
        return None
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(v for k in keys if isinstance(v := usage.get(k), int)) or None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _quiet_decode(raw: bytes) -> dict[str, Any]:
    try:
        return decode_line(raw)
    except ValueError:
        return {}


def _decode_all(lines: Iterable[bytes], start_line: int) -> tuple[list[_Line], list[Skipped]]:
    decoded: list[_Line] = []
    skipped: list[Skipped] = []
    for line_no, raw in enumerate(lines, start=start_line):
        raw = raw.rstrip(b"\r\n")
        if not raw.strip():
            continue
        notes: list[str] = []
        try:
            decoded.append(_Line(line_no, decode_line(raw, notes), raw))
        except ValueError as exc:
            skipped.append(Skipped(line_no, str(exc)))
        skipped += [Skipped(line_no, note) for note in notes]  # reported, and kept
    return decoded, skipped


# --- files ----------------------------------------------------------------------------


def reader_for(path: Path) -> ClaudeReader:
    return ClaudeReader(fallback_id=path.stem, name=subagent_name(path))


def subagent_name(path: Path) -> str | None:
    """`agent-x.meta.json` next to a sub-agent file says what the agent was asked to do."""
    meta_path = path.with_name(path.stem + ".meta.json")
    try:
        meta = jsonline.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    parts = [str(meta[k]) for k in ("agentType", "description") if isinstance(meta.get(k), str) and meta[k]]
    return ": ".join(parts) or None


def parse_lines(lines: Iterable[bytes], fallback_id: str | None = None) -> ParsedSession:
    return ClaudeReader(fallback_id=fallback_id).parse(lines)


def read_session_file(path: Path) -> ParsedSession:
    return reader_for(path).parse(iter_file_lines(path))
