"""A writer waiting for the archive's lock says so, and a bulk import lets it in first (`storage.waiting`).

The announcements are POSIX record locks, which the kernel keeps per process, so what one process
announced is looked at from another process here (a child Python), as an import and a live pi
session are.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pi_memory.storage import waiting
from pi_memory.storage.store import Store

pytestmark = pytest.mark.skipif(waiting.fcntl is None, reason="no POSIX record locks on this system")

PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    print("free")
except OSError:
    print("held")
"""

WAITER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.lockf(fd, fcntl.LOCK_SH, 1, 0)
print("waiting", flush=True)
sys.stdin.readline()
"""


def _seen_from_another_process(path: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", PROBE, path], capture_output=True, text=True, check=True
    ).stdout.strip()


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_a_writer_waiting_for_the_lock_announces_it_until_its_begin_returns(tmp_path: Path) -> None:
    holder, writer = Store.open(tmp_path / "a.db"), Store.open(tmp_path / "a.db")
    wait_file = waiting.wait_file(tmp_path / "a.db")
    holder.conn.execute("BEGIN IMMEDIATE")
    began = threading.Event()

    def write() -> None:
        with writer.write():
            began.set()
            writer.conn.execute("UPDATE counter SET value = value + 1 WHERE name = 'indexed_docs'")

    thread = threading.Thread(target=write)
    thread.start()
    _until(lambda: Path(wait_file).exists(), "the waiting writer never announced itself")
    assert _seen_from_another_process(wait_file) == "held"
    assert not began.is_set()
    holder.conn.execute("COMMIT")
    thread.join()
    assert _seen_from_another_process(wait_file) == "free"
    assert writer.scalar("SELECT value FROM counter WHERE name = 'indexed_docs'") == 1
    holder.close()
    writer.close()


def test_a_writer_that_gets_the_lock_at_once_announces_nothing(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "a.db")  # the side file exists: the archive was created under its lock
    with store.write():
        assert _seen_from_another_process(waiting.wait_file(tmp_path / "a.db")) == "free"
    store.close()


def test_a_bulk_writer_leaves_the_lock_to_an_announced_waiter_before_its_next_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting, "YIELD_MAX_S", 30.0)
    store = Store.open(tmp_path / "a.db")
    waiter = subprocess.Popen(
        [sys.executable, "-c", WAITER, waiting.wait_file(tmp_path / "a.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert waiter.stdout and waiter.stdin
    assert waiter.stdout.readline().strip() == "waiting"
    began = threading.Event()

    def bulk_write() -> None:
        with store.yielding_to_waiters(), store.write():
            began.set()

    thread = threading.Thread(target=bulk_write)
    thread.start()
    try:
        time.sleep(0.2)  # long enough for a write that did not yield to be done
        assert not began.is_set(), "the bulk writer took the lock while another process waited for it"
    finally:
        waiter.communicate("done\n")
        thread.join()
    assert began.is_set()
    store.close()


def test_a_bulk_writer_does_not_wait_for_its_own_process_or_for_a_waiter_that_died(tmp_path: Path) -> None:
    store, other = Store.open(tmp_path / "a.db"), Store.open(tmp_path / "a.db")
    line = waiting.WaitingLine(tmp_path / "a.db")
    line._beginning = True
    line.busy()  # announced by this very process: not a reason to wait
    assert not other._line.someone_waiting()
    line.close()
    subprocess.run(  # a waiter killed while announced: the kernel drops its lock
        [sys.executable, "-c", WAITER.replace("sys.stdin.readline()", "os._exit(9)"), line.path],
        capture_output=True,
        check=False,
    )
    assert not store._line.someone_waiting()
    with store.yielding_to_waiters(), store.write():
        pass
    store.close()
    other.close()
