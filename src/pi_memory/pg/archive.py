"""`PgArchive`: the `Archive` API over a PostgreSQL team archive.

Design idea: a front end cannot tell the backends apart. `Archive.open(url)`
returns a `PgArchive`, a subclass whose core methods (import, search, read,
stats, forget) talk to PostgreSQL; the parsing, planning, ranking and
formatting code is the SQLite archive's own. Methods that exist only for the
SQLite file (and those other features add to `Archive` before they learn
PostgreSQL) meet `store`, which answers every attribute with one clear error
instead of running SQLite SQL against PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from ..api import (
    MIN_PREFIX,
    Archive,
    parse_since,
)
from ..capture import ImportSlice, LiveCapture, import_slice
from ..errors import ArchiveError, BadInput, NotFound
from ..forget import ForgetPlan
from ..ingest import Importer, ImportReport, SessionWrite
from ..search import Hit
from ..sources.pi import default_sessions_dir
from ..store import Store
from ..tail import Follower
from .push import PushReport, push
from .search import PgSearcher, TeamFilters
from .store import PgStore

if TYPE_CHECKING:
    from ..memory.service import Memories


class _SqliteOnly:
    """Stands in for the SQLite `Store`: any use says the feature is not on PostgreSQL yet."""

    def __getattr__(self, name: str) -> NoReturn:
        raise ArchiveError(
            f"this feature works on a local SQLite archive only, not on a PostgreSQL archive (store.{name})"
        )


class _PgStandIn(_SqliteOnly):
    """What front ends ask of `archive.store` that has a meaning on PostgreSQL too."""

    def __init__(self, pg: PgStore) -> None:
        self._pg = pg

    # PostgreSQL checkpoints on its own schedule: a live writer has nothing to defer or run when idle
    def defer_checkpoints(self) -> None:
        pass

    def checkpoint(self) -> None:
        pass

    # runs are a local-archive feature: nothing is put off on a team archive
    deferred_hooks = None

    def defer_hooks(self) -> None:
        pass

    @property
    def user_version(self) -> int:
        return self._pg.schema_version()


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
        self.store = cast(Store, _PgStandIn(pg))
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
        if include_forgotten or agent:
            raise BadInput("--include-forgotten and --agent work on a local archive; push one to the team archive")
        targets = [Path(p).expanduser() for p in paths] if paths else [default_sessions_dir()]
        with self.pg.errors():
            return PgImporter(self.pg).import_paths(targets, force=force, progress=progress)

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
    ) -> list[Hit]:
        """Same as `Archive.search`, plus who wrote it: `mine`, a `team` (group role) or `authors`.

        Runs (scope, kinds, path) and agents are local-archive features: asking for them here is
        a clear error, not a silently wider search.
        """
        if scope != "content" or tuple(kinds) or path or agent:
            raise BadInput("--scope/--kind/--path/--agent work on a local archive, not on a team archive")
        since_ms = since if isinstance(since, int) else parse_since(since)
        with self.pg.errors():
            session_id = self.resolve_session(session) if session else None
            filters = TeamFilters(
                project=project or None,
                since_ms=since_ms,
                session_id=session_id,
                roles=tuple(roles),
                mine=mine,
                team=team or None,
                authors=tuple(authors),
            )
            return self.searcher.search(str(query), limit=limit, filters=filters)

    # --- read ------------------------------------------------------------------------

    def resolve_session(self, prefix: str) -> str:
        prefix = prefix.strip()
        with self.pg.errors():
            if self.pg.scalar("SELECT 1 FROM session WHERE id=%s", (prefix,)):
                return prefix
            if len(prefix) < MIN_PREFIX:
                raise BadInput(f"session id {prefix!r} is too short: give at least {MIN_PREFIX} characters")
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            ids = [r[0] for r in self.pg.rows("SELECT id FROM session WHERE id LIKE %s LIMIT 2", (escaped + "%",))]
        if not ids:
            raise NotFound(f"no session matches {prefix!r}")
        if len(ids) > 1:
            raise BadInput(f"session id {prefix!r} is ambiguous: give more characters")
        return str(ids[0])

    # the reads of `Archive` (session_info, read, stats) run on the PostgreSQL store
    def _reader(self) -> Any:
        return self.pg

    @contextmanager
    def _reading(self) -> Iterator[None]:
        with self.pg.errors(), self.pg.read():
            yield

    # --- team ------------------------------------------------------------------------

    # A team archive forgets whole sessions (for everyone); a local archive also forgets runs and messages.
    def plan_forget(self, target: str) -> ForgetPlan:
        """The session `target` names (id or prefix) and its messages, counted before anything is deleted."""
        with self.pg.errors():
            sid = self.resolve_session(target)
            ids = [int(r[0]) for r in self.pg.rows("SELECT id FROM msg WHERE session_id=%s ORDER BY id", (sid,))]
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
