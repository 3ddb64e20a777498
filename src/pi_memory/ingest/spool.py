"""Live captures that found the write lock taken, kept beside the archive until it is free.

Design idea: SQLite's one write lock has no queue, and on a busy machine whoever holds it (an
import's transaction, another session's idle-moment indexing, a process waiting for a core while
it holds the lock) can keep it for tens of milliseconds. A live capture does not wait that out:
when the lock cannot be had at once (`capture.LIVE_WAIT_S`), the capture is appended to its process's
spool, `<archive>-spool/<pid>-<token>.jsonl` (one JSON line, one `write` to a file opened for
appending: as safe from a crash of the process as a commit at `synchronous=NORMAL`, which is what
a live write had), and the call returns. While a spool holds anything, that process's later
captures go behind it, so a session's messages keep their order; each capture then tries to write
the whole spool in one transaction, and the owner's idle moment (`catch_up`), any read and `close`
write it, waiting as long as it takes.

A spool's owner holds `flock` on it while it lives (per open file, so two archives open in one
process are two owners, and the kernel lets go when a process dies). A `*.jsonl` that nobody holds
is left by a process that died: the next process to open the archive writes it
(`capture.adopt_orphans`) and removes it. Writing a spool twice (a crash between the commit and the
truncation) adds nothing: every record is a live capture, found again by its content hash like any
message that arrives twice.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..core.jsonline import loads

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no spool, a capture waits for the lock as before
    fcntl = None  # type: ignore[assignment]

Record = dict[str, Any]


def spool_folder(db_path: Path) -> Path:
    return Path(f"{db_path}-spool")


def supported() -> bool:
    return fcntl is not None


def _encode(record: Record) -> bytes:
    # ASCII escapes: a lone surrogate a caller passed becomes an escape the reader turns into U+FFFD
    return (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def _decode(data: bytes) -> list[Record]:
    """The records of a spool's bytes; a line that does not parse (the end of a file a full disk cut)
    is skipped: nothing was acknowledged for it."""
    out = []
    for line in data.splitlines():
        try:
            record = loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def _read_all(fd: int) -> bytes:
    chunks, at = [], 0
    while chunk := os.pread(fd, 1 << 20, at):
        chunks.append(chunk)
        at += len(chunk)
    return b"".join(chunks)


class Spool:
    """One process's spool: append, read back, clear once written."""

    def __init__(self, db_path: Path) -> None:
        self.folder = spool_folder(db_path)
        self.path: Path | None = None
        self._fd: int | None = None
        self._end = 0  # bytes in the file
        self._kept: list[Record] = []  # its records, as appended
        self.since: float | None = None  # when its oldest record came (`time.monotonic`)

    def __len__(self) -> int:
        return len(self._kept)

    def _open(self) -> int:
        if self._fd is not None:
            return self._fd
        self.folder.mkdir(mode=0o700, exist_ok=True)
        token = f"{os.getpid()}-{secrets.token_hex(4)}"
        making = self.folder / f".{token}.tmp"
        fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held before the name an adopter looks for exists
        self.path = self.folder / f"{token}.jsonl"
        os.rename(making, self.path)
        self._fd = fd
        return fd

    def append(self, record: Record) -> None:
        """Keep one record; an `OSError` (a full disk) leaves the file as it was."""
        line = _encode(record)
        fd = self._open()
        try:
            if os.write(fd, line) != len(line):
                raise OSError("short write to the spool")
        except OSError:
            os.ftruncate(fd, self._end)  # no half line left behind
            raise
        self._end += len(line)
        self._kept.append(record)
        if self.since is None:
            self.since = time.monotonic()

    def records(self) -> list[Record]:
        return list(self._kept)

    def clear(self) -> None:
        """Everything in it was written to the archive."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        self._end = 0
        self._kept = []
        self.since = None

    def close(self) -> None:
        """Let go: an empty spool is removed; one that still holds records is left for `adopt_orphans`."""
        if self._fd is None:
            return
        if not self._kept and self.path is not None:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None


def _remover(path: Path) -> Callable[[], None]:
    return lambda: path.unlink(missing_ok=True)


def orphans(db_path: Path) -> Iterator[tuple[Path, list[Record], Callable[[], None]]]:
    """The spools nobody holds: (path, its records, a callable that removes it once they are written).
    Each is held while the caller handles it; one another process adopts at the same moment is skipped."""
    folder = spool_folder(db_path)
    if fcntl is None or not folder.is_dir():
        return
    for path in sorted(folder.glob("*.jsonl")):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue  # removed meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its owner is alive, or another process adopts it
            if not path.exists():
                continue  # adopted and removed between the listing and the lock
            yield path, _decode(_read_all(fd)), _remover(path)
        finally:
            os.close(fd)
