"""`Archive`: the facade every front end uses (CLI, bridge, MCP, watch, benchmarks).

Design idea: the library is the product. A front end opens an `Archive`, calls
one method, and renders what comes back; it holds no SQL and no rules of its
own. Methods return plain dataclasses with `to_dict()` for JSON front ends.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import apsw

from ..core import ids, scoring
from ..core.format import SHORT_ID, short_id
from ..core.sources.readers import AGENTS, existing_roots, session_roots
from ..core.text import clip, other_script_chars
from ..errors import ArchiveError, BadInput, CorruptDatabase, NotFound
from ..ingest import retention
from ..ingest.capture import adopt_orphans
from ..ingest.importer import Importer, ImportReport
from ..ingest.retention import Advice
from ..ingest.tail import Follower
from ..runs.catalog import SessionListing, list_sessions
from ..runs.detail import MessageDetail, RunWindow, is_address, parse_address, read_message, read_run
from ..runs.forget import ForgetPlan, plan_target
from ..runs.table import RunInfo, address_of, get_run, list_runs, parse_run_id
from ..search.messages import Filters, Hit, Searcher, SessionHit, current_run_ids, rank_sessions
from ..search.runs import RunFilters, RunHit, RunSearcher, check_kinds
from ..storage.pg import pg_url
from ..storage.presence import OpeningLock
from ..storage.store import Store, decode_text, default_db_path, file_id
from .memory import REVIEW_MIN_COUNT, MemoryMethods
from .model import MessageView, SessionInfo, Stats, Window, json_meta, parse_since
from .overview import OVERVIEW_DAYS, Overview
from .provenance import ProvenanceMethods
from .semantic import SemanticMethods
from .session import SessionMethods
from .timeline import Timeline
from .usage import UsageMethods

__all__ = ["REVIEW_MIN_COUNT", "Archive", "Stats", "Window", "move_aside"]

READ_BEFORE, READ_AFTER = 4, 6
READ_MAX_SIDE = 50
MIN_PREFIX = 8


_team_opener: Callable[[str], Archive] | None = None


def open_team_with(opener: Callable[[str], Archive]) -> None:
    """How `Archive.open` opens a postgresql:// URL (the team archive subclasses `Archive`, so it
    cannot be imported from here without a cycle; `pi_memory.archive` passes it in)."""
    global _team_opener
    _team_opener = opener


def _adopting_spools(store: Store) -> Store:
    """A store whose archive's orphaned live spools (a bridge killed while the lock was taken) are
    written (`ingest/spool.py`). Never fatal: what cannot be written now waits for the next opener."""
    try:
        adopt_orphans(store)
    except (apsw.Error, OSError) as exc:
        print(f"pi-memory: live captures left by a stopped process wait for the next start: {exc}", file=sys.stderr)
    return store


class Archive(MemoryMethods, SessionMethods, UsageMethods, ProvenanceMethods, SemanticMethods):
    """A session archive in one SQLite file."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.searcher = Searcher(store)
        self.run_searcher = RunSearcher(store)

    # --- lifecycle -------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str | None = None, *, recover: bool = True) -> Archive:
        """Open (creating if needed). A damaged file is moved aside and a fresh one made.

        A `postgresql://` URL (argument or `PI_MEMORY_DB`) opens the team archive instead
        (`team.PgArchive`, a subclass: the package wires it in with `open_team_with`).
        """
        url = pg_url(path)
        if url is not None:
            if _team_opener is None:
                raise ArchiveError("this build has no team archive (PostgreSQL) support")
            return _team_opener(url)
        db_path = Path(path).expanduser() if path else default_db_path()
        try:
            store = Store.open(db_path)
        except CorruptDatabase as exc:
            if not recover:
                raise
            moved = recover_from(db_path, exc)
            archive = cls(_adopting_spools(Store.open(db_path)))
            archive.recovered_from = moved
            archive.recovery_reason = exc.detail
            return archive
        return cls(_adopting_spools(store))

    recovered_from: Path | None = None
    recovery_reason: str | None = None
    is_team = False  # a shared archive on PostgreSQL (`PgArchive`), not a file

    def close(self) -> None:
        self.close_semantic()
        if self._live is not None:
            self._live.close()  # what its captures spooled is written first
        self.store.close()

    def preload_search(self) -> None:
        """Load what a first search needs but a command that never searches skips (NumPy, ~45 ms; the
        table of each character's other-script spellings, ~25 ms): for a long-lived front end, at its
        start rather than inside its first search."""
        scoring.preload()
        other_script_chars("一")

    def __enter__(self) -> Archive:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
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
        include_forgotten: bool = False,
        agent: str | None = None,
        on_progress: Callable[[Path, int], None] | None = None,
    ) -> ImportReport:
        """Import files or folders; with None, every agent's session folder that exists (an empty
        list imports nothing: a folder with no session file never means "the default folders").

        `agent` limits the default folders to one agent, and forces that parser on given paths.
        `progress(path)` and `on_progress(path, messages read so far)` are called as each file is done.
        """
        targets = [Path(p).expanduser() for p in paths] if paths is not None else self.session_roots(agent)
        importer = Importer(self.store, include_forgotten=include_forgotten)
        if on_progress is not None:
            report_file, plain = on_progress, progress

            def both(path: Path) -> None:
                if plain is not None:
                    plain(path)
                report_file(path, importer.messages_read)

            progress = both
        # bringing forgotten messages back means reading files that have not changed since
        return importer.import_paths(targets, force=force or include_forgotten, progress=progress, agent=agent)

    # --- search ----------------------------------------------------------------------

    def writer_filters(
        self, mine: bool = False, team: str | None = None, authors: Iterable[str] = ()
    ) -> dict[str, Any]:
        """The who-wrote-it search options (`mine`, `team`, `authors`) as keyword arguments of `search`.

        Only a team archive knows who wrote what: here any of them is a clear error.
        """
        if mine or team or tuple(authors):
            raise BadInput("--mine, --team and --author filter a team archive: use --db postgresql://...")
        return {}

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
        until: str | int | None = None,
        include_echoes: bool = False,
        asking_session: str | None = None,
        mode: str | None = None,
    ) -> list[Hit] | list[RunHit]:
        """`scope="content"`: messages; `scope="summary"`: one hit per run, from run summaries only.

        `mode` (content): `lexical`, `hybrid` (lexical and vector candidates fused) or `semantic`
        (vectors alone); None: hybrid when the archive has vectors and the `semantic` extra is
        installed, else lexical (`archive.semantic`); the summary track likewise, with the run
        summaries' vectors.

        `until` (exclusive) bounds the period from above as `since` does from below. What the archive's
        own tools put into sessions (`core.echo`: calls to them, their results, runs that only asked
        the archive) is left out unless `include_echoes`. `asking_session`: the session a model asks
        from; its run under way (the prompt, the model's calls and their results) is never a hit.
        """
        query = ids.query(query)
        if agent and agent not in AGENTS:
            raise BadInput(f"unknown agent {agent!r}: use one of {', '.join(AGENTS)}")
        if scope == "summary":
            return self.search_runs(
                query,
                limit=limit,
                project=project,
                since=since,
                session=session,
                path=path,
                kinds=kinds,
                agent=agent,
                until=until,
                include_echoes=include_echoes,
                asking_session=asking_session,
                mode=mode,
            )
        if scope != "content":
            raise BadInput(f"unknown scope {scope!r}: use content or summary")
        searcher = self.content_searcher(mode)
        filters = self.content_filters(
            project,
            since,
            session,
            roles,
            kinds,
            path,
            agent,
            until=until,
            include_echoes=include_echoes,
            asking_session=asking_session,
        )
        return searcher.search(str(query), limit=limit, filters=filters)

    def content_filters(
        self,
        project: str | None = None,
        since: str | int | None = None,
        session: str | None = None,
        roles: Iterable[str] = (),
        kinds: Iterable[str] = (),
        path: str | None = None,
        agent: str | None = None,
        *,
        until: str | int | None = None,
        include_echoes: bool = False,
        asking_session: str | None = None,
    ) -> Filters:
        """The filters of a content search, checked and resolved (a session prefix to its id)."""
        since_ms = since if isinstance(since, int) else parse_since(since)
        return Filters(
            until_ms=until if isinstance(until, int) else parse_since(until),
            project=project or None,
            since_ms=since_ms,
            session_id=self.resolve_session(session) if session else None,
            roles=tuple(roles),
            kinds=check_kinds(tuple(kinds)),
            path=path or None,
            agent=agent or None,
            include_echoes=include_echoes,
            current_session=self._asking(asking_session),
        )

    def _asking(self, session: str | None) -> str | None:
        """The session a question is asked from, if the archive holds it (a new session may not be in
        yet: then nothing of it can be a hit anyway)."""
        if not session:
            return None
        try:
            return self.resolve_session(session)
        except (NotFound, BadInput):
            return None

    # --- read ------------------------------------------------------------------------

    def resolve_session(self, ref: str) -> str:
        """A full session id, its last 8 characters (the short id every listing shows) or a prefix of 8+.

        An ambiguous reference names the sessions it matches, so the person can pick one.
        """
        ref = ids.reference(ref, "session id")
        if self.store.scalar("SELECT 1 FROM session WHERE id=?", (ref,)):
            return ref
        if len(ref) < MIN_PREFIX:
            raise BadInput(
                f"session id {ref!r} is too short: give its last {SHORT_ID} characters (as listed) "
                f"or at least {MIN_PREFIX} of its start"
            )
        escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self.store.rows(
            """SELECT id, project, first_user FROM session
               WHERE id LIKE ? ESCAPE '\\' OR id LIKE ? ESCAPE '\\' ORDER BY last_at DESC LIMIT 6""",
            (escaped + "%", "%" + escaped),
        )
        if not rows:
            raise NotFound(f"no session matches {ref!r}: `pi-memory sessions` lists them")
        if len(rows) > 1:
            shown = "; ".join(
                f"{short_id(r[0])} {r[1] or '?'} {clip(str(r[2] or '').replace(chr(10), ' '), 30, '…')[0]}".rstrip()
                for r in rows[:5]
            )
            more = " …" if len(rows) > 5 else ""
            raise BadInput(f"session id {ref!r} is ambiguous, pick one of: {shown}{more}")
        return str(rows[0][0])

    def addresses(self, msg_ids: Iterable[int]) -> dict[int, str]:
        """The `rN/mK` address of each message that belongs to a run (`read` opens it)."""
        found = {}
        for msg_id in msg_ids:
            address = address_of(self.store, int(msg_id))
            if address is not None:
                found[int(msg_id)] = address
        return found

    def session_info(self, session_id: str) -> SessionInfo:
        row = self.store.session_row(session_id)
        if row is None:
            raise NotFound(f"no session {session_id!r}")
        return SessionInfo(*row)

    def read(
        self,
        session: str,
        around: int | None = None,
        before: int = READ_BEFORE,
        after: int = READ_AFTER,
        *,
        from_start: bool = False,
    ) -> Window:
        """Messages of a session around one message (default: its last one, `from_start`: its first), in order."""
        before = max(0, min(int(before), READ_MAX_SIDE))
        after = max(0, min(int(after), READ_MAX_SIDE))
        with self.store.read():
            sid = self.resolve_session(session)
            info = self.session_info(sid)
            pivot = self._pivot(sid, around, from_start)
            if pivot is None:
                return Window(info, [], around, False, False)
            older, newer = self.store.message_window(sid, pivot[0], pivot[1], before + 1, after + 2)
        before_more, after_more = len(older) > before, len(newer) > after + 1
        rows = list(reversed(older[:before])) + newer[: after + 1]
        views = [MessageView(r[0], r[1], r[2], r[3], decode_text(r[4]), r[5], json_meta(r[6])) for r in rows]
        return Window(info, views, around, before_more, after_more)

    def _pivot(self, sid: str, around: int | None, first: bool = False) -> tuple[int, int] | None:
        if around is not None:
            around = ids.number(around, "message id")
        pivot = self.store.window_pivot(sid, around, first)
        if pivot is None and around is not None:
            raise NotFound(f"message {around} is not in session {sid}")
        return pivot

    # --- stats -----------------------------------------------------------------------

    def stats(self) -> Stats:
        with self.store.read():
            roles, sessions, projects, oldest, newest = self.store.stats_rows()
            indexed = self.store.counters().get("indexed_docs", 0)
            db_bytes = self.store.db_bytes()
        return Stats(
            messages=sum(roles.values()),
            indexed=indexed,
            sessions=sessions,
            projects=projects,
            db_bytes=db_bytes,
            oldest=oldest,
            newest=newest,
            roles=roles,
            path=str(self.store.path),
        )

    # --- runs: navigation summaries, addressed reads, forget ---------------------------

    def runs(
        self, project: str | None = None, since: str | None = None, session: str | None = None, limit: int = 20
    ) -> list[RunInfo]:
        """Recent runs, newest first, with their navigation summaries."""
        session_id = self.resolve_session(session) if session else None
        return list_runs(self.store, project or None, parse_since(since), session_id, limit)

    def run(self, run_id: str | int) -> RunInfo:
        return get_run(self.store, run_id if isinstance(run_id, int) else parse_run_id(run_id))

    def search_runs(
        self,
        query: str,
        limit: int = 10,
        project: str | None = None,
        since: str | int | None = None,
        session: str | None = None,
        path: str | None = None,
        kinds: Iterable[str] = (),
        agent: str | None = None,
        *,
        until: str | int | None = None,
        include_echoes: bool = False,
        asking_session: str | None = None,
        mode: str | None = None,
    ) -> list[RunHit]:
        """The summary track: runs whose summary matches, one hit per run (kinds: runs holding such a message).

        Runs that only asked the archive are left out unless `include_echoes`; so is the run under way
        in `asking_session`. `mode` as in `search`: hybrid (the default when run summaries have
        vectors) fuses the summaries' words and meaning."""
        return self._summary_hits(
            query,
            limit,
            project,
            since,
            session,
            path,
            kinds,
            agent,
            until=until,
            include_echoes=include_echoes,
            asking_session=asking_session,
            mode=mode,
        )

    def _summary_hits(
        self,
        query: str,
        limit: int,
        project: str | None,
        since: str | int | None,
        session: str | None,
        path: str | None,
        kinds: Iterable[str],
        agent: str | None,
        extra: tuple[str, list[Any]] = ("TRUE", []),
        *,
        until: str | int | None = None,
        include_echoes: bool = False,
        asking_session: str | None = None,
        mode: str | None = None,
    ) -> list[RunHit]:
        """`search_runs`, with one more condition over `run r` (a team archive's who-wrote-it filter)."""
        query = ids.query(query)
        searcher = self.summary_searcher(mode)
        since_ms = since if isinstance(since, int) else parse_since(since)
        until_ms = until if isinstance(until, int) else parse_since(until)
        if until_ms is not None:
            extra = (f"({extra[0]}) AND r.start_ts < ?", [*extra[1], until_ms])
        asking = self._asking(asking_session)
        if asking:
            with self.store.read():
                under_way = current_run_ids(self.store, asking)
            if under_way:
                runs_of = f"SELECT rm.run_id FROM run_msg rm WHERE {self.store.sql_in_list('rm.msg_id')}"
                extra = (f"({extra[0]}) AND NOT (r.id IN ({runs_of}))", [*extra[1], self.store.list_param(under_way)])
        session_id = self.resolve_session(session) if session else None
        kind_filter = check_kinds(tuple(kinds))
        filters = RunFilters(
            project or None, since_ms, session_id, path or None, kind_filter, extra, agent or None, include_echoes
        )
        return searcher.search(str(query), limit, filters)

    def read_address(
        self, address: str, offset: int = 0, raw: bool = False, thinking: bool = False
    ) -> RunWindow | MessageDetail:
        """`r12`: the run's messages (from message `offset`); `r12/m3`: one message in full, paged."""
        parsed = parse_address(address)
        if parsed.pos is None:
            return read_run(self.store, parsed.run_id, offset)
        return read_message(self.store, parsed, offset=offset, raw=raw, thinking=thinking)

    def run_addresses(self, msg_ids: Iterable[int]) -> dict[int, str]:
        """The `r<N>/m<K>` address of each message (for `read_address`); messages outside runs are left out."""
        ids = list(msg_ids)
        return self.store.run_addresses(ids) if ids else {}

    def overview(self, days: int = OVERVIEW_DAYS) -> Overview:
        """Totals, messages per day over the last `days`, per project and agent, and the last imports."""
        from .overview import overview, totals

        with self.store.read():
            return overview(self.store, totals(self.store), days)

    def timeline(self, project: str | None = None, agent: str | None = None, day: str | None = None) -> Timeline:
        """Messages per day by agent over all time (one project, one agent, or all), and a day's runs."""
        from .timeline import timeline

        if agent and agent not in AGENTS:
            raise BadInput(f"unknown agent {agent!r}: use one of {', '.join(AGENTS)}")
        with self.store.read():
            return timeline(self.store, project or None, agent or None, day or None)

    def day_runs(self, day: str, project: str | None = None, agent: str | None = None) -> list[RunInfo]:
        """The runs started on a UTC day (`YYYY-MM-DD`), oldest first (for one project, one agent)."""
        from .timeline import day_runs, parse_day

        start = parse_day(day)
        if start is None:
            raise BadInput("give the day as YYYY-MM-DD")
        with self.store.read():
            return day_runs(self.store, start, project or None, agent or None)

    def is_address(self, value: str) -> bool:
        return is_address(value)

    def rebuild_runs(self, session: str | None = None) -> int:
        """Re-segment and re-summarize every session (or one); returns the number of runs."""
        from ..runs.table import rebuild

        return rebuild(self.store, self.resolve_session(session) if session else None)

    def plan_forget(self, target: str) -> ForgetPlan:
        """What `forget(target)` would delete: a session (id or prefix), a run `rN` or a msg id."""
        return plan_target(self.store, str(target), self.resolve_session)

    def forget(self, target: str) -> ForgetPlan:
        """Delete for real (rows, verbatim copies, index entries, runs) and keep a tombstone."""
        from ..runs.forget import execute

        done = execute(self.store, self.plan_forget(target))
        self.drop_scan_index()  # its sign bits and ids of the forgotten units go too
        return done

    # --- agents (Claude Code, Codex, pi) ----------------------------------------------

    def session_roots(self, agent: str | None = None, existing: bool = True) -> list[Path]:
        """The session folders `import` reads by default: those that exist (`watch` waits for the others)."""
        if agent is not None and agent not in AGENTS:
            raise BadInput(f"unknown agent {agent!r}: use one of {', '.join(AGENTS)}")
        if not existing:
            return [p for _a, p in session_roots(agent)]
        roots = existing_roots(agent)
        if not roots:
            looked = ", ".join(str(p) for _a, p in session_roots(agent))
            raise NotFound(f"no agent session folders found (looked in {looked})")
        return roots

    def follower(self) -> Follower:
        """Incremental reader of growing session files (what `watch` drives)."""
        return Follower(self.store)

    def doctor(self) -> Advice:
        """Warnings about sessions an agent may delete before they are archived."""
        return retention.doctor(self.store)

    def sessions(self, agent: str | None = None, project: str | None = None, limit: int = 20) -> list[SessionListing]:
        """Archived sessions, most recently active first."""
        if agent is not None and agent not in AGENTS:
            raise BadInput(f"unknown agent {agent!r}: use one of {', '.join(AGENTS)}")
        return list_sessions(self.store, agent=agent, project=project, limit=limit)

    # --- session-level search (issue 3) ----------------------------------------------

    def search_sessions(
        self,
        query: str,
        limit: int = 10,
        project: str | None = None,
        since: str | int | None = None,
        *,
        include_echoes: bool = False,
        asking_session: str | None = None,
        mode: str | None = None,
    ) -> list[SessionHit]:
        """Sessions that talked about the query, best first, each with its first user message as headline.

        Echoes and the asking session's run under way are left out as in `search`; `mode` as there."""
        query = ids.query(query)
        since_ms = since if isinstance(since, int) else parse_since(since)
        filters = Filters(
            project=project or None,
            since_ms=since_ms,
            include_echoes=include_echoes,
            current_session=self._asking(asking_session),
        )
        return rank_sessions(self.content_searcher(mode), str(query), limit=limit, filters=filters)


def recover_from(db_path: Path, damage: CorruptDatabase) -> Path | None:
    """Move the damaged file aside, unless another process did first (the path then names another
    file, the fresh archive it made, which is left alone); returns where it went, or None."""
    with OpeningLock(db_path).held():
        if damage.identity is not None and file_id(db_path) != damage.identity:
            return None
        return move_aside(db_path) if db_path.exists() else None


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
