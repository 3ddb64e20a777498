"""Memory operations for people and models: remember, propose, edit, forget, confirm, list, read.

Design idea: each operation is a small builder that looks at the replayed
state and returns the one event to append (or the existing record, when
there is nothing to write); `MemoryLog.append` runs it inside the write
transaction and judges the event with the policy before sealing it. The user
writes authoritative records; a model only proposes, and its proposals stay
provisional until the user confirms them (`confirm`, or `remember` with the
same text).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..core import ids
from ..errors import BadInput, NotFound
from ..storage.store import Store
from . import chain, find, seal
from .chain import ChainReport
from .log import Appended, MemoryLog, MemoryRefused, now_ms, workspace_key
from .model import MemoryRecord
from .policy import (
    SourceIds,
    body_problem,
    cap_source_ids,
    find_duplicate,
    normalize_kind,
    normalize_priority,
    normalize_scope,
    normalize_status,
    visible_to,
)
from .projection import PROJECTIONS, MemoryState

MIN_ID_PREFIX = 4  # hex chars after `mem_` accepted as a unique prefix


@dataclass
class WriteResult:
    """What a write did, for people (`message`) and for tools (`to_dict`)."""

    action: str  # created, superseded, confirmed, pinned, unpinned, resolved, edited, unchanged
    record: MemoryRecord
    written: bool
    seq: int | None = None
    sources: SourceIds | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "action": self.action,
            "written": self.written,
            "seq": self.seq,
            "memory": self.record.to_dict(),
        }
        if self.sources is not None:
            out["source_entry_ids"] = self.sources.to_dict()
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Listing:
    workspace: str
    query: str
    status: str | None
    kind: str | None
    found: list[find.Found]
    chain: ChainReport
    ignored: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "query": self.query,
            "status": self.status,
            "kind": self.kind,
            "chain": self.chain.to_dict(),
            "memories": [{**f.record.to_dict(), "score": round(f.score, 4)} for f in self.found],
        }


def resolve_id(state: MemoryState, ref: str, session_id: str | None) -> MemoryRecord:
    """A full id or a unique prefix (`mem_` optional) of a memory this session can see."""
    ref = ids.reference(ref, "memory id")
    want = ref if ref.startswith("mem_") else "mem_" + ref
    visible = [r for r in state.records.values() if visible_to(r, session_id)]
    exact = [r for r in visible if r.id == want]
    if exact:
        return exact[0]
    if len(want) - 4 < MIN_ID_PREFIX:
        raise BadInput(f"memory id {ref!r} is too short: give at least {MIN_ID_PREFIX} characters after mem_")
    matches = [r for r in visible if r.id.startswith(want)]
    if not matches:
        raise NotFound(f"no memory {ref!r} in this workspace (a session memory is visible only in its own session)")
    if len(matches) > 1:
        raise BadInput(f"memory id {ref!r} is ambiguous: give more characters")
    return matches[0]


def _checked(fn: Any, *args: Any) -> Any:
    """Turn a policy ValueError into the one-line BadInput the front ends show."""
    try:
        return fn(*args)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def _restated(same: MemoryRecord, pin: bool) -> tuple[str, dict[str, Any] | None]:
    """The user says again what is already there: confirm a proposal, pin if asked, else nothing."""
    if same.status == "provisional":
        return "confirmed", {"type": "confirm", "id": same.id, "pin": pin}
    if pin and not same.pinned:
        return "pinned", {"type": "pin", "id": same.id}
    return "unchanged", None


def _stamp(event: dict[str, Any], author: str, session_id: str | None, ts: int | None) -> dict[str, Any]:
    return {**event, "author": author, "session_id": session_id, "ts": ts if ts is not None else now_ms()}


class MemoryVectors(Protocol):
    """Semantic recall's part in memory operations (`vectors.memories`, handed in by the facade)."""

    def rerank(self, query: str, records: list[MemoryRecord], found: list[find.Found]) -> list[find.Found]:
        """A search's lexical hits among `records`, fused with the records' vectors."""

    def retired(self) -> None:
        """A write retired a text (resolve, edit, supersede): its vector goes."""


RETIRING = ("resolve", "edit", "supersede")  # events after which a text no longer stands


class Memories:
    """The memory operations of one archive; every method names its workspace by cwd."""

    def __init__(self, store: Store, name_other_workspaces: bool = True, vectors: MemoryVectors | None = None) -> None:
        self.log = MemoryLog(store)
        self.vectors = vectors
        # a person is told which workspace holds a memory not found here; a model never learns
        # the paths of other workspaces (the tools of the bridge and the MCP server)
        self.name_other_workspaces = name_other_workspaces

    # --- writes by the user ------------------------------------------------------

    def remember(
        self,
        cwd: str | Path | None,
        text: str,
        *,
        kind: str | None = None,
        scope: str | None = None,
        session_id: str | None = None,
        priority: int = 0,
        pin: bool = False,
        supersede: str | None = None,
        source_entry_ids: Iterable[object] = (),
        ts: int | None = None,
    ) -> WriteResult:
        """The user's authoritative write. The same text as an open proposal confirms it; as an active record, nothing."""
        problem = body_problem(text)
        if problem:
            raise BadInput(problem)
        scope_v = _checked(normalize_scope, scope)
        priority_v = _checked(normalize_priority, priority)
        kind_v = _checked(normalize_kind, kind) if kind else None
        if scope_v == "session" and not session_id:
            raise BadInput("a session memory needs --session ID")
        sources = cap_source_ids(source_entry_ids)
        outcome: dict[str, str] = {}

        def build(state: MemoryState) -> dict[str, Any] | MemoryRecord:
            base = {
                "body": text,
                "scope": scope_v,
                "priority": priority_v,
                "pinned": pin,
                "source_entry_ids": list(sources.ids),
            }
            if supersede:
                old = self._resolve(state, supersede, session_id, cwd)
                outcome["action"] = "superseded"
                base.update(type="supersede", supersedes=old.id, kind=kind_v or old.kind, pinned=pin or old.pinned)
                return _stamp(base, "user", session_id, ts)
            same = find_duplicate(state.records.values(), text, scope_v, session_id)
            if same is not None:
                outcome["action"], event = _restated(same, pin)
                return _stamp(event, "user", session_id, ts) if event else same
            outcome["action"] = "created"
            return _stamp({**base, "type": "create", "kind": kind_v or "note"}, "user", session_id, ts)

        done = self._append(cwd, build)
        return self._result(outcome["action"], done, sources)

    def confirm(
        self, cwd: str | Path | None, ref: str, *, session_id: str | None = None, pin: bool = False
    ) -> WriteResult:
        return self._change(cwd, ref, "confirm", "user", session_id, {"pin": pin})

    def pin(
        self, cwd: str | Path | None, ref: str, *, session_id: str | None = None, pinned: bool = True
    ) -> WriteResult:
        return self._change(cwd, ref, "pin" if pinned else "unpin", "user", session_id, {})

    def forget(
        self, cwd: str | Path | None, ref: str, *, session_id: str | None = None, author: str = "user"
    ) -> WriteResult:
        return self._change(cwd, ref, "resolve", author, session_id, {})

    # --- writes by a model ----------------------------------------------------------

    def propose(
        self,
        cwd: str | Path | None,
        text: str,
        *,
        kind: str | None = None,
        scope: str | None = None,
        session_id: str | None = None,
        source_entry_ids: Iterable[object] = (),
        author: str = "model",
        ts: int | None = None,
    ) -> WriteResult:
        """A provisional proposal; the same text already open in the same scope is not written again."""
        if author not in ("model", "rule"):
            raise BadInput("proposals come from a model or a rule")
        problem = body_problem(text)
        if problem:
            raise BadInput(problem)
        scope_v, kind_v = _checked(normalize_scope, scope), _checked(normalize_kind, kind)
        if scope_v == "session" and not session_id:
            raise BadInput("a session memory needs a session id")
        sources = cap_source_ids(source_entry_ids)

        def build(state: MemoryState) -> dict[str, Any] | MemoryRecord:
            same = find_duplicate(state.records.values(), text, scope_v, session_id)
            if same is not None:
                return same
            event = {"type": "create", "body": text, "kind": kind_v, "scope": scope_v, "priority": 0, "pinned": False}
            return _stamp({**event, "source_entry_ids": list(sources.ids)}, author, session_id, ts)

        done = self._append(cwd, build)
        note = "a proposal stays provisional until the user confirms it"
        if done.event is None:
            return WriteResult(
                "unchanged", _require(done.record), False, None, sources, "the same memory is already there"
            )
        return WriteResult("created", _require(done.record), True, _seq(done), sources, note)

    def edit(
        self, cwd: str | Path | None, ref: str, text: str, *, session_id: str | None = None, author: str = "model"
    ) -> WriteResult:
        problem = body_problem(text)
        if problem:
            raise BadInput(problem)
        return self._change(cwd, ref, "edit", author, session_id, {"body": text})

    # --- reads ----------------------------------------------------------------------

    def state(self, cwd: str | Path | None) -> tuple[str, MemoryState, ChainReport]:
        workspace = workspace_key(cwd)
        state, report = self.log.state(workspace)
        return workspace, state, report

    def list(
        self,
        cwd: str | Path | None,
        query: str = "",
        *,
        status: str | None = None,
        kind: str | None = None,
        session_id: str | None = None,
        now: int | None = None,
    ) -> Listing:
        query = ids.query(query)
        status_v = _checked(normalize_status, status)
        kind_v = _checked(normalize_kind, kind) if kind else None
        workspace, state, report = self.state(cwd)
        chosen = find.select(
            state.records.values(), session_id=session_id, status=status_v, kind=kind_v, now_ms=now or now_ms()
        )
        found = find.search(chosen, query)
        if self.vectors is not None and query.strip():
            found = self.vectors.rerank(query, chosen, found)
        return Listing(workspace, query, status_v, kind_v, found, report, state.ignored)

    def get(self, cwd: str | Path | None, ref: str, *, session_id: str | None = None) -> MemoryRecord:
        _workspace, state, _report = self.state(cwd)
        return self._resolve(state, ref, session_id, cwd)

    def injection_text(
        self, cwd: str | Path | None, session_id: str | None, budget: int = find.INJECTION_BUDGET
    ) -> str:
        _workspace, state, _report = self.state(cwd)
        return find.render_injection(state.records.values(), session_id, budget)

    # --- plumbing -------------------------------------------------------------------

    def _resolve(self, state: MemoryState, ref: str, session_id: str | None, cwd: str | Path | None) -> MemoryRecord:
        """`resolve_id`, and when a full id is not here, say which workspace holds it."""
        try:
            return resolve_id(state, ref, session_id)
        except NotFound:
            if not self.name_other_workspaces:
                raise
            elsewhere = [w for w in self.log.workspaces_holding(ref.strip()) if w != workspace_key(cwd)]
            if elsewhere:
                raise NotFound(
                    f"memory {ref.strip()} belongs to workspace {elsewhere[0]}: pass --cwd {elsewhere[0]}"
                ) from None
            raise

    def _append(self, cwd: str | Path | None, build: Any) -> Appended:
        done = self.log.append(workspace_key(cwd), build)
        if self.vectors is not None and done.event is not None and done.event.get("type") in RETIRING:
            self.vectors.retired()
        return done

    def _change(
        self, cwd: str | Path | None, ref: str, kind: str, author: str, session_id: str | None, extra: dict[str, Any]
    ) -> WriteResult:
        def build(state: MemoryState) -> dict[str, Any]:
            target = self._resolve(state, ref, session_id, cwd)
            return _stamp({"type": kind, "id": target.id, **extra}, author, session_id, None)

        done = self._append(cwd, build)
        return self._result(_PAST[kind], done, None)

    def _result(self, action: str, done: Appended, sources: SourceIds | None) -> WriteResult:
        record = _require(done.record)
        return WriteResult(action, record, done.event is not None, _seq(done), sources)


_PAST = {"confirm": "confirmed", "pin": "pinned", "unpin": "unpinned", "resolve": "resolved", "edit": "edited"}


def _require(record: MemoryRecord | None) -> MemoryRecord:
    if record is None:  # pragma: no cover - append always returns the touched record
        raise MemoryRefused("the memory write did not produce a record")
    return record


def _seq(done: Appended) -> int | None:
    return int(done.event["seq"]) if done.event is not None else None


def clear_caches() -> None:
    """Forget what this process kept of the chains it verified, replayed and searched (a row's
    checks, seals, replayed states, bodies' tokens): the next call costs what it costs a new
    process, as one `pi-memory` command is (`bench/memory_log.py` measures both)."""
    chain.clear_cache()
    seal.clear_cache()
    PROJECTIONS.clear()
    find.clear_cache()
