"""The rules a memory write must follow, and who may see what (pure functions).

Design idea: the same rule function judges an event twice: when it is
appended (a violation is refused with a one-line reason) and when the log is
replayed (a violating event, e.g. from a hand-made import file, is ignored).
So "a proposal never becomes active or pinned by itself" holds for every
chain the projection ever reads, not just for the ones this code wrote.

Limits are the spec's (pi-compact): bodies over 8,000 chars are refused, not
cut; source entry ids are deduplicated and capped (64 ids, 4,096 chars), and
the cut is reported; model and rule proposals stop showing in default
listings after 30 days (an explicit `provisional` filter still finds them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .model import AUTHORS, KINDS, SCOPE_ALIASES, SCOPES, STATUS_FILTERS, MemoryRecord

MAX_BODY_CHARS = 8000
MAX_SOURCE_IDS = 64
MAX_SOURCE_CHARS = 4096
PROVISIONAL_TTL_MS = 30 * 24 * 3600 * 1000
MAX_PRIORITY = 1_000_000  # priorities are small ordering hints, not arbitrary numbers


# --- values ------------------------------------------------------------------------


def body_problem(body: object) -> str | None:
    if not isinstance(body, str) or not body.strip():
        return "a memory needs a non-empty text"
    if not _is_valid_unicode(body):
        return "memory text contains invalid Unicode (a lone surrogate); nothing was written"
    if len(body) > MAX_BODY_CHARS:
        return f"memory text is {len(body):,} chars, over the {MAX_BODY_CHARS:,}-char limit (it is refused, not cut)"
    return None


def _is_valid_unicode(text: str) -> bool:
    """Text that has a UTF-8 form (a JS string can carry a lone surrogate, which has none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def normalize_scope(scope: str | None) -> str:
    value = (scope or "workspace").strip().lower()
    value = SCOPE_ALIASES.get(value, value)
    if value not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}: use workspace or session")
    return value


def normalize_kind(kind: str | None) -> str:
    value = (kind or "note").strip().lower()
    if value not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
    return value


def normalize_status(status: str | None) -> str | None:
    if status is None or status == "":
        return None
    value = status.strip().lower()
    if value not in STATUS_FILTERS:
        raise ValueError(f"unknown status {status!r}: use one of {', '.join(STATUS_FILTERS)}")
    return value


def normalize_priority(priority: object) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > MAX_PRIORITY:
        raise ValueError(f"priority must be a whole number between -{MAX_PRIORITY:,} and {MAX_PRIORITY:,}")
    return priority


@dataclass(frozen=True)
class SourceIds:
    ids: tuple[str, ...]
    truncated: bool
    dropped: int

    def to_dict(self) -> dict[str, Any]:
        return {"count": len(self.ids), "truncated": self.truncated, "dropped": self.dropped}


def cap_source_ids(ids: Iterable[object]) -> SourceIds:
    """Distinct ids in first-seen order, at most 64 of them and 4,096 chars in all."""
    distinct: list[str] = []
    for raw in ids:
        value = str(raw).strip()
        if value and _is_valid_unicode(value) and value not in distinct:
            distinct.append(value)
    kept: list[str] = []
    chars = 0
    for value in distinct:
        if len(kept) >= MAX_SOURCE_IDS or chars + len(value) > MAX_SOURCE_CHARS:
            break
        kept.append(value)
        chars += len(value)
    return SourceIds(tuple(kept), len(kept) < len(distinct), len(distinct) - len(kept))


# --- visibility and listing ----------------------------------------------------------


def visible_to(record: MemoryRecord, session_id: str | None) -> bool:
    """Workspace records are shared by the workspace's sessions; session records by their session only."""
    return record.scope != "session" or (session_id is not None and record.session_id == session_id)


def expired_proposal(record: MemoryRecord, now_ms: int) -> bool:
    """A model or rule proposal nobody confirmed within 30 days of its creation (edits do not extend it)."""
    return (
        record.status == "provisional" and not record.authoritative and now_ms - record.created_ts > PROVISIONAL_TTL_MS
    )


def matches_status(record: MemoryRecord, status: str | None, now_ms: int) -> bool:
    """`status=None` is the default listing: pinned, active, and recent provisional records."""
    if status is None:
        return record.status in ("active", "provisional") and not expired_proposal(record, now_ms)
    if status == "all":
        return True
    if status == "pinned":
        return record.status == "active" and record.pinned
    return record.status == status


def same_text(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def find_duplicate(
    records: Iterable[MemoryRecord], body: str, scope: str, session_id: str | None
) -> MemoryRecord | None:
    """An open record with the same text in the same scope (same session for session scope)."""
    for record in records:
        if record.status not in ("active", "provisional") or record.scope != scope:
            continue
        if scope == "session" and record.session_id != session_id:
            continue
        if same_text(record.body, body):
            return record
    return None


# --- events: who may do what ---------------------------------------------------------


def _actor(event: Mapping[str, Any]) -> tuple[str, str | None]:
    author = event.get("author")
    session = event.get("session_id")
    return (author if isinstance(author, str) else ""), (session if isinstance(session, str) else None)


def _create_problem(records: Mapping[str, MemoryRecord], event: Mapping[str, Any]) -> str | None:
    author, session = _actor(event)
    problem = body_problem(event.get("body"))
    if problem:
        return problem
    if event.get("kind") not in KINDS:
        return f"unknown kind {event.get('kind')!r}"
    scope = SCOPE_ALIASES.get(str(event.get("scope")), str(event.get("scope")))
    if scope not in SCOPES:
        return f"unknown scope {event.get('scope')!r}"
    if scope == "session" and not session:
        return "a session memory needs a session id"
    if event.get("pinned") and author != "user":
        return "only the user can pin a memory (a proposal is never pinned by itself)"
    if not isinstance(event.get("id"), str) or event["id"] in records:
        return "the new memory's id is missing or already used"
    return None


def _target_problem(target: MemoryRecord | None, session: str | None) -> str | None:
    if target is None or not visible_to(target, session):
        return "no such memory in this workspace (session memories are visible only to their session)"
    return None


def _supersede_problem(records: Mapping[str, MemoryRecord], event: Mapping[str, Any]) -> str | None:
    author, session = _actor(event)
    if author != "user":
        return "only the user can supersede a memory"
    target = records.get(str(event.get("supersedes")))
    problem = _target_problem(target, session)
    if problem or target is None:
        return problem
    if target.status not in ("active", "provisional"):
        return f"memory {target.id} is {target.status}; only an active or provisional memory can be superseded"
    return _create_problem(records, event)


def _change_problem(target: MemoryRecord, kind: str, author: str, event: Mapping[str, Any]) -> str | None:
    """The rules for pin, unpin, resolve, edit and confirm on a visible record."""
    if kind in ("pin", "unpin", "confirm") and author != "user":
        return f"only the user can {kind} a memory"
    if kind in ("pin", "unpin") and target.status != "active":
        return f"memory {target.id} is {target.status}; only an active memory can be pinned (confirm a proposal first)"
    if kind == "confirm" and target.status != "provisional":
        return f"memory {target.id} is {target.status}, not a provisional proposal"
    if kind in ("resolve", "edit") and author != "user":
        if target.author != author or target.status != "provisional":
            return (
                f"a {author} may only {kind} its own provisional proposals; "
                f"{target.id} is {target.status} and was written by the {target.author}"
            )
    if kind == "resolve" and target.status not in ("active", "provisional"):
        return f"memory {target.id} is already {target.status}"
    if kind == "edit":
        if target.status != "provisional":
            return f"memory {target.id} is {target.status}; only a provisional proposal can be edited (supersede it instead)"
        return body_problem(event.get("body"))
    return None


def event_problem(records: Mapping[str, MemoryRecord], event: Mapping[str, Any]) -> str | None:
    """Why this event may not apply to this state (None if it may)."""
    kind = event.get("type")
    author, session = _actor(event)
    if author not in AUTHORS:
        return f"unknown author {author!r}"
    if kind == "create":
        return _create_problem(records, event)
    if kind == "supersede":
        return _supersede_problem(records, event)
    target = records.get(str(event.get("id")))
    problem = _target_problem(target, session)
    if problem or target is None:
        return problem
    if kind in ("pin", "unpin", "resolve", "edit", "confirm"):
        return _change_problem(target, str(kind), author, event)
    return f"unknown event type {kind!r}"
