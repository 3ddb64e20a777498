"""Import session files into the archive: discover, parse, dedupe, write in short batches.

Design idea: parsing, rendering and tokenizing happen outside any transaction;
each batch of at most `BATCH` messages is one short write transaction (spec 000
§9 rule 4), so an import never holds the lock long enough to stall a live pi
session writing at the same time. Files that have not changed since the last
import (same size and mtime) are skipped without being read. Bad lines are
reported with their line numbers; everything good in the same file is kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ArchiveError
from .sources.pi import Entry, ParsedSession, project_of
from .sources.readers import read_session_file
from .store import NewEntry, NewMessage, SessionRow, Store

BATCH = 200


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
    errors: list[FileError] = field(default_factory=list)

    def merge(self, other: ImportReport) -> None:
        self.files += other.files
        self.unchanged += other.unchanged
        self.sessions |= other.sessions
        self.added += other.added
        self.skipped += other.skipped
        self.errors += other.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "unchanged": self.unchanged,
            "sessions": len(self.sessions),
            "added": self.added,
            "skipped": self.skipped,
            "errors": [e.to_dict() for e in self.errors],
        }


def discover(paths: Iterable[Path]) -> list[Path]:
    """Session files under the given files and folders, in a stable order."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise ArchiveError(f"no such file or folder: {path}")
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        else:
            found.append(path)
    return found


def message_from_entry(session_id: str, entry: Entry) -> NewMessage:
    r = entry.rendered
    assert r is not None
    return NewMessage(
        session_id=session_id,
        ts=r.ts or entry.ts,
        role=r.role,
        text=r.text,
        indexed=r.indexed,
        entry_id=entry.entry_id,
        parent_id=entry.parent_id,
        meta=r.meta,
        hash=r.hash,
        raw=entry.raw,
        entry_type=entry.type,
    )


def _session_row(parsed: ParsedSession, path: Path) -> SessionRow:
    h = parsed.header
    assert h is not None
    times = [e.ts for e in parsed.entries if e.ts] or [h.started_at]
    return SessionRow(
        id=h.session_id,
        agent=h.agent,
        cwd=h.cwd,
        project=project_of(h.cwd),
        started_at=h.started_at or min(times),
        last_at=max(times),
        name=parsed.name,
        parent_session=h.parent_session,
        source_path=str(path),
    )


class Importer:
    def __init__(self, store: Store) -> None:
        self.store = store

    def import_file(self, path: Path, force: bool = False, agent: str | None = None) -> ImportReport:
        report = ImportReport(files=1)
        try:
            stat = path.stat()
        except OSError as exc:
            report.errors.append(FileError(str(path), 0, f"cannot read: {exc.strerror}"))
            return report
        key = str(path.resolve())
        if not force and self.store.source_file_state(key) == (stat.st_size, stat.st_mtime_ns):
            report.unchanged = 1
            return report
        try:
            parsed = read_session_file(path, agent)
        except OSError as exc:
            report.errors.append(FileError(str(path), 0, f"cannot read: {exc.strerror}"))
            return report
        report.errors += [FileError(str(path), s.line_no, s.error) for s in parsed.skipped]
        if parsed.header is None:
            if not parsed.skipped:
                report.errors.append(FileError(str(path), 0, "empty file: not a pi session"))
            return report
        self.write_session(parsed, path, report)
        with self.store.write():
            self.store.record_source_file(key, parsed.header.session_id, stat.st_size, stat.st_mtime_ns)
        return report

    def write_session(self, parsed: ParsedSession, path: Path, report: ImportReport) -> None:
        row = _session_row(parsed, path)
        report.sessions.add(row.id)
        messages: list[NewMessage] = []
        entries: list[NewEntry] = []
        for entry in parsed.entries:
            if entry.rendered is None:
                entries.append(NewEntry(row.id, entry.key, entry.entry_id, entry.type, entry.ts, entry.raw))
                continue
            m = message_from_entry(row.id, entry)
            if self.store.message_exists(row.id, m.hash) and not _needs_reconcile(self.store, m):
                report.skipped += 1
                continue
            if self.store.copied_from_elsewhere(m.entry_id, m.hash) and not self.store.message_exists(row.id, m.hash):
                report.skipped += 1  # a fork/clone copy of a message archived under its first session
                continue
            m.prepare()
            messages.append(m)
        with self.store.write():
            self.store.ensure_session(row)
        self._write_batches(row.id, messages, entries, report)

    def _write_batches(self, session_id: str, messages: list[NewMessage], entries: list[NewEntry], report: ImportReport) -> None:
        added, skipped = write_messages(self.store, session_id, messages, entries)
        report.added += added
        report.skipped += skipped

    def import_paths(
        self,
        paths: Iterable[Path],
        force: bool = False,
        progress: Callable[[Path], None] | None = None,
        agent: str | None = None,
    ) -> ImportReport:
        report = ImportReport()
        for path in discover(paths):
            report.merge(self.import_file(path, force=force, agent=agent))
            if progress:
                progress(path)
        return report


def write_messages(
    store: Store, session_id: str, messages: list[NewMessage], entries: list[NewEntry] = ()  # type: ignore[assignment]
) -> tuple[int, int]:
    """The one write path (import, live capture, watch): batches of short transactions.

    Messages must be `prepare()`d (tokenized) already. Returns (added, duplicates).
    After the messages are in, each hook in `AFTER_WRITE` runs in its own short
    transaction with the ids that were added (runs and summaries hang off this).
    """
    added_ids: list[int] = []
    skipped = 0
    for start in range(0, max(len(messages), 1), BATCH):
        batch = messages[start : start + BATCH]
        with store.write():
            for m in batch:
                msg_id = store.insert_message(m)
                if msg_id is None:
                    skipped += 1
                else:
                    added_ids.append(msg_id)
            if start == 0:
                for e in entries:
                    store.insert_entry(e)
    if added_ids:
        with store.write():
            store.update_first_user(session_id)
        for hook in AFTER_WRITE:
            hook(store, session_id, added_ids)
    return len(added_ids), skipped


def write_parsed(importer: Importer, parsed: ParsedSession, path: Path) -> tuple[int, int]:
    """Write what is new in a parsed file or chunk of one (`watch`'s path). Returns (added, duplicates)."""
    report = ImportReport()
    importer.write_session(parsed, path, report)
    return report.added, report.skipped


# Functions (store, session_id, new msg ids) run after every write; each opens its own transaction.
AFTER_WRITE: list[Callable[[Store, str, list[int]], None]] = []


def _needs_reconcile(store: Store, m: NewMessage) -> bool:
    """A message captured live has no entry id yet; the file supplies it."""
    if not m.entry_id:
        return False
    return bool(store.scalar("SELECT 1 FROM msg WHERE session_id=? AND hash=? AND entry_id IS NULL", (m.session_id, m.hash)))


def file_size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
