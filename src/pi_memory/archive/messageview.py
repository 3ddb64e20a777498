"""Presenters of the facade's message answers: search hits, sessions, a read window, the archive's totals.

Pure: values in, text out (the CLI's, the bridge's and the MCP tools' text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..core.format import (
    EVIDENCE_HEADER,
    READ_CAP,
    READ_MESSAGE_CLIP,
    SEARCH_CAP,
    SEARCH_MAX_SESSIONS,
    cap_lines,
    home_path,
    human_bytes,
    local_time,
    short_id,
)
from ..core.text import clip

if TYPE_CHECKING:
    from ..search.messages import Hit, SessionHit
    from .model import Stats, Window


def _session_label(ts: int, cwd: str, project: str, name: str | None) -> str:
    parts = [local_time(ts), home_path(cwd) or project or "?"]
    if name:
        parts.append(name)
    return "[" + " · ".join(parts) + "]"


def format_search(
    hits: Sequence[Hit],
    query: str,
    cap: int = SEARCH_CAP,
    evidence: bool = False,
    addresses: Mapping[int, str] | None = None,
) -> str:
    """Hits grouped by session (at most 5 sessions), one snippet per hit, capped.

    With `addresses` (msg_id -> `rN/mK`, the command line's form) sessions are shown by their
    short id and each hit by its address, with how to open it; the model tools keep full ids.
    """
    if not hits:
        return f"No matches for {query!r}."
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        if hit.session_id in groups or len(groups) < SEARCH_MAX_SESSIONS:
            groups.setdefault(hit.session_id, []).append(hit)
    lines = [EVIDENCE_HEADER] if evidence else []
    for sid, group in groups.items():
        first = group[0]
        shown_id = sid if addresses is None else short_id(sid)
        lines.append(f"{_session_label(first.ts, first.cwd, first.project, first.session_name)} session={shown_id}")
        for hit in group:
            at = f"{addresses[hit.msg_id]} " if addresses and hit.msg_id in addresses else ""
            lines.append(f"  {at}msg_id={hit.msg_id} {hit.role}: {hit.snippet}")
    shown = sum(len(g) for g in groups.values())
    if shown < len(hits):
        lines.append(f"({len(hits) - shown} more hits in other sessions; narrow the query or use project/since)")
    if addresses is not None:
        lines.append(OPEN_HINT)
    return cap_lines(lines, cap, "(output capped; use read with a msg_id for details)")


OPEN_HINT = (
    "(pi-memory read rN/mK: one message in full; read rN: its run; read SESSION --around MSG_ID: the session there)"
)


def format_read(window: Window, cap: int = READ_CAP, evidence: bool = False, short_ids: bool = False) -> str:
    s = window.session
    sid = short_id(s.id) if short_ids else s.id
    title = f"# {local_time(s.started_at, True)} · {home_path(s.cwd) or s.project} · session {sid}"
    if s.name:
        title += f' "{s.name}"'
    lines = [EVIDENCE_HEADER] if evidence else []
    lines.append(title)
    if window.before_more and window.messages:
        lines.append(f"(earlier messages exist: read around msg_id={window.messages[0].msg_id})")
    for m in window.messages:
        text, _ = clip(m.text, READ_MESSAGE_CLIP, "…[clipped, {n} more chars]")
        lines.append(f"[{m.msg_id}] {m.role}: {text}")
    if window.after_more and window.messages:
        lines.append(f"(later messages exist: read around msg_id={window.messages[-1].msg_id})")
    if not window.messages:
        lines.append("(no messages)")
    return cap_lines(lines, cap, "(output capped; read a narrower window)")


def format_stats(st: Stats) -> str:
    roles = ", ".join(f"{r} {n}" for r, n in sorted(st.roles.items()))
    return "\n".join(
        [
            f"archive   {st.path}",
            f"messages  {st.messages} ({st.indexed} indexed)",
            f"sessions  {st.sessions} in {st.projects} projects",
            f"size      {human_bytes(st.db_bytes)}",
            f"oldest    {local_time(st.oldest, True)}",
            f"newest    {local_time(st.newest, True)}",
            f"roles     {roles or '-'}",
        ]
    )


def format_sessions(found: Sequence[SessionHit], query: str, cap: int = SEARCH_CAP) -> str:
    """One block per session: label, first user message as headline, the best hit's snippet."""
    if not found:
        return f"No sessions match {query!r}."
    lines = []
    for s in found:
        lines.append(
            f"{_session_label(s.started_at, s.cwd, s.project, s.name)} session={short_id(s.session_id)} hits={s.hits}"
        )
        lines.append(f"  first: {s.headline or '(no user message)'}")
        lines.append(f"  best:  msg_id={s.best.msg_id} {s.best.role}: {s.best.snippet}")
    return cap_lines(lines, cap, "(output capped; use read with a session id for details)")
