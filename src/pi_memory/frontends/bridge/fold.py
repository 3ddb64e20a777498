"""Bridge methods for in-session folding: `fold_context`, `fold_now`, `fold_status`, `read_address`.

Design idea: the pi extension (`extensions/pi/fold.ts`) forwards the context pi is about to
send (or the branch) and the session's fold records, persists the records that come back
(custom entries) and splices the returned edits into the messages. Every decision is made in
`pi_memory.fold`; each method is a parameter check plus one call.
"""

from __future__ import annotations

import time
from typing import Any

from ...archive import Archive, MessageDetail
from ...archive.present import format_detail, format_run_window
from .protocol import BadParams, method, opt_int, opt_str, req_str


def _list(params: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = params.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise BadParams(f"{key} must be a list of JSON objects")
    return value


def _now(params: dict[str, Any]) -> int:
    return opt_int(params, "now", None) or int(time.time() * 1000)


@method("fold_context")
def fold_context(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """pi's `context` event: `{edits: [{start, end, message}], records: [new fold records]}`."""
    return archive.fold_context(
        req_str(params, "session_id"),
        req_str(params, "cwd"),
        _list(params, "messages"),
        _list(params, "entries"),
        _list(params, "folds"),
        _now(params),
    )


@method("fold_now")
def fold_now_method(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """The `fold` tool (with `summary`) or `/fold` (without): `{records, text}`."""
    summary = params.get("summary")
    if summary is not None and not isinstance(summary, str):
        raise BadParams("summary must be a string")
    return archive.fold_now(
        req_str(params, "session_id"),
        req_str(params, "cwd"),
        _list(params, "entries"),
        _list(params, "folds"),
        _now(params),
        summary=summary,
        keep_last=opt_int(params, "keep_last", 0, 0, 1000) or 0,
    )


@method("fold_status")
def fold_status_method(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """`/fold status`: from the records the shim sends, or (no `folds`) from the archived session."""
    folds = None if params.get("folds") is None else _list(params, "folds")
    session_id = opt_str(params, "session_id")
    return archive.fold_status(req_str(params, "cwd"), folds, opt_int(params, "compacted", 0) or 0, session_id)


@method("read_address")
def read_address(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """`session_read` with an address: `r12` (a run) or `r12/m4` (one message in full, paged)."""
    found = archive.read_address(
        req_str(params, "address"),
        offset=opt_int(params, "offset", 0) or 0,
        raw=bool(params.get("raw")),
        thinking=bool(params.get("thinking")),
    )
    if isinstance(found, MessageDetail):
        text = format_detail(found, evidence=True)
    else:
        text = format_run_window(found, evidence=True)
    return {"text": text, "found": found.to_dict()}
