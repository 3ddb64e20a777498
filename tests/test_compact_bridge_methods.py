"""The compaction methods of the bridge: plan, commit, status and read by entry id, over the real protocol."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compact_helpers import Branch
from test_bridge import run


def small_session() -> Branch:
    b = Branch()
    b.user("fix the flaky cache test in tests/test_cache.py")
    b.assistant("reading", calls=[("c1", "read", {"path": "tests/test_cache.py"})])
    b.result("c1", "def test_cache(): assert rebuild_index() == 3", name="read")
    b.assistant("done: the index rebuild was racy")
    b.user("now run the suite")
    b.assistant("", calls=[("c2", "bash", {"command": "pytest -q"})])
    b.result("c2", "12 passed, 1 failed")
    b.assistant("one failure left")
    return b


def plan_request(b: Branch, cwd: Path, kept: str, aborted: bool = False) -> dict[str, Any]:
    preparation = {"firstKeptEntryId": kept, "tokensBefore": 900, "isSplitTurn": False}
    params = {"branchEntries": b.entries, "preparation": preparation, "aborted": aborted, "reason": "manual"}
    return {"id": 1, "method": "compact_plan", "params": dict(params, cwd=str(cwd), sessionId="s-1")}


def test_compact_plan_returns_our_checkpoint_with_the_trigger_reason(archive_target: str, tmp_path: Path) -> None:
    b = small_session()
    (out,) = run(archive_target, plan_request(b, tmp_path, "e005"))
    compaction = out["result"]["compaction"]
    assert compaction["firstKeptEntryId"] == "e005" and compaction["tokensBefore"] == 900
    assert "e001" in compaction["summary"] and compaction["details"]["reason"] == "manual"


def test_compact_plan_cancels_an_aborted_request_and_skips_when_the_takeover_is_off(
    archive_target: str, tmp_path: Path
) -> None:
    b = small_session()
    (aborted,) = run(archive_target, plan_request(b, tmp_path, "e005", aborted=True))
    assert aborted["result"]["cancel"] is True
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "pi-memory.json").write_text(json.dumps({"overrideDefaultCompaction": False}))
    (off,) = run(archive_target, plan_request(b, tmp_path, "e005"))
    assert off["result"]["skip"] is True


def test_compact_committed_records_one_window_and_status_reports_it(archive_target: str, tmp_path: Path) -> None:
    b = small_session()
    (planned,) = run(archive_target, plan_request(b, tmp_path, "e005"))
    c = planned["result"]["compaction"]
    b.compaction(c["firstKeptEntryId"], c["summary"], c["details"])
    entry = b.entries[-1]
    commit = {"session_id": "s-1", "entry": entry, "branchEntries": b.entries, "cwd": str(tmp_path), "reason": "manual"}
    _started, first, again, status = run(
        archive_target,
        {"id": 1, "method": "session_start", "params": {"session_id": "s-1", "cwd": str(tmp_path)}},
        {"id": 2, "method": "compact_committed", "params": commit},
        {"id": 3, "method": "compact_committed", "params": commit},
        {"id": 4, "method": "compact_status", "params": {"cwd": str(tmp_path), "session_id": "s-1"}},
    )
    assert first["result"]["written"] is True and first["result"]["window"]["compaction_entry_id"] == entry["id"]
    assert again["result"]["written"] is False
    assert "reason manual" in status["result"]["text"] and status["result"]["status"]["windows"] == 1


def test_read_entries_returns_the_cited_entries_as_evidence(archive_target: str, tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "s-1", "timestamp": "2026-12-02T10:00:00.000Z", "cwd": "/p"}
    session.write_text("\n".join(json.dumps(e) for e in [header, *small_session().entries]) + "\n")
    imported, found, bad = run(
        archive_target,
        {"id": 1, "method": "import", "params": {"paths": [str(session)]}},
        {"id": 2, "method": "read_entries", "params": {"session_id": "s-1", "entry_ids": ["e003", "e999"]}},
        {"id": 3, "method": "read_entries", "params": {"session_id": "s-1", "entry_ids": "e003"}},
    )
    assert imported["result"]["added"] == 8
    assert "rebuild_index() == 3" in found["result"]["text"] and found["result"]["read"]["missing"] == ["e999"]
    assert found["result"]["text"].startswith("[archived history")
    assert bad["error"]["code"] == "bad_params"


def test_recall_reads_a_compacted_entry_of_the_current_branch_by_id(archive_target: str, tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "s-1", "timestamp": "2026-12-02T10:00:00.000Z", "cwd": "/p"}
    branch = small_session().entries
    session.write_text("\n".join(json.dumps(e) for e in [header, *branch]) + "\n")
    ids = [e["id"] for e in branch]
    ask = {"session_id": "s-1", "branch_ids": ids, "args": {"entry_ids": ["e003"], "session_id": "other"}}
    _imported, found, elsewhere, bad = run(
        archive_target,
        {"id": 1, "method": "import", "params": {"paths": [str(session)]}},
        {"id": 2, "method": "recall", "params": ask},
        {"id": 3, "method": "recall", "params": dict(ask, branch_ids=["e001"])},
        {"id": 4, "method": "recall", "params": {"args": {}}},
    )
    assert "rebuild_index() == 3" in found["result"]["text"]
    assert "rebuild_index() == 3" not in elsewhere["result"]["text"]  # not on that branch
    assert bad["error"]["code"] == "bad_params"
