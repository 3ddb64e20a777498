"""`Archive`: the facade every front end uses (CLI, bridge, MCP, watch, benchmarks).

Design idea: the library is the product. A front end opens an `Archive`, calls
one method, and renders what comes back; it holds no SQL and no rules of its
own. Methods return plain dataclasses with `to_dict()` for JSON front ends.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

import apsw

from .errors import ArchiveError, BadInput, CorruptDatabase, NotFound
from .ingest import Importer, ImportReport
from .search import Filters, Hit, Searcher, SessionHit, rank_sessions
from .sources.pi import default_sessions_dir
from .store import Store, default_db_path

READ_BEFORE, READ_AFTER = 4, 6
READ_MAX_SIDE = 50
MIN_PREFIX = 8


@dataclass
class SessionInfo:
    id: str
    agent: str
    cwd: str
    project: str
    started_at: int
    last_at: int
    name: str | None
    first_user: str | None
    messages: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class MessageView:
    msg_id: int
    seq: int
    ts: int
    role: str
    text: str
    entry_id: str | None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Window:
    session: SessionInfo
    messages: list[MessageView]
    around: int | None
    before_more: bool
    after_more: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session.to_dict(),
            "around": self.around,
            "before_more": self.before_more,
            "after_more": self.after_more,
            "messages": [m.to_dict() for m in self.messages],
        }


@dataclass
class Stats:
    messages: int
    indexed: int
    sessions: int
    projects: int
    db_bytes: int
    oldest: int | None
    newest: int | None
    roles: dict[str, int]
    path: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def parse_since(value: str | None) -> int | None:
    """`YYYY-MM-DD` (or a full ISO time) -> unix ms, UTC; a clear error otherwise."""
    if value is None or value == "":
        return None
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"bad date {value!r}: use YYYY-MM-DD") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def _json_meta(raw: str | None) -> dict[str, Any]:
    import json

    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class Archive:
    """A session archive in one SQLite file."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.searcher = Searcher(store)

    # --- lifecycle -------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str | None = None, *, recover: bool = True) -> Archive:
        """Open (creating if needed). A damaged file is moved aside and a fresh one made."""
        db_path = Path(path).expanduser() if path else default_db_path()
        try:
            return cls(Store.open(db_path))
        except CorruptDatabase as exc:
            if not recover:
                raise
            moved = move_aside(db_path)
            archive = cls(Store.open(db_path))
            archive.recovered_from = moved
            archive.recovery_reason = exc.detail
            return archive

    recovered_from: Path | None = None
    recovery_reason: str | None = None

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @property
    def path(self) -> Path:
        return self.store.path

    def check(self) -> list[str]:
        """Full `integrity_check`; an empty list means the file is sound."""
        return self.store.integrity_errors()

    # --- import ----------------------------------------------------------------------

    def import_paths(
        self,
        paths: Iterable[Path | str] | None = None,
        *,
        force: bool = False,
        progress: Callable[[Path], None] | None = None,
    ) -> ImportReport:
        targets = [Path(p).expanduser() for p in paths] if paths else [default_sessions_dir()]
        return Importer(self.store).import_paths(targets, force=force, progress=progress)

    # --- search ----------------------------------------------------------------------

    def search(
        self,
        query: str,
        limit: int = 10,
        project: str | None = None,
        since: str | int | None = None,
        session: str | None = None,
        roles: Iterable[str] = (),
    ) -> list[Hit]:
        since_ms = since if isinstance(since, int) else parse_since(since)
        session_id = self.resolve_session(session) if session else None
        filters = Filters(project=project or None, since_ms=since_ms, session_id=session_id, roles=tuple(roles))
        return self.searcher.search(str(query), limit=limit, filters=filters)

    # --- read ------------------------------------------------------------------------

    def resolve_session(self, prefix: str) -> str:
        prefix = prefix.strip()
        if self.store.scalar("SELECT 1 FROM session WHERE id=?", (prefix,)):
            return prefix
        if len(prefix) < MIN_PREFIX:
            raise BadInput(f"session id {prefix!r} is too short: give at least {MIN_PREFIX} characters")
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        ids = [r[0] for r in self.store.rows("SELECT id FROM session WHERE id LIKE ? ESCAPE '\\' LIMIT 2", (escaped + "%",))]
        if not ids:
            raise NotFound(f"no session matches {prefix!r}")
        if len(ids) > 1:
            raise BadInput(f"session id {prefix!r} is ambiguous: give more characters")
        return str(ids[0])

    def session_info(self, session_id: str) -> SessionInfo:
        rows = self.store.rows(
            """SELECT id, agent, cwd, project, started_at, last_at, name, first_user,
                      (SELECT count(*) FROM msg WHERE session_id = session.id)
               FROM session WHERE id=?""",
            (session_id,),
        )
        if not rows:
            raise NotFound(f"no session {session_id!r}")
        return SessionInfo(*rows[0])

    def read(
        self,
        session: str,
        around: int | None = None,
        before: int = READ_BEFORE,
        after: int = READ_AFTER,
    ) -> Window:
        """Messages of a session around one message (default: its last one), in order."""
        before = max(0, min(int(before), READ_MAX_SIDE))
        after = max(0, min(int(after), READ_MAX_SIDE))
        with self.store.read():
            sid = self.resolve_session(session)
            info = self.session_info(sid)
            pivot = self._pivot(sid, around)
            if pivot is None:
                return Window(info, [], around, False, False)
            ts, seq = pivot
            cols = "id, seq, ts, role, text, entry_id, meta"
            older = self.store.rows(
                f"""SELECT {cols} FROM msg WHERE session_id=? AND (ts < ? OR (ts = ? AND seq < ?))
                    ORDER BY ts DESC, seq DESC LIMIT ?""",
                (sid, ts, ts, seq, before + 1),
            )
            newer = self.store.rows(
                f"""SELECT {cols} FROM msg WHERE session_id=? AND (ts > ? OR (ts = ? AND seq >= ?))
                    ORDER BY ts, seq LIMIT ?""",
                (sid, ts, ts, seq, after + 2),
            )
        before_more, after_more = len(older) > before, len(newer) > after + 1
        rows = list(reversed(older[:before])) + newer[: after + 1]
        views = [MessageView(r[0], r[1], r[2], r[3], r[4], r[5], _json_meta(r[6])) for r in rows]
        return Window(info, views, around, before_more, after_more)

    def _pivot(self, sid: str, around: int | None) -> tuple[int, int] | None:
        if around is None:
            rows = self.store.rows("SELECT ts, seq FROM msg WHERE session_id=? ORDER BY ts DESC, seq DESC LIMIT 1", (sid,))
        else:
            rows = self.store.rows("SELECT ts, seq FROM msg WHERE session_id=? AND id=?", (sid, int(around)))
            if not rows:
                raise NotFound(f"message {around} is not in session {sid}")
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    # --- stats -----------------------------------------------------------------------

    def stats(self) -> Stats:
        with self.store.read():
            roles = {str(r): int(n) for r, n in self.store.rows("SELECT role, count(*) FROM msg GROUP BY role")}
            sessions, projects = self.store.rows("SELECT count(*), count(DISTINCT project) FROM session")[0]
            oldest, newest = self.store.rows("SELECT min(started_at), max(last_at) FROM session")[0]
            indexed = self.store.counters().get("indexed_docs", 0)
        return Stats(
            messages=sum(roles.values()),
            indexed=indexed,
            sessions=int(sessions),
            projects=int(projects),
            db_bytes=self.store.db_bytes(),
            oldest=oldest,
            newest=newest,
            roles=roles,
            path=str(self.store.path),
        )

    # --- session-level search (issue 3) ----------------------------------------------

    def search_sessions(
        self,
        query: str,
        limit: int = 10,
        project: str | None = None,
        since: str | int | None = None,
    ) -> list[SessionHit]:
        """Sessions that talked about the query, best first, each with its first user message as headline."""
        since_ms = since if isinstance(since, int) else parse_since(since)
        filters = Filters(project=project or None, since_ms=since_ms)
        return rank_sessions(self.searcher, str(query), limit=limit, filters=filters)


def move_aside(db_path: Path) -> Path:
    """Rename a damaged archive (and its WAL/SHM) to `<name>.corrupt`, never overwriting one."""
    target = db_path.with_name(db_path.name + ".corrupt")
    if target.exists():
        target = db_path.with_name(f"{db_path.name}.{int(time.time())}.corrupt")
    shutil.move(str(db_path), str(target))
    for suffix in ("-wal", "-shm"):
        side = Path(str(db_path) + suffix)
        if side.exists():
            shutil.move(str(side), str(target) + suffix)
    return target


__all__ = ["Archive", "ArchiveError", "Hit", "ImportReport", "Stats", "Window", "apsw"]
