"""Who is doing what to the archive: an import under way, an archive being created or recovered.

Design idea: an import turns FTS5's automerge off and records the setting it found
(`merging.py`), so that the next opening of the archive gives it back if the import was killed.
But "the next opening" may come while the import still runs (a `stats`, a search, a new pi
session's bridge): it gave the setting back and deleted the record under the import, whose end
then failed (`TypeError` in `merging.py`, the import's report lost). So an import says it is
alive, and the settings are given back only by whoever can show that no import is:

- an import holds a shared lock on byte 1 of the archive's side file (`<archive>-wait`, whose
  byte 0 is the waiting line's: `waiting.py`) from before it records anything until its end;
- whoever gives the settings back (an opening, an import at its end) takes the exclusive lock
  on that byte without waiting, and only if it gets it; a new import waits for that instant.

The locks are open-file-description locks (Linux's `F_OFD_SETLK`): the kernel drops them when
their holder dies, and two connections of one process exclude each other as two processes do.
Where they do not exist (other systems), the plain per-process record locks stand in; with no
locks at all (Windows), the settings are given back at every opening as before.

The same kind of lock, on byte 2, is held by whoever creates the archive file (until SQLite has
written its first page) or moves a damaged one aside (`OpeningLock`): an opener that finds an
empty file then knows whether it is being made (it waits for the lock, and finds it made) or
damaged (still empty once the lock is free), and a damaged file is moved aside once, by one
process, never the fresh archive another process made meanwhile.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .waiting import wait_file

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_IMPORTING = 1  # byte 0 of the side file is the waiting line's
_OPENING = 2
_OFD = getattr(fcntl, "F_OFD_SETLK", None) if fcntl is not None else None
_OFD_WAIT = getattr(fcntl, "F_OFD_SETLKW", None) if fcntl is not None else None


def _flock(kind: int, byte: int) -> bytes:
    """A `struct flock` for one byte (l_type, l_whence, l_start, l_len, l_pid = 0 for OFD)."""
    return struct.pack("@hhqqi4x", kind, os.SEEK_SET, byte, 1, 0)


class _ByteLock:
    """A lock on one byte of the archive's side file, held through a descriptor of its own."""

    byte = _IMPORTING

    def __init__(self, db_path: Path) -> None:
        self.path = wait_file(db_path)
        self._fd: int | None = None

    def _open(self) -> int | None:
        if fcntl is None:
            return None
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError:  # a read-only folder: nobody can say anything here
                return None
        return self._fd

    def _lock(self, kind: int, wait: bool) -> bool:
        fd = self._open()
        if fd is None:
            return True
        try:
            if _OFD is not None and _OFD_WAIT is not None:
                fcntl.fcntl(fd, _OFD_WAIT if wait else _OFD, _flock(kind, self.byte))
            else:  # pragma: no cover - systems without OFD locks
                flags = {fcntl.F_RDLCK: fcntl.LOCK_SH, fcntl.F_WRLCK: fcntl.LOCK_EX}.get(kind, fcntl.LOCK_UN)
                fcntl.lockf(fd, flags | (0 if wait else fcntl.LOCK_NB), 1, self.byte)
        except OSError:
            return False
        return True

    def _unlock(self) -> None:
        if self._fd is not None:
            self._lock(fcntl.F_UNLCK, wait=False)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class ImportPresence(_ByteLock):
    """One store's side of it: `importing` around an import, `none_importing` to give settings back."""

    @contextmanager
    def importing(self) -> Iterator[None]:
        """An import under way: from before it records its settings until it has given them back."""
        self._lock(fcntl.F_RDLCK if fcntl is not None else 0, wait=True)
        try:
            yield
        finally:
            self._unlock()

    @contextmanager
    def none_importing(self) -> Iterator[bool]:
        """Whether no import is under way (True also where nothing can be told), held as such
        until the block ends: no import starts meanwhile. An import's own store calls it after
        leaving `importing`."""
        alone = self._lock(fcntl.F_WRLCK if fcntl is not None else 0, wait=False)
        try:
            yield alone
        finally:
            if alone:
                self._unlock()


class OpeningLock(_ByteLock):
    """Held while the archive file is created (until its first page is written) or a damaged one
    is moved aside; `held()` waits for whoever holds it."""

    byte = _OPENING

    @contextmanager
    def held(self) -> Iterator[None]:
        self._lock(fcntl.F_WRLCK if fcntl is not None else 0, wait=True)
        try:
            yield
        finally:
            self._unlock()
            self.close()
