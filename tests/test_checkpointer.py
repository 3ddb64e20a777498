"""Checkpoints beside a bulk write (storage/checkpointer.py), on real SQLite files."""

from pathlib import Path

import apsw

from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.ingest import importer
from pi_memory.storage.store import Store
from reliability import eventually


def _write_transactions(store: Store, count: int) -> None:
    for i in range(count):
        with store.write():
            store.conn.execute("INSERT INTO t(body) VALUES (?)", (f"{i:06d}" * 2000,))


def _after_the_threads_pass(store: Store) -> None:
    """Wait (not a timing assertion: up to a minute on a loaded machine) until no pass of the thread
    is under way, once it has made one. The last may have ended and been finished by the writes
    already (the state is back to idle), or be waiting for the next write to finish it."""
    checkpointer = store.aside_checkpointer
    assert checkpointer is not None
    eventually(lambda: checkpointer.passes and checkpointer._state != "copying", 60, every_s=0.005)
    assert checkpointer.passes and checkpointer._state != "copying"


def _wal_frames(path: Path) -> int:
    """The WAL's frames, as a checkpoint of another connection counts them. While the thread's own
    pass holds the checkpoint lock, SQLite answers busy with -1 frames: wait for that pass to end
    (the event, bounded at a minute on a loaded machine), as CI once met under load."""
    conn = apsw.Connection(str(path))
    try:
        assert str(conn.execute("PRAGMA journal_mode").fetchall()[0][0]).lower() == "wal"
        counted: list[int] = []

        def count() -> bool:
            ((busy, frames, _copied),) = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            counted[:] = [int(frames)]
            return frames >= 0 or not busy

        eventually(count, 60, every_s=0.005)
        assert counted[0] >= 0, "the checkpoint lock stayed taken"
        return counted[0]
    finally:
        conn.close()


def test_checkpoints_aside_keep_the_wal_short_and_give_the_setting_back(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "a.db")
    store.conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)")
    store.conn.execute("PRAGMA wal_autocheckpoint=0")  # a deferring connection: no checkpoint of its own
    with store.checkpointing(pages=40, aside=True):
        assert store.scalar("PRAGMA wal_autocheckpoint") == 0  # the thread checkpoints, not the commits
        _write_transactions(store, 300)  # ~5 pages a transaction: ~1,400 frames without checkpoints
        _after_the_threads_pass(store)
        # copies what a finished pass left, then starts the WAL over; or, if the writes finished the
        # last pass already, adds to a WAL that has grown by less than a pass's 40 frames since
        _write_transactions(store, 1)
        assert _wal_frames(store.path) < 2 * 40
    assert store.scalar("PRAGMA wal_autocheckpoint") == 0
    assert store.scalar("SELECT count(*) FROM t") == 301
    store.close()


def test_without_checkpoints_the_same_writes_leave_a_long_wal(tmp_path: Path) -> None:
    """The control for the test above: its writes do grow the WAL past what it allows."""
    store = Store.open(tmp_path / "a.db")
    store.conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)")
    store.conn.execute("PRAGMA wal_autocheckpoint=0")
    _write_transactions(store, 300)
    assert _wal_frames(store.path) > 600
    store.close()


def test_an_import_checkpoints_beside_its_writes_and_loses_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(importer, "BULK_CHECKPOINT_PAGES", 5)
    monkeypatch.setattr(importer, "BATCH", 1)  # a transaction per file: many commits to checkpoint
    with Archive.open(tmp_path / "a.db") as a:
        before = a.store.scalar("PRAGMA wal_autocheckpoint")
        report = a.import_paths([PI_DATA])
        assert a.store.scalar("PRAGMA wal_autocheckpoint") == before
        assert report.added == a.store.scalar("SELECT count(*) FROM msg") > 0
    with Archive.open(tmp_path / "a.db") as again:
        assert again.import_paths([PI_DATA]).added == 0


def test_a_bulk_write_inside_one_that_checkpoints_aside_leaves_the_checkpoints_to_it(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "a.db")
    store.conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)")
    store.conn.execute("PRAGMA wal_autocheckpoint=0")
    with store.checkpointing(pages=40, aside=True):
        outer = store.aside_checkpointer
        with store.checkpointing():  # e.g. a capture's bulk write during an import
            assert store.aside_checkpointer is outer
            assert store.scalar("PRAGMA wal_autocheckpoint") == 0
        _write_transactions(store, 30)  # the thread is still woken: the WAL hook is still its own
        _after_the_threads_pass(store)
        _write_transactions(store, 1)
        assert _wal_frames(store.path) < 2 * 40
    store.close()
