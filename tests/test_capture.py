"""Live capture meets the importer on one key: message_end copies, branch backfills and file imports land once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.storage.store import decode_text

SDK_TREE = PI_DATA / "pi-0.73.1-sdk-faux-tree.jsonl"
RPC_COMPACTION = PI_DATA / "pi-0.73.1-cli-rpc-faux-compaction.jsonl"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def archived(archive: Archive, session_id: str) -> list[tuple[Any, ...]]:
    rows = archive.store.rows("SELECT role, text, entry_id FROM msg WHERE session_id=? ORDER BY ts, seq", (session_id,))
    return [(role, decode_text(text), entry_id) for role, text, entry_id in rows]


def live_replay(archive: Archive, path: Path) -> str:
    """What the extension does: register the session, then capture each message as message_end gives it."""
    header, *entries = lines(path)
    archive.ensure_session(header["id"], header["cwd"], started_at=header["timestamp"])
    for e in entries:
        if e["type"] == "message":
            archive.capture_message(header["id"], e["message"])
    return str(header["id"])


def test_live_capture_then_import_of_the_same_file_adds_nothing_twice(archive: Archive, tmp_path: Path) -> None:
    sid = live_replay(archive, RPC_COMPACTION)
    live_count = len(archived(archive, sid))
    report = archive.import_paths([RPC_COMPACTION])
    rows = archived(archive, sid)
    with Archive.open(tmp_path / "reference.db") as ref:
        ref.import_paths([RPC_COMPACTION])
        expected = archived(ref, sid)
    assert live_count > 0
    assert report.added == len(expected) - live_count  # only the compaction summary was not seen live
    assert rows == expected  # same texts, same order, every entry id filled in


def test_backfill_fills_entry_ids_and_a_second_backfill_changes_nothing(archive: Archive) -> None:
    sid = live_replay(archive, RPC_COMPACTION)
    entries = lines(RPC_COMPACTION)[1:]
    first = archive.backfill(sid, entries)
    second = archive.backfill(sid, entries)
    assert first.reconciled > 0 and first.added == 1  # the compaction entry was never a message_end
    assert second.added == 0 and second.reconciled == 0
    assert second.present == first.present + first.reconciled + first.added
    assert all(entry_id for _role, _text, entry_id in archived(archive, sid))


def test_capture_message_returns_the_id_once_and_none_for_a_duplicate(archive: Archive) -> None:
    archive.ensure_session("s-dup", "/home/dev/proj")
    message = {"role": "user", "content": "SSE 断流 proxy_buffering", "timestamp": 1_796_000_000_000}
    first = archive.capture_message("s-dup", message)
    again = archive.capture_message("s-dup", message)
    assert isinstance(first, int) and again is None
    assert archive.search("断流")[0].msg_id == first


def test_system_messages_of_pi_1x_are_not_archived(archive: Archive) -> None:
    archive.ensure_session("s-sys", "/p")
    message = {"role": "system", "sections": {"docs": "x"}, "timestamp": 1_796_000_000_000}
    assert archive.capture_message("s-sys", message) is None
    assert archived(archive, "s-sys") == []


def test_a_custom_message_stamped_differently_on_disk_is_reconciled_not_duplicated(
    archive: Archive, tmp_path: Path
) -> None:
    sid = "01a2364c-0000-7000-8000-00000000c0de"
    live = {
        "role": "custom",
        "customType": "hint",
        "content": "记忆提示 memory hint",
        "display": True,
        "timestamp": 1_796_206_613_450,
    }
    entry = {
        "type": "custom_message",
        "id": "aa11bb22",
        "parentId": None,
        "timestamp": "2026-12-02T10:16:53.457Z",  # 7 ms after the live stamp
        "customType": "hint",
        "content": "记忆提示 memory hint",
        "display": True,
    }
    archive.ensure_session(sid, "/home/dev/proj")
    archive.capture_message(sid, live)
    report = archive.backfill(sid, [entry])
    session_file = tmp_path / "s.jsonl"
    header = {
        "type": "session",
        "version": 3,
        "id": sid,
        "timestamp": "2026-12-02T10:16:53.000Z",
        "cwd": "/home/dev/proj",
    }
    session_file.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n", encoding="utf-8")
    imported = archive.import_paths([session_file])
    assert report.reconciled == 1 and report.added == 0
    assert imported.added == 0
    assert archived(archive, sid) == [("custom", "记忆提示 memory hint", "aa11bb22")]


def test_capture_entry_archives_a_compaction_summary_once(archive: Archive) -> None:
    compaction = next(e for e in lines(SDK_TREE) if e["type"] == "compaction")
    archive.ensure_session("s-c", "/p")
    first = archive.capture_entry("s-c", compaction)
    again = archive.capture_entry("s-c", compaction)
    assert isinstance(first, int) and again is None
    assert archived(archive, "s-c") == [("summary", compaction["summary"], compaction["id"])]


def test_a_message_for_an_unregistered_session_still_gets_a_session_row(archive: Archive) -> None:
    archive.capture_message("s-orphan", {"role": "user", "content": "hello", "timestamp": 1_796_000_000_000})
    assert archive.session_info("s-orphan").messages == 1


def test_set_session_name_renames_and_blank_clears(archive: Archive) -> None:
    archive.ensure_session("s-n", "/p", name="first")
    archive.set_session_name("s-n", "修复 SSE 断流")
    assert archive.session_info("s-n").name == "修复 SSE 断流"
    archive.set_session_name("s-n", "  ")
    assert archive.session_info("s-n").name is None


def test_import_slice_walks_a_folder_in_batches(archive: Archive) -> None:
    folder = PI_DATA / "agent-dir"
    seen, offset, batches = 0, 0, 0
    while offset is not None:
        part = archive.import_slice([folder], offset, limit=2)
        seen += part.report.files
        offset = part.next_offset
        batches += 1
    assert (seen, batches) == (3, 2)
    assert archive.stats().sessions == 3


def test_a_forked_session_backfill_does_not_copy_messages_archived_under_the_first_session(archive: Archive) -> None:
    sid = live_replay(archive, RPC_COMPACTION)
    entries = lines(RPC_COMPACTION)[1:]
    archive.backfill(sid, entries)
    before = archive.stats().messages
    report = archive.backfill("fork-of-" + sid, entries)  # pi's fork writes the same entries, same ids
    assert report.added == 0
    assert archive.stats().messages == before


@pytest.mark.sqlite_only("WAL checkpoints of the archive file; PostgreSQL checkpoints on its own schedule")
def test_a_bulk_import_checkpoints_as_it_goes_even_when_live_writes_defer_checkpoints(archive: Archive) -> None:
    archive.store.defer_checkpoints()
    with archive.store.checkpointing():
        assert archive.store.scalar("PRAGMA wal_autocheckpoint") == 1000
    assert archive.store.scalar("PRAGMA wal_autocheckpoint") == 0
    archive.import_slice([PI_DATA / "agent-dir"], 0, limit=10)
    assert archive.store.scalar("PRAGMA wal_autocheckpoint") == 0
