"""Following session files as they grow: read only what was appended, notice rewrites.

Design idea: each followed file has a remembered byte offset, the end of its
last complete line (a partial last line is left for later, when its newline
arrives). On a change we read from that offset to the end and feed the new
lines to the file's reader, which still holds what earlier lines taught it
(the pi header, Claude tool names, Codex call ids). A file counts as the same
file only while its inode, its first line and its size (never below the
offset) agree with what we remembered; otherwise it was rewritten (a pi v1 ->
v3 migration), replaced or truncated, and is re-read whole. Re-reading is
always safe: content hashes make every write idempotent, so it costs time,
never duplicates.

A streamed Claude message can still grow while its last line is the newest
line of the file, so such a tail is held back until the file has been quiet
for `SETTLE_S` (or more lines follow). A file that disappears keeps all its
messages in the archive; its session is flagged `source_missing`.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..core.sources.pi import open_regular
from ..core.sources.readers import Reader, open_tail, reader_for
from ..storage.store import Store
from .importer import FileError, Importer, write_parsed

SETTLE_S = 0.5  # a possibly unfinished streamed message waits this long for its next block
HEAD_MAX = 1 << 20  # the first line identifies a file; a longer one is hashed up to here


@dataclass
class FileState:
    session_id: str | None
    offset: int
    line_no: int
    inode: int | None
    head: str | None
    size: int = 0
    mtime_ns: int = 0

    def imported_as_is(self, st: os.stat_result) -> bool:
        """`import` read this very file (same size and mtime) but kept no offset."""
        return self.inode is None and (self.size, self.mtime_ns) == (st.st_size, st.st_mtime_ns)


@dataclass
class SyncResult:
    path: Path
    added: int = 0
    duplicates: int = 0
    session_id: str | None = None
    reread: bool = False  # the file was rewritten or replaced and read again from the start
    held: int = 0  # lines of a possibly unfinished message left for later
    missing: bool = False
    errors: list[FileError] = field(default_factory=list)


def head_hash(path: Path) -> str | None:
    """Hash of the first line; None while the first line is not complete."""
    with open_regular(path) as fh:
        head = fh.readline(HEAD_MAX)
    if not head.endswith(b"\n") and len(head) < HEAD_MAX:
        return None
    return hashlib.sha1(head).hexdigest()


def complete_lines(data: bytes) -> list[bytes]:
    """The lines of `data` that end with a newline (without it); a partial last line is left out."""
    end = data.rfind(b"\n")
    return data[:end].split(b"\n") if end >= 0 else []


class Follower:
    """Keeps followed files' readers and offsets; every change goes through `sync`."""

    def __init__(self, store: Store, settle_s: float = SETTLE_S, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.importer = Importer(store)
        self.settle_s = settle_s
        self.clock = clock
        self.readers: dict[str, Reader] = {}
        self.waiting: dict[str, Path] = {}  # files with a held-back tail

    def sync(self, path: Path) -> SyncResult:
        key = str(path.resolve())
        try:
            st = path.stat()
            head = head_hash(path)
        except FileNotFoundError:
            return self.mark_missing(path)
        except OSError as exc:
            return SyncResult(path, errors=[FileError(str(path), 0, f"cannot read: {exc.strerror}")])
        if head is None:
            return SyncResult(path)  # not even the first line is complete yet
        self.waiting.pop(key, None)
        state = self.state(key)
        if state is not None and state.imported_as_is(st) and self._adopt(path, key, st, head, state):
            return SyncResult(path, session_id=state.session_id)
        same = state is not None and state.inode == st.st_ino and state.head == head and st.st_size >= state.offset
        if same and state is not None and st.st_size == state.offset:
            return SyncResult(path, session_id=state.session_id)
        if same and state is not None:
            reader = self.readers.get(key) or self._rebuild(path, state)
            start, line_no = state.offset, state.line_no
        else:
            reader, start, line_no = reader_for(path), 0, 0
        result = SyncResult(path, reread=state is not None and not same)
        try:
            self._read_from(path, key, st, head, reader, start, line_no, result)
        except OSError as exc:
            result.errors.append(FileError(str(path), 0, f"cannot read: {exc.strerror}"))
        return result

    def _read_from(
        self,
        path: Path,
        key: str,
        st: os.stat_result,
        head: str | None,
        reader: Reader,
        start: int,
        line_no: int,
        result: SyncResult,
    ) -> None:
        with open_regular(path) as fh:
            fh.seek(start)
            lines = complete_lines(fh.read(st.st_size - start))
        if self.clock() - st.st_mtime < self.settle_s:
            result.held = open_tail(reader, lines)
        use = lines[: len(lines) - result.held]
        parsed = reader.parse(use, start_line=line_no + 1)
        result.errors += [FileError(str(path), s.line_no, s.error) for s in parsed.skipped]
        session_id = parsed.header.session_id if parsed.header else None
        if parsed.header is not None and (parsed.entries or start == 0):
            result.added, result.duplicates = write_parsed(self.importer, parsed, path)
        consumed = sum(len(line) + 1 for line in use)
        agent = parsed.header.agent if parsed.header else None
        self._remember(key, session_id, st, start + consumed, line_no + len(use), head, agent)
        self.readers[key] = reader
        result.session_id = session_id
        if result.held:
            self.waiting[key] = path

    def _adopt(self, path: Path, key: str, st: os.stat_result, head: str, state: FileState) -> bool:
        """Take over a file `import` already read whole: count its lines instead of parsing them again."""
        line_no, last = 0, b"\n"
        with open_regular(path) as fh:
            while block := fh.read(1 << 20):
                line_no += block.count(b"\n")
                last = block[-1:]
        if last != b"\n":
            return False  # a partial last line: read it the ordinary way
        self._remember(key, state.session_id, st, st.st_size, line_no, head, None)
        return True

    def _rebuild(self, path: Path, state: FileState) -> Reader:
        """A reader that has seen the lines before the offset (after a restart), without writing them again."""
        reader = reader_for(path)
        with open_regular(path) as fh:
            reader.parse(complete_lines(fh.read(state.offset)))
        return reader

    def due(self) -> list[Path]:
        """Files whose held-back tail has now been quiet long enough."""
        now = self.clock()
        ready = []
        for path in list(self.waiting.values()):
            try:
                if now - path.stat().st_mtime >= self.settle_s:
                    ready.append(path)
            except OSError:
                ready.append(path)
        return ready

    def mark_missing(self, path: Path) -> SyncResult:
        """The file is gone: keep its messages, flag its session, forget the offset."""
        key = str(path.resolve())
        self.readers.pop(key, None)
        self.waiting.pop(key, None)
        state = self.state(key)
        if state is None:
            return SyncResult(path, missing=True)
        with self.store.write():
            self.store.forget_file_offsets(key)
            if state.session_id:
                self.store.execute("UPDATE session SET source_missing = 1 WHERE id = ?", (state.session_id,))
        return SyncResult(path, session_id=state.session_id, missing=True)

    # --- state ---------------------------------------------------------------------

    def state(self, key: str) -> FileState | None:
        row = self.store.file_state(key)
        return FileState(*row) if row else None

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
        with self.store.write():
            self.store.remember_file(
                key, session_id, (st.st_size, st.st_mtime_ns, offset, line_no, st.st_ino, head), agent
            )
            if session_id:
                self.store.execute("UPDATE session SET source_missing = 0 WHERE id = ?", (session_id,))
