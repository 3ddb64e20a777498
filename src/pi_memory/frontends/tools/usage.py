"""The model's answer to "how much did this session cost": one session's tokens, cache hits,
dollars per model, and what pi-memory added to and removed from its requests (the ledger).

Shared by the bridge (`session_usage`, pi's tool) and the MCP server (`session_usage`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...archive import Archive
from ...archive.present import format_ledger, format_usage
from ...errors import NotFound

DESCRIPTION = (
    "How much a coding session cost: its model requests, input/output/cache tokens, cache-hit rate and "
    "dollars per model (the session file's own costs, else an offline price table; unknown for a model "
    "the table lacks), and what pi-memory added to its requests and what its folding and compaction "
    "saved. Default: the newest session of this project."
)


def session_for(archive: Archive, session_id: str | None, cwd: str | None) -> str:
    """The session asked about, or the newest one of the workspace's project (then of any)."""
    if session_id:
        return archive.resolve_session(session_id)
    project = Path(cwd).name if cwd else None
    found = archive.sessions(project=project, limit=1) if project else []
    found = found or archive.sessions(limit=1)
    if not found:
        raise NotFound("the archive holds no session yet")
    return found[0].id


def session_usage_text(archive: Archive, session_id: str | None, cwd: str | None) -> str:
    sid = session_for(archive, session_id, cwd)
    by_model = archive.usage("model", session=sid)
    text = f"session {sid}\n" + format_usage(by_model)
    return text + "\n\ncontext ledger:\n" + format_ledger(archive.usage_ledger(sid))


def bridge_session_usage(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    sid = params.get("session_id") if isinstance(params.get("session_id"), str) else None
    cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else None
    return {"text": session_usage_text(archive, sid, cwd)}


BRIDGE_METHODS = {"session_usage": bridge_session_usage}
