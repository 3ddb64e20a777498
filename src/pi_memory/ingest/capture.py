"""Live capture: messages arrive one at a time from a running agent, not from a file.

Design idea: a live message and the same message read later from the session
file must meet on one key, so capture renders with the very functions the
importer uses (`render.render_message`, `sources.pi.render_entry`) and writes
through the one write path (`storage.writes.write_messages`), one message per short
transaction. pi hands an extension each message at `message_end` *before* it
persists it, so the first copy has no entry id; the active branch, sent later
(`backfill`), carries the ids and fills them in by content hash.

One kind of message has no common key: pi stamps a `custom_message` entry with
the time it is persisted, not the time the message was made. For that case
`backfill` finds the live twin (same role and text, no entry id, close in time)
and re-keys it to the file's identity, so a later `pi-memory import` of the
file does not add it a second time. It keeps its live time, the moment it was
made: pi may stamp the entry after the next message was already made.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.render import Rendered, render_message
from ..core.sources.pi import Entry, parse_iso_ms, project_of, render_entry, usage_of
from ..core.usage import from_pi
from ..errors import BadInput
from ..storage.store import NewEntry, NewMessage, SessionRow, Store
from ..storage.usage import UsageRow, row_of
from ..storage.writes import SessionWrite, write_messages
from .importer import Importer, ImportReport, find_files

# How far apart (ms) a live custom message and its persisted entry may be stamped.
TWIN_WINDOW_MS = 10 * 60 * 1000


@dataclass
class BackfillReport:
    added: int = 0  # messages that were missing
    reconciled: int = 0  # live messages that got their entry id (or their file identity)
    present: int = 0  # already archived with their id
    entries: int = 0  # non-message entries kept verbatim

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def now_ms() -> int:
    return int(time.time() * 1000)


def _raw(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _new_message(
    session_id: str, r: Rendered, entry_id: str | None, parent_id: str | None, raw: bytes, kind: str
) -> NewMessage:
    return NewMessage(
        session_id=session_id,
        ts=r.ts,
        role=r.role,
        text=r.text,
        indexed=r.indexed,
        entry_id=entry_id,
        parent_id=parent_id,
        meta=r.meta,
        hash=r.hash,
        raw=raw,
        entry_type=kind,
    )


def message_from_live(
    session_id: str, message: dict[str, Any], entry_id: str | None = None, parent_id: str | None = None
) -> NewMessage | None:
    """A `message_end` message -> a message to write (None for roles never archived, e.g. system)."""
    if not isinstance(message, dict):
        raise BadInput("message must be a JSON object")
    stamp = message.get("timestamp")
    ts = parse_iso_ms(stamp) if stamp is not None else 0
    rendered = render_message(message, ts or now_ms())
    if rendered is None:
        return None
    # kept verbatim in the shape of a session-file entry, until the file's own line replaces it
    raw = _raw({"type": "message", "id": entry_id, "parentId": parent_id, "message": message})
    return _new_message(session_id, rendered, entry_id, parent_id, raw, "message")


def message_from_entry_dict(session_id: str, entry: dict[str, Any]) -> NewMessage | None:
    """A session entry (as `getBranch()` returns it) -> a message, if it is message-like."""
    if not isinstance(entry, dict):
        raise BadInput("entry must be a JSON object")
    ts = parse_iso_ms(entry.get("timestamp"))
    rendered = render_entry(entry, ts)
    if rendered is None:
        return None
    entry_id = entry.get("id") if isinstance(entry.get("id"), str) else None
    parent_id = entry.get("parentId") if isinstance(entry.get("parentId"), str) else None
    kind = entry.get("type") if isinstance(entry.get("type"), str) else "unknown"
    return _new_message(session_id, rendered, entry_id, parent_id, _raw(entry), str(kind))


def entry_usage(session_id: str, entry: dict[str, Any]) -> list[UsageRow]:
    """The model request a session entry records (an assistant message, a 1.x request entry), priced."""
    ts = parse_iso_ms(entry.get("timestamp"))
    kind = entry.get("type") if isinstance(entry.get("type"), str) else "unknown"
    parsed = Entry(0, str(kind), entry.get("id") if isinstance(entry.get("id"), str) else None, None, ts, entry, b"")
    parsed.rendered = render_entry(entry, ts)
    usage = usage_of(parsed)
    return [row_of(session_id, usage)] if usage is not None else []


def other_entry(session_id: str, entry: dict[str, Any]) -> NewEntry:
    """A non-message entry (model change, label, session_info, ...) kept verbatim, keyed like the importer."""
    raw = _raw(entry)
    ts = parse_iso_ms(entry.get("timestamp"))
    entry_id = entry.get("id") if isinstance(entry.get("id"), str) else None
    parent_id = entry.get("parentId") if isinstance(entry.get("parentId"), str) else None
    kind = entry.get("type") if isinstance(entry.get("type"), str) else "unknown"
    key = Entry(0, str(kind), entry_id, parent_id, ts, entry, raw).key
    return NewEntry(session_id, key, entry_id, str(kind), ts, raw)


class LiveCapture:
    """Capture for one process: remembers which sessions it has registered."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._known: set[str] = set()

    def ensure_session(
        self,
        session_id: str,
        cwd: str,
        name: str | None = None,
        started_at: int | str | None = None,
        agent: str = "pi",
        source_path: str | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise BadInput("session id must be a non-empty string")
        started = parse_iso_ms(started_at) if started_at is not None else 0
        started = started or now_ms()
        row = SessionRow(
            id=session_id,
            agent=agent,
            cwd=cwd or "",
            project=project_of(cwd or ""),
            started_at=started,
            last_at=started,
            name=name.strip() if isinstance(name, str) and name.strip() else None,
            source_path=source_path,
        )
        with self.store.write():
            self.store.ensure_session(row)
        self._known.add(session_id)

    def _ensure_known(self, session_id: str, ts: int) -> None:
        """A message for a session nobody registered (a restarted bridge) still gets a session row."""
        if session_id in self._known:
            return
        if not self.store.session_exists(session_id):
            self.ensure_session(session_id, "", started_at=ts)
        self._known.add(session_id)

    def capture_message(
        self, session_id: str, message: dict[str, Any], entry_id: str | None = None, parent_id: str | None = None
    ) -> int | None:
        """Write one live message; its new msg id, or None if it was archived already (or not archivable)."""
        m = message_from_live(session_id, message, entry_id, parent_id)
        if m is None:
            return None
        usage = from_pi(message, m.ts, m.hash)
        return self._write_one(m, [row_of(session_id, usage)] if usage is not None else [])

    def capture_entry(self, session_id: str, entry: dict[str, Any]) -> int | None:
        """Write one session entry (a compaction, a branch summary, a custom message)."""
        m = message_from_entry_dict(session_id, entry)
        usage = entry_usage(session_id, entry)
        if m is None:
            ne = other_entry(session_id, entry)
            self._ensure_known(session_id, ne.ts or now_ms())
            self._write(session_id, [], [ne], usage)
            return None
        return self._write_one(m, usage)

    def _write_one(self, m: NewMessage, usage: list[UsageRow] | None = None) -> int | None:
        self._ensure_known(m.session_id, m.ts)
        if not self.store.index_deferred:
            m.prepare()  # tokenize before the transaction (a deferring store tokenizes when idle)
        unit = SessionWrite(m.session_id, [m], usage=list(usage or []))
        self.store.write_sessions([unit])  # the one write path (`storage.writes.write_sessions`)
        return unit.added[0] if unit.added else None

    def backfill(self, session_id: str, entries: list[dict[str, Any]]) -> BackfillReport:
        """Write a branch of entries (root to leaf): missing ones added, live ones given their ids."""
        if not isinstance(entries, list):
            raise BadInput("entries must be a list of session entries")
        report = BackfillReport()
        self._ensure_known(session_id, now_ms())
        messages: list[NewMessage] = []
        others: list[NewEntry] = []
        usage: list[UsageRow] = []
        for entry in entries:
            usage += entry_usage(session_id, entry)
            m = message_from_entry_dict(session_id, entry)
            if m is None:
                others.append(other_entry(session_id, entry))
                continue
            state = self._state(m)
            if state == "present":
                report.present += 1
            elif state == "unkeyed":
                report.reconciled += 1
                messages.append(m)  # the store fills the entry id on the live row
            elif self._adopt_twin(m):
                report.reconciled += 1
            else:
                m.prepare()
                messages.append(m)
        added, _dup = self._write(session_id, messages, others, usage)
        report.added = added
        report.entries = len(others)
        return report

    def _write(
        self,
        session_id: str,
        messages: list[NewMessage],
        entries: list[NewEntry] | None = None,
        usage: list[UsageRow] | None = None,
    ) -> tuple[int, int]:
        """The one write path (`Store.write_sessions`, or `PgStore.write_sessions` on a team archive)."""
        return write_messages(self.store, session_id, messages, entries, usage)

    def _state(self, m: NewMessage) -> str:
        found = self.store.message_by_hash(m.session_id, m.hash)
        if found is None:
            # a fork copies entries under their ids: archived once, under the session that wrote them
            return "present" if self.store.copied_from_elsewhere(m.entry_id, m.hash) else "missing"
        return "unkeyed" if found[1] is None and m.entry_id else "present"

    def _adopt_twin(self, m: NewMessage) -> bool:
        """Give a live copy stamped differently (custom messages) the file's identity."""
        if not m.entry_id:
            return False
        twin = self.store.find_unkeyed_twin(m.session_id, m.role, m.text, m.ts, TWIN_WINDOW_MS)
        if twin is None:
            return False
        with self.store.write():
            self.store.rekey_message(twin, m.hash, m.entry_id, m.parent_id, m.raw, m.text)
        return True

    def set_session_name(self, session_id: str, name: str | None) -> None:
        clean = name.strip() if isinstance(name, str) and name.strip() else None
        self._ensure_known(session_id, now_ms())
        with self.store.write():
            self.store.set_session_name(session_id, clean)


@dataclass
class ImportSlice:
    """One batch of files of a longer import: the host calls again with `next_offset` until it is None."""

    report: ImportReport
    total_files: int
    offset: int
    next_offset: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.report.to_dict(),
            "total_files": self.total_files,
            "offset": self.offset,
            "next_offset": self.next_offset,
        }


def import_slice(importer: Importer, targets: list[Path], offset: int, limit: int) -> ImportSlice:
    found = find_files(targets)
    files = found.files
    offset = max(0, int(offset))
    limit = max(1, int(limit))
    chunk = files[offset : offset + limit]
    with importer.store.checkpointing():  # a bulk write: the WAL must not grow until the next idle moment
        report = importer.import_paths(chunk) if chunk else ImportReport()
    if offset == 0:  # the paths that could not be used, said once, in the first batch
        report.errors[:0] = found.errors
    end = offset + len(chunk)
    return ImportSlice(report, len(files), offset, end if end < len(files) else None)
