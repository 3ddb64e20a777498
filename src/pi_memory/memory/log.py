"""The memory log in the archive database: chains, append, verify, export, import, repair.

Design idea: one append-only, hash-chained event table; SQLite's locking is
the lock. An append is one `BEGIN IMMEDIATE` transaction that reads the
chain's tail, replays it, judges the new event against that state, seals it
(seq, prev_hash, hash) and inserts it; two processes can never both write
seq N. Triggers refuse UPDATE and DELETE on both tables, so history is only
ever added to.

A workspace (a normalized cwd) owns a sequence of chains; the newest is the
active one. A chain that fails verification is read-only: reads use its
trusted prefix, appends are refused. `repair` never edits a row: it starts a
new chain for the workspace from the trusted prefix (or from a verified
export) and leaves the broken chain in the table for inspection.

On the local archive every event also gets a keyed seal and each workspace's head is pinned
outside the archive (`seal.py`): verification then also stops at an event written without the
key (a forged append or rewrite) and at a replaced or cut chain.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ArchiveError, BadInput
from ..storage.store import Store
from . import seal
from .chain import GENESIS, ChainReport, ChainRow, canonical, make_row, parse_line, verify_chain
from .model import MemoryRecord
from .policy import event_problem
from .projection import PROJECTIONS, MemoryState, apply, project


class MemoryChainBroken(ArchiveError):
    """The workspace's chain failed verification: reads use the trusted prefix, writes are refused."""


class MemoryRefused(BadInput):
    """A write the memory policy does not allow."""


def now_ms() -> int:
    return int(time.time() * 1000)


def workspace_key(cwd: str | Path | None) -> str:
    """The normalized cwd: absolute, symlinks resolved, no trailing slash (the spec's `ctx.cwd` rule)."""
    path = Path(cwd if cwd not in (None, "") else Path.cwd()).expanduser()
    return str(path.resolve())


def broken_message(workspace: str, report: ChainReport) -> str:
    return (
        f"the memory log of {workspace} is broken at event {report.broken_at} ({report.reason}); "
        f"it is read-only and only its first {report.trusted} events are used. To repair: inspect it with "
        f"`pi-memory memory export --raw --cwd {workspace}`, then run `pi-memory memory repair --cwd {workspace}` "
        "to continue from the trusted events in a new chain (the broken rows are kept, never rewritten)"
    )


@dataclass
class Appended:
    """What an append did: the event written (or None when nothing needed writing) and the state after it."""

    event: dict[str, Any] | None
    state: MemoryState
    record: MemoryRecord | None = None


# A builder turns the current state into the event to append, or into an existing record (nothing to write).
Builder = Callable[[MemoryState], "dict[str, Any] | MemoryRecord"]


@dataclass
class ImportResult:
    workspace: str
    chain: int
    added: int
    already: int
    ignored: list[int] = field(default_factory=list)
    skipped_torn_line: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RepairResult:
    workspace: str
    old_chain: int
    new_chain: int
    kept: int
    left_behind: int
    broken_at: int | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _memory_id(head_hash: str, body: dict[str, Any]) -> str:
    """Deterministic and unique per chain position: the previous hash is in it."""
    return "mem_" + hashlib.sha256((head_hash + canonical(body)).encode()).hexdigest()[:12]


def parse_export(lines: Iterable[str]) -> tuple[list[ChainRow], bool]:
    """Exported JSONL back into rows; a torn last line (a crash mid-write) is skipped and reported."""
    pending: list[tuple[int, str]] = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    rows: list[ChainRow] = []
    for i, (number, line) in enumerate(pending):
        try:
            rows.append(parse_line(line))
        except ValueError as exc:
            if i == len(pending) - 1 and not line.rstrip().endswith("}"):
                return rows, True
            raise BadInput(f"line {number} is not a memory event ({exc})") from None
    return rows, False


class MemoryLog:
    """Chains of memory events in one archive."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.sealing = bool(getattr(store, "seals_memory", False))  # the team archive does not
        self.projections = PROJECTIONS

    # --- reading -------------------------------------------------------------------

    def active_chain(self, workspace: str) -> int | None:
        value = self.store.scalar("SELECT max(id) FROM memory_chain WHERE workspace=?", (workspace,))
        return int(value) if value is not None else None

    def chain_rows(self, chain: int | None) -> list[ChainRow]:
        if chain is None:
            return []
        rows = self.store.rows(
            "SELECT seq, prev_hash, hash, event FROM memory_event WHERE chain=? ORDER BY seq", (chain,)
        )
        return [ChainRow(int(s), str(p), str(h), str(e)) for s, p, h, e in rows]

    def report(self, workspace: str) -> ChainReport:
        with self.store.read():
            chain = self.active_chain(workspace)
            return self.verify(workspace, chain, self.chain_rows(chain))

    def verify(self, workspace: str, chain: int | None, rows: list[ChainRow]) -> ChainReport:
        """The hash chain's report, cut further where a seal or the pin fails (`seal.py`)."""
        report = verify_chain(rows)
        if not self.sealing:
            return report
        pin = seal.read_pin(self._archive(), workspace)
        trusted = rows[: report.trusted]
        pinned_present = pin is not None and self._chain_of(pin.chain) == workspace
        found = seal.check(seal.read_key(), workspace, chain, trusted, self.seals_of(chain), pin, pinned_present)
        report.sealed, report.pinned = not found.legacy and bool(rows), pin is not None
        if found.problem is not None and (found.sealed < report.trusted or report.ok):  # else the hash broke first
            report.cut(found.sealed, found.problem, trusted[found.sealed - 1].hash if found.sealed else GENESIS)
        if pinned_present and pin is not None and pin.chain != chain:
            report.restore_from = pin.chain
        return report

    def seals_of(self, chain: int | None) -> dict[int, str]:
        if chain is None or not self.sealing:
            return {}
        return {int(q): str(v) for q, v in self.store.rows("SELECT seq, seal FROM memory_seal WHERE chain=?", (chain,))}

    def _chain_of(self, chain: int) -> str | None:
        value = self.store.scalar("SELECT workspace FROM memory_chain WHERE id=?", (chain,))
        return str(value) if value is not None else None

    def _archive(self) -> str:
        return seal.archive_key(self.store.path)

    def state(self, workspace: str) -> tuple[MemoryState, ChainReport]:
        """The projection of the trusted prefix, and the verification report it came from."""
        report = self.report(workspace)
        return self.projections.project(report.events, report.head_hash), report

    def workspaces(self) -> list[str]:
        return [str(r[0]) for r in self.store.rows("SELECT DISTINCT workspace FROM memory_chain ORDER BY workspace")]

    def workspaces_holding(self, memory_id: str) -> list[str]:
        """Workspaces whose active chain created this memory id (a help for people who mixed them up)."""
        if not memory_id.startswith("mem_") or not memory_id[4:].isalnum():
            return []
        needle = f'%"id":"{memory_id}"%'
        sql = """SELECT DISTINCT c.workspace FROM memory_event e JOIN memory_chain c ON c.id = e.chain
                 WHERE e.event LIKE ? AND c.id = (SELECT max(id) FROM memory_chain WHERE workspace = c.workspace)"""
        return sorted(str(r[0]) for r in self.store.rows(sql, (needle,)))

    def export_lines(self, workspace: str, raw: bool = False) -> tuple[list[str], ChainReport]:
        """The chain as JSONL lines: the trusted prefix, or every stored row with `raw`."""
        with self.store.read():
            chain = self.active_chain(workspace)
            rows = self.chain_rows(chain)
            report = self.verify(workspace, chain, rows)
        chosen = rows if raw else rows[: report.trusted]
        return [r.to_line() for r in chosen], report

    # --- writing -------------------------------------------------------------------

    def _ensure_chain(self, workspace: str, note: str = "new") -> int:
        chain = self.active_chain(workspace)
        if chain is not None:
            return chain
        return self._new_chain(workspace, note)

    def _new_chain(self, workspace: str, note: str) -> int:
        rows = self.store.rows(
            "INSERT INTO memory_chain(workspace, created_at, note) VALUES (?,?,?) RETURNING id",
            (workspace, now_ms(), note),
        )
        return int(rows[0][0])

    def _insert(self, chain: int, row: ChainRow) -> None:
        self.store.execute(
            "INSERT INTO memory_event(chain, seq, prev_hash, hash, event) VALUES (?,?,?,?,?)",
            (chain, row.seq, row.prev_hash, row.hash, row.event),
        )

    @contextlib.contextmanager
    def _pinning(self) -> Iterator[list[tuple[str, seal.Pin]]]:
        """Around a write: what it pins is pinned after its commit, in commit order (`seal.pinning`)."""
        pins: list[tuple[str, seal.Pin]] = []
        if not self.sealing:
            yield pins
            return
        with seal.pinning():
            yield pins
            for workspace, pin in pins:
                seal.write_pin(self._archive(), workspace, pin)

    def _seal(self, workspace: str, chain: int, rows: Sequence[ChainRow], pins: list[tuple[str, seal.Pin]]) -> None:
        """Seal the chain's events that have no seal yet (all of them in a chain written before
        seals: trusted as they are, once), inside the write transaction; pin the head after it."""
        if not self.sealing:
            return
        if not rows:  # a repair that kept nothing: this empty chain is the workspace's now
            pins.append((workspace, seal.Pin(chain, 0, seal.NO_SEAL)))
            return
        have = self.seals_of(chain)
        start = 0
        while start < len(rows) and rows[start].seq in have:
            start += 1
        previous = have[rows[start - 1].seq] if start else seal.NO_SEAL
        new = seal.seal_rows(seal.ensure_key(), workspace, chain, rows[start:], previous)
        self.store.executemany(
            "INSERT INTO memory_seal(chain, seq, seal) VALUES (?,?,?)",
            [(chain, row.seq, value) for row, value in zip(rows[start:], new, strict=True)],
        )
        last = new[-1] if new else have[rows[-1].seq]
        pins.append((workspace, seal.Pin(chain, rows[-1].seq, last)))

    def append(self, workspace: str, build: Builder) -> Appended:
        """Read the tail, replay, build and judge the event, seal and insert it: one transaction."""
        with self._pinning() as pins, self.store.write():
            self.store.lock_workspace(workspace)
            chain = self._ensure_chain(workspace)
            rows = self.chain_rows(chain)
            report = self.verify(workspace, chain, rows)
            if not report.ok:
                raise MemoryChainBroken(broken_message(workspace, report))
            state = self.projections.project(report.events, report.head_hash)
            built = build(state)
            if isinstance(built, MemoryRecord):
                return Appended(None, state, built)
            body = dict(built)
            if body.get("type") in ("create", "supersede") and "id" not in body:
                body["id"] = _memory_id(report.head_hash, body)
            row = make_row(report.trusted + 1, report.head_hash, body)
            event = {**body, "seq": row.seq}
            problem = event_problem(state.records, event)
            if problem:
                raise MemoryRefused(problem)
            self._insert(chain, row)
            self._seal(workspace, chain, [*rows, row], pins)
        apply(state, event)
        target = str(body.get("id"))
        return Appended(event, state, state.records.get(target))

    def import_rows(self, workspace: str, rows: Sequence[ChainRow], torn: bool = False) -> ImportResult:
        """Append a verified export to the workspace's chain: into an empty chain, or extending it."""
        incoming = verify_chain(rows)
        if not incoming.ok:
            raise BadInput(
                f"the file's chain is broken at event {incoming.broken_at} ({incoming.reason}); nothing imported"
            )
        with self._pinning() as pins, self.store.write():
            self.store.lock_workspace(workspace)
            chain = self._ensure_chain(workspace, "import")
            existing = self.chain_rows(chain)
            current = self.verify(workspace, chain, existing)
            if not current.ok:
                raise MemoryChainBroken(broken_message(workspace, current))
            for mine, theirs in zip(existing, rows, strict=False):
                if mine.hash != theirs.hash:
                    raise BadInput(
                        f"the file and the memory log of {workspace} differ from event {mine.seq} on; nothing imported "
                        "(import it into another workspace with --cwd, or compare with `pi-memory memory export`)"
                    )
            new = list(rows[len(existing) :])
            for row in new:
                self._insert(chain, row)
            self._seal(workspace, chain, [*existing, *new], pins)
        ignored = project(incoming.events).ignored
        return ImportResult(workspace, chain, len(new), min(len(existing), len(rows)), ignored, torn)

    def repair(self, workspace: str, source: Sequence[ChainRow] | None = None) -> RepairResult:
        """Start a new chain from the trusted prefix (or a verified export); the broken chain stays as it is."""
        if source is not None:
            checked = verify_chain(source)
            if not checked.ok:
                raise BadInput(
                    f"the file's chain is broken at event {checked.broken_at} ({checked.reason}); nothing changed"
                )
        with self._pinning() as pins, self.store.write():
            self.store.lock_workspace(workspace)
            old = self.active_chain(workspace)
            rows = self.chain_rows(old)
            report = self.verify(workspace, old, rows)
            if old is None or report.ok:
                raise BadInput(f"the memory log of {workspace} is intact; there is nothing to repair")
            keep = list(source) if source is not None else self._trusted_rows(workspace, rows, report)
            note = f"repair of chain {old}: broken at event {report.broken_at} ({report.reason})"
            new = self._new_chain(workspace, note)
            for row in keep:
                self._insert(new, row)
            self._seal(workspace, new, keep, pins)
        return RepairResult(workspace, old, new, len(keep), len(rows) - report.trusted, report.broken_at, report.reason)

    def _trusted_rows(self, workspace: str, rows: list[ChainRow], report: ChainReport) -> list[ChainRow]:
        """What a repair continues from: the chain's trusted events, or, for a replaced log, those
        of the chain pinned before it (as far as its seals vouch for them)."""
        if report.restore_from is None:
            return rows[: report.trusted]
        pinned = self.chain_rows(report.restore_from)
        found = seal.check(
            seal.read_key(), workspace, report.restore_from, pinned, self.seals_of(report.restore_from), None, False
        )
        return pinned[: min(found.sealed, verify_chain(pinned).trusted)]
