"""The recall request and result (pure): parameter names, defaults, limits, kinds and source classes.

A request comes from a model tool, the bridge, MCP or the CLI as a plain dict;
it is validated here once, with the spec's camelCase names accepted, numbers
clamped into range (a model asking for 50 results gets 30, not an error) and
unknown names refused (a typo must not silently filter nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..core import ids
from ..core.format import EVIDENCE_HEADER
from ..core.render import ROLES, SUMMARY, TOOL_ERROR, TOOL_RESULT
from ..errors import BadInput

if TYPE_CHECKING:
    from ..search.messages import Searcher
    from ..storage.store import Store


class ArchiveView(Protocol):
    """What recall reads through: the store, the message searcher and session-id resolution.

    The facade (`Archive`) has all three; recall never needs the rest of it.
    """

    store: Store
    searcher: Searcher

    def resolve_session(self, ref: str) -> str: ...


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
ACTIONS = ("search", "list", "read", "summary", "summary_search")
# the same vocabulary as runsearch.KINDS (`search --kind`)
KINDS = ("user", "assistant", "tool_call", "tool_result", "tool_error", "bash", "custom", "summary")
SOURCE_CLASSES = ("primary", "derived", "all")
KIND_ROLES = {
    "user": ("user",),
    "assistant": ("assistant",),
    "tool_call": ("assistant",),  # narrowed to assistant messages that called a tool
    "tool_result": (TOOL_RESULT, TOOL_ERROR),
    "tool_error": (TOOL_ERROR,),
    "bash": ("bash",),
    "custom": ("custom",),
    "summary": (SUMMARY,),
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


def id_list(value: Any, name: str) -> tuple[str, ...]:
    """A list of ids, or one comma/space separated string; `[12a82452]` pointers are accepted."""
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise BadInput(f"{name} must be a list of entry ids")
    cleaned = (str(i).strip("[], \t\r\n") for i in items)
    return tuple(dict.fromkeys(i for i in cleaned if i))


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
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return value is True or value == 1


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
    branch_ids = id_list(p.get("branch_ids") or [], "branch_ids")
    session = str(p["session"]).strip() if p.get("session") else None
    scope_value = SCOPE_ALIASES.get(str(p.get("scope") or "").lower(), p.get("scope"))
    default_scope = "branch" if branch_ids else ("session" if session else "all")
    entry_ids = id_list(p.get("entry_ids") or [], "entry_ids")
    if len(entry_ids) > MAX_IDS:
        raise BadInput(f"{len(entry_ids)} entry ids: ask for at most {MAX_IDS} at a time")
    action = _choice(p.get("action"), "action", ACTIONS, "read" if entry_ids else "search")
    if action in ("summary", "summary_search"):  # spec: the branch's compaction summaries, read or searched
        p["source_class"] = "derived"
        action = "search" if action == "summary_search" else "summary"
    return RecallRequest(
        action=action,
        query=ids.query(str(p.get("query") or "")).strip(),
        session=session,
        scope=_choice(scope_value, "scope", SCOPES, default_scope),
        branch_ids=branch_ids,
        entry_ids=entry_ids,
        file=str(p.get("file") or "").strip() or None,
        kind=_choice(p.get("kind"), "kind", KINDS, "") or None,
        source_class=_choice(p.get("source_class"), "source_class", SOURCE_CLASSES, "all"),
        page=_int(p.get("page"), "page", 1, MAX_PAGE, 1),
        limit=_int(p.get("limit"), "limit", 1, LIMIT_MAX, 1 if action == "summary" else LIMIT_DEFAULT),
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
