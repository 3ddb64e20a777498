"""The bridge protocol: one JSON request per line in, one response per line out, never an exit on bad input."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import python_cli
from pi_memory.frontends.bridge.server import MAX_REQUEST_BYTES, METHODS, TOO_LARGE, LineReader, serve
from pi_memory.storage.pg import redact


def run(db: Path, *requests: Any, raw: bytes = b"", limit: int = MAX_REQUEST_BYTES) -> list[dict[str, Any]]:
    """Serve the given requests (objects are JSON-encoded, bytes sent as they are) and parse every response."""
    body = b"".join(r if isinstance(r, bytes) else json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in requests)
    out = io.BytesIO()
    code = serve(db, io.BytesIO(body + raw), out, limit=limit)
    assert code == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


USER = {"role": "user", "content": "缓存索引 rebuild", "timestamp": 1_796_000_000_000}


def test_malformed_json_gets_a_parse_error_and_the_next_request_is_answered(archive_target: str) -> None:
    out = run(archive_target, b"{not json\n", {"id": 1, "method": "hello"})
    assert out[0]["id"] is None and out[0]["error"]["code"] == "parse_error"
    assert out[1]["id"] == 1 and out[1]["result"]["db"] == redact(archive_target)  # a URL without its password


def test_unknown_method_is_an_error_naming_the_known_ones(archive_target: str) -> None:
    (out,) = run(archive_target, {"id": 7, "method": "frobnicate"})
    assert out["id"] == 7 and out["error"]["code"] == "unknown_method"
    assert "capture" in out["error"]["message"]


def test_bad_params_are_reported_per_request(archive_target: str) -> None:
    out = run(
        archive_target,
        {"id": 1, "method": "capture", "params": {"session_id": "s"}},
        {"id": 2, "method": "capture", "params": {"session_id": 5, "message": USER}},
        {"id": 3, "method": "search", "params": {"query": "x", "limit": "ten"}},
        {"id": 4, "method": "read", "params": []},
        {"id": 5, "method": "backfill", "params": {"session_id": "s", "entries": [1, 2]}},
    )
    assert [o["error"]["code"] for o in out] == ["bad_params"] * 5
    assert "message" in out[0]["error"]["message"]


def test_a_request_that_is_not_an_object_or_lacks_a_method_is_invalid(archive_target: str) -> None:
    out = run(archive_target, b"[1,2]\n", {"id": 3})
    assert [o["error"]["code"] for o in out] == ["invalid_request", "invalid_request"]
    assert out[1]["id"] == 3


def test_an_oversize_request_is_refused_and_skipped_to_its_end(archive_target: str) -> None:
    huge = json.dumps(
        {
            "id": 1,
            "method": "capture",
            "params": {"session_id": "s", "message": {"role": "user", "content": "x" * (MAX_REQUEST_BYTES + 10)}},
        }
    )
    out = run(archive_target, huge.encode() + b"\n", {"id": 2, "method": "stats"})
    assert out[0]["error"]["code"] == "too_large"
    assert out[1]["id"] == 2 and out[1]["result"]["stats"]["messages"] == 0


def test_capture_is_idempotent_and_search_finds_it_with_the_evidence_header(archive_target: str) -> None:
    out = run(
        archive_target,
        {"id": 1, "method": "session_start", "params": {"session_id": "s1", "cwd": "/home/dev/shop"}},
        {"id": 2, "method": "capture", "params": {"session_id": "s1", "message": USER}},
        {"id": 3, "method": "capture", "params": {"session_id": "s1", "message": USER}},
        {"id": 4, "method": "search", "params": {"query": "缓存"}},
        {"id": 5, "method": "read", "params": {"session_id": "s1"}},
    )
    msg_id = out[1]["result"]
    assert isinstance(msg_id, int) and out[2]["result"] is None
    assert out[3]["result"]["hits"][0]["msg_id"] == msg_id
    assert out[3]["result"]["text"].startswith("[archived history")
    assert f"[{msg_id}] user: 缓存索引 rebuild" in out[4]["result"]["text"]


def test_read_of_an_unknown_session_is_not_found(archive_target: str) -> None:
    (out,) = run(archive_target, {"id": 1, "method": "read", "params": {"session_id": "0123456789abcdef"}})
    assert out["error"]["code"] == "not_found"


def test_shutdown_answers_then_stops_reading(archive_target: str) -> None:
    out = run(archive_target, {"id": 1, "method": "shutdown"}, {"id": 2, "method": "stats"})
    assert out == [{"id": 1, "result": {"bye": True}}]


def test_blank_lines_are_ignored_and_eof_ends_cleanly(archive_target: str) -> None:
    assert run(archive_target, b"\n\n", {"id": 1, "method": "stats"})[0]["id"] == 1


def test_methods_is_a_plain_registry_other_features_can_extend(archive_target: str) -> None:
    METHODS["echo_for_test"] = lambda _archive, params: params
    try:
        (out,) = run(archive_target, {"id": 1, "method": "echo_for_test", "params": {"a": 1}})
    finally:
        del METHODS["echo_for_test"]
    assert out == {"id": 1, "result": {"a": 1}}


def test_the_bridge_command_serves_over_real_pipes(archive_target: str) -> None:
    requests = [
        {"id": 1, "method": "session_start", "params": {"session_id": "s1", "cwd": "/p"}},
        {"id": 2, "method": "capture", "params": {"session_id": "s1", "message": USER}},
        {"id": 3, "method": "stats"},
    ]
    body = "".join(json.dumps(r) + "\n" for r in requests) + "garbage\n"
    proc = subprocess.run([*python_cli(), "bridge"], input=body.encode(), capture_output=True, timeout=60)
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0
    assert out[2]["result"]["stats"]["messages"] == 1
    assert out[3]["error"]["code"] == "parse_error"


def test_import_reports_batches_until_next_offset_is_null(archive_target: str, tmp_path: Path) -> None:
    folder = Path(__file__).parent / "data" / "pi" / "agent-dir"
    out = run(
        archive_target,
        {"id": 1, "method": "import", "params": {"paths": [str(folder)], "limit": 2}},
        {"id": 2, "method": "import", "params": {"paths": [str(folder)], "limit": 2, "offset": 2}},
    )
    assert (out[0]["result"]["total_files"], out[0]["result"]["next_offset"]) == (3, 2)
    assert out[1]["result"]["next_offset"] is None
    assert out[0]["result"]["added"] + out[1]["result"]["added"] > 0


def test_line_reader_is_idle_only_when_no_request_is_waiting() -> None:
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb", buffering=0) as r, os.fdopen(write_fd, "wb", buffering=0) as w:
        reader = LineReader(r)
        assert reader.idle(0.01)
        w.write(b'{"id": 1}\n{"id": 2}\n')
        assert not reader.idle(0.01)
        assert reader.readline() == b'{"id": 1}\n'
        assert not reader.idle(0.01)  # the second line is already in our buffer, invisible to select
        assert reader.readline() == b'{"id": 2}\n'
        assert reader.idle(0.01)


def test_line_reader_skips_an_oversize_line_and_keeps_the_lines_after_it() -> None:
    stream = io.BytesIO(b"x" * 1000 + b"\n" + b"y" * 50 + b"\n" + b"tail-without-newline")
    reader = LineReader(stream, limit=100)
    assert reader.readline() is TOO_LARGE
    assert reader.readline() == b"y" * 50 + b"\n"
    assert reader.readline() == b"tail-without-newline"
    assert reader.readline() is None


def test_a_damaged_archive_is_replaced_and_the_first_session_start_says_so(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    db_path.write_bytes(b"this is not a database" * 100)
    out = run(
        str(db_path),
        {"id": 1, "method": "session_start", "params": {"session_id": "s1", "cwd": "/p"}},
        {"id": 2, "method": "session_start", "params": {"session_id": "s2", "cwd": "/p"}},
    )
    assert out[0]["result"]["recovered_from"] == str(db_path) + ".corrupt"
    assert out[1]["result"]["recovered_from"] is None
    assert (db_path.parent / (db_path.name + ".corrupt")).exists()


REPLY = {
    "role": "assistant",
    "content": [{"type": "text", "text": "索引已重建。"}],
    "stopReason": "stop",
    "timestamp": 1_796_000_001_000,
}


def test_live_writes_put_run_summaries_off_until_a_read_needs_them(archive_target: str) -> None:
    from pi_memory import Archive
    from pi_memory.storage.writes import run_deferred_hooks

    with Archive.open(archive_target) as archive:
        archive.store.defer_hooks()
        archive.ensure_session("s2", "/home/dev/shop")
        archive.capture_message("s2", USER)
        archive.capture_message("s2", REPLY)
        assert archive.store.scalar("SELECT count(*) FROM run") == 0  # the write returned first
        assert run_deferred_hooks(archive.store)
        assert archive.store.scalar("SELECT count(*) FROM run WHERE status='ok'") == 1
        assert not run_deferred_hooks(archive.store)


def test_live_writes_leave_indexing_to_the_idle_moment_and_search_then_finds_them(archive_target: str) -> None:
    from pi_memory import Archive
    from pi_memory.storage.pending import INDEX_PENDING
    from pi_memory.storage.writes import run_deferred_hooks

    with Archive.open(archive_target) as archive:
        archive.store.defer_hooks()
        archive.ensure_session("s5", "/home/dev/shop")
        archive.capture_message("s5", USER)
        archive.capture_message("s5", REPLY)
        archive.capture_message("s5", {"role": "user", "content": "畫一張架構圖", "timestamp": 1_796_000_002_000})
        if not archive.is_team:  # the team archive indexes in the write (no idle moment to wait for)
            assert archive.store.scalar("SELECT count(*) FROM msg WHERE indexed = ?", (INDEX_PENDING,)) == 3
            assert archive.store.counters()["indexed_docs"] == 0  # counted once indexed
        assert run_deferred_hooks(archive.store)
        assert archive.store.counters()["indexed_docs"] == 3
        assert {h.session_id for h in archive.search("索引")} == {"s5"}
        assert [h.text for h in archive.search("構")] == ["畫一張架構圖"]  # as typed, too


def test_messages_left_unindexed_by_a_writer_that_ended_first_are_indexed_when_the_archive_is_next_opened(
    tmp_path: Path,
) -> None:
    from pi_memory import Archive

    db = tmp_path / "a.db"
    with Archive.open(db) as archive:
        archive.store.defer_hooks()
        archive.ensure_session("s6", "/home/dev/shop")
        archive.capture_message("s6", USER)
        archive.capture_message("s6", REPLY)  # closed before any idle moment (a killed bridge)
    with Archive.open(db) as archive:
        assert archive.store.scalar("SELECT count(*) FROM msg WHERE indexed = 2") == 0
        assert archive.store.counters()["indexed_docs"] == 2
        assert {h.session_id for h in archive.search("索引")} == {"s6"}


@pytest.mark.sqlite_only("how the SQLite file stores a verbatim line")
def test_a_live_messages_verbatim_line_is_compressed_at_the_idle_moment_and_reads_the_same_before_and_after(
    tmp_path: Path,
) -> None:
    from pi_memory import Archive
    from pi_memory.storage.codec import decompress, plain_line
    from pi_memory.storage.writes import run_deferred_hooks

    def lines(archive: Archive) -> list[tuple[bytes, bytes]]:
        rows = archive.store.rows("SELECT e.raw, m.text FROM entry e JOIN msg m ON m.id = e.msg_id ORDER BY m.id")
        return [(bytes(raw), decompress(raw, text)) for raw, text in rows]

    db = tmp_path / "a.db"
    with Archive.open(db) as archive:
        archive.store.defer_hooks()
        archive.ensure_session("s7", "/home/dev/shop")
        archive.capture_message("s7", USER)
        archive.capture_message("s7", REPLY)
        before = lines(archive)
        assert all(plain_line(raw) is not None for raw, _ in before)  # the write left it as it is
        assert run_deferred_hooks(archive.store)
        after = lines(archive)
        assert all(
            plain_line(raw) is None and len(raw) < len(old) for (raw, _), (old, _) in zip(after, before, strict=True)
        )
        assert [line for _, line in after] == [line for _, line in before]
        assert json.loads(after[1][1])["message"] == REPLY
        archive.capture_message("s7", {"role": "user", "content": "再來一次", "timestamp": 1_796_000_003_000})
    with Archive.open(db) as archive:  # a writer that ended before its idle moment: the next opening packs it
        assert all(plain_line(raw) is None for raw, _ in lines(archive))
        assert json.loads(lines(archive)[2][1])["message"]["content"] == "再來一次"


def test_a_read_through_the_bridge_sees_runs_of_messages_captured_just_before(archive_target: str) -> None:
    out = run(
        archive_target,
        {"id": 1, "method": "session_start", "params": {"session_id": "s3", "cwd": "/home/dev/shop"}},
        {"id": 2, "method": "capture", "params": {"session_id": "s3", "message": USER}},
        {"id": 3, "method": "capture", "params": {"session_id": "s3", "message": REPLY}},
        {"id": 4, "method": "recall", "params": {"session_id": "s3", "args": {"action": "list", "scope": "session"}}},
    )
    records = out[3]["result"]["result"]["results"]
    assert len(records) == 2
    assert all(r["address"] and r["address"].startswith("r") for r in records)  # the run is already there
