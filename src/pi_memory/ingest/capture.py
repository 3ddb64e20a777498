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

A long-lived host (`use_spool`, the bridge) never waits for the write lock: a
capture that cannot have it at once is kept in the process's spool
(`spool.py`) and written by a later capture or the idle moment.
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from ..core.render import Rendered, render_message
from ..core.sources.pi import Entry, parse_iso_ms, project_of, render_entry, usage_of
from ..core.usage import from_pi
from ..errors import BadInput
from ..storage.store import NewEntry, NewMessage, SessionRow, Store
from ..storage.usage import UsageRow, row_of
from ..storage.writes import SessionWrite, write_messages
from . import spool as spools
from .importer import Importer, ImportReport, find_files

# How far apart (ms) a live custom message and its persisted entry may be stamped.
TWIN_WINDOW_MS = 10 * 60 * 1000

# How long a spooling capture waits for the write lock before it keeps the message in its spool:
# not at all. A capture's own transaction takes ~0.5 ms, the lock's other holders (an import's
# transaction, another session's idle moment) 10-50 ms on a busy machine, and a wait of even 3 ms
# (1 ms sleeps) came back 20 ms later when the machine's cores were taken (`bench/contention.py`).
LIVE_WAIT_S = 0.0


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
    session_id: str,
    message: dict[str, Any],
    entry_id: str | None = None,
    parent_id: str | None = None,
    received_at: int | None = None,
) -> NewMessage | None:
    """A `message_end` message -> a message to write (None for roles never archived, e.g. system).
    One without a timestamp is stamped `received_at` (default: now)."""
    if not isinstance(message, dict):
        raise BadInput("message must be a JSON object")
    stamp = message.get("timestamp")
    ts = parse_iso_ms(stamp) if stamp is not None else 0
    rendered = render_message(message, ts or received_at or now_ms())
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


def unit_of(record: spools.Record) -> SessionWrite | None:
    """A live capture (as `LiveCapture` records it) -> what it writes; None if nothing is archived.
    `BadInput` for a message or entry that is not a JSON object."""
    session_id = record.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        raise BadInput("session id must be a non-empty string")
    if record.get("kind") == "entry":
        entry = record.get("entry")
        if not isinstance(entry, dict):
            raise BadInput("entry must be a JSON object")
        m = message_from_entry_dict(session_id, entry)
        usage = entry_usage(session_id, entry)
        if m is None:
            return SessionWrite(session_id, [], [other_entry(session_id, entry)], usage=usage)
        return SessionWrite(session_id, [m], usage=usage)
    message = record.get("message")
    if not isinstance(message, dict):
        raise BadInput("message must be a JSON object")
    ids = [v if isinstance(v, str) else None for v in (record.get("entry_id"), record.get("parent_id"))]
    received = record.get("received_at")
    m = message_from_live(session_id, message, ids[0], ids[1], received if isinstance(received, int) else None)
    if m is None:
        return None
    request = from_pi(message, m.ts, m.hash)
    return SessionWrite(session_id, [m], usage=[row_of(session_id, request)] if request is not None else [])


def _first_ts(unit: SessionWrite) -> int:
    stamps = [m.ts for m in unit.messages] + [e.ts for e in unit.entries]
    return next((ts for ts in stamps if ts), 0) or now_ms()


def adopt_orphans(store: Store) -> int:
    """Write the spools of processes that died before they wrote them (`spool.py`), then remove them;
    how many records. A spool that cannot be written now stays for the next opener."""
    done = 0
    capture = LiveCapture(store)
    for _path, records, remove in spools.orphans(store.path):
        units = [u for u in map(_unit_or_none, records) if u is not None]
        capture._write_units(units)
        remove()
        done += len(records)
    return done


def _unit_or_none(record: spools.Record) -> SessionWrite | None:
    try:
        return unit_of(record)
    except BadInput:
        return None  # refused when it was captured too: never acknowledged


class LiveCapture:
    """Capture for one process: remembers which sessions it has registered, and keeps what found
    the write lock taken in its spool (`use_spool`)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._known: set[str] = set()
        self.spool: spools.Spool | None = None
        # what the spool's records write, built once (None: to be built again from the records)
        self._waiting: list[SessionWrite] | None = []
        self.spooled = 0  # captures that went to the spool
        self.longest_wait_s = 0.0  # the longest a spooled capture waited before it was written

    def use_spool(self) -> None:
        """A long-lived host's captures never wait for the write lock (`spool.py`); it calls
        `drain` (`Archive.catch_up`) when idle and `close` at the end."""
        if self.spool is None and spools.supported() and getattr(self.store, "spools_live_writes", False):
            self.spool = spools.Spool(self.store.path)

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
        self.drain()
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
        """Write one live message; its new msg id, or None if it was archived already, is not
        archivable, or waits in the spool."""
        record = {
            "kind": "message",
            "session_id": session_id,
            "message": message,
            "entry_id": entry_id,
            "parent_id": parent_id,
            "received_at": now_ms(),
        }
        return self._capture(record)

    def capture_entry(self, session_id: str, entry: dict[str, Any]) -> int | None:
        """Write one session entry (a compaction, a branch summary, a custom message)."""
        return self._capture({"kind": "entry", "session_id": session_id, "entry": entry})

    def _capture(self, record: spools.Record) -> int | None:
        unit = unit_of(record)  # bad input is refused here, before anything is kept
        if unit is None:
            return None
        self._ensure_known(unit.session_id, _first_ts(unit))  # waits for the lock, once a session
        if self.spool is None:
            return self._write_unit(unit)
        if not self.spool:
            try:
                with self.store.waiting_at_most(LIVE_WAIT_S):
                    return self._write_unit(unit)
            except apsw.BusyError:
                pass  # the lock is someone else's for now: keep it, below
        if not self._keep(record, unit):
            return self._write_unit(unit)  # the spool cannot take it (a full disk): wait for the lock
        self.drain(wait=False)
        return None

    def _keep(self, record: spools.Record, unit: SessionWrite) -> bool:
        assert self.spool is not None
        try:
            self.spool.append(record)
        except OSError:
            return False
        self.spooled += 1
        if self._waiting is not None:
            self._waiting.append(unit)
        return True

    def _write_unit(self, unit: SessionWrite) -> int | None:
        self._write_units([unit])
        return unit.added[0] if unit.added else None

    def _write_units(self, units: list[SessionWrite], index_now: bool = False) -> None:
        """`index_now`: tokenized here and indexed in the write even on a deferring store (the idle
        moment writing a spool: one transaction where the pending index would take a second)."""
        for unit in units:
            self._ensure_known(unit.session_id, _first_ts(unit))
            if index_now or not self.store.index_deferred:
                for m in unit.messages:
                    m.prepare()  # tokenize before the transaction (a deferring store tokenizes when idle)
        self.store.write_sessions(units)  # the one write path (`storage.writes.write_sessions`)

    def drain(self, wait: bool = True) -> int:
        """Write what the spool holds, in order, in as few transactions as the write path cuts; how many
        records. `wait=False`: only if the lock is free (within `LIVE_WAIT_S`; else 0, all kept)."""
        if not self.spool:
            return 0
        units = self._waiting
        if units is None:
            units = [u for u in map(_unit_or_none, self.spool.records()) if u is not None]
        written = len(self.spool)
        began = self.store.write_transactions
        try:
            with nullcontext() if wait else self.store.waiting_at_most(LIVE_WAIT_S):
                self._write_units(units, index_now=wait)
        except BaseException as exc:
            # nothing written: the same units serve the next try; else they are built again from the
            # records, and what the first transactions wrote is found again by its hash
            self._waiting = units if self.store.write_transactions == began else None
            if wait or not isinstance(exc, apsw.BusyError):
                raise
            return 0  # the lock was taken again between two of its transactions: all kept
        if self.spool.since is not None:
            self.longest_wait_s = max(self.longest_wait_s, time.monotonic() - self.spool.since)
        self.spool.clear()
        self._waiting = []
        return written

    def close(self) -> None:
        """Write the spool and let go of it; if it cannot be written now, the next process to open
        the archive does (`adopt_orphans`)."""
        if self.spool is None:
            return
        try:
            self.drain()
        except (apsw.Error, OSError):
            pass
        self.spool.close()
        self.spool = None

    def backfill(self, session_id: str, entries: list[dict[str, Any]]) -> BackfillReport:
        """Write a branch of entries (root to leaf): missing ones added, live ones given their ids."""
        if not isinstance(entries, list):
            raise BadInput("entries must be a list of session entries")
        report = BackfillReport()
        self.drain()  # live copies first, so a branch's entries find them by hash
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
        self.drain()
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
