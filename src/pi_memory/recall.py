"""Recall inside the current session: search, list or read back records by branch, file, kind and id.

Design idea (spec 002, `pi_compact_recall`, folded into our tools): after a
compaction the model still needs the details it no longer sees, and only the
ones of its own line of work. So a recall is always *scoped*: `branch` (the
entries on the current branch, whose ids the caller passes: pi knows its
branch, the archive does not), `session` (every branch of the session) or
`all` (every session). Inside the scope it selects records three ways:

- `entry_ids`: exactly these records, in session order (query, kind, file and
  page are ignored), with their full text or verbatim JSON in segments;
- `action: "list"`: the newest records, bounded, no query needed;
- a query (and/or `file`): the content search, ranked as everywhere else
  (`Searcher` with the scope as a filter), plus a bounded scan of the
  successful tool outputs the index leaves out, matched on their full text.

An empty query with only a kind lists nothing (spec rule): history is read on
purpose, not dumped. Compaction and branch summaries are `derived`, everything
else `primary` (`source_class`). One params dict in, one JSON-able dict out,
so the bridge and MCP register it in one line; `format_recall` turns it into
the text a model reads: the evidence header, whole result blocks within
16,000 characters, and the ids of whatever was left out. A long body comes in
`offset`/`raw_limit` segments whose cursors join them back exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .compact.recall import segment
from .detail import message_detail_text, strip_attachments
from .errors import BadInput
from .format import EVIDENCE_HEADER, local_time
from .render import ROLES, SUMMARY, TOOL_ERROR, TOOL_RESULT
from .search import Filters, _filter_sql
from .sources.pi import active_branch, read_session_file
from .store import Store, decompress
from .text import clip, normalize, query_phrases_for_snippet, snippet

if TYPE_CHECKING:
    from .api import Archive

RECALL_MAX_CHARS = 16_000  # spec `recallMaxChars`: what a model reads from one recall
LIMIT_DEFAULT, LIMIT_MAX = 8, 30
RAW_LIMIT_DEFAULT, RAW_LIMIT_MAX = 4_000, 12_000  # one segment; the cap keeps room for the header
MAX_PAGE = 200  # page * limit stays a bounded offset
MAX_IDS = 100
SEARCH_MAX = 100  # the content search returns at most this many hits
SCAN_ROWS = 400  # newest successful tool outputs in scope matched on their full text
SNIPPET_CHARS = 300
LINEAGE_MAX = 20  # forked sessions followed back to their parents
HEADER_RESERVE = 800  # room for the header and the notes below the results

SCOPES = ("branch", "session", "all")
SCOPE_ALIASES = {"active-lineage": "branch", "lineage": "branch", "current": "branch"}
ACTIONS = ("search", "list", "read")
KINDS = ("user", "assistant", "tool_call", "tool_result", "bash", "custom")
SOURCE_CLASSES = ("primary", "derived", "all")
KIND_ROLES = {
    "user": ("user",),
    "assistant": ("assistant",),
    "tool_call": ("assistant",),  # narrowed to assistant messages that called a tool
    "tool_result": (TOOL_RESULT, TOOL_ERROR),
    "bash": ("bash",),
    "custom": ("custom",),
}
DERIVED_ROLES = (SUMMARY,)  # compaction and branch summaries: written about the history, not in it
PARAM_ALIASES = {
    "entryIds": "entry_ids",
    "ids": "entry_ids",
    "branchIds": "branch_ids",
    "rawLimit": "raw_limit",
    "sourceClass": "source_class",
    "includeThinking": "include_thinking",
    "sessionId": "session",
    "session_id": "session",
}
PARAMS = (
    "action query session scope branch_ids entry_ids file kind source_class page limit raw offset raw_limit "
    "include_thinking"
).split()


# --- the request (pure) ----------------------------------------------------------------


@dataclass
class RecallRequest:
    action: str = "search"
    query: str = ""
    session: str | None = None
    scope: str = "all"
    branch_ids: tuple[str, ...] = ()
    entry_ids: tuple[str, ...] = ()
    file: str | None = None
    kind: str | None = None
    source_class: str = "all"
    page: int = 1
    limit: int = LIMIT_DEFAULT
    raw: bool = False
    offset: int = 0
    raw_limit: int = RAW_LIMIT_DEFAULT
    include_thinking: bool = False


def _id_list(value: Any, name: str) -> tuple[str, ...]:
    """A list of ids, or one comma/space separated string; `[12a82452]` pointers are accepted."""
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise BadInput(f"{name} must be a list of entry ids")
    ids = [str(i).strip().strip("[],") for i in items]
    return tuple(dict.fromkeys(i for i in ids if i))


def _int(value: Any, name: str, low: int, high: int, default: int) -> int:
    """An integer clamped into [low, high] (a model asking for 50 results gets 30, not an error)."""
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadInput(f"{name} must be a whole number, not {value!r}") from None
    return max(low, min(number, high))


def _choice(value: Any, name: str, choices: tuple[str, ...], default: str) -> str:
    if value is None or value == "":
        return default
    text = str(value).strip().lower()
    if text not in choices:
        raise BadInput(f"unknown {name} {value!r}: use one of {', '.join(choices)}")
    return text


def _flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes"))


def normalize_params(params: dict[str, Any]) -> dict[str, Any]:
    """The spec's camelCase names mapped to ours; an unknown name is an error (a typo filters nothing)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = PARAM_ALIASES.get(key, key)
        if name not in PARAMS:
            raise BadInput(f"unknown recall parameter {key!r}: use {', '.join(PARAMS)}")
        out[name] = value
    return out


def parse_request(params: dict[str, Any]) -> RecallRequest:
    """Validate and default a params dict (from the bridge, MCP or the CLI)."""
    p = normalize_params(params)
    branch_ids = _id_list(p.get("branch_ids") or [], "branch_ids")
    session = str(p["session"]).strip() if p.get("session") else None
    scope_value = SCOPE_ALIASES.get(str(p.get("scope") or "").lower(), p.get("scope"))
    default_scope = "branch" if branch_ids else ("session" if session else "all")
    entry_ids = _id_list(p.get("entry_ids") or [], "entry_ids")
    if len(entry_ids) > MAX_IDS:
        raise BadInput(f"{len(entry_ids)} entry ids: ask for at most {MAX_IDS} at a time")
    default_action = "read" if entry_ids else "search"
    return RecallRequest(
        action=_choice(p.get("action"), "action", ACTIONS, default_action),
        query=str(p.get("query") or "").strip(),
        session=session,
        scope=_choice(scope_value, "scope", SCOPES, default_scope),
        branch_ids=branch_ids,
        entry_ids=entry_ids,
        file=str(p["file"]).strip() or None if p.get("file") else None,
        kind=_choice(p.get("kind"), "kind", KINDS, "") or None,
        source_class=_choice(p.get("source_class"), "source_class", SOURCE_CLASSES, "all"),
        page=_int(p.get("page"), "page", 1, MAX_PAGE, 1),
        limit=_int(p.get("limit"), "limit", 1, LIMIT_MAX, LIMIT_DEFAULT),
        raw=_flag(p.get("raw")),
        offset=_int(p.get("offset"), "offset", 0, 1 << 40, 0),
        raw_limit=_int(p.get("raw_limit"), "raw_limit", 1, RAW_LIMIT_MAX, RAW_LIMIT_DEFAULT),
        include_thinking=_flag(p.get("include_thinking")),
    )


def allowed_roles(kind: str | None, source_class: str) -> tuple[str, ...] | None:
    """The roles a kind and a source class leave (None: any role; empty: nothing can match)."""
    by_kind = set(KIND_ROLES[kind]) if kind else None
    by_class = {"primary": set(ROLES) - set(DERIVED_ROLES), "derived": set(DERIVED_ROLES)}.get(source_class)
    if by_kind is None and by_class is None:
        return None
    both = (by_kind or set(ROLES)) & (by_class or set(ROLES))
    return tuple(r for r in ROLES if r in both)


def record_kind(role: str | None, meta: dict[str, Any], entry_type: str) -> str:
    """What a record is, in the spec's words (`tool_call`, `compaction`...)."""
    if role is None:
        return entry_type  # a non-message entry: custom state, label, model change...
    if role == "assistant" and meta.get("tools"):
        return "tool_call"
    if role in (TOOL_RESULT, TOOL_ERROR):
        return "tool_result"
    if role == SUMMARY:
        kind = str(meta.get("kind") or "compaction")
        return {"compactionSummary": "compaction", "branchSummary": "branch_summary"}.get(kind, kind)
    return role


def source_class_of(role: str | None, entry_type: str) -> str:
    derived = role in DERIVED_ROLES or entry_type in ("compaction", "branch_summary")
    return "derived" if derived else "primary"


# --- the result --------------------------------------------------------------------------


@dataclass
class RecallItem:
    entry_id: str | None
    msg_id: int | None
    session_id: str
    address: str | None  # rN/mK when the message belongs to a run
    role: str  # the archive role, or the entry type of a non-message entry
    kind: str
    source_class: str
    ts: int
    snippet: str = ""
    body: str | None = None  # read / raw: one segment of the full text or the verbatim JSON
    body_format: str | None = None  # "text" or "raw"
    offset: int = 0
    next_offset: int | None = None
    total_chars: int = 0

    @property
    def label(self) -> str:
        return self.entry_id or (f"msg {self.msg_id}" if self.msg_id else "?")

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if self.body is None:
            for key in ("body", "body_format", "offset", "next_offset", "total_chars"):
                out.pop(key)
        else:
            out["truncated"] = self.next_offset is not None or self.offset > 0
        return out


@dataclass
class RecallResult:
    action: str
    scope: str
    session_id: str | None
    query: str
    page: int
    limit: int
    items: list[RecallItem] = field(default_factory=list)
    next_page: int | None = None
    missing: list[str] = field(default_factory=list)  # asked-for ids not found in scope
    omitted: list[str] = field(default_factory=list)  # found but left out to stay within the budget
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "evidence": EVIDENCE_HEADER,
            "action": self.action,
            "scope": self.scope,
            "session_id": self.session_id,
            "query": self.query,
            "page": self.page,
            "limit": self.limit,
            "next_page": self.next_page,
            "results": [i.to_dict() for i in self.items],
            "missing": self.missing,
            "omitted": self.omitted,
            "note": self.note,
        }


# --- scope ------------------------------------------------------------------------------


@dataclass
class Scope:
    name: str
    session_id: str | None
    sessions: tuple[str, ...]  # the session and the sessions it was forked from
    msg_ids: tuple[int, ...] | None  # branch: its messages; None: no restriction
    branch_ids: frozenset[str] | None

    def filters(self, roles: tuple[str, ...] = (), kinds: tuple[str, ...] = (), path: str | None = None) -> Filters:
        session = self.session_id if self.name == "session" else None
        return Filters(session_id=session, roles=roles, kinds=kinds, path=path, msg_ids=self.msg_ids)


def lineage(store: Store, session_id: str) -> tuple[str, ...]:
    """A session and its fork ancestors: a fork's copied entries are stored once, under the parent."""
    chain = [session_id]
    while len(chain) < LINEAGE_MAX:
        parent = parent_session_id(store, chain[-1])
        if parent is None or parent in chain:
            break
        chain.append(parent)
    return tuple(chain)


def parent_session_id(store: Store, session_id: str) -> str | None:
    """pi's `parentSession` is the parent's file path: match it as imported, or by the uuid in its name."""
    value = store.scalar("SELECT parent_session FROM session WHERE id=?", (session_id,))
    if not value:
        return None
    uuid = Path(str(value)).stem.rsplit("_", 1)[-1]
    found = store.scalar(
        "SELECT id FROM session WHERE id IN (?, ?) OR source_path = ? LIMIT 1", (str(value), uuid, str(value))
    )
    return str(found) if found else None


def resolve_scope(archive: Archive, req: RecallRequest) -> Scope:
    if req.scope == "all":
        sid = archive.resolve_session(req.session) if req.session else None
        return Scope("all", sid, (), None, None)
    if not req.session:
        raise BadInput(f"scope {req.scope} needs a session id")
    sid = archive.resolve_session(req.session)
    if req.scope == "session":
        return Scope("session", sid, (sid,), None, None)
    if not req.branch_ids:  # never widen to the whole session when the branch is unknown (spec)
        raise BadInput("scope branch needs the branch's entry ids (branch_ids); use scope session for every branch")
    sessions = lineage(archive.store, sid)
    marks = ",".join("?" * len(sessions))
    rows = archive.store.rows(
        f"SELECT id FROM msg WHERE session_id IN ({marks}) AND entry_id IN (SELECT value FROM json_each(?))",
        (*sessions, json.dumps(list(req.branch_ids))),
    )
    return Scope("branch", sid, sessions, tuple(sorted(int(r[0]) for r in rows)), frozenset(req.branch_ids))


# --- records ------------------------------------------------------------------------------

_MSG_COLUMNS = """m.id, m.session_id, m.ts, m.role, m.text, m.entry_id, m.meta, rm.run_id, rm.pos"""


def _meta(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _item_from_msg(row: tuple[Any, ...]) -> RecallItem:
    msg_id, sid, ts, role, text, entry_id, meta, run_id, pos = row
    meta_dict = _meta(meta)
    one_line, _ = clip(" ".join(str(text).split()), SNIPPET_CHARS, "…")
    return RecallItem(
        entry_id=entry_id,
        msg_id=int(msg_id),
        session_id=str(sid),
        address=f"r{run_id}/m{pos}" if run_id is not None else None,
        role=str(role),
        kind=record_kind(str(role), meta_dict, "message"),
        source_class=source_class_of(str(role), "message"),
        ts=int(ts),
        snippet=one_line,
    )


def load_items(store: Store, msg_ids: list[int]) -> list[RecallItem]:
    """Records for these messages, in the order given."""
    if not msg_ids:
        return []
    rows = store.rows(
        f"""SELECT {_MSG_COLUMNS} FROM msg m LEFT JOIN run_msg rm ON rm.msg_id = m.id
            WHERE m.id IN (SELECT value FROM json_each(?))""",
        (json.dumps(msg_ids),),
    )
    by_id = {int(r[0]): _item_from_msg(r) for r in rows}
    return [by_id[i] for i in msg_ids if i in by_id]


def _source_of(line: str) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return data["message"] if isinstance(data.get("message"), dict) else data


def full_text(line: str | None, rendered: str, thinking: bool) -> str:
    """A record's whole text from its verbatim line (complete tool output, attachments stripped)."""
    source = _source_of(line) if line is not None else None
    if source is None:
        return rendered
    return message_detail_text(strip_attachments(source), thinking)


def raw_lines(store: Store, msg_ids: list[int]) -> dict[int, str]:
    """msg id -> its verbatim source line (a message captured live without a file has none)."""
    if not msg_ids:
        return {}
    rows = store.rows(
        "SELECT msg_id, raw FROM entry WHERE msg_id IN (SELECT value FROM json_each(?))", (json.dumps(msg_ids),)
    )
    return {int(mid): decompress(blob).decode("utf-8", "replace") for mid, blob in rows}


def rendered_texts(store: Store, msg_ids: list[int]) -> dict[int, str]:
    if not msg_ids:
        return {}
    rows = store.rows("SELECT id, text FROM msg WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(msg_ids),))
    return {int(i): str(t) for i, t in rows}


def attach_body(item: RecallItem, line: str | None, rendered: str, req: RecallRequest) -> None:
    """One segment of the record's full text (or, with `raw` or for a non-message entry, its verbatim JSON)."""
    if req.raw or item.msg_id is None:
        whole, fmt = (line if line is not None else rendered), "raw"
    else:
        whole, fmt = full_text(line, rendered, req.include_thinking), "text"
    piece, nxt = segment(whole, req.offset, req.raw_limit)
    item.body, item.body_format = piece, fmt
    item.offset, item.next_offset, item.total_chars = min(req.offset, len(whole)), nxt, len(whole)


def attach_bodies(store: Store, items: list[RecallItem], req: RecallRequest) -> None:
    ids = [i.msg_id for i in items if i.msg_id is not None]
    lines, texts = raw_lines(store, ids), rendered_texts(store, ids)
    for item in items:
        if item.msg_id is not None:
            attach_body(item, lines.get(item.msg_id), texts.get(item.msg_id, ""), req)


# --- the three ways of selecting ------------------------------------------------------


def read_by_ids(archive: Archive, req: RecallRequest, scope: Scope) -> RecallResult:
    """Exactly the asked-for entries, in session order; query, kind, file and page are ignored (spec)."""
    store = archive.store
    wanted = [i for i in req.entry_ids if scope.branch_ids is None or i in scope.branch_ids]
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
        "SELECT DISTINCT session_id FROM msg WHERE entry_id IN (SELECT value FROM json_each(?))",
        (json.dumps(entry_ids),),
    )
    return tuple(str(r[0]) for r in rows)


def _entry_rows(store: Store, sessions: tuple[str, ...], entry_ids: list[str]) -> list[tuple[Any, ...]]:
    if not sessions or not entry_ids:
        return []
    marks = ",".join("?" * len(sessions))
    return store.rows(
        f"""SELECT e.entry_id, e.type, e.ts, e.session_id, e.msg_id, e.raw FROM entry e
            WHERE e.session_id IN ({marks}) AND e.entry_id IN (SELECT value FROM json_each(?))
            ORDER BY e.ts, e.id""",
        (*sessions, json.dumps(entry_ids)),
    )


def _items_from_entries(store: Store, rows: list[tuple[Any, ...]], req: RecallRequest) -> list[RecallItem]:
    """Entries as records with bodies: messages through `load_items`, other entries (custom state...) as they are."""
    msg_ids = [int(r[4]) for r in rows if r[4] is not None]
    by_msg = {i.msg_id: i for i in load_items(store, msg_ids)}
    texts = rendered_texts(store, msg_ids)
    items = []
    for entry_id, kind, ts, sid, msg_id, blob in rows:
        line = decompress(blob).decode("utf-8", "replace")
        item = by_msg.get(msg_id) if msg_id is not None else None
        if item is None:
            snip = clip(" ".join(line.split()), SNIPPET_CHARS, "…")[0]
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
    where, params = _filter_sql(filters)
    rows = store.rows(
        f"""SELECT m.id FROM msg m JOIN session s ON s.id = m.session_id WHERE {where}
            ORDER BY {_order(scope)} LIMIT ? OFFSET ?""",
        [*params, req.limit + 1, (req.page - 1) * req.limit],
    )
    ids = [int(r[0]) for r in rows]
    result = RecallResult("list", scope.name, scope.session_id, req.query, req.page, req.limit)
    result.items = load_items(store, ids[: req.limit])
    result.next_page = req.page + 1 if len(ids) > req.limit else None
    return result


def scan_tool_outputs(store: Store, query: str, scope: Scope, filters: Filters) -> list[tuple[int, str]]:
    """Successful tool outputs are stored, not indexed: match the newest few in scope on their full text.

    Every word (a whole CJK stretch counts as one) must occur; returns (msg id, snippet), newest first.
    """
    words = query_phrases_for_snippet(query)
    if not words:
        return []
    where, params = _filter_sql(filters)
    rows = store.rows(
        f"""SELECT m.id, m.text, e.raw FROM msg m JOIN session s ON s.id = m.session_id
            LEFT JOIN entry e ON e.msg_id = m.id WHERE {where} ORDER BY {_order(scope)} LIMIT ?""",
        [*params, SCAN_ROWS],
    )
    found = []
    for msg_id, text, blob in rows:
        whole = full_text(decompress(blob).decode("utf-8", "replace") if blob else None, str(text), False)
        norm = normalize(whole)
        if all(w in norm for w in words):
            found.append((int(msg_id), snippet(whole, [words])))
    return found


def _scans_tool_outputs(req: RecallRequest, scope: Scope, roles: tuple[str, ...] | None) -> bool:
    """Asked for tool results, or no kind inside one session (bounded there); never for derived records."""
    if roles is not None:
        return TOOL_RESULT in roles
    return scope.name != "all"


def search_records(archive: Archive, req: RecallRequest, scope: Scope, roles: tuple[str, ...] | None) -> RecallResult:
    """Ranked content hits in scope, then matching tool outputs the index does not hold; one page of them."""
    kinds = ("tool_call",) if req.kind == "tool_call" else ()
    wanted = min(req.page * req.limit + 1, SEARCH_MAX)
    filters = scope.filters(roles or (), kinds, req.file)
    hits = archive.searcher.search(req.query, limit=wanted, filters=filters)
    found = [(h.msg_id, h.snippet) for h in hits]
    if _scans_tool_outputs(req, scope, roles):
        seen = {m for m, _ in found}
        scan_filters = scope.filters((TOOL_RESULT,), (), req.file)
        found += [f for f in scan_tool_outputs(archive.store, req.query, scope, scan_filters) if f[0] not in seen]
    start = (req.page - 1) * req.limit
    page = found[start : start + req.limit]
    result = RecallResult("search", scope.name, scope.session_id, req.query, req.page, req.limit)
    result.items = load_items(archive.store, [m for m, _ in page])
    snippets = dict(page)
    for item in result.items:
        item.snippet = snippets.get(item.msg_id or 0, item.snippet)
    result.next_page = req.page + 1 if len(found) > start + req.limit else None
    return result


def branch_ids_from(value: str) -> list[str]:
    """`--branch-ids`: a comma list, a file of ids, or a pi session file (its current branch, as pi would load it)."""
    path = Path(value).expanduser()
    if not path.is_file():
        return list(_id_list(value, "branch_ids"))
    parsed = read_session_file(path)
    if parsed.header is not None:
        return [e.entry_id for e in active_branch(parsed.entries) if e.entry_id]
    return list(_id_list(path.read_text(encoding="utf-8", errors="replace"), "branch_ids"))


# --- the entry point ---------------------------------------------------------------------


def recall(archive: Archive, params: dict[str, Any]) -> RecallResult:
    """One recall: `params` as the model tool, the bridge, MCP or the CLI send them."""
    req = parse_request(params)
    with archive.store.read():
        scope = resolve_scope(archive, req)
        result = _select(archive, req, scope)
    if req.raw and req.action != "read":
        attach_bodies(archive.store, result.items, req)
    fit_budget(result)
    return result


def _select(archive: Archive, req: RecallRequest, scope: Scope) -> RecallResult:
    if req.entry_ids:
        return read_by_ids(archive, req, scope)
    if req.action == "read":
        raise BadInput("action read needs entry_ids")
    roles = allowed_roles(req.kind, req.source_class)
    empty = RecallResult(req.action, scope.name, scope.session_id, req.query, req.page, req.limit)
    if roles == () or scope.msg_ids == ():
        empty.note = (
            "nothing in scope can match (no records on the branch, or kind and source_class exclude each other)"
        )
        return empty
    kinds = ("tool_call",) if req.kind == "tool_call" else ()
    filters = scope.filters(roles or (), kinds, req.file)
    if req.action == "list" or (not req.query and req.file):
        return list_recent(archive.store, req, scope, filters)
    if not req.query:  # spec: an empty query, or a kind alone, never lists the whole history
        raise BadInput("give a query, a file or entry_ids (or action list for the newest records)")
    return search_records(archive, req, scope, roles)


def fit_budget(result: RecallResult, budget: int = RECALL_MAX_CHARS) -> None:
    """Keep whole records within the budget (the first always fits); name the ones left out."""
    used = HEADER_RESERVE
    kept: list[RecallItem] = []
    for item in result.items:
        size = len(item_block(item)) + 1
        if kept and used + size > budget:
            result.omitted.append(item.label)
            continue
        kept.append(item)
        used += size
    result.items = kept


# --- text for the model (pure) ---------------------------------------------------------


def item_block(item: RecallItem) -> str:
    """`[entry] rN/mK kind · time · msg N: snippet`, or the head and one segment of the body."""
    head = f"[{item.label}]" + (f" {item.address}" if item.address else "") + f" {item.kind}"
    if item.source_class == "derived":
        head += " (derived summary)"
    head += f" · {local_time(item.ts, True)}" + (f" · msg {item.msg_id}" if item.msg_id else "")
    head += f" · session {item.session_id[:8]}"
    if item.body is None:
        return f"{head}: {item.snippet}"
    end = item.offset + len(item.body)
    span = f"{item.body_format} chars {item.offset}-{end} of {item.total_chars}"
    more = f"; more: offset {item.next_offset}" if item.next_offset is not None else ""
    return f"{head} · {span}{more}\n{item.body}"


def _title(result: RecallResult) -> str:
    what = f"{result.action} {result.query!r}" if result.query else result.action
    where = f"scope {result.scope}" + (f" (session {result.session_id})" if result.session_id else "")
    page = f"page {result.page}" + (f", next page {result.next_page}" if result.next_page else "")
    return f"recall {what} · {where} · {page} · {len(result.items)} records"


def format_recall(result: RecallResult, cap: int = RECALL_MAX_CHARS) -> str:
    """The text a model reads: evidence header, whole records, what is missing or left out; within `cap`."""
    lines = [EVIDENCE_HEADER, _title(result)]
    if not result.items:
        lines.append("(no records)")
    tail = []
    if result.missing:
        tail.append("not found in scope: " + ", ".join(result.missing))
    if result.omitted:
        tail.append("left out to stay within the output budget (read them by entry_ids): " + ", ".join(result.omitted))
    if result.note:
        tail.append(result.note)
    if any(i.next_offset is not None for i in result.items):
        tail.append("(a body continues: recall again with the same entry_ids and the offset shown)")
    room = cap - sum(len(x) + 1 for x in lines + tail)
    for item in result.items:
        block = item_block(item)
        if len(block) + 1 > room:
            tail.insert(0, f"(output capped at {cap} chars; not shown: {item.label} and after)")
            break
        lines.append(block)
        room -= len(block) + 1
    return "\n".join(lines + tail)[:cap]
