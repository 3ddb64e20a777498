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
from typing import Any, cast

from ..core import ids
from ..core.sources.readers import AGENTS
from ..errors import ArchiveError, BadInput
from ..ingest.push import PushReport, push
from ..runs import forget as forget_plan
from ..runs.forget import ForgetPlan
from ..search.messages import Hit
from ..search.pg import PgRunSearcher, PgSearcher, TeamFilters, writer_filter
from ..search.runs import RunHit
from ..storage.pg.store import PgStore
from ..storage.store import Store
from .api import Archive


class TeamForgetPlan(ForgetPlan):
    """Forgetting on a team archive removes the rows for every member."""

    def after_note(self) -> str:
        return "removed for everyone on the team archive; " + super().after_note()


class PgArchive(Archive):
    """A session archive in a PostgreSQL database shared by a team."""

    is_team = True

    def __init__(self, pg: PgStore) -> None:  # noqa: D107 - deliberately not calling Archive.__init__
        self.pg = pg
        self.store = cast(Store, pg)  # the same store calls as the SQLite Store
        self.searcher = PgSearcher(pg)
        self.run_searcher = PgRunSearcher(pg)

    @classmethod
    def connect(cls, url: str) -> PgArchive:
        return cls(PgStore.connect(url))

    def close(self) -> None:
        self.close_semantic()  # the background job's worker, and its claim on the embedder lock
        self.pg.close()

    @property
    def path(self) -> Path:
        raise ArchiveError(f"{self.pg.path} is a PostgreSQL archive, not a file")

    @property
    def url(self) -> str:
        """The archive's URL with any password redacted."""
        return self.pg.path

    def check(self) -> list[str]:
        """What the server cannot check for us: the schema version and the counters the ranking reads."""
        with self.pg.errors():
            return self.pg.consistency_problems()

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
        until: str | int | None = None,
        include_echoes: bool = False,
        asking_session: str | None = None,
        mode: str | None = None,
    ) -> list[Hit] | list[RunHit]:
        """Same as `Archive.search`, plus who wrote it: `mine`, a `team` (group role) or `authors`.

        They limit messages (scope content) or runs (scope summary) by the role that wrote them.
        """
        query = ids.query(query)
        authors = tuple(authors)
        by_writer = mine or bool(team) or bool(authors)
        echo_options: dict[str, Any] = {"include_echoes": include_echoes, "asking_session": asking_session}
        if not by_writer:
            return super().search(
                query,
                limit,
                project,
                since,
                session,
                roles,
                scope,
                kinds,
                path,
                agent,
                until=until,
                mode=mode,
                **echo_options,
            )
        searcher = self.content_searcher(mode)  # hybrid where the server has pgvector and vectors exist
        if agent and agent not in AGENTS:
            raise BadInput(f"unknown agent {agent!r}: use one of {', '.join(AGENTS)}")
        writers = TeamFilters(mine=mine, team=team or None, authors=authors)
        if scope == "summary":
            return self._summary_hits(
                query,
                limit,
                project,
                since,
                session,
                path,
                kinds,
                agent,
                writer_filter(writers, "r"),
                until=until,
                mode=mode,
                **echo_options,
            )
        if scope != "content":
            raise BadInput(f"unknown scope {scope!r}: use content or summary")
        base = self.content_filters(project, since, session, roles, kinds, path, agent, until=until, **echo_options)
        filters = TeamFilters(**asdict(base), mine=mine, team=team or None, authors=authors)
        return searcher.search(str(query), limit=limit, filters=filters)

    # --- team ------------------------------------------------------------------------

    def writer_filters(
        self, mine: bool = False, team: str | None = None, authors: Iterable[str] = ()
    ) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if mine:
            options["mine"] = True
        if team:
            options["team"] = team
        if tuple(authors):
            options["authors"] = tuple(authors)
        return options

    def plan_forget(self, target: str) -> ForgetPlan:
        plan = super().plan_forget(target)
        return TeamForgetPlan(plan.target, plan.kind, plan.session_id, plan.msg_ids, plan.run_ids)

    def forget(self, target: str) -> ForgetPlan:
        """As on a local archive, for everyone; only the session's writer or a `pi_memory_admin` member may."""
        plan = self.plan_forget(target)
        self.pg.check_may_forget(plan.session_id)
        return forget_plan.execute(self.store, plan)

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
