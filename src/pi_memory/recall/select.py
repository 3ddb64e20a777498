"""Selecting records: by entry id, the newest ones (list), or by query and file (search)."""

from __future__ import annotations

from typing import Any

from ..core.render import TOOL_ERROR, TOOL_RESULT
from ..core.text import clip, normalize, query_phrases_for_snippet, snippet
from ..errors import BadInput
from ..search.messages import Filters, filter_sql
from ..storage.store import Store, decode_text, decompress
from .model import (
    SCAN_ROWS,
    SEARCH_MAX,
    SNIPPET_CHARS,
    ArchiveView,
    RecallItem,
    RecallRequest,
    RecallResult,
    allowed_roles,
    parse_request,
    source_class_of,
)
from .present import fit_budget
from .records import attach_bodies, attach_body, full_text, load_items, rendered_texts
from .scope import Scope, resolve_scope

# --- the three ways of selecting ------------------------------------------------------


def read_by_ids(archive: ArchiveView, req: RecallRequest, scope: Scope) -> RecallResult:
    """Exactly the asked-for entries, in session order; query, kind, file and page are ignored (spec)."""
    store = archive.store
    on_branch = set(scope.branch_ids)
    wanted = [i for i in req.entry_ids if not on_branch or i in on_branch]
    sessions = scope.sessions or _sessions_holding(store, wanted, scope.session_id)
    rows = _entry_rows(store, sessions, wanted)
    result = RecallResult("read", scope.name, scope.session_id, "", 1, req.limit)
    result.items = _items_from_entries(store, rows[: req.limit], req)
    seen = {str(r[0]) for r in rows}
    result.missing = [i for i in req.entry_ids if i not in seen]
    result.omitted = [str(r[0]) for r in rows[req.limit :]]
    if result.missing and scope.name == "branch":
        result.note = "ids not on the current branch are reported missing; scope session reads every branch"
    return result


def _sessions_holding(store: Store, entry_ids: list[str], session_id: str | None) -> tuple[str, ...]:
    """Scope all without a session: the sessions holding a message with one of these ids."""
    if session_id:
        return (session_id,)
    rows = store.rows(
        f"SELECT DISTINCT session_id FROM msg WHERE {store.sql_in_list('entry_id')}",
        (store.list_param(entry_ids),),
    )
    return tuple(str(r[0]) for r in rows)


def _entry_rows(store: Store, sessions: tuple[str, ...], entry_ids: list[str]) -> list[tuple[Any, ...]]:
    """(entry id, type, ts, session, msg id, raw blob) in session order: messages by their indexed entry id,
    then, only for ids still unfound, the session's other entries (custom state, labels...)."""
    if not sessions or not entry_ids:
        return []
    sess, wanted = store.list_param(sessions), store.list_param(entry_ids)
    rows = store.rows(
        f"""SELECT m.entry_id, coalesce(e.type, 'message'), m.ts, m.session_id, m.id, e.raw, coalesce(e.id, 0)
           FROM msg m LEFT JOIN entry e ON e.msg_id = m.id
           WHERE {store.sql_in_list("m.entry_id")} AND {store.sql_in_list("m.session_id")}""",
        (wanted, sess),
    )
    found = {str(r[0]) for r in rows}
    rest = [i for i in entry_ids if i not in found]
    if rest:
        rows += store.rows(
            f"""SELECT e.entry_id, e.type, e.ts, e.session_id, NULL, e.raw, e.id FROM entry e
               WHERE {store.sql_in_list("e.session_id")} AND e.msg_id IS NULL
               AND {store.sql_in_list("e.entry_id")}""",
            (sess, store.list_param(rest)),
        )
    return [r[:6] for r in sorted(rows, key=lambda r: (r[2], r[6]))]


def _items_from_entries(store: Store, rows: list[tuple[Any, ...]], req: RecallRequest) -> list[RecallItem]:
    """Entries as records with bodies: messages through `load_items`, other entries (custom state...) as they are."""
    msg_ids = [int(r[4]) for r in rows if r[4] is not None]
    by_msg = {i.msg_id: i for i in load_items(store, msg_ids)}
    texts = rendered_texts(store, msg_ids)
    items = []
    for entry_id, kind, ts, sid, msg_id, blob in rows:
        line = decompress(blob, texts.get(msg_id)).decode("utf-8", "replace") if blob is not None else None
        item = by_msg.get(msg_id) if msg_id is not None else None
        if item is None:
            snip = clip(" ".join((line or "").split()), SNIPPET_CHARS, "…")[0]
            item = RecallItem(
                str(entry_id),
                None,
                str(sid),
                None,
                str(kind),
                str(kind),
                source_class_of(None, str(kind)),
                int(ts),
                snip,
            )
        attach_body(item, line, texts.get(item.msg_id or 0, ""), req)
        items.append(item)
    return items


def _order(scope: Scope) -> str:
    """Newest first: by time inside a session (its index), by insertion order across sessions."""
    return "m.id DESC" if scope.name == "all" else "m.ts DESC, m.seq DESC"


def list_recent(store: Store, req: RecallRequest, scope: Scope, filters: Filters) -> RecallResult:
    """The newest records in scope (matching kind, class, file), one page, no query needed."""
    where, params = filter_sql(filters, store)
    rows = store.rows(
        f"""SELECT m.id FROM msg m JOIN session s ON s.id = m.session_id WHERE {where}
            ORDER BY {_order(scope)} LIMIT ? OFFSET ?""",
        [*params, req.limit + 1, (req.page - 1) * req.limit],
    )
    ids = [int(r[0]) for r in rows]
    action = "summary" if req.action == "summary" else "list"
    result = RecallResult(action, scope.name, scope.session_id, req.query, req.page, req.limit)
    result.items = load_items(store, ids[: req.limit])
    result.next_page = req.page + 1 if len(ids) > req.limit else None
    return result


def scan_records(store: Store, query: str, scope: Scope, filters: Filters) -> list[tuple[int, str]]:
    """The newest `SCAN_ROWS` records in scope (under `filters`) matched on their full text, word by word.

    For what the index does not answer: successful tool outputs are stored, not indexed, and the
    index's recent track only looks at the newest rows of the archive. Every word (a whole CJK
    stretch counts as one) must occur; returns (msg id, snippet), newest first. The archive's own
    output (`core.echo`: earlier recall calls and what they returned) is left out, as a search leaves it.
    """
    words = query_phrases_for_snippet(query)
    if not words:
        return []
    where, params = filter_sql(filters, store)
    echoes = "" if filters.include_echoes else " AND m.echo = 0"
    rows = store.rows(
        f"""SELECT m.id, m.text, e.raw FROM msg m JOIN session s ON s.id = m.session_id
            LEFT JOIN entry e ON e.msg_id = m.id WHERE {where}{echoes} ORDER BY {_order(scope)} LIMIT ?""",
        [*params, SCAN_ROWS],
    )
    fold = normalize if not all(w.isascii() for w in words) else str.lower  # folding Chinese is the slow part
    found = []
    for msg_id, text, blob in rows:
        rendered = decode_text(text)
        whole = full_text(decompress(blob, rendered).decode("utf-8", "replace") if blob else None, rendered, False)
        folded = fold(whole)
        if all(w in folded for w in words):
            found.append((int(msg_id), snippet(whole, [words])))
    return found


def _scans_tool_outputs(req: RecallRequest, scope: Scope, roles: tuple[str, ...] | None) -> bool:
    """Asked for tool results, or no kind; never for derived records.

    Bounded in every scope: the scan reads the newest `SCAN_ROWS` tool outputs in scope (across all
    sessions, newest by insertion order), so paging a query over all sessions reaches them too.
    """
    if roles is not None:
        return TOOL_RESULT in roles
    return True


def search_records(
    archive: ArchiveView, req: RecallRequest, scope: Scope, roles: tuple[str, ...] | None
) -> RecallResult:
    """Ranked content hits in scope (or, if none, a scan of the newest records in scope), then matching
    tool outputs the index does not hold; one page of them."""
    kinds = ("tool_call",) if req.kind == "tool_call" else ()
    wanted = min(req.page * req.limit + 1, SEARCH_MAX)
    filters = scope.filters(roles or (), kinds, req.file)
    hits = archive.searcher.search(req.query, limit=wanted, filters=filters)
    found = [(h.msg_id, h.snippet) for h in hits]
    scanned_tool_outputs = False
    if not found and scope.name != "all":  # an old session's rows may be beyond the index's recent track
        found = scan_records(archive.store, req.query, scope, filters)
        scanned_tool_outputs = roles is not None and set(roles) <= {TOOL_RESULT, TOOL_ERROR}
    if _scans_tool_outputs(req, scope, roles) and not scanned_tool_outputs:
        seen = {m for m, _ in found}
        scan_filters = scope.filters((TOOL_RESULT,), (), req.file)
        found += [f for f in scan_records(archive.store, req.query, scope, scan_filters) if f[0] not in seen]
    start = (req.page - 1) * req.limit
    page = found[start : start + req.limit]
    result = RecallResult("search", scope.name, scope.session_id, req.query, req.page, req.limit)
    result.items = load_items(archive.store, [m for m, _ in page])
    snippets = dict(page)
    for item in result.items:
        item.snippet = snippets.get(item.msg_id or 0, item.snippet)
    result.next_page = req.page + 1 if len(found) > start + req.limit else None
    return result


# --- the entry point ---------------------------------------------------------------------


def recall(archive: ArchiveView, params: dict[str, Any]) -> RecallResult:
    """One recall: `params` as the model tool, the bridge, MCP or the CLI send them."""
    req = parse_request(params)
    with archive.store.read():
        scope = resolve_scope(archive, req)
        result = _select(archive, req, scope)
    if (req.raw or req.action == "summary") and req.action != "read":  # a summary is read in full (segments)
        attach_bodies(archive.store, result.items, req)
    fit_budget(result)
    return result


def _select(archive: ArchiveView, req: RecallRequest, scope: Scope) -> RecallResult:
    if req.entry_ids:
        return read_by_ids(archive, req, scope)
    if req.action == "read":
        raise BadInput("action read needs entry_ids")
    roles = allowed_roles(req.kind, req.source_class)
    empty = RecallResult(req.action, scope.name, scope.session_id, req.query, req.page, req.limit)
    if roles == ():
        empty.note = "nothing can match: no record of this kind is of that source class"
        return empty
    kinds = ("tool_call",) if req.kind == "tool_call" else ()
    filters = scope.filters(roles or (), kinds, req.file)
    if req.action in ("list", "summary") or (not req.query and req.file):
        return list_recent(archive.store, req, scope, filters)
    if not req.query:  # spec: an empty query, or a kind alone, never lists the whole history
        raise BadInput("give a query, a file or entry_ids (or action list for the newest records)")
    return search_records(archive, req, scope, roles)
