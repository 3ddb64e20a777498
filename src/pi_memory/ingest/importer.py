"""Import session files into the archive: discover, parse, dedupe, write in short batches.

Design idea: parsing, rendering, tokenizing and compressing happen outside any
transaction (`prepare`; in a parse worker process while this one writes, for
many files); the write path cuts its transactions by the time they take
(`storage.writes.TXN_TARGET_S`, spec 000 §9 rule 4), so an import never holds the
lock long enough to stall a live pi session writing at the same time. Files
that have not changed since the last import (same size and mtime) are skipped
without being read. Bad lines are reported with their line numbers; everything
good in the same file is kept.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from ..core.sources.pi import ParsedSession, open_regular, project_of
from ..core.sources.readers import open_tail, reader_for
from ..provenance import record as edits
from ..runs import forget
from ..storage import codec
from ..storage.store import BULK_CHECKPOINT_PAGES, NewEntry, NewMessage, SessionRow, Store
from ..storage.writes import BATCH, SessionWrite
from .prepare import PreparedFile, parse_and_tokenize, prepare
from .workers import Worker, WorkerGone


@dataclass
class FileError:
    path: str
    line: int
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "error": self.error}


@dataclass
class ImportReport:
    files: int = 0
    unchanged: int = 0
    sessions: set[str] = field(default_factory=set)
    added: int = 0
    skipped: int = 0  # messages already in the archive
    forgotten: int = 0  # messages not re-imported because the user forgot them
    errors: list[FileError] = field(default_factory=list)

    def merge(self, other: ImportReport) -> None:
        self.files += other.files
        self.unchanged += other.unchanged
        self.sessions |= other.sessions
        self.added += other.added
        self.skipped += other.skipped
        self.forgotten += other.forgotten
        self.errors += other.errors

    @property
    def failed(self) -> list[str]:
        """The files that could not be read or had bad lines, in the order met (`import` exits 1)."""
        return list(dict.fromkeys(e.path for e in self.errors))

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "failed": self.failed,
            "unchanged": self.unchanged,
            "sessions": len(self.sessions),
            "added": self.added,
            "skipped": self.skipped,
            "forgotten": self.forgotten,
            "errors": [e.to_dict() for e in self.errors],
        }


@dataclass
class Discovery:
    """The session files under the paths given, and each path that could not be used, said why."""

    files: list[Path] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)


def find_files(paths: Iterable[Path]) -> Discovery:
    """Session files under the given files and folders, in a stable order: a folder's `*.jsonl`
    regular files, recursively, and every file named as it is. A path that does not exist, cannot
    be read or is no regular file (a FIFO would block the reader forever) is an error, and the
    others are found all the same."""
    found = Discovery()
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            missing = isinstance(exc, FileNotFoundError)
            reason = "no such file or folder" + (" (a broken link)" if path.is_symlink() else "") if missing else None
            found.errors.append(FileError(str(path), 0, reason or f"cannot read: {exc.strerror}"))
            continue
        if stat.S_ISDIR(mode):
            _walk(path, found)
        elif stat.S_ISREG(mode):
            found.files.append(path)
        else:
            found.errors.append(FileError(str(path), 0, NOT_REGULAR))
    return found


NOT_REGULAR = "cannot read: not a regular file (a FIFO, socket or device)"


def _walk(folder: Path, found: Discovery) -> None:
    """A folder's `*.jsonl` regular files, sorted (symlinked folders are not entered, as `rglob`)."""
    here: list[Path] = []

    def unreadable(exc: OSError) -> None:
        found.errors.append(FileError(str(exc.filename or folder), 0, f"cannot read folder: {exc.strerror}"))

    for top, _dirs, names in os.walk(folder, onerror=unreadable):
        for name in names:
            if not name.endswith(".jsonl"):
                continue
            path = Path(top) / name
            try:
                regular = stat.S_ISREG(path.stat().st_mode)
            except OSError:
                continue  # a broken link or a file gone since the folder was listed: nothing to read
            if regular:
                here.append(path)
            else:
                found.errors.append(FileError(str(path), 0, NOT_REGULAR))
    found.files += sorted(here)


def discover(paths: Iterable[Path]) -> list[Path]:
    """The session files of `find_files`, without the paths that could not be used."""
    return find_files(paths).files


def _session_row(prepared: PreparedFile, path: Path) -> SessionRow:
    h = prepared.header
    assert h is not None
    times = prepared.times or [h.started_at]
    return SessionRow(
        id=h.session_id,
        agent=h.agent,
        cwd=h.cwd,
        project=project_of(h.cwd),
        started_at=h.started_at or min(times),
        last_at=max(times),
        name=prepared.name,
        parent_session=h.parent_session,
        source_path=str(path),
    )


class Importer:
    """Reads files, keeps what is new, and writes it through `write_sessions` in packed batches."""

    FLUSH_FILES = 50

    def __init__(self, store: Store, include_forgotten: bool = False) -> None:
        self.store = store
        self.include_forgotten = include_forgotten
        self._pending: list[SessionWrite] = []
        self._pending_messages = 0
        # the files' edits, written before their messages (see `flush`)
        self._pending_edits: list[tuple[str, edits.PlannedEdits]] = []
        self.messages_read = 0  # messages in the files read so far (for a progress display)
        self._any_tombstone: bool | None = None
        self._real_folders: dict[Path, str] = {}
        self._merging = False  # inside `import_paths`: the index merges are this importer's (`Store.merge_steps`)

    def import_file(self, path: Path, force: bool = False, agent: str | None = None) -> ImportReport:
        report = self._read_file(path, force, agent)
        self.flush(report)
        return report

    def _changed(self, path: Path, force: bool, report: ImportReport) -> tuple[str, int, int] | None:
        """(key, size, mtime) of a file to read, or None when it is unchanged or unreadable."""
        try:
            stat = path.stat()
        except OSError as exc:
            report.errors.append(FileError(str(path), 0, f"cannot read: {exc.strerror}"))
            return None
        key = self._file_key(path)
        if not force and self.store.source_file_state(key) == (stat.st_size, stat.st_mtime_ns):
            report.unchanged = 1
            return None
        return key, stat.st_size, stat.st_mtime_ns

    @property
    def keep_lines(self) -> bool:
        """Whether messages come with their verbatim lines as they are (the team archive stores them
        alone), not packed against their text by whoever prepares them (`prepare.prepare`)."""
        return not self.store.packs_lines

    def _file_key(self, path: Path) -> str:
        """The path a file is remembered by, fully resolved. A plain file's is its folder's, resolved
        once per import, and its name: most imports are thousands of files in a few folders."""
        if path.is_symlink():
            return str(path.resolve())
        folder = self._real_folders.get(path.parent)
        if folder is None:
            folder = self._real_folders[path.parent] = str(path.parent.resolve())
        return os.path.join(folder, path.name)

    def _read_file(self, path: Path, force: bool, agent: str | None = None) -> ImportReport:
        report = ImportReport(files=1)
        source = self._changed(path, force, report)
        if source is None:
            return report
        if source[1] > LARGE_FILE_BYTES:
            self.import_in_chunks(path, source, agent, report)
            return report
        try:
            parsed = parse_and_tokenize(str(path), agent, keep_lines=self.keep_lines)
        except OSError as exc:
            report.errors.append(FileError(str(path), 0, f"cannot read: {exc.strerror}"))
            return report
        self._accept(path, source, parsed, report)
        return report

    def _accept(self, path: Path, source: tuple[str, int, int], prepared: PreparedFile, report: ImportReport) -> None:
        report.errors += [FileError(str(path), s.line_no, s.error) for s in prepared.skipped]
        if prepared.header is None:
            return  # no session in it: its bad lines are said, and a file of blank lines is nothing to import
        unit = self.plan_session(prepared, path, report)
        if unit is None:
            return
        unit.source = source
        if prepared.edits:
            self._pending_edits.append((unit.session_id, prepared.edits))
        self._pending.append(unit)
        self._pending_messages += len(unit.messages)
        self.messages_read += len(prepared.messages)

    def import_in_chunks(
        self, path: Path, source: tuple[str, int, int], agent: str | None, report: ImportReport
    ) -> None:
        """A file over `LARGE_FILE_BYTES`, read, parsed and written `CHUNK_BYTES` at a time, as `watch`
        reads appended lines: whole, a 21 MB session took 288 MB (its lines, their JSON, their
        prepared rows, all at once). The file counts as imported with its last chunk, so a killed
        import reads it again (idempotent). Its runs are built from the archived messages."""
        self.flush(report)  # what waits is written first: the memory is this file's chunk alone
        try:
            reader = reader_for(path, agent)
            line_no, held = 0, list[bytes]()
            with open_regular(path) as fh:
                for lines, last in _chunks(fh, CHUNK_BYTES):
                    lines = held + lines
                    cut = len(lines) - (0 if last else open_tail(reader, lines))  # a message still to grow
                    lines, held = lines[:cut], lines[cut:]
                    parsed = reader.parse(lines, start_line=line_no + 1)
                    line_no += len(lines)
                    self._accept_chunk(path, source if last else None, parsed, report)
                    self.flush(report)
        except OSError as exc:
            report.errors.append(FileError(str(path), 0, f"cannot read: {exc.strerror}"))

    def _accept_chunk(
        self, path: Path, source: tuple[str, int, int] | None, parsed: ParsedSession, report: ImportReport
    ) -> None:
        prepared = prepare(parsed, self.store.text_codec(), self.keep_lines)
        report.errors += [FileError(str(path), s.line_no, s.error) for s in prepared.skipped]
        if prepared.header is None:
            return
        unit = self.plan_session(prepared, path, report)
        if unit is None:
            return
        unit.source = source  # a chunk plans no edits: the after-write hook reads them back
        self._pending.append(unit)
        self._pending_messages += len(unit.messages)
        self.messages_read += len(prepared.messages)

    def plan_session(self, prepared: PreparedFile, path: Path, report: ImportReport) -> SessionWrite | None:
        """What of this session is new: its messages (cut and packed) and its other lines, and the
        runs planned for it when the archive does not have it yet and takes all of it."""
        row = _session_row(prepared, path)
        report.sessions.add(row.id)
        forgotten = self._forgotten(row.id)
        if forget.WHOLE_SESSION in forgotten:
            report.forgotten += len(prepared.messages)
            return None  # the user forgot this session: not even its row comes back
        unit = SessionWrite(row.id, [], [NewEntry(row.id, *line) for line in prepared.kept], row)
        unit.usage = [(r[0], row.id, *r[2:]) for r in prepared.usage if r[0] not in forgotten]
        existing = self.store.existing_hashes(row.id)
        is_copy = prepared.header is not None and prepared.header.parent_session is not None
        for line in prepared.messages:
            m = NewMessage(row.id, *line)
            if m.hash in forgotten or (not self.include_forgotten and self._forgotten_anywhere(m.hash)):
                report.forgotten += 1
                continue
            if m.hash in existing and not (existing[m.hash] and m.entry_id):
                report.skipped += 1  # already archived (and nothing to reconcile)
                continue
            if is_copy and m.hash not in existing and self.store.copied_from_elsewhere(m.entry_id, m.hash):
                report.skipped += 1  # a fork/clone copies entries under the same ids: archived once
                continue
            unit.messages.append(m)
        if existing:
            unit.unfinished = self.store.messages_without_run(row.id)
        elif len(unit.messages) == len(prepared.messages):
            unit.planned = prepared.runs  # a new session, whole: its runs as planned with it
        return unit

    def _forgotten(self, session_id: str) -> set[str]:
        """Tombstones of what the user forgot here; `--include-forgotten` clears them instead."""
        if self.include_forgotten:
            with self.store.write():
                forget.clear_tombstones(self.store, session_id)
            return set()
        return forget.forgotten_hashes(self.store, session_id) if self._tombstones() else set()

    def _forgotten_anywhere(self, hash_: str) -> bool:
        return self._tombstones() and forget.forgotten_anywhere(self.store, hash_)

    def _tombstones(self) -> bool:
        """Whether the user forgot anything at all: asked once per batch, most archives have none."""
        if self._any_tombstone is None:
            self._any_tombstone = bool(self.store.scalar("SELECT EXISTS (SELECT 1 FROM forgotten)"))
        return self._any_tombstone

    def write_units(self, units: list[SessionWrite]) -> tuple[int, int]:
        """Write planned sessions now (another backend's importer writes through its own store)."""
        return self.store.write_sessions(units)

    def flush(self, report: ImportReport) -> None:
        if not self._pending:
            return
        if self._pending_edits:  # first: they wait for their messages by hash (see provenance.record)
            edits.write_planned(self.store, self._pending_edits)
            self._pending_edits = []
        added, skipped = self.write_units(self._pending)
        if self._merging:  # the full-text merges FTS5 would have done in bursts, in short steps
            self.store.merge_steps()
        self._any_tombstone = None
        report.added += added
        report.skipped += skipped
        self._pending, self._pending_messages = [], 0

    def import_paths(
        self,
        paths: Iterable[Path],
        force: bool = False,
        progress: Callable[[Path], None] | None = None,
        agent: str | None = None,
    ) -> ImportReport:
        found = find_files(paths)
        files = found.files
        with (
            self.store.yielding_to_waiters(),  # outermost: the last merge steps let waiters in too
            self.store.checkpointing(BULK_CHECKPOINT_PAGES, aside=True),
            self.store.merging_in_steps(),
        ):
            self._merging = True
            try:
                if len(files) >= PARALLEL_MIN_FILES and _workers() > 0:
                    report = self._import_pipelined(files, force, progress, agent)
                else:
                    report = self._import_serial(files, force, progress, agent)
            finally:
                self._merging = False
        report.errors[:0] = found.errors
        return report

    def _import_serial(
        self, files: list[Path], force: bool, progress: Callable[[Path], None] | None, agent: str | None
    ) -> ImportReport:
        report = ImportReport()
        for path in files:
            report.merge(self._read_file(path, force, agent))
            self._maybe_flush(report)
            if progress:
                progress(path)
        self.flush(report)
        return report

    def _maybe_flush(self, report: ImportReport) -> None:
        if self._pending_messages >= BATCH or len(self._pending) >= self.FLUSH_FILES:
            self.flush(report)

    def _import_pipelined(
        self, files: list[Path], force: bool, progress: Callable[[Path], None] | None, agent: str | None
    ) -> ImportReport:
        """Many files: worker processes parse, render, tokenize and compress while this one writes.

        The two halves cost about the same, so on two cores this nearly doubles the rate.
        The workers stay up to `AHEAD_BYTES` of source ahead of the writer; their answers wait in
        a pipe of bounded size, so memory stays flat. A worker that dies is not fatal: its files
        are read here instead. Once the archive has its dictionary (trained at the first writes),
        the workers pack the messages' text with it too.
        """
        report = ImportReport()
        self.store.text_codec()  # an archive that has its dictionary hands it to the workers before their first file
        ahead = _Ahead(
            files,
            agent,
            lambda path, done: self._changed(path, force, done),
            self._text_dict,
            self._ahead_limit,
            self._parse_here_limit,
        )
        ahead.keep_lines = self.keep_lines
        try:
            for path, source, skipped, prepared in ahead:
                file_report = skipped or ImportReport(files=1)
                if isinstance(prepared, _InChunks) and source is not None:
                    self.import_in_chunks(path, source, agent, file_report)
                elif isinstance(prepared, OSError):
                    file_report.errors.append(FileError(str(path), 0, f"cannot read: {prepared.strerror}"))
                elif isinstance(prepared, PreparedFile) and source is not None:
                    self._accept(path, source, prepared, file_report)
                report.merge(file_report)
                self._maybe_flush(report)
                if progress:
                    progress(path)
        finally:
            ahead.close()
        self.flush(report)
        return report

    def _ahead_limit(self) -> int:
        """How far the workers may parse ahead: not as far while the archive has no dictionary yet (the
        files they parse before they have it come back with their text for the writer to pack)."""
        return min(UNTRAINED_AHEAD_BYTES, AHEAD_BYTES) if self.store.dictionary_due() else AHEAD_BYTES

    def _parse_here_limit(self) -> int:
        """How far this process may parse ahead while it waits for a worker: not at all while the
        archive has no dictionary yet (what it parsed would wait to be packed by the writer)."""
        return 0 if self.store.dictionary_due() else PARSED_HERE_BYTES

    def _text_dict(self) -> int:
        """The dictionary the parse workers pack message text with: the archive's (0: none yet)."""
        return self.store.text_dict_id if codec.PACK_TEXT else 0


class _ParsedHere(NamedTuple):
    """A file parsed in the writer's process ahead of its turn (`_Ahead.parse_while_waiting`)."""

    result: PreparedFile | OSError


class _InChunks:
    """A file too large to parse whole: the writer reads it in chunks in its turn (`import_in_chunks`)."""


IN_CHUNKS = _InChunks()

# A file in `_Ahead`'s queue: its path, its source (None: unchanged or unreadable, with the report
# saying so), and who parses it: a worker, this process already (`_ParsedHere`), in its turn (None)
# or in chunks (`IN_CHUNKS`).
_Queued = tuple[Path, tuple[str, int, int] | None, ImportReport | None, Worker | _ParsedHere | _InChunks | None]


class _Ahead:
    """Files in order, each with its parse result, parsed ahead by workers (see `AHEAD_BYTES`), or
    here, one at a time, while they start (a child's start took ~5% of a 20k-message import) or
    once they are gone, and ahead of their turn whenever the writer would wait for a worker
    (`parse_while_waiting`).

    Yields (path, source, report of an unchanged/unreadable file or None, parse result or OSError or None).
    `text_dict`: the archive's dictionary id (0: none yet), handed to each worker once it has one;
    `ahead_limit`: the source bytes the workers may have in hand (`AHEAD_BYTES` but at the start);
    `parse_here_limit`: those this process may parse ahead of their turn (`PARSED_HERE_BYTES` but at the start).
    """

    def __init__(
        self,
        files: list[Path],
        agent: str | None,
        changed: Callable[[Path, ImportReport], tuple[str, int, int] | None],
        text_dict: Callable[[], int] = lambda: 0,
        ahead_limit: Callable[[], int] = lambda: AHEAD_BYTES,
        parse_here_limit: Callable[[], int] = lambda: PARSED_HERE_BYTES,
    ) -> None:
        self.todo = iter(files)
        self.agent = agent
        self.changed = changed
        self.text_dict = text_dict
        self.ahead_limit = ahead_limit
        self.parse_here_limit = parse_here_limit
        self.workers = [Worker() for _ in range(_workers())]
        self.turn = 0
        self.queue: deque[_Queued] = deque()
        self.keep_lines = False  # messages come with their lines as they are (`Importer.keep_lines`)
        self.ahead_bytes = 0  # source bytes handed to workers and not yet taken back
        self.ahead_requests = 0  # bytes of the requests among them (paths): see AHEAD_REQUEST_BYTES
        self.parsed_here_bytes = 0  # source bytes parsed here ahead of their turn, not yet taken back

    def __iter__(self) -> _Ahead:
        return self

    def __next__(
        self,
    ) -> tuple[Path, tuple[str, int, int] | None, ImportReport | None, PreparedFile | OSError | _InChunks | None]:
        self._refill()
        if not self.queue:
            raise StopIteration
        self.parse_while_waiting()
        path, source, skipped, worker = self.queue.popleft()
        if source is None:
            return path, None, skipped, None
        if isinstance(worker, _InChunks):
            return path, source, None, worker
        if isinstance(worker, _ParsedHere):
            self.parsed_here_bytes -= source[1]
            return path, source, None, worker.result
        if worker is not None:
            self.ahead_bytes -= source[1]
            self.ahead_requests -= _request_bytes(path)
        try:
            return path, source, None, self._result(path, worker)
        except OSError as exc:
            return path, source, None, exc

    def parse_while_waiting(self) -> None:
        """While the worker has not answered the oldest file, parse the next files not handed out
        yet here, to be written in their turn, instead of waiting (up to `parse_here_limit`).

        The two processes cost about the same a message, so each often waits for the other: at 300k
        messages of 40-message sessions the writer waited 2-7 s of ~65 for the worker's answers, with
        one core idle all that time. Parsing here fills it; the worker has fewer files to do."""
        head = self.queue[0][3] if self.queue else None
        while isinstance(head, Worker) and not head.answered() and self.parsed_here_bytes < self.parse_here_limit():
            to_read = self._next_to_read()
            if to_read is None:
                return
            path, source = to_read
            if source[1] > LARGE_FILE_BYTES:
                self.queue.append((path, source, None, IN_CHUNKS))
                continue
            try:
                result: PreparedFile | OSError = self._parse_here(path)
            except OSError as exc:
                result = exc
            self.queue.append((path, source, None, _ParsedHere(result)))
            self.parsed_here_bytes += source[1]

    def _refill(self) -> None:
        while self.ahead_bytes < self.ahead_limit() and self.ahead_requests < AHEAD_REQUEST_BYTES:
            # while the workers start (~0.1-0.2 s), the writer parses files itself, one at a time
            starting = bool(self.workers) and not any(w.ready for w in self.workers)
            if starting and self.queue:
                return
            if not starting:
                self._hand_dictionary()
            to_read = self._next_to_read()
            if to_read is None:
                return
            path, source = to_read
            if source[1] > LARGE_FILE_BYTES:  # read in chunks by the writer, in its turn
                self.queue.append((path, source, None, IN_CHUNKS))
                continue
            worker = None if starting else self._submit(path)
            if worker is not None:
                self.ahead_bytes += source[1]
                self.ahead_requests += _request_bytes(path)
            self.queue.append((path, source, None, worker))

    def _next_to_read(self) -> tuple[Path, tuple[str, int, int]] | None:
        """The next file to parse, with its source; the files before it that need no parsing
        (unchanged since the last import, or unreadable) are queued with their report. None: no file left."""
        for path in self.todo:
            done = ImportReport(files=1)
            source = self.changed(path, done)
            if source is not None:
                return path, source
            self.queue.append((path, None, done, None))
        return None

    def _hand_dictionary(self) -> None:
        """The next worker, if it lacks the archive's dictionary, gets it before its next file (the
        writer packs the text of the files it had before)."""
        dict_id = self.text_dict()
        data = codec.dictionary(dict_id) if dict_id else None
        if data is None or not self.workers:
            return
        worker = self.workers[self.turn % len(self.workers)]
        if worker.text_dict != dict_id:
            try:
                worker.send_dictionary(dict_id, data)
            except WorkerGone:
                self._drop(worker)

    def _submit(self, path: Path) -> Worker | None:
        """Hand the file to the next live worker; None: parse it here when its turn comes."""
        while self.workers:
            worker = self.workers[self.turn % len(self.workers)]
            self.turn += 1
            try:
                worker.submit(str(path), self.agent, self.keep_lines)
                return worker
            except WorkerGone:
                self._drop(worker)
        return None

    def _result(self, path: Path, worker: Worker | None) -> PreparedFile:
        if worker is not None:
            try:
                result: PreparedFile = worker.result()
                return result
            except WorkerGone:
                self._drop(worker)
        return self._parse_here(path)

    def _parse_here(self, path: Path) -> PreparedFile:
        dict_id = self.text_dict()  # packed as a worker would (it is registered here: the archive's)
        return parse_and_tokenize(str(path), self.agent, dict_id if codec.dictionary(dict_id) else 0, self.keep_lines)

    def _drop(self, worker: Worker) -> None:
        if worker in self.workers:
            self.workers.remove(worker)
            worker.close()

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
        self.workers = []


# A session file larger than this is read, parsed and written in chunks of `CHUNK_BYTES` (by the
# writer, never a worker): parsed whole, a file costs ~14x its size in memory at once (a 21 MB
# session: 288 MB peak RSS). In chunks: ~14 x 2 MB whatever the file's size.
LARGE_FILE_BYTES = 4 << 20
CHUNK_BYTES = 2 << 20


def _chunks(fh: BinaryIO, size: int) -> Iterator[tuple[list[bytes], bool]]:
    """Whole lines of an open file, about `size` bytes at a time, each with whether it is the last."""
    chunk: list[bytes] = []
    held = 0
    for line in fh:
        chunk.append(line)
        held += len(line)
        if held >= size:
            yield chunk, False
            chunk, held = [], 0
    yield chunk, True


# Files parsed ahead by a worker process (`import` of many files); PI_MEMORY_IMPORT_WORKERS=0 turns it off.
PARALLEL_MIN_FILES = 32
# How far ahead of the writer the workers may parse: enough source to keep them busy while the
# writer spends tens of ms on a flush (eight files ahead left a worker idle most of a flush of
# short sessions). Their answers wait in the worker's pipe (`workers.PIPE_BYTES`), which bounds
# memory whatever this is. The requests in flight (paths) stay within half a request pipe (64 KB):
# written by a thread of their own (`workers.Worker`), they could not block the writer, but a
# request the child will not read for seconds needs no place in memory either.
AHEAD_BYTES = 4 << 20
UNTRAINED_AHEAD_BYTES = 1 << 20  # ... while the archive has no dictionary (`_ahead_limit`)
AHEAD_REQUEST_BYTES = 32 << 10
# How far the writer may parse files ahead of their turn while it waits for a worker: their results
# (~4x their source) wait in its memory until their turn.
PARSED_HERE_BYTES = 1 << 20


def _request_bytes(path: Path) -> int:
    return len(str(path).encode("utf-8", "surrogateescape")) + 64  # the path and the pickle around it


def _workers() -> int:
    setting = os.environ.get("PI_MEMORY_IMPORT_WORKERS")
    if setting is not None and setting.strip().isdigit():
        return min(int(setting), 4)
    return 1 if (os.cpu_count() or 1) > 1 else 0


def write_parsed(importer: Importer, parsed: ParsedSession, path: Path) -> tuple[int, int]:
    """Write what is new in a parsed file or chunk of one (`watch`'s path). Returns (added, duplicates)."""
    report = ImportReport()
    prepared = prepare(parsed, importer.store.text_codec(), importer.keep_lines)
    unit = importer.plan_session(prepared, path, report)
    if unit is None:
        return 0, report.skipped
    added, skipped = importer.write_units([unit])
    return added, report.skipped + skipped


# Functions (store, session_id, new msg ids) run after every write; each opens its own transaction.
# Runs and their summaries are built here, so import and live capture both keep them current.
# each hook gets the new msg ids of every session of one write (session id -> ids)
