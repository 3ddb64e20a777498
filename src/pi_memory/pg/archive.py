"""`PgArchive`: the `Archive` API over a PostgreSQL team archive.

Design idea: a front end cannot tell the backends apart. `Archive.open(url)`
returns a `PgArchive` whose `store` is a `PgStore`: it answers the same store
calls as the SQLite `Store`, with the library's shared SQL (written once, with
`?` placeholders, see `PgStore.rows`), so runs, run search, addressed reads,
compaction windows, recall, sessions and the memory log are the SQLite
archive's own code. What differs is overridden here: import and live writes go
through `PgStore.write_sessions`, candidates come from the GIN index
(`PgSearcher`), search can be limited by who wrote a message, and forgetting
removes whole sessions for everyone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..api import Archive
from ..capture import ImportSlice, LiveCapture, import_slice
from ..errors import ArchiveError, BadInput
from ..forget import ForgetPlan
from ..ingest import Importer, ImportReport, SessionWrite
from ..runsearch import RunHit
from ..search import Hit
from ..sources.readers import AGENTS
from ..store import Store
from ..tail import Follower
from .push import PushReport, push
from .search import PgSearcher, TeamFilters
from .store import PgStore

if TYPE_CHECKING:
    from ..memory.service import Memories


class PgForgetPlan(ForgetPlan):
    """A team archive forgets whole sessions, for everyone, and keeps no tombstone."""

    def after_note(self) -> str:
        return "removed for everyone on the team archive (a later import or push of its file would add it again)"


class PgImporter(Importer):
    """The SQLite importer's reading and planning, writing through `PgStore.write_sessions`."""

    def __init__(self, store: PgStore) -> None:
        # plan_session and _read_file call existing_hashes, copied_from_elsewhere and source_file_state,
        # which PgStore answers with the same meaning
        super().__init__(cast(Store, store))
        self.pg = store

    # a team archive forgets whole sessions for everyone and keeps no tombstones (yet)
    def _forgotten(self, session_id: str) -> set[str]:
        return set()

    def _forgotten_anywhere(self, hash_: str) -> bool:
        return False

    def write_units(self, units: list[SessionWrite]) -> tuple[int, int]:
        return self.pg.write_sessions(units)


class PgArchive(Archive):
    """A session archive in a PostgreSQL database shared by a team."""

    def __init__(self, pg: PgStore) -> None:  # noqa: D107 - deliberately not calling Archive.__init__
        self.pg = pg
        self.store = cast(Store, pg)  # the same store calls as the SQLite Store
        self.searcher = PgSearcher(pg)

    @classmethod
    def connect(cls, url: str) -> PgArchive:
        return cls(PgStore.connect(url))

    def close(self) -> None:
        self.pg.close()

    @property
    def path(self) -> Path:
        raise ArchiveError(f"{self.pg.path} is a PostgreSQL archive, not a file")

    @property
    def url(self) -> str:
        """The archive's URL with any password redacted."""
        return self.pg.path

    def check(self) -> list[str]:
        with self.pg.errors():
            return [] if self.pg.scalar("SELECT count(*) FROM counter") == 1 else ["counter row missing"]

    # --- import ----------------------------------------------------------------------

    def import_paths(
        self,
        paths: Iterable[Path | str] | None = None,
        *,
        force: bool = False,
        progress: Callable[[Path], None] | None = None,
        include_forgotten: bool = False,
        agent: str | None = None,
    ) -> ImportReport:
        if include_forgotten:
            raise BadInput(
                "--include-forgotten: a team archive keeps no tombstones; a re-import adds forgotten sessions back"
            )
        targets = [Path(p).expanduser() for p in paths] if paths else self.session_roots(agent)
        with self.pg.errors():
            return PgImporter(self.pg).import_paths(targets, force=force, progress=progress, agent=agent)

    # --- search ----------------------------------------------------------------------

    def search(
        self,
        query: str,
        limit: int = 10,
        project: str | None = None,
        since: str | int | None = None,
        session: str | None = None,
        roles: Iterable[str] = (),
        scope: str = "content",
        kinds: Iterable[str] = (),
        path: str | None = None,
        agent: str | None = None,
        *,
        mine: bool = False,
        team: str | None = None,
        authors: Iterable[str] = (),
    ) -> list[Hit] | list[RunHit]:
        """Same as `Archive.search`, plus who wrote the messages: `mine`, a `team` (group role) or `authors`."""
        authors = tuple(authors)
        by_writer = mine or bool(team) or bool(authors)
        if not by_writer:
            return super().search(query, limit, project, since, session, roles, scope, kinds, path, agent)
        if scope != "content":
            raise BadInput("--mine/--team/--author limit a content search (scope content), not run summaries")
        if agent and agent not in AGENTS:
            raise BadInput(f"unknown agent {agent!r}: use one of {', '.join(AGENTS)}")
        base = self.content_filters(project, since, session, roles, kinds, path, agent)
        filters = TeamFilters(**asdict(base), mine=mine, team=team or None, authors=authors)
        return self.searcher.search(str(query), limit=limit, filters=filters)

    # --- team ------------------------------------------------------------------------

    # A team archive forgets whole sessions (for everyone); a local archive also forgets runs and messages.
    def plan_forget(self, target: str) -> ForgetPlan:
        """The session `target` names (id or prefix) and its messages, counted before anything is deleted."""
        if self.is_address(target):
            raise BadInput(f"{target}: a team archive forgets whole sessions; give the session id")
        with self.pg.errors():
            sid = self.resolve_session(target)
            ids = [int(r[0]) for r in self.pg.rows("SELECT id FROM msg WHERE session_id=? ORDER BY id", (sid,))]
        return PgForgetPlan(target, "session", sid, ids)

    def forget(self, target: str) -> ForgetPlan:
        """Remove a session's rows for everyone; only its writer or a `pi_memory_admin` member may."""
        plan = self.plan_forget(target)
        with self.pg.errors():
            self.pg.forget_session(plan.session_id)
        return plan

    # --- live writers (pg/capture.py) ---------------------------------------------------

    @property
    def live(self) -> LiveCapture:
        if self._live is None:
            from .capture import PgLiveCapture

            self._live = PgLiveCapture(self.pg)
        return self._live

    def import_slice(self, paths: Iterable[Path | str] | None, offset: int = 0, limit: int = 20) -> ImportSlice:
        """One batch of a long import into the team archive (the bridge's `import` method)."""
        targets = [Path(p).expanduser() for p in paths] if paths else self.session_roots(None)
        with self.pg.errors():
            return import_slice(PgImporter(self.pg), targets, offset, limit)

    def follower(self) -> Follower:
        """`watch` into the team archive (read offsets kept in the watch process, see pg/capture.py)."""
        from .capture import PgFollower

        return PgFollower(self.pg)

    def whoami(self) -> dict[str, Any]:
        """The identity rows are written under: the database role, the display name and this host."""
        with self.pg.errors():
            role = self.pg.current_user
        return {"role": role, "author": self.pg.author or role, "host": self.pg.host}

    def push_from(self, local: Archive, progress: Callable[[PushReport], None] | None = None) -> PushReport:
        """Copy a local SQLite archive here; re-running adds nothing, an interrupted run resumes."""
        if isinstance(local, PgArchive):
            raise BadInput("push copies a local SQLite archive: --from must be a file, not a PostgreSQL URL")
        with self.pg.errors():
            return push(local.store, self.pg, progress)

    @property
    def memories(self) -> Memories:
        """The memory operations over this archive's memory log (`pg/memory.py`)."""
        from ..memory.service import Memories as SqliteMemories
        from .memory import PgMemoryLog

        memories = SqliteMemories(cast(Store, self.pg))
        memories.log = PgMemoryLog(self.pg)
        return memories
