"""Addressed reads: `r12` (a run, clipped) and `r12/m3` (one message in full detail, paged).

Design idea (spec 004 §4): the navigation summary says where to look, the
address says exactly what to open, and a detail read never floods the model's
context. A message's detail is rebuilt from its verbatim source line (tool call
arguments unclipped, the complete tool output), with base64 images and other
encoded attachments replaced by a placeholder that gives their size. Anything
over 12 KB comes in pages: the page carries `offset` and `next_offset` (a
character offset into the same text), and the pages concatenate to the whole
text exactly, so nothing is ever lost or cut without a way to continue. `raw`
pages the verbatim source JSON the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core import ids, jsonline
from ..core.format import EVIDENCE_HEADER
from ..errors import BadInput, NotFound
from ..storage.store import Store, decode_text, decompress
from .table import RunInfo, get_run

PAGE_BYTES = 12 * 1024  # one page of a detail read, in UTF-8 bytes (spec 004: 12 KB)
RUN_READ_MAX_MESSAGES = 400  # a run read loads at most this many messages; the 8K cap cuts first anyway
ENCODED_MIN_CHARS = 1024  # a `data`/`base64` string this long is an attachment, not text
DETAILS_MAX_CHARS = 2_000  # tool `details` (diffs...) are shown when this small; raw mode has them all
ENCODED_KEYS = {"data", "base64", "bytes", "blob"}
# addresses are read by the one id parser (`core.ids`); its names kept here for their callers
Address = ids.Address
parse_address = ids.address
is_address = ids.is_address


# --- paging ---------------------------------------------------------------------------


def page_end(text: str, offset: int, limit: int = PAGE_BYTES) -> int:
    """The end of the page starting at `offset`: as many characters as fit in `limit` UTF-8 bytes."""
    end, used = offset, 0
    while end < len(text):
        size = len(text[end].encode("utf-8", "surrogatepass"))
        if used + size > limit:
            break
        used += size
        end += 1
    return max(end, min(offset + 1, len(text)))  # always make progress


def page(text: str, offset: int = 0, limit: int = PAGE_BYTES) -> tuple[str, int | None]:
    """(the page at `offset`, the offset of the next page or None at the end)."""
    if offset < 0 or offset > len(text):
        raise BadInput(f"offset {offset} is outside the text (0..{len(text)})")
    end = page_end(text, offset, limit)
    return text[offset:end], (end if end < len(text) else None)


# --- attachments --------------------------------------------------------------------


def placeholder(kind: str, value: str, mime: str | None = None) -> str:
    what = f"{kind} {mime}" if mime else kind
    return f"[{what}: {len(value)} chars of base64 (~{len(value) * 3 // 4} bytes) omitted; raw mode has it]"


def strip_attachments(value: Any) -> Any:
    """A copy with image data and other large encoded fields replaced by a placeholder."""
    if isinstance(value, list):
        return [strip_attachments(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in ENCODED_KEYS and isinstance(item, str) and len(item) >= ENCODED_MIN_CHARS:
            out[key] = placeholder("attachment", item, value.get("mimeType") or value.get("media_type"))
        elif key in ENCODED_KEYS and value.get("type") == "image" and isinstance(item, str):
            out[key] = placeholder("image", item, value.get("mimeType"))
        else:
            out[key] = strip_attachments(item)
    return out


# --- rendering one message in full --------------------------------------------------


def _block_detail(block: Any, thinking: bool) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("thinking", "redacted_thinking"):
        body = str(block.get("thinking", block.get("data", "")))
        return (
            f"[thinking]\n{body}\n[/thinking]"
            if thinking
            else f"[thinking: {len(body)} chars hidden; ask for thinking to see it]"
        )
    if kind in ("toolCall", "tool_use"):
        args = block.get("arguments", block.get("input", {}))
        return f"→ tool call {block.get('name', '?')} (id {block.get('id', '?')}):\n{arguments_detail(args)}"
    if kind == "image":
        data = block.get("data")
        return str(data) if isinstance(data, str) and data.startswith("[image") else "[image]"
    return json.dumps(block, ensure_ascii=False)


def arguments_detail(args: Any) -> str:
    """Tool call arguments one per line; multi-line strings (file contents, edits) shown as they are."""
    if not isinstance(args, dict):
        return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    lines = []
    for key, value in args.items():
        if isinstance(value, str):
            lines.append(f"{key}:\n{value}" if "\n" in value else f"{key}: {value}")
        else:
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines)


def _content_detail(content: Any, thinking: bool) -> str:
    if isinstance(content, list):
        return "\n".join(p for p in (_block_detail(b, thinking) for b in content) if p)
    return _block_detail(content, thinking)


def message_detail_text(source: dict[str, Any], thinking: bool = False) -> str:
    """The full text of one agent message, attachments already stripped."""
    role = source.get("role") or source.get("type")
    if role == "toolResult":
        head = f"tool result of {source.get('toolName', '?')} (call {source.get('toolCallId', '?')})"
        head += " [error]" if source.get("isError") else ""
        body = head + ":\n" + _content_detail(source.get("content"), thinking)
        details = source.get("details")
        if details:
            shown = json.dumps(details, ensure_ascii=False)
            if len(shown) <= DETAILS_MAX_CHARS:
                body += "\n[details] " + shown
        return body
    if role == "bashExecution":
        return f"$ {source.get('command', '')}\n[exit {source.get('exitCode')}]\n{source.get('output', '')}"
    if role in ("compaction", "branch_summary", "compactionSummary", "branchSummary"):
        return str(source.get("summary", ""))
    body = _content_detail(source.get("content"), thinking)
    if source.get("stopReason") in ("error", "aborted"):
        body += f"\n[{source['stopReason']}] {source.get('errorMessage') or ''}".rstrip()
    return body


# --- reads ------------------------------------------------------------------------------


@dataclass
class RunMessageView:
    address: str
    msg_id: int
    ts: int
    role: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunWindow:
    run: RunInfo
    messages: list[RunMessageView]
    offset: int  # messages skipped at the start of the run

    def to_dict(self) -> dict[str, Any]:
        return {
            "evidence": EVIDENCE_HEADER,
            "run": self.run.to_dict(),
            "offset": self.offset,
            "messages": [m.to_dict() for m in self.messages],
        }


@dataclass
class MessageDetail:
    address: str
    run: RunInfo
    msg_id: int
    ts: int
    role: str
    entry_id: str | None
    raw: bool
    offset: int
    next_offset: int | None
    total_chars: int
    text: str = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = {"evidence": EVIDENCE_HEADER, **self.__dict__}
        out["run"] = self.run.address
        out["session_id"] = self.run.session_id
        return out


def read_run(store: Store, run_id: int, offset: int = 0) -> RunWindow:
    with store.read():
        run = get_run(store, run_id)
        rows = store.rows(
            """SELECT rm.pos, m.id, m.ts, m.role, m.text FROM run_msg rm JOIN msg m ON m.id = rm.msg_id
               WHERE rm.run_id=? AND rm.pos > ? ORDER BY rm.pos LIMIT ?""",
            (run_id, ids.number(offset, "offset"), RUN_READ_MAX_MESSAGES),
        )
    views = [
        RunMessageView(f"r{run_id}/m{pos}", int(mid), int(ts), str(role), decode_text(text))
        for pos, mid, ts, role, text in rows
    ]
    return RunWindow(run, views, max(0, int(offset)))


def read_message(
    store: Store, address: Address, offset: int = 0, raw: bool = False, thinking: bool = False
) -> MessageDetail:
    with store.read():
        run = get_run(store, address.run_id)
        rows = store.rows(
            """SELECT m.id, m.ts, m.role, m.text, m.entry_id, e.raw FROM run_msg rm JOIN msg m ON m.id = rm.msg_id
               LEFT JOIN entry e ON e.msg_id = m.id WHERE rm.run_id=? AND rm.pos=?""",
            (address.run_id, address.pos),
        )
    if not rows:
        raise NotFound(f"run r{address.run_id} has no message m{address.pos} (it has {run.messages})")
    msg_id, ts, role, text, entry_id, blob = rows[0]
    full = _full_text(decode_text(text), blob, raw, thinking)
    chunk, next_offset = page(full, offset)
    return MessageDetail(
        str(address), run, int(msg_id), int(ts), str(role), entry_id, raw, offset, next_offset, len(full), chunk
    )


def _full_text(rendered: str, blob: bytes | None, raw: bool, thinking: bool) -> str:
    if blob is None:
        return rendered  # captured live without a source line: the rendered text is all there is
    line = decompress(blob, rendered).decode("utf-8", "replace")
    if raw:
        return line
    try:
        data = jsonline.loads(line)
    except ValueError:
        return rendered
    source = data.get("message") if isinstance(data.get("message"), dict) else data
    return message_detail_text(strip_attachments(source), thinking)
