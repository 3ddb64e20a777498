"""A live capture that finds the write lock taken is kept in its process's spool, never lost, never reordered."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest

from pi_memory import Archive
from pi_memory.frontends.bridge.server import handle_line
from pi_memory.ingest.spool import Spool, orphans, spool_folder
from pi_memory.storage.store import decode_text

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="spools need flock")

SRC = Path(__file__).resolve().parent.parent / "src"


def message(text: str, ts: int) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


@contextmanager
def lock_held(db: Path) -> Iterator[None]:
    """Another connection holds the archive's write lock (as an import's transaction does)."""
    other = apsw.Connection(str(db))
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def texts(db: Path, session_id: str) -> list[str]:
    conn = apsw.Connection(str(db))
    try:
        rows = conn.execute("SELECT text FROM msg WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
    finally:
        conn.close()
    return [decode_text(t) for (t,) in rows]


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Archive]:
    with Archive.open(tmp_path / "a.db") as archive:
        archive.live_mode()
        archive.ensure_session("s1", "/home/dev/shop")
        yield archive


def test_a_capture_that_finds_the_lock_taken_is_spooled_and_written_at_the_idle_moment(live: Archive) -> None:
    with lock_held(live.path):
        assert live.capture_message("s1", message("缓存索引 rebuilt at noon", 1_796_000_000_000)) is None
        assert live.live.spooled == 1
        assert texts(live.path, "s1") == []  # not in the archive yet: the lock was someone else's
    assert live.catch_up()
    assert texts(live.path, "s1") == ["缓存索引 rebuilt at noon"]
    assert [h.text for h in live.search("rebuilt")] == ["缓存索引 rebuilt at noon"]
    assert len(live.live.spool or []) == 0


def test_a_capture_behind_a_spool_keeps_the_sessions_order(live: Archive) -> None:
    with lock_held(live.path):
        live.capture_message("s1", message("first", 1_796_000_000_000))
        live.capture_message("s1", message("second", 1_796_000_001_000))
    # the lock is free again: this capture goes behind the two and writes all three, in order
    live.capture_message("s1", message("third", 1_796_000_002_000))
    assert texts(live.path, "s1") == ["first", "second", "third"]
    assert len(live.live.spool or []) == 0


def test_a_message_without_a_timestamp_keeps_the_time_it_was_captured_not_the_time_it_was_written(
    live: Archive,
) -> None:
    with lock_held(live.path):
        live.capture_message("s1", {"role": "user", "content": "no stamp"})
        captured = live.live.spool.records()[0]["received_at"]  # type: ignore[union-attr]
    live.catch_up()
    assert live.store.scalar("SELECT ts FROM msg WHERE session_id = 's1'") == captured


def test_closing_the_archive_writes_what_its_spool_holds(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    archive = Archive.open(db)
    archive.live_mode()
    archive.ensure_session("s1", "/home/dev/shop")
    with lock_held(db):
        archive.capture_message("s1", message("kept until close", 1_796_000_000_000))
    archive.close()
    assert texts(db, "s1") == ["kept until close"]
    assert list(spool_folder(db).glob("*.jsonl")) == []  # an empty spool is removed


def test_a_live_processs_spool_is_not_taken_by_another_opener(live: Archive) -> None:
    with lock_held(live.path):
        live.capture_message("s1", message("mine", 1_796_000_000_000))
    with Archive.open(live.path):
        pass  # an opener adopts only spools nobody holds
    assert texts(live.path, "s1") == []
    assert len(live.live.spool or []) == 1


CAPTURE_THEN_WAIT = r"""
import sys
from pi_memory import Archive
archive = Archive.open(sys.argv[1])
archive.live_mode()
archive.ensure_session("s9", "/home/dev/shop")
print("ready", flush=True)
sys.stdin.readline()
archive.capture_message("s9", {"role": "user", "content": "said just before the kill", "timestamp": 1796000000000})
print("spooled" if archive.live.spooled else "written", flush=True)
sys.stdin.readline()  # killed here
"""


def test_a_spool_left_by_a_killed_bridge_is_written_by_the_next_process_to_open_the_archive(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.Popen(
        [sys.executable, "-c", CAPTURE_THEN_WAIT, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        with lock_held(db):
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "spooled"  # acknowledged, not yet in the archive
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert texts(db, "s9") == []  # the kill landed before anything wrote it
        assert len(list(spool_folder(db).glob("*.jsonl"))) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    with Archive.open(db) as archive:
        assert [h.text for h in archive.search("the kill")] == ["said just before the kill"]
    assert list(spool_folder(db).glob("*.jsonl")) == []


def test_a_spool_written_twice_adds_nothing_the_second_time(live: Archive) -> None:
    with lock_held(live.path):
        live.capture_message("s1", message("once", 1_796_000_000_000))
    assert live.live.spool is not None and live.live.spool.path is not None
    left = live.live.spool.path.read_bytes()
    live.catch_up()
    # a bridge killed between its commit and the truncation leaves the same records behind
    (spool_folder(live.path) / "4242-dead.jsonl").write_bytes(left)
    with Archive.open(live.path):
        pass
    assert texts(live.path, "s1") == ["once"]
    assert not (spool_folder(live.path) / "4242-dead.jsonl").exists()


def test_bad_input_is_refused_at_capture_and_nothing_is_spooled(live: Archive) -> None:
    from pi_memory.errors import BadInput

    with lock_held(live.path), pytest.raises(BadInput):
        live.capture_message("s1", "not an object")  # type: ignore[arg-type]
    assert live.live.spooled == 0


def test_a_read_through_the_bridge_sees_a_capture_that_was_spooled(live: Archive) -> None:
    def request(method: str, **params: Any) -> dict[str, Any]:
        line = json.dumps({"id": 1, "method": method, "params": params}).encode()
        return handle_line(live, line)

    with lock_held(live.path):
        answer = request("capture", session_id="s1", message=message("nginx proxy_buffering off", 1_796_000_000_000))
        assert answer["result"] is None and live.live.spooled == 1
    found = request("search", query="proxy_buffering")
    assert len(found["result"]["hits"]) == 1
    assert "user: nginx ⟦proxy_buffering⟧ off" in found["result"]["text"]


def abandon(spool: Spool) -> None:
    """What a process killed with records in its spool leaves: the file, nobody holding it."""
    os.close(spool._fd)  # type: ignore[arg-type]
    spool._fd = None


def test_a_spool_cut_mid_line_gives_back_its_whole_records(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    spool = Spool(db)
    spool.append({"kind": "message", "session_id": "s", "message": {"role": "user", "content": "a"}})
    assert spool.path is not None
    with spool.path.open("ab") as f:
        f.write(b'{"kind": "message", "sess')  # a full disk cut the last line
    abandon(spool)
    assert [[r["message"]["content"] for r in records] for _p, records, _rm in orphans(db)] == [["a"]]


def test_an_orphan_spool_is_listed_until_removed_and_a_held_one_never(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    held = Spool(db)
    held.append({"kind": "message", "session_id": "s", "message": {"role": "user", "content": "alive"}})
    left = Spool(db)
    left.append({"kind": "message", "session_id": "s", "message": {"role": "user", "content": "orphan"}})
    abandon(left)
    found = []
    for _path, records, remove in orphans(db):
        found += [r["message"]["content"] for r in records]
        remove()
    assert found == ["orphan"]
    assert [path for path, _records, _remove in orphans(db)] == []  # removed once written
    held.close()
    assert list(spool_folder(db).glob("*.jsonl")) == [held.path]  # closed with a record: left for adoption


def test_a_capture_the_spool_cannot_take_waits_for_the_lock_instead(
    live: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from pi_memory.storage.store import _busy_waiter

    def disk_full(self: Spool, record: dict[str, Any]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Spool, "append", disk_full)
    other = apsw.Connection(str(live.path))
    other.execute("BEGIN IMMEDIATE")
    waited: list[bool] = []

    def release() -> None:  # the capture started to wait for the lock: its holder lets go (the event, no clock)
        waited.append(True)
        other.execute("ROLLBACK")

    store = live.store
    store.conn.setbusyhandler(_busy_waiter(release, lambda: store.busy_limit_s))
    try:
        msg_id = live.capture_message("s1", message("waited for", 1_796_000_000_000))
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
    assert waited  # it waited, rather than finding the lock free
    assert isinstance(msg_id, int) and live.live.spooled == 0
    assert texts(live.path, "s1") == ["waited for"]


def test_a_spool_whose_writing_is_cut_by_another_writer_is_kept_whole_and_written_once_later(
    live: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_memory.storage import writes
    from pi_memory.storage.store import Store

    with lock_held(live.path):
        live.capture_message("s1", message("one", 1_796_000_000_000))
        live.capture_message("s1", message("two", 1_796_000_001_000))
    monkeypatch.setattr(writes, "_fits", lambda *_a: False)  # a transaction a message
    other = apsw.Connection(str(live.path))
    plain_write = Store.write

    @contextmanager
    def then_taken(self: Store) -> Iterator[None]:
        with plain_write(self):
            yield
        if not other.in_transaction:
            other.execute("BEGIN IMMEDIATE")  # another writer takes the lock between two transactions

    monkeypatch.setattr(Store, "write", then_taken)
    try:
        assert live.capture_message("s1", message("three", 1_796_000_002_000)) is None  # no error
        assert texts(live.path, "s1") == ["one"]
        assert len(live.live.spool or []) == 3
    finally:
        other.execute("ROLLBACK")
        other.close()
        monkeypatch.setattr(Store, "write", plain_write)
    live.catch_up()
    assert texts(live.path, "s1") == ["one", "two", "three"]


def test_the_idle_moment_indexes_a_spool_in_the_write_that_archives_it(live: Archive) -> None:
    from pi_memory.storage.pending import INDEX_PENDING

    with lock_held(live.path):
        live.capture_message("s1", message("spooled then indexed at once", 1_796_000_000_000))
    live.live.drain()
    assert live.store.scalar("SELECT count(*) FROM msg WHERE indexed = ?", (INDEX_PENDING,)) == 0
    assert [h.text for h in live.search("indexed")] == ["spooled then indexed at once"]
