"""Live writers on the team archive: the pi extension's capture (bridge) and `watch`.

Design idea: both reuse the SQLite archive's logic whole and swap only the
writes. `PgLiveCapture` is `capture.LiveCapture` over a `PgStore` (which
answers the few store calls capture makes, with the same meaning) writing
through `PgStore.write_sessions`: one message per short transaction,
idempotent by the `(session_id, hash)` key, entry ids filled in by content
hash when the branch is backfilled.

`PgFollower` is `tail.Follower` with its per-file read state (offset, line
count, inode, first-line hash) kept in the watch process's memory instead of
in tables, because that state describes one machine's files and one reader's
progress, not the team's archive. A file that was read whole (its offset at its
end) is recorded in the shared `source_file` table by (host, path, size,
mtime), so a restarted watcher takes unchanged files over without parsing them;
a file that changed while no watcher ran is re-read whole, which content hashes
make harmless (it costs time, never duplicates).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from ..capture import BackfillReport, LiveCapture
from ..ingest import SessionWrite
from ..store import NewEntry, NewMessage, Store
from ..tail import FileState, Follower, SyncResult
from .archive import PgImporter
from .store import PgStore


class PgLiveCapture(LiveCapture):
    """Live capture into the team archive."""

    def __init__(self, pg: PgStore) -> None:
        super().__init__(cast(Store, pg))
        self.pg = pg

    def _write(
        self, session_id: str, messages: list[NewMessage], entries: list[NewEntry] | None = None
    ) -> tuple[int, int]:
        return self.pg.write_sessions([SessionWrite(session_id, messages, list(entries or []))])

    # driver errors (a reader role, a lost connection) become one clear line for the bridge to answer
    def ensure_session(
        self,
        session_id: str,
        cwd: str,
        name: str | None = None,
        started_at: int | str | None = None,
        agent: str = "pi",
        source_path: str | None = None,
    ) -> None:
        with self.pg.errors():
            super().ensure_session(session_id, cwd, name, started_at, agent, source_path)

    def capture_message(
        self, session_id: str, message: dict[str, Any], entry_id: str | None = None, parent_id: str | None = None
    ) -> int | None:
        with self.pg.errors():
            return super().capture_message(session_id, message, entry_id, parent_id)

    def capture_entry(self, session_id: str, entry: dict[str, Any]) -> int | None:
        with self.pg.errors():
            return super().capture_entry(session_id, entry)

    def backfill(self, session_id: str, entries: list[dict[str, Any]]) -> BackfillReport:
        with self.pg.errors():
            return super().backfill(session_id, entries)

    def set_session_name(self, session_id: str, name: str | None) -> None:
        with self.pg.errors():
            super().set_session_name(session_id, name)


class PgFollower(Follower):
    """`watch` into the team archive: offsets in memory, whole files recorded in `source_file`."""

    def __init__(self, pg: PgStore) -> None:
        super().__init__(cast(Store, pg))
        self.pg = pg
        self.importer = PgImporter(pg)
        self.files: dict[str, FileState] = {}

    def sync(self, path: Path) -> SyncResult:
        with self.pg.errors():
            return super().sync(path)

    def state(self, key: str) -> FileState | None:
        known = self.files.get(key)
        if known is not None:
            return known
        recorded = self.pg.source_file_state(key)
        if recorded is None:
            return None
        # read whole before (by import or an earlier watcher): `imported_as_is` adopts it if unchanged
        size, mtime_ns = recorded
        return FileState(None, 0, 0, None, None, size, mtime_ns)

    def _remember(
        self,
        key: str,
        session_id: str | None,
        st: os.stat_result,
        offset: int,
        line_no: int,
        head: str | None,
        agent: str | None,
    ) -> None:
        before = self.files.get(key)
        session_id = session_id or (before.session_id if before else None)
        self.files[key] = FileState(session_id, offset, line_no, st.st_ino, head, st.st_size, st.st_mtime_ns)
        if session_id and offset == st.st_size:  # nothing held back: a restart may skip this file as it is
            self.pg.record_source_file(key, session_id, st.st_size, st.st_mtime_ns)

    def mark_missing(self, path: Path) -> SyncResult:
        """The file is gone: its messages stay in the team archive; only this watcher's state goes."""
        key = str(path.resolve())
        self.readers.pop(key, None)
        self.waiting.pop(key, None)
        state = self.files.pop(key, None)
        return SyncResult(path, session_id=state.session_id if state else None, missing=True)
