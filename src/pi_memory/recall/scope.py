"""The scope of a recall: the current branch (ids from pi), the whole session, or every session.

pi knows its branch, the archive does not: the caller passes the branch's entry
ids and they are turned into the messages they name. A forked session holds
copies of its parent's entries, which the archive stores once, under the
parent, so the branch is looked up in the session and its fork ancestors.
The branch scope is never widened to the session when the ids are missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.sources.pi import active_branch, read_session_file
from ..errors import BadInput
from ..search.messages import Filters
from ..storage.store import Store
from .model import LINEAGE_MAX, ArchiveView, RecallRequest, id_list


@dataclass
class Scope:
    name: str
    session_id: str | None
    sessions: tuple[str, ...]  # the session and the sessions it was forked from
    branch_ids: tuple[str, ...]  # branch: the entry ids on it (checked in SQL, never loaded as rows)

    def filters(self, roles: tuple[str, ...] = (), kinds: tuple[str, ...] = (), path: str | None = None) -> Filters:
        session = self.session_id if self.name == "session" else None
        sessions = self.sessions if self.name == "branch" else ()
        if len(sessions) == 1:  # one session (no fork): its index also gives the newest-first order
            session, sessions = sessions[0], ()
        return Filters(
            session_id=session, roles=roles, kinds=kinds, path=path, sessions=sessions, entry_ids=self.branch_ids
        )


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


def resolve_scope(archive: ArchiveView, req: RecallRequest) -> Scope:
    if req.scope == "all":
        sid = archive.resolve_session(req.session) if req.session else None
        return Scope("all", sid, (), ())
    if not req.session:
        raise BadInput(f"scope {req.scope} needs a session id")
    sid = archive.resolve_session(req.session)
    if req.scope == "session":
        return Scope("session", sid, (sid,), ())
    if not req.branch_ids:  # never widen to the whole session when the branch is unknown (spec)
        raise BadInput("scope branch needs the branch's entry ids (branch_ids); use scope session for every branch")
    return Scope("branch", sid, lineage(archive.store, sid), req.branch_ids)


def branch_ids_from(value: str) -> list[str]:
    """`--branch-ids`: a comma list, a file of ids, or a pi session file (its current branch, as pi would load it)."""
    path = Path(value).expanduser()
    if not path.is_file():
        return list(id_list(value, "branch_ids"))
    parsed = read_session_file(path)
    if parsed.header is not None:
        return [e.entry_id for e in active_branch(parsed.entries) if e.entry_id]
    return list(id_list(path.read_text(encoding="utf-8", errors="replace"), "branch_ids"))
