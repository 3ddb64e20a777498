"""The facade's long-term memory and self-review methods (`Archive.memory_*`, `review`, `review_link`).

A mixin of `Archive`, in its own file so the facade reads by topic: each method
is one call into `pi_memory.memory` or `pi_memory.review`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.sources.readers import AGENTS
from ..errors import BadInput
from ..memory import ChainReport, Listing, Memories, MemoryRecord, WriteResult, workspace_key
from ..memory.find import INJECTION_BUDGET
from ..memory.log import ImportResult, RepairResult, parse_export
from ..storage.store import Store
from .model import parse_since, parse_until

if TYPE_CHECKING:
    from ..review import Report
    from ..vectors.memories import MemoryVectors

REVIEW_MIN_COUNT = 3  # a finding seen this often gets a draft rule


class MemoryMethods:
    """Long-term memory (one hash-chained log per workspace) and the self-review that reads it."""

    store: Store

    if TYPE_CHECKING:  # `SemanticMethods`

        def memory_vectors(self, mode: str | None = None) -> MemoryVectors | None: ...

    # --- long-term memory (see `pi_memory.memory`) ---------------------------------------

    @property
    def memories(self) -> Memories:
        """The memory operations; every method names its workspace by a cwd (None: the current directory).
        A search is hybrid when the memories have vectors (semantic recall), as a message search is."""
        return Memories(self.store, vectors=self.memory_vectors())

    @property
    def model_memories(self) -> Memories:
        """The memory operations a model's tools call: a memory id not found in the workspace is
        only that, never "it belongs to workspace /other/path" (`memories` tells a person)."""
        return Memories(self.store, name_other_workspaces=False, vectors=self.memory_vectors())

    def memory_remember(self, cwd: str | Path | None, text: str, **options: Any) -> WriteResult:
        return self.memories.remember(cwd, text, **options)

    def memory_list(self, cwd: str | Path | None, query: str = "", mode: str | None = None, **filters: Any) -> Listing:
        """A workspace's memories matching `query`; `mode` as in `search` (None: hybrid when the
        memories have vectors, else lexical)."""
        return Memories(self.store, vectors=self.memory_vectors(mode)).list(cwd, query, **filters)

    def memory_get(self, cwd: str | Path | None, ref: str, session_id: str | None = None) -> MemoryRecord:
        return self.memories.get(cwd, ref, session_id=session_id)

    def memory_forget(self, cwd: str | Path | None, ref: str, session_id: str | None = None) -> WriteResult:
        return self.memories.forget(cwd, ref, session_id=session_id)

    def memory_confirm(
        self, cwd: str | Path | None, ref: str, session_id: str | None = None, pin: bool = False
    ) -> WriteResult:
        return self.memories.confirm(cwd, ref, session_id=session_id, pin=pin)

    def memory_pin(
        self, cwd: str | Path | None, ref: str, session_id: str | None = None, pinned: bool = True
    ) -> WriteResult:
        return self.memories.pin(cwd, ref, session_id=session_id, pinned=pinned)

    def memory_propose(self, cwd: str | Path | None, text: str, **options: Any) -> WriteResult:
        return self.memories.propose(cwd, text, **options)

    def memory_verify(
        self, cwd: str | Path | None = None, all_workspaces: bool = False
    ) -> list[tuple[str, ChainReport]]:
        log = self.memories.log
        keys = log.workspaces() if all_workspaces else [workspace_key(cwd)]
        return [(key, log.report(key)) for key in keys]

    def memory_export(self, cwd: str | Path | None, raw: bool = False) -> tuple[list[str], ChainReport]:
        return self.memories.log.export_lines(workspace_key(cwd), raw=raw)

    def memory_import(self, cwd: str | Path | None, lines: Iterable[str]) -> ImportResult:
        rows, torn = parse_export(lines)
        return self.memories.log.import_rows(workspace_key(cwd), rows, torn)

    def memory_repair(self, cwd: str | Path | None, lines: Iterable[str] | None = None) -> RepairResult:
        rows = parse_export(lines)[0] if lines is not None else None
        return self.memories.log.repair(workspace_key(cwd), rows)

    def memory_injection_text(
        self, cwd: str | Path | None, session_id: str | None, budget: int = INJECTION_BUDGET
    ) -> str:
        return self.memories.injection_text(cwd, session_id, budget)

    # --- self-review (see `pi_memory.review`) ----------------------------------------------

    def review(
        self,
        since: str | int | None = None,
        until: str | int | None = None,
        project: str | None = None,
        agent: str | None = None,
        min_count: int = REVIEW_MIN_COUNT,
        cwd: str | Path | None = None,
    ) -> Report:
        """Recurring failures, user corrections, cost of work, draft rules and the ledger of the
        workspace's memories (`cwd`), over the runs started in [since, until] (dates inclusive)."""
        from ..review import MemoryInfo, Scope, review

        if agent and agent not in AGENTS:
            raise BadInput(f"unknown agent {agent!r}: use one of {', '.join(AGENTS)}")
        if int(min_count) < 1:
            raise BadInput("min_count must be at least 1")
        scope = Scope(
            since if isinstance(since, int) else parse_since(since),
            until if isinstance(until, int) else parse_until(until),
            project or None,
            agent or None,
        )
        workspace, state, _report = self.memories.state(cwd)
        memories = [MemoryInfo(r.id, r.body, r.created_ts, r.status) for r in state.records.values()]
        memories.sort(key=lambda m: (m.created_ts, m.id))
        with self.store.read():
            return review(self.store, scope, int(min_count), workspace, memories)

    def review_link(self, memory_id: str, signature: str, cwd: str | Path | None = None) -> dict[str, Any]:
        """Say that a memory addresses a finding (a signature, its `sig_` key, or a command as typed);
        the ledger then counts that finding before and after the memory was written."""
        from ..review import add_link, link_key

        if not signature or not signature.strip():
            raise BadInput("give the finding's signature (or its sig_ key) as shown by `pi-memory review`")
        record = self.memory_get(cwd, memory_id)
        key, text = link_key(signature)
        workspace = workspace_key(cwd)
        added = add_link(self.store, workspace, record.id, key, text)
        return {"workspace": workspace, "memory_id": record.id, "key": key, "signature": text, "added": added}
