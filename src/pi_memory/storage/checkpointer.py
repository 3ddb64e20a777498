"""Checkpoints beside a bulk write, on a thread and a connection of their own.

A checkpoint copies the WAL into the database file and syncs both: on an import's 80 MB WAL it
takes ~200 ms, of which ~170 ms wait for the disk. Run inside the writer's commit (SQLite's own
autocheckpoint), that wait is the writer's, and the import stands still. Run here, the writer goes
on while the disk syncs (the connection's calls leave the GIL while SQLite works), and a PASSIVE
checkpoint never takes the write lock, so no writer waits for it either.

The writer's WAL hook (called after each of its commits with the WAL's length) wakes the thread
each time the WAL has grown by `pages` frames since the last wake. The thread's pass copies the
frames there were when it began; the writer appended more meanwhile, so the WAL is not wholly
copied and would not start over: it would grow by `pages` at each wake. So once a pass is done,
the writer copies what is left itself before its next transaction (`finish`: the frames written
during the pass, 35-55 ms here, outside any transaction), and that transaction starts the WAL
over from its first frame.
"""

from __future__ import annotations

import threading
from pathlib import Path

import apsw


class WalCheckpointer:
    """Checkpoint `db_path` in the background every `pages` frames its writer's WAL grows."""

    def __init__(self, db_path: Path, pages: int) -> None:
        self.db_path = db_path
        self.pages = max(1, int(pages))
        self.passes = 0  # the thread's checkpoint passes (for tests and profiles)
        self._since = 0  # the WAL's length when the last pass was asked for
        # "idle"; "copying": the thread's pass runs; "finishing": done, the writer copies the rest
        self._state = "idle"
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="pi-memory checkpoints", daemon=True)

    def start(self, writer: apsw.Connection) -> None:
        """Take over `writer`'s checkpoints: its WAL hook replaces SQLite's autocheckpoint."""
        self._thread.start()
        writer.set_wal_hook(self._after_commit)

    def stop(self, writer: apsw.Connection) -> None:
        """Hand the checkpoints back: the hook is removed (the caller restores autocheckpoint)."""
        writer.set_wal_hook(None)
        self._stopping = True
        self._wake.set()
        self._thread.join()

    @property
    def finish_due(self) -> bool:
        return self._state == "finishing"

    def finish(self, writer: apsw.Connection) -> None:
        """The writer, outside a transaction: copy what the last pass left, so that its next
        transaction starts the WAL over."""
        try:
            writer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except apsw.Error:
            pass  # busy with another process's checkpoint, which copies the same frames
        self._state = "idle"

    def _after_commit(self, _conn: apsw.Connection, _db: str, frames: int) -> int:
        if frames < self._since:  # the WAL started over
            self._since = 0
        if self._state == "idle" and frames - self._since >= self.pages:
            self._since = frames
            self._state = "copying"
            self._wake.set()
        return apsw.SQLITE_OK

    def _run(self) -> None:
        conn = apsw.Connection(str(self.db_path))
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                self._checkpoint(conn)
                self._state = "finishing"
        finally:
            conn.close()

    def _checkpoint(self, conn: apsw.Connection) -> None:
        # the pragma, not `Connection.wal_checkpoint`: on a connection that has read nothing yet,
        # the latter finds no WAL open and does nothing (it answers -1, -1)
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.passes += 1
        except apsw.Error:  # busy: another process's checkpoint runs; the next wake tries again
            pass
