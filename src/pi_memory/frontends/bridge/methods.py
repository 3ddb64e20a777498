"""The archive's own bridge methods: hello, sessions and live capture, search, read, stats, import.

Each is one facade call; the text a model reads comes from the facade's presenters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...archive import Archive, Hit
from ...archive.present import format_read, format_search, format_stats
from ..tools.memory import BRIDGE_METHODS as MEMORY_BRIDGE_METHODS
from ..tools.review import BRIDGE_METHODS as REVIEW_BRIDGE_METHODS
from ..tools.usage import BRIDGE_METHODS as USAGE_BRIDGE_METHODS
from .protocol import METHODS, BadParams, method, opt_bool, opt_int, opt_str, req_dict, req_list, req_str

SEARCH_MAX_LIMIT = 50
IMPORT_BATCH_FILES = 20


@method("hello")
def hello(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("pi-memory")
    except PackageNotFoundError:
        ver = "unknown"
    return {
        "version": ver,
        "db": getattr(archive, "url", None) or str(archive.path),  # a team archive has a URL, not a path
        "schema": archive.schema_version,
        "methods": sorted(METHODS),
        "recovered_from": str(archive.recovered_from) if archive.recovered_from else None,
    }


@method("session_start")
def session_start(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    sid = req_str(params, "session_id")
    archive.ensure_session(
        sid,
        opt_str(params, "cwd") or "",
        name=opt_str(params, "name"),
        started_at=params.get("started_at") if isinstance(params.get("started_at"), (int, str)) else None,
        source_path=opt_str(params, "source_path"),
    )
    # a damaged archive was moved aside at open: the first session to start tells the user, once
    recovered, archive.recovered_from = archive.recovered_from, None
    return {"session_id": sid, "recovered_from": str(recovered) if recovered else None}


@method("capture")
def capture(archive: Archive, params: dict[str, Any]) -> int | None:
    return archive.capture_message(
        req_str(params, "session_id"),
        req_dict(params, "message"),
        entry_id=opt_str(params, "entry_id"),
        parent_id=opt_str(params, "parent_id"),
    )


@method("capture_entry")
def capture_entry(archive: Archive, params: dict[str, Any]) -> int | None:
    return archive.capture_entry(req_str(params, "session_id"), req_dict(params, "entry"))


@method("backfill")
def backfill(archive: Archive, params: dict[str, Any]) -> dict[str, int]:
    entries = req_list(params, "entries")
    if not all(isinstance(e, dict) for e in entries):
        raise BadParams("entries must be JSON objects")
    return archive.backfill(req_str(params, "session_id"), entries).to_dict()


@method("set_name")
def set_name(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    sid = req_str(params, "session_id")
    archive.set_session_name(sid, opt_str(params, "name"))
    return {"session_id": sid}


@method("search")
def search(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    query = req_str(params, "query")
    limit = opt_int(params, "limit", 10, 1, SEARCH_MAX_LIMIT) or 10
    found = archive.search(
        query,
        limit=limit,
        project=opt_str(params, "project"),
        since=opt_str(params, "since"),
        session=opt_str(params, "session"),
        include_echoes=opt_bool(params, "include_echoes"),
        # the model's own tool call: the run it answers is never a hit (a person's /recall sends none)
        asking_session=opt_str(params, "asking_session"),
    )
    hits = [h for h in found if isinstance(h, Hit)]  # the content track: message hits
    return {
        "text": format_search(hits, query, evidence=True),
        "hits": [dict(h.to_dict(), cwd=h.cwd, session_name=h.session_name) for h in hits],
    }


@method("read")
def read(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    window = archive.read(
        req_str(params, "session_id"),
        around=opt_int(params, "around", None),
        before=opt_int(params, "before", 4, 0, 50) or 0,
        after=opt_int(params, "after", 6, 0, 50) or 0,
    )
    return {"text": format_read(window, evidence=True), "window": window.to_dict()}


@method("stats")
def stats(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    st = archive.stats()
    return {"text": format_stats(st), "stats": st.to_dict()}


@method("import")
def import_batch(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """One batch of files; the caller repeats with `offset = next_offset` until it is null."""
    paths = params.get("paths")
    if paths is not None and (not isinstance(paths, list) or not all(isinstance(p, str) for p in paths)):
        raise BadParams("paths must be a list of strings")
    offset = opt_int(params, "offset", 0) or 0
    limit = opt_int(params, "limit", IMPORT_BATCH_FILES, 1, 1000) or IMPORT_BATCH_FILES
    return archive.import_slice([Path(p) for p in paths] if paths is not None else None, offset, limit).to_dict()


@method("shutdown")
def shutdown(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    return {"bye": True}


# long-term memory: the memory_* tools, memory_command, memory_injection, memory_start
METHODS.update(MEMORY_BRIDGE_METHODS)
# self-review: /review (the report) and /dream (the report as evidence for the model)
METHODS.update(REVIEW_BRIDGE_METHODS)
# usage: `session_usage`, "how much did this session cost"
METHODS.update(USAGE_BRIDGE_METHODS)
