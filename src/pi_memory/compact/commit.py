"""After pi commits a compaction: record the window and write the rule-derived memories.

Design idea: this is the only place compaction writes anything, and it runs
on pi's `session_compact` event, i.e. after pi persisted the entry; a
cancelled or failed compaction never gets here. A duplicate event finds its
window and does nothing. The entries a compaction replaced are recomputed from
the branch (the same rule `compact_plan` used), so derivation needs no state
kept between the plan and the commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput
from .boundary import Entry, context_start
from .config import Settings, load_settings
from .derive import derive_memories, write_derived
from .window import WindowRecord, find_window, record_window


@dataclass
class Committed:
    window: WindowRecord | None
    written: bool  # False for a duplicate event or with the manifest turned off
    derived: int  # memory records newly written
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "window": self.window.to_dict() if self.window else None,
            "written": self.written,
            "derived": self.derived,
            "note": self.note,
        }


def replaced_entries(branch: Sequence[Entry], compaction: Mapping[str, Any]) -> list[Entry]:
    """The entries a committed compaction took out of the context, from the branch that holds it."""
    ids = [e.get("id") for e in branch]
    before = list(branch[: ids.index(compaction["id"])]) if compaction.get("id") in ids else list(branch)
    kept = next((i for i, e in enumerate(before) if e.get("id") == compaction.get("firstKeptEntryId")), -1)
    if kept < 0:
        return []
    return [e for e in before[context_start(before) : kept] if e.get("type") != "compaction"]


def on_compacted(
    archive: Any,
    session_id: str,
    compaction: Mapping[str, Any],
    branch: Sequence[Entry] | None = None,
    cwd: str | Path | None = None,
    settings: Settings | None = None,
    reason: str | None = None,
) -> Committed:
    """Record the window (if `window.manifest`) and derived memories (if `memory.deriveOnCompact`)."""
    if not isinstance(compaction, Mapping) or not isinstance(compaction.get("id"), str):
        raise BadInput("session_compact needs the compaction entry (with its id)")
    settings = settings or load_settings(cwd or Path.cwd())
    existing = find_window(archive.store, session_id, compaction["id"])
    if existing is not None:
        return Committed(existing, False, 0, "already recorded")
    derived = 0
    if cwd is not None and branch and settings.get("memory.enabled") and settings.get("memory.deriveOnCompact"):
        derived = write_derived(archive, session_id, str(cwd), derive_memories(replaced_entries(branch, compaction)))
    if not settings.get("window.manifest"):
        return Committed(None, False, derived, "window manifest is off")
    window, written = record_window(archive.store, session_id, compaction, branch, derived, reason)
    return Committed(window, written, derived if written else 0, "" if written else "already recorded")
