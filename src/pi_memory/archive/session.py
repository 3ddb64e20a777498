"""The facade's methods for a host inside a live session: capture, compaction, folding, recall.

A mixin of `Archive`, in its own file so the facade reads by topic: what the pi
extension calls through the bridge while a session runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..ingest.capture import BackfillReport, ImportSlice, LiveCapture, import_slice
from ..ingest.importer import Importer
from ..search.messages import Searcher
from ..storage.store import Store
from ..storage.writes import run_deferred_hooks

if TYPE_CHECKING:
    from ..compact.config import Settings
    from ..compact.fold.plan import FoldSettings


class SessionMethods:
    """Live capture, compaction takeover, in-session folding and the recall tool."""

    store: Store
    searcher: Searcher

    if TYPE_CHECKING:

        def resolve_session(self, ref: str) -> str: ...

        def session_roots(self, agent: str | None = None, existing: bool = True) -> list[Path]: ...

        def semantic_state(self) -> Any: ...

    # --- compaction (see `pi_memory.compact`) -------------------------------------------

    def compact_plan(self, params: dict[str, Any]) -> dict[str, Any]:
        """The bridge's answer to `session_before_compact`; `{"skip": true}` lets pi summarize itself."""
        from ..compact import load_settings, timed_plan

        settings = load_settings(params.get("cwd") or Path.cwd())
        if not settings.takeover:
            return {"skip": True, "reason": "compaction takeover is off (enabled / overrideDefaultCompaction)"}
        return timed_plan(params, settings.values)

    def compact_committed(
        self,
        session_id: str,
        compaction_entry: dict[str, Any],
        branch_entries: list[dict[str, Any]] | None = None,
        cwd: str | None = None,
        reason: str | None = None,
    ) -> Any:
        """After `session_compact`: record the window and the rule-derived memories (once per entry)."""
        from ..compact.commit import on_compacted

        return on_compacted(self, session_id, compaction_entry, branch_entries, cwd, reason=reason)

    def compact_windows(self, session_id: str) -> list[Any]:
        from ..compact.window import list_windows

        return list_windows(self.store, session_id)

    def verify_compact_windows(self, session_id: str) -> list[str]:
        """Problems in a session's window hash chain; empty when it holds."""
        from ..compact.window import list_windows, verify_chain

        return verify_chain(list_windows(self.store, session_id))

    def compact_status(self, cwd: str | Path, session_id: str | None = None) -> Any:
        from ..compact.status import compact_status

        status = compact_status(self, cwd, self.resolve_session(session_id) if session_id else None)
        status.semantic = self.semantic_state().to_dict()  # `SemanticMethods`
        return status

    def read_entries(
        self, session: str, entry_ids: list[str], raw: bool = False, offset: int = 0, limit: int = 4000
    ) -> Any:
        """Messages (and, with `raw`, verbatim entry segments) by pi entry id: what a checkpoint cites."""
        from ..compact.recall import read_entries

        with self.store.read():
            return read_entries(self.store, self.resolve_session(session), entry_ids, raw, offset, limit)

    # --- settings ---------------------------------------------------------------------

    def settings(self, cwd: str | Path | None) -> Settings:
        """pi-memory's settings in effect for a workspace (its `pi-memory.json` over the global one)."""
        from ..compact.config import load_settings

        return load_settings(cwd or Path.cwd())

    # --- in-session folding (pi_memory.compact.fold) --------------------------------------

    def _fold_settings(self, cwd: str) -> FoldSettings:
        from ..compact.fold.plan import FoldSettings

        return FoldSettings.from_values(self.settings(cwd).values["fold"])

    def fold_context(
        self, session_id: str, cwd: str, messages: list[Any], entries: list[Any], folds: list[Any], now: int
    ) -> dict[str, Any]:
        """pi's `context` event: `{edits: [{start, end, message}], records: [new fold records]}`."""
        from ..compact.fold.service import on_context

        lookup = self._fold_lookup(session_id)
        return on_context(messages, entries, folds, self._fold_settings(cwd), lookup, now)

    def fold_now(
        self, session_id: str, cwd: str, entries: list[Any], folds: list[Any], now: int, **options: Any
    ) -> dict[str, Any]:
        """The `fold` tool (`summary=`) or `/fold` (without): `{records, text}`; `keep_last` spares the newest."""
        from ..compact.fold.service import fold_now

        lookup = self._fold_lookup(session_id)
        return fold_now(entries, folds, self._fold_settings(cwd), lookup, now, **options)

    def fold_status(
        self, cwd: str, folds: list[Any] | None, compacted: int = 0, session_id: str | None = None
    ) -> dict[str, Any]:
        """`/fold status`: from the records the host sends, or (no `folds`) from the archived session."""
        from ..compact.fold.service import status

        if folds is None and session_id:
            records, compacted = self.fold_records(session_id)
            folds = [r.to_dict() for r in records]
        return status(folds or [], compacted, self._fold_settings(cwd))

    def _fold_lookup(self, session_id: str) -> Callable[[list[str]], dict[str, str]]:
        return lambda ids: self.fold_addresses(session_id, ids)

    def fold_addresses(self, session_id: str, entry_ids: list[str]) -> dict[str, str]:
        """pi entry id -> run address (`r12/m4`) for the entries of a session the archive has in runs."""
        from ..compact.fold.archive import addresses_for_entries

        with self.store.read():
            return addresses_for_entries(self.store, session_id, entry_ids)

    def fold_records(self, session: str) -> tuple[list[Any], int]:
        """A session's fold records in order, and how many precede its last compaction."""
        from ..compact.fold.archive import session_fold_records

        with self.store.read():
            return session_fold_records(self.store, self.resolve_session(session))

    # --- live capture (capture.py) -------------------------------------------------------

    @property
    def live(self) -> LiveCapture:
        if self._live is None:
            self._live = LiveCapture(self.store)
        return self._live

    _live: LiveCapture | None = None

    def ensure_session(
        self,
        session_id: str,
        cwd: str,
        name: str | None = None,
        started_at: int | str | None = None,
        agent: str = "pi",
        source_path: str | None = None,
    ) -> None:
        self.live.ensure_session(session_id, cwd, name, started_at, agent, source_path)

    def capture_message(
        self, session_id: str, message: dict[str, Any], entry_id: str | None = None, parent_id: str | None = None
    ) -> int | None:
        return self.live.capture_message(session_id, message, entry_id, parent_id)

    def capture_entry(self, session_id: str, entry: dict[str, Any]) -> int | None:
        return self.live.capture_entry(session_id, entry)

    def backfill(self, session_id: str, entries: list[dict[str, Any]]) -> BackfillReport:
        return self.live.backfill(session_id, entries)

    def set_session_name(self, session_id: str, name: str | None) -> None:
        self.live.set_session_name(session_id, name)

    def live_mode(self) -> None:
        """For a long-lived host (the bridge): live writes leave their after-write hooks (runs) and
        WAL checkpoints for an idle moment, `catch_up` and `checkpoint`, and a capture that finds the
        write lock taken keeps its message in a spool until then (`ingest/spool.py`)."""
        self.store.defer_checkpoints()
        self.store.defer_hooks()
        self.live.use_spool()

    def catch_up(self) -> bool:
        """Write what live captures spooled and run the after-write hooks they put off; True if any ran."""
        drained = self._live.drain() > 0 if self._live is not None else False
        return run_deferred_hooks(self.store) or drained

    def checkpoint(self) -> None:
        self.store.checkpoint()

    @property
    def schema_version(self) -> int:
        return self.store.user_version

    def import_slice(self, paths: Iterable[Path | str] | None, offset: int = 0, limit: int = 20) -> ImportSlice:
        """One batch of a long import, so a host can yield between batches and show progress."""
        targets = [Path(p).expanduser() for p in paths] if paths is not None else self.session_roots(None)
        return import_slice(Importer(self.store), targets, offset, limit)

    # --- recall inside a session (see `pi_memory.recall`) ------------------------------

    def recall(self, params: dict[str, Any], text: bool = True) -> dict[str, Any]:
        """The model's recall tool: search, list or read records by branch, file, kind and entry id.

        `params` as the tool sends them (see `recall.PARAMS`); the answer is JSON-able, with the
        `text` a model reads (evidence header, within 16,000 chars) unless `text=False`.
        """
        from ..recall import format_recall, recall

        result = recall(self, params)
        out = result.to_dict()
        if text:
            out["text"] = format_recall(result)
        return out
