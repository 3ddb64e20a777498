"""The facade's methods for provenance: blame, changed files, a file's history, export, resume.

A mixin of `Archive`, in its own file so the facade reads by topic (see `pi_memory.provenance`).
An archive from before the `edit` table reads the edits of its messages once, the first time one
of these is asked (`edits_ready`), in short transactions.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import BadInput
from ..provenance import export as exporting
from ..provenance import query, record
from ..provenance.query import Blame, ChangedFiles, History
from ..provenance.resume import Resume, resume
from ..runs.table import get_run
from ..storage.pg.sql import PermissionDenied
from ..storage.store import Store

__all__ = ["Blame", "ChangedFiles", "History", "ProvenanceMethods", "Resume"]

Progress = Callable[[int, int], None]


def _run_ref(value: str) -> int | None:
    text = value.strip().lower()
    return int(text[1:]) if text.startswith("r") and text[1:].isdigit() else None


class ProvenanceMethods:
    """Edits as data, and what is built on them."""

    store: Store
    edits_progress: Progress | None = None  # told (sessions done, of) while old messages are read once

    if TYPE_CHECKING:

        def resolve_session(self, ref: str) -> str: ...

    def edits_ready(self) -> None:
        """Read the edits of the messages archived before the `edit` table, once (a role that may
        only read a team archive answers from the rows there are: a writer's blame fills them)."""
        if not record.backfilled(self.store):
            try:
                record.backfill(self.store, self.edits_progress)
            except PermissionDenied:
                pass

    def rebuild_edits(self) -> int:
        """Read every archived message's edits again (idempotent); returns the rows that were missing."""
        return record.backfill(self.store, self.edits_progress)

    def blame(self, target: str, cwd: str | None = None, require_edits: bool = False) -> Blame:
        """`PATH[:LINE[-LINE]]` (relative to `cwd`, default here): who wrote each line of the file now.

        `require_edits`: refuse (NotFound) a file no archived session changed, before reading it."""
        self.edits_ready()
        return query.blame(self.store, target, cwd or os.getcwd(), require_edits)

    def file_history(self, target: str, cwd: str | None = None) -> History:
        """Every run that changed the file, oldest first."""
        self.edits_ready()
        return query.history(self.store, target, cwd or os.getcwd())

    def changed_files(self, target: str) -> ChangedFiles:
        """What a session (id, short id, prefix) or a run (`rN`) changed, file by file."""
        self.edits_ready()
        run_id = _run_ref(target)
        if run_id is not None:
            return query.run_files(self.store, run_id)
        return query.session_files(self.store, self.resolve_session(target))

    def observe_edit(
        self,
        session_id: str,
        call_id: str,
        path: str,
        before_hash: str | None = None,
        after_hash: str | None = None,
        git_commit: str | None = None,
        observed_at: int | None = None,
        before_text: str | None = None,
    ) -> bool:
        """What pi's extension saw as an edit ran (see `record.observe`); True: it kept the file before."""
        import time

        if not session_id or not call_id or not path:
            raise BadInput("an observed edit needs its session_id, call_id and path")
        when = observed_at if observed_at is not None else int(time.time() * 1000)
        return record.observe(
            self.store, session_id, call_id, path, before_hash, after_hash, git_commit, when, before_text
        )

    def export(self, target: str, fmt: str = "md", thinking: bool = False) -> str:
        """A session (id, short id, prefix) or a run (`rN`) as Markdown, self-contained HTML or JSON."""
        if fmt not in exporting.FORMATS:
            raise BadInput(f"unknown format {fmt!r}: use one of {', '.join(exporting.FORMATS)}")
        run_id = _run_ref(target)
        if run_id is not None:
            session_id = get_run(self.store, run_id).session_id
        else:
            session_id = self.resolve_session(target)
        return exporting.render(exporting.load(self.store, session_id, run_id, thinking), fmt)

    def resume(self, session: str) -> Resume:
        """The agent's own command that continues a session (a run: its session)."""
        run_id = _run_ref(session)
        session_id = get_run(self.store, run_id).session_id if run_id is not None else self.resolve_session(session)
        return resume(self.store, session_id)
