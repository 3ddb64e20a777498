"""Window manifest: written only for committed compactions, once per entry, hash-chained per session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
import pytest

from compact_helpers import Branch
from pi_memory import Archive
from pi_memory.compact.commit import replaced_entries
from pi_memory.compact.plan import compact_plan, timed_plan
from pi_memory.compact.window import window_id_for
from pi_memory.errors import ArchiveError, BadInput
from test_compact_plan import busy_session

SID = "01a2364c-aaaa-7000-8000-000000000001"


def commit(b: Branch, kept: str, reason: str = "manual") -> dict[str, Any]:
    """Plan like the bridge does, then append the entry pi would write."""
    plan = timed_plan(
        {"branchEntries": b.entries, "preparation": {"firstKeptEntryId": kept, "tokensBefore": 5000}, "reason": reason}
    )
    c = plan["compaction"]
    b.compaction(c["firstKeptEntryId"], summary=c["summary"], details=c["details"])
    b.entries[-1].update(fromHook=True, tokensBefore=c["tokensBefore"])
    return b.entries[-1]


def test_a_committed_compaction_records_one_window(archive: Archive, tmp_path: Path) -> None:
    b = busy_session(3)
    entry = commit(b, b.user("go on"))
    done = archive.compact_committed(SID, entry, b.entries, cwd=None)
    w = done.window
    assert done.written and w.window_id == window_id_for(SID, entry["id"]) and w.seq == 1 and w.prev_hash is None
    assert w.kept_entry_id == entry["firstKeptEntryId"] and w.source_count == 24
    assert w.source_hash == entry["details"]["sourceHash"] and w.reason == "manual" and w.plan_ms is not None
    assert w.checkpoint_chars == len(entry["summary"]) and w.compactor == "pi-memory" and w.tokens_before == 5000


def test_a_duplicate_event_writes_once(archive: Archive) -> None:
    b = busy_session(1)
    entry = commit(b, b.user("next"))
    first = archive.compact_committed(SID, entry, b.entries)
    again = archive.compact_committed(SID, json.loads(json.dumps(entry)), b.entries)
    assert first.written and not again.written and again.window.hash == first.window.hash
    assert len(archive.compact_windows(SID)) == 1


def test_windows_chain_per_session_with_parent_links(archive: Archive) -> None:
    b = busy_session(1)
    e1 = commit(b, b.user("second"))
    archive.compact_committed(SID, e1, b.entries)
    b.assistant("reply")
    e2 = commit(b, b.user("third"))
    archive.compact_committed(SID, e2, b.entries)
    archive.compact_committed("another-session-0001", e1, b.entries)
    windows = archive.compact_windows(SID)
    assert [w.seq for w in windows] == [1, 2]
    assert windows[1].prev_hash == windows[0].hash and windows[1].parent_window_id == windows[0].window_id
    assert archive.verify_compact_windows(SID) == []
    assert archive.compact_windows("another-session-0001")[0].prev_hash is None


def test_a_tampered_window_is_reported_and_rows_cannot_be_updated(archive: Archive, backend: str) -> None:
    b = busy_session(1)
    archive.compact_committed(SID, commit(b, b.user("second")), b.entries)
    with pytest.raises((apsw.ConstraintError, ArchiveError), match="immutable"):
        archive.store.execute("UPDATE compact_window SET source_count = 1")
    on_table = " ON compact_window" if backend == "postgres" else ""
    archive.store.execute(f"DROP TRIGGER compact_window_immutable{on_table}")
    archive.store.execute("UPDATE compact_window SET source_count = 1")
    assert "hash does not match" in archive.verify_compact_windows(SID)[0]


def test_a_cancelled_plan_leaves_nothing_behind(archive: Archive) -> None:
    b = busy_session(2)
    plan = archive.compact_plan(
        {"branchEntries": b.entries, "preparation": {"firstKeptEntryId": b.entries[-1]["id"]}, "aborted": True}
    )
    assert plan["cancel"]
    assert archive.compact_windows(SID) == [] and archive.store.scalar("SELECT count(*) FROM compact_window") == 0


def test_planning_writes_nothing(archive: Archive) -> None:
    b = busy_session(2)
    b.user("x")
    plan = archive.compact_plan({"branchEntries": b.entries, "preparation": {"firstKeptEntryId": b.entries[-1]["id"]}})
    assert "compaction" in plan and archive.store.scalar("SELECT count(*) FROM compact_window") == 0


def test_takeover_off_skips_so_pi_summarizes(archive: Archive, tmp_path: Path) -> None:
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "pi-memory.json").write_text('{"overrideDefaultCompaction": false}')
    b = busy_session(1)
    b.user("x")
    plan = archive.compact_plan(
        {"branchEntries": b.entries, "preparation": {"firstKeptEntryId": b.entries[-1]["id"]}, "cwd": str(tmp_path)}
    )
    assert plan.get("skip") and "cancel" not in plan and "compaction" not in plan


def test_manifest_off_records_no_window(archive: Archive, tmp_path: Path) -> None:
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "pi-memory.json").write_text('{"window": {"manifest": false}}')
    b = busy_session(1)
    done = archive.compact_committed(SID, commit(b, b.user("x")), b.entries, cwd=str(tmp_path))
    assert done.window is None and not done.written


def test_pi_own_compaction_is_recorded_without_a_source_hash(archive: Archive) -> None:
    b = busy_session(1)
    kept = b.user("x")
    b.compaction(kept, summary="## Goal\nLLM text", details={"readFiles": [], "modifiedFiles": []})
    w = archive.compact_committed(SID, b.entries[-1], b.entries, reason="threshold").window
    assert (
        w.compactor == "pi"
        and w.reason == "threshold"
        and w.source_hash is None
        and w.source_count is None
        and w.kept_entry_id == kept
    )


def test_bad_events_are_refused_with_a_clear_error(archive: Archive) -> None:
    with pytest.raises(BadInput):
        archive.compact_committed(SID, {"type": "message", "id": "x"})
    with pytest.raises(BadInput):
        archive.compact_committed("", {"type": "compaction", "id": "x", "firstKeptEntryId": "y"})


def test_replaced_entries_match_what_the_plan_compacted() -> None:
    b = busy_session(2)
    kept = b.user("third")
    plan = compact_plan(b.entries, {"firstKeptEntryId": kept})["compaction"]
    b.compaction(kept, summary=plan["summary"], details=plan["details"])
    replaced = replaced_entries(b.entries, b.entries[-1])
    assert [e["id"] for e in replaced] == plan["details"]["sourceEntryIds"]
