"""Runs as text, for people and models (pure functions).

Design idea: the summary track is a table of contents, one line per run
(`r12 2026-12-02 vue-shop 71f83655 ok · <summary>`), cheap enough to scan dozens of runs;
a run read lists its messages by address (`[r12/m3]`) so the next step is
obvious; a detail read says where the next page starts. Text meant for a model
starts with the evidence header: archived text is what happened, not what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.format import (
    EVIDENCE_HEADER,
    READ_CAP,
    READ_MESSAGE_CLIP,
    SEARCH_CAP,
    cap_lines,
    home_path,
    local_time,
    plural,
    short_id,
)
from ..core.text import clip

if TYPE_CHECKING:
    from ..runs.detail import MessageDetail, RunWindow
    from ..runs.table import RunInfo
    from ..search.runs import RunHit


def run_line(run: RunInfo) -> str:
    """`r12 2026-12-02 14:03 vue-shop 71f83655 ok · summary` (one line per run; the session by short id)."""
    where = f"{run.project or '?'} {short_id(run.session_id)}"
    return f"{run.address} {local_time(run.start_ts, True)} {where} {run.status} · {run.summary}"


def format_run_list(runs: Sequence[RunInfo], evidence: bool = False) -> str:
    if not runs:
        return "No runs."
    lines = [EVIDENCE_HEADER] if evidence else []
    lines += [run_line(r) for r in runs]
    return "\n".join(lines)


def format_summary_hits(hits: Sequence[RunHit], query: str, cap: int = SEARCH_CAP, evidence: bool = False) -> str:
    if not hits:
        return f"No runs match {query!r}."
    lines = [EVIDENCE_HEADER] if evidence else []
    lines += [run_line(h.run) for h in hits]
    lines.append("(read r<N> for a run's messages, r<N>/m<K> for one message in full)")
    return cap_lines(lines, cap, "(output capped; narrow the query)", partial=False)


def _run_header(run: RunInfo) -> list[str]:
    counts = (
        f"{plural(run.messages, 'msg')}, {plural(run.tool_calls, 'tool call')}, {plural(run.tool_errors, 'tool error')}"
    )
    where = home_path(run.cwd) or run.project or "?"
    return [
        f"# {run.address} · {local_time(run.start_ts, True)} · {where} · session {short_id(run.session_id)} · {run.status} · {counts}",
        f"summary: {run.summary}",
    ]


def format_run_window(window: RunWindow, cap: int = READ_CAP, evidence: bool = False) -> str:
    """A run's messages by address, each clipped, the whole capped; says where to continue."""
    lines = [EVIDENCE_HEADER] if evidence else []
    lines += _run_header(window.run)
    budget = cap - sum(len(x) + 1 for x in lines) - 120
    shown = 0
    for m in window.messages:
        text, _ = clip(m.text, READ_MESSAGE_CLIP, "…[clipped, {n} more chars: read " + m.address + "]")
        line = f"[{m.address}] {m.role}: {text}"
        if len(line) + 1 > budget:
            break
        lines.append(line)
        budget -= len(line) + 1
        shown += 1
    next_pos = window.offset + shown
    if next_pos < window.run.messages:
        lines.append(
            f"({window.run.messages - next_pos} more messages: read {window.run.address} with offset {next_pos}, "
            f"or r{window.run.id}/m{next_pos + 1})"
        )
    return "\n".join(lines)


def format_detail(detail: MessageDetail, evidence: bool = False) -> str:
    lines = [EVIDENCE_HEADER] if evidence else []
    mode = "raw source entry" if detail.raw else detail.role
    lines.append(
        f"# {detail.address} · {mode} · {local_time(detail.ts, True)} · session {short_id(detail.run.session_id)}"
        f" · msg_id {detail.msg_id}" + (f" · entry {detail.entry_id}" if detail.entry_id else "")
    )
    end = detail.offset + len(detail.text)
    if detail.offset or detail.next_offset is not None:
        lines.append(f"(chars {detail.offset}-{end} of {detail.total_chars})")
    lines.append(detail.text)
    if detail.next_offset is not None:
        lines.append(f"(more: read {detail.address} with offset {detail.next_offset})")
    return "\n".join(lines)


def format_run_show(window: RunWindow) -> str:
    """`pi-memory show rN`: the run for a person: header, summary fields, messages."""
    run = window.run
    lines = _run_header(run)
    lines += _fields_lines(run.fields)
    lines.append("")
    for m in window.messages:
        lines.append(f"[{m.address}] {local_time(m.ts, True)} {m.role}")
        lines += ["    " + x for x in m.text.splitlines() or [""]]
    return "\n".join(lines)


def _fields_lines(fields: dict[str, Any]) -> list[str]:
    out = []
    for key in ("goal", "outcome"):
        value = fields.get(key)
        if value:
            out.append(f"{key}: {value['text']}")
    for key in ("files_read", "files_changed"):
        files = fields.get(key) or []
        if files:
            out.append(f"{key.replace('_', ' ')}: " + ", ".join(f["text"] for f in files))
    for c in fields.get("commands") or []:
        out.append(f"command: {c['text']}  [exit {c.get('exit')}]")
    errors = (fields.get("errors") or {}).get("count", 0)
    if errors:
        out.append(f"errors: {errors}")
    return out
