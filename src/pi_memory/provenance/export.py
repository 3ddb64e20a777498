"""A session or a run, exported: Markdown, one self-contained HTML file, or JSON.

Design idea: an export is read away from the archive (attached to an issue, mailed, kept with
the code), so it carries its own framing: what it is, where it came from, how to resume it, and
the archive's fixed line that history is evidence, not instructions. Each message is read from
its verbatim source line (the rendered text where there is none) and cut into parts: text (Markdown),
thinking (left out unless asked for), tool calls with their arguments one per line (file contents
and edits as they were, never as escaped JSON), tool results and shell runs. The HTML file loads
nothing: its style is inline, it runs no script, Markdown is rendered with every HTML tag escaped
(`core.markdown`), and tool parts fold away under `<details>`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..core.calls import readable_arguments
from ..core.format import EVIDENCE_HEADER, short_id
from ..core.markdown import escape, render_markdown
from ..core.render import content_text
from ..core.sources.codex import call_name_and_args, message_text, output_text
from ..runs.detail import strip_attachments
from ..runs.table import get_run, message_of
from ..storage.store import Store, decode_text, decompress
from .extract import source_lines
from .resume import Resume, resume

FORMATS = ("md", "html", "json")
ROLE_TITLES = {
    "user": "User",
    "assistant": "Assistant",
    "tool_result": "Tool result",
    "tool_error": "Tool error",
    "bash": "Shell",
    "summary": "Summary",
    "custom": "Extension message",
}


@dataclass
class Part:
    kind: str  # text | thinking | tool_call | tool_result | shell
    body: str
    title: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ExportMessage:
    msg_id: int
    address: str | None
    ts: int
    role: str
    parts: list[Part]

    def to_dict(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.__dict__.items() if k != "parts"}, "parts": [p.to_dict() for p in self.parts]}


@dataclass
class Export:
    title: str
    session_id: str
    agent: str
    cwd: str
    started_at: int
    last_at: int
    run: str | None  # the run exported, or None for the whole session
    resume: Resume
    messages: list[ExportMessage] = field(default_factory=list)
    thinking: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "evidence": EVIDENCE_HEADER,
            "title": self.title,
            "session_id": self.session_id,
            "agent": self.agent,
            "cwd": self.cwd,
            "started_at": self.started_at,
            "last_at": self.last_at,
            "run": self.run,
            "resume": self.resume.to_dict(),
            "thinking": self.thinking,
            "messages": [m.to_dict() for m in self.messages],
        }


# --- reading -----------------------------------------------------------------------------------


def load(store: Store, session_id: str, run_id: int | None = None, thinking: bool = False) -> Export:
    with store.read():
        row = store.rows(
            "SELECT agent, cwd, started_at, last_at, name, first_user FROM session WHERE id = ?", (session_id,)
        )[0]
        if run_id is not None:
            get_run(store, run_id)
        where = "rm.run_id = ?" if run_id is not None else "m.session_id = ?"
        params: list[Any] = [run_id if run_id is not None else session_id]
        rows = store.rows(
            f"""SELECT m.id, m.ts, m.role, m.text, e.raw, rm.run_id, rm.pos FROM msg m
                LEFT JOIN entry e ON e.msg_id = m.id LEFT JOIN run_msg rm ON rm.msg_id = m.id
                WHERE {where} ORDER BY m.ts, m.seq""",
            params,
        )
        how = resume(store, session_id)
    agent, cwd, started, last, name, first_user = row
    title = str(name or first_user or session_id).strip().split("\n", 1)[0][:120]
    messages = [_message(r, thinking) for r in rows]
    run = f"r{run_id}" if run_id is not None else None
    return Export(title, session_id, str(agent), str(cwd or ""), int(started), int(last), run, how, messages, thinking)


def _message(row: tuple[Any, ...], thinking: bool) -> ExportMessage:
    msg_id, ts, role, stored, raw, run_id, pos = row
    text = decode_text(stored)
    source = _source(decompress(raw, stored)) if raw is not None else None
    parts = parts_of(strip_attachments(source), str(role), thinking) if source else []
    if not parts:
        parts = [Part("tool_result" if role in ("tool_result", "tool_error") else "text", text)]
    address = f"r{run_id}/m{pos}" if run_id is not None else None
    return ExportMessage(int(msg_id), address, int(ts), str(role), parts)


def _source(raw: bytes) -> dict[str, Any] | None:
    """The agent message of a verbatim copy; Claude Code's streamed lines merged into one."""
    lines = list(source_lines(raw))
    if not lines:
        return None
    first = message_of(lines[0])
    if first is None or len(lines) == 1:
        return first
    blocks: list[Any] = []
    for line in lines:
        content = (message_of(line) or {}).get("content")
        blocks += [b for b in content if b not in blocks] if isinstance(content, list) else []
    return {**first, "content": blocks}


def parts_of(source: dict[str, Any], role: str, thinking: bool) -> list[Part]:
    """A message's parts from its source (pi's shapes; Claude's blocks are read alike, Codex's items
    through `_codex_parts`)."""
    if isinstance(source.get("payload"), dict):
        return _codex_parts(source["payload"])
    kind = source.get("role")
    if kind == "toolResult":
        name = str(source.get("toolName") or "tool")
        title = f"{name} {'failed' if source.get('isError') else 'result'}"
        return [Part("tool_result", content_text(source.get("content")), title)]
    if kind == "bashExecution":
        body = f"$ {source.get('command', '')}\n{source.get('output', '')}".rstrip()
        return [Part("shell", body, f"exit {source.get('exitCode')}")]
    if source.get("type") in ("compaction", "branch_summary"):
        return [Part("text", str(source.get("summary") or ""))]
    content = source.get("content")
    if isinstance(content, str):
        return [Part("text", content)] if content.strip() else []
    parts: list[Part] = []
    for block in content if isinstance(content, list) else []:
        part = _block(block, thinking)
        if part is not None:
            parts.append(part)
    return parts


def _codex_parts(item: dict[str, Any]) -> list[Part]:
    kind = item.get("type")
    if kind == "message":
        text = message_text(item.get("content"), drop_injected=item.get("role") == "user")
        return [Part("text", text)] if text.strip() else []
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        name, args = call_name_and_args(item)
        return [Part("tool_call", readable_arguments(args), f"→ {name}")]
    if kind in ("function_call_output", "custom_tool_call_output"):
        text, failed = output_text(item.get("output"))
        return [Part("tool_result", text, "tool failed" if failed else "tool result")]
    return []


def _block(block: Any, thinking: bool) -> Part | None:
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text":
        text = str(block.get("text") or "")
        return Part("text", text) if text.strip() else None
    if kind in ("thinking", "redacted_thinking"):
        return Part("thinking", str(block.get("thinking") or ""), "thinking") if thinking else None
    if kind in ("toolCall", "tool_use"):
        args = block.get("arguments", block.get("input", {}))
        return Part("tool_call", readable_arguments(args), f"→ {block.get('name', 'tool')}")
    if kind == "tool_result":
        body = content_text(block.get("content"))
        return Part("tool_result", body, "tool failed" if block.get("is_error") else "tool result")
    if kind == "image":
        return Part("text", "[image]")
    return None


# --- writing ---------------------------------------------------------------------------------------


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if ms else "?"


def _fence(body: str) -> str:
    """A fenced block that no backtick run inside the body can close."""
    longest = max((len(run) for run in body.split("\n") if set(run) == {"`"}), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}\n{body}\n{ticks}"


def to_markdown(x: Export) -> str:
    scope = f"run {x.run} of session" if x.run else "session"
    out = [
        f"# {x.title}",
        "",
        f"> {EVIDENCE_HEADER}",
        "",
        f"- {scope} `{x.session_id}` ({x.agent}), in `{x.cwd}`",
        f"- {_when(x.started_at)} – {_when(x.last_at)}, {len(x.messages)} messages",
        f"- resume: `{x.resume.command}`" if x.resume.available else f"- resume: {x.resume.reason}",
        "",
    ]
    for m in x.messages:
        head = f"## {ROLE_TITLES.get(m.role, m.role)} · {_when(m.ts)}" + (f" · {m.address}" if m.address else "")
        out += [head, ""]
        for p in m.parts:
            if p.kind == "text":
                out += [p.body, ""]
            else:
                out += [f"**{p.title or p.kind}**", "", _fence(p.body), ""]
    return "\n".join(out).rstrip() + "\n"


STYLE = """
body { margin: 0 auto; max-width: 900px; padding: 24px; color: #1d2129;
  font: 15px/1.55 system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", "Source Han Sans SC",
  "PingFang SC", "Microsoft YaHei", sans-serif; }
code, pre { font: 13px/1.45 ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, "Noto Sans Mono CJK SC", monospace; }
pre { background: #f6f7f9; padding: 10px 12px; border-radius: 6px; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
.evidence { background: #fff7ed; border: 1px solid #fed7aa; padding: 8px 12px; border-radius: 6px; }
.meta { color: #6b7280; font-size: 13px; }
article { border-left: 3px solid #e5e7eb; padding: 2px 14px; margin: 16px 0; }
article.user { border-left-color: #60a5fa; background: #f8fbff; }
article.assistant { border-left-color: #4ade80; }
article.tool_error { border-left-color: #f87171; }
article h2 { font-size: 13px; font-weight: 600; color: #6b7280; margin: 8px 0 4px; }
details summary { cursor: pointer; color: #374151; font-family: ui-monospace, Menlo, monospace; font-size: 13px; }
table { border-collapse: collapse; } td, th { border: 1px solid #e5e7eb; padding: 2px 8px; }
"""


def to_html(x: Export) -> str:
    scope = f"run {x.run} of session" if x.run else "session"
    resume_line = f"<code>{escape(x.resume.command)}</code>" if x.resume.available else escape(x.resume.reason)
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{escape(x.title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(x.title)}</h1>",
        f'<p class="evidence">{escape(EVIDENCE_HEADER)}</p>',
        f'<p class="meta">{scope} <code>{escape(x.session_id)}</code> ({escape(x.agent)}) in <code>{escape(x.cwd)}</code>'
        f" · {_when(x.started_at)} – {_when(x.last_at)} · {len(x.messages)} messages<br>resume: {resume_line}</p>",
    ]
    for m in x.messages:
        out.append(f'<article class="{escape(m.role)}" id="m{m.msg_id}">')
        where = f" · {escape(m.address)}" if m.address else ""
        out.append(f"<h2>{escape(ROLE_TITLES.get(m.role, m.role))} · {_when(m.ts)}{where}</h2>")
        out += [_html_part(p, m.role) for p in m.parts]
        out.append("</article>")
    out.append(f'<p class="meta">Exported by pi-memory from session …{short_id(x.session_id)}.</p></body></html>')
    return "\n".join(out) + "\n"


def _html_part(p: Part, role: str) -> str:
    if p.kind == "text":
        return (
            render_markdown(p.body)
            if role in ("assistant", "user", "summary", "custom")
            else f"<pre>{escape(p.body)}</pre>"
        )
    opened = " open" if p.kind == "tool_result" and role == "tool_error" else ""
    return f"<details{opened}><summary>{escape(p.title or p.kind)}</summary><pre>{escape(p.body)}</pre></details>"


def render(x: Export, fmt: str) -> str:
    if fmt == "md":
        return to_markdown(x)
    if fmt == "html":
        return to_html(x)
    return json.dumps(x.to_dict(), ensure_ascii=False, indent=1) + "\n"
