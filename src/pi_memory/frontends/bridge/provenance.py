"""Provenance over the bridge: what pi's extension observed of an edit, and the `session_blame` tool."""

from __future__ import annotations

from typing import Any

from ...archive import Archive
from ..tools.provenance import SPEC, session_blame
from .protocol import method, opt_int, opt_str, req_str

SNAPSHOT_CHARS = 1 << 20  # the extension sends the file before an edit only up to this size


@method("edit_observed")
def edit_observed(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    before = opt_str(params, "before_text")
    kept = archive.observe_edit(
        req_str(params, "session_id"),
        req_str(params, "call_id"),
        req_str(params, "path"),
        before_hash=opt_str(params, "before_hash"),
        after_hash=opt_str(params, "after_hash"),
        git_commit=opt_str(params, "git_commit"),
        observed_at=opt_int(params, "observed_at", None),
        before_text=before if before is None or len(before) <= SNAPSHOT_CHARS else None,
    )
    return {"snapshot": kept}


@method("session_blame")
def blame_tool(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    return {"text": session_blame(archive, params), "spec": SPEC}


@method("resume")
def resume(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    return archive.resume(req_str(params, "session_id")).to_dict()
