"""Letting a waiting writer in: a live write beside a bulk import gets the next gap, not a later one.

Design idea: SQLite has no queue for its write lock. A connection that finds the archive locked
sleeps and looks again (`store.BUSY_POLL_S`), and an import's write transactions follow each other
with gaps far shorter than that sleep: a live pi session capturing a message beside a first import
missed gap after gap and waited 100-250 ms (several of the import's transactions) where one
transaction is 10-30 ms. So a waiting writer says it is waiting, in a file beside the archive
(`<archive>-wait`): it holds a shared lock on its first byte from its first busy look until its
`BEGIN` returns. A bulk writer (`Store.yielding_to_waiters`) tests that byte before each of its
transactions and, while someone holds it, leaves the lock free for them (up to `YIELD_MAX_S`).

The locks are POSIX record locks (`fcntl`): the kernel drops them when a process dies, so a
killed waiter never stalls an import. They are per process, so a process never waits for itself.
Where `fcntl` does not exist (Windows), nothing is announced and nothing waits.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

# How long a bulk writer leaves the lock to announced waiters before it takes its turn anyway
# (a waiter gets in within one busy look, ~1 ms; this bounds a waiter that is slow to start).
YIELD_MAX_S = 0.05
_LOOK_EVERY_S = 0.0005


def wait_file(db_path: Path) -> str:
    return f"{db_path}-wait"


class WaitingLine:
    """One connection's side of the line: announce while waiting, or let announced waiters in."""

    def __init__(self, db_path: Path) -> None:
        self.path = wait_file(db_path)
        self._fd: int | None = None
        self._announced = False
        self._beginning = False  # inside `BEGIN IMMEDIATE`: a busy wait there is a writer waiting

    @contextmanager
    def beginning(self) -> Iterator[None]:
        """Around `BEGIN IMMEDIATE`: a busy wait inside is announced, and withdrawn once it returns."""
        self._beginning = True
        try:
            yield
        finally:
            self._beginning = False
            self.withdraw()

    def busy(self) -> None:
        """The connection's busy handler started a wait (`store._busy_waiter`)."""
        if self._beginning:
            self.announce()

    def _open(self) -> int | None:
        if fcntl is None:
            return None
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError:  # a read-only folder: nobody can announce here, nothing to wait for
                return None
        return self._fd

    def announce(self) -> None:
        """This connection waits for the write lock: hold the shared lock until `withdraw`."""
        if self._announced:
            return
        fd = self._open()
        if fd is None:
            return
        try:
            # blocking: a bulk writer holds the exclusive lock only for the instant of its test
            fcntl.lockf(fd, fcntl.LOCK_SH, 1, 0)
        except OSError:
            return
        self._announced = True

    def withdraw(self) -> None:
        if self._announced and self._fd is not None:
            self._announced = False
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)

    def someone_waiting(self) -> bool:
        """Whether another process announced it waits (the exclusive lock cannot be had)."""
        fd = self._open()
        if fd is None:
            return False
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:
            return True
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
        return False

    def let_waiters_in(self) -> bool:
        """Before a bulk writer's transaction: while another writer announces it waits, leave
        the lock to it, up to `YIELD_MAX_S`; whether anyone waited."""
        deadline = time.monotonic() + YIELD_MAX_S
        waited = False
        while self.someone_waiting() and time.monotonic() < deadline:
            waited = True
            time.sleep(_LOOK_EVERY_S)
        return waited

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._announced = False
