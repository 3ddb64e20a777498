"""The archive file under damage, races and a full disk; concurrent writers killed mid-work.

Each kind of damage is made to the file itself; each race is made with real processes started
together; each kill is proven to land while its victim was working (it had answered some of its
writes and not the rest). Waits are bounded by events, not by a clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest
from click.testing import CliRunner

from conftest import PI_DATA, python_cli
from pi_memory import Archive
from pi_memory.frontends.cli.main import cli
from pi_memory.storage.presence import OpeningLock
from pi_memory.storage.store import decode_text
from reliability import WAIT_S, env, many_sessions

VUE = PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _scribbled(db: Path) -> None:
    data = bytearray(db.read_bytes())
    pages = len(data) // 8192
    for page in range(pages // 2, pages):  # the second half of the file, whole pages
        data[page * 8192 : (page + 1) * 8192] = os.urandom(8192)
    db.write_bytes(bytes(data))


def _archive_with_messages(db: Path) -> None:
    with Archive.open(db) as archive:
        archive.import_paths([PI_DATA])
        archive.checkpoint()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


DAMAGE = {
    "not a database": lambda db: db.write_bytes(os.urandom(16384)),
    "zero length": lambda db: db.write_bytes(b""),
    "cut in half": lambda db: db.write_bytes(db.read_bytes()[: len(db.read_bytes()) // 2]),
    "pages scribbled over": _scribbled,
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_each_kind_of_damage_fails_check_in_one_line_and_a_reimport_rebuilds(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "a.db"
    _archive_with_messages(db)
    before = json.loads(run("--db", str(db), "stats", "--json")[1])["messages"]
    DAMAGE[kind](db)
    code, out, err = run("--db", str(db), "check")
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "integrity check failed" in err and "pi-memory import" in err and "Traceback" not in err
    assert len(list(tmp_path.glob("a.db*.corrupt"))) == 1
    assert run("--db", str(db), "check") == (0, "ok\n", "")  # the fresh archive is sound
    run("--db", str(db), "import", str(PI_DATA))
    assert json.loads(run("--db", str(db), "stats", "--json")[1])["messages"] == before


def test_a_sound_archive_checks_ok_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    _archive_with_messages(db)
    assert run("--db", str(db), "check") == (0, "ok\n", "")


def test_a_zero_length_file_is_damaged_not_an_empty_archive(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    db.write_bytes(b"")
    code, _out, err = run("--db", str(db), "check")
    assert code == 1 and "the file is empty (0 bytes): not an archive" in err
    assert (tmp_path / "a.db.corrupt").exists()


def test_an_archive_being_created_is_waited_for_never_taken_for_damaged(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    db.write_bytes(b"")
    creating = OpeningLock(db)
    with creating.held():  # a creator that has made the file and not yet its first page
        opener = subprocess.Popen(
            [*python_cli(), "--db", str(db), "stats", "--json"], env=env(), stdout=subprocess.PIPE, text=True
        )
        conn = apsw.Connection(str(db))
        conn.execute("PRAGMA page_size=8192; PRAGMA journal_mode=WAL; CREATE TABLE t(x); DROP TABLE t;")
        conn.close()
    out, _ = opener.communicate(timeout=WAIT_S)
    assert opener.returncode == 0 and json.loads(out)["messages"] == 0
    assert not list(tmp_path.glob("a.db*.corrupt"))


CAPTURER = """
import os, sys, time
from pathlib import Path
from pi_memory import Archive
db, go, n = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
while not go.exists():
    time.sleep(0.001)
with Archive.open(db) as archive:
    archive.live_mode()
    archive.ensure_session(f"sess-race-{n}", "/w/race")
    archive.capture_message(f"sess-race-{n}", {"role": "user", "content": f"racer {n} zebrafish", "timestamp": 1790000000000})
    archive.catch_up()
    print(archive.recovered_from or "", flush=True)
"""


def test_a_damaged_archive_opened_by_many_processes_at_once_is_moved_aside_once(tmp_path: Path) -> None:
    db, go = tmp_path / "a.db", tmp_path / "go"
    garbage = os.urandom(16384)
    db.write_bytes(garbage)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", CAPTURER, str(db), str(go), str(n)],
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(8)
    ]
    go.touch()
    results = [p.communicate(timeout=WAIT_S) for p in racers]
    assert all(p.returncode == 0 for p in racers), [err for _out, err in results]
    moved = list(tmp_path.glob("a.db*.corrupt"))
    assert len(moved) == 1 and moved[0].read_bytes() == garbage  # the damaged file, once
    assert sum(bool(out.strip()) for out, _err in results) == 1  # one process moved it
    with Archive.open(db) as archive:  # no racer's message went into a file moved aside
        assert len(archive.search("zebrafish", limit=20)) == 8 and archive.check() == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a small tmpfs needs root to mount")
def test_a_full_disk_is_one_line_and_the_next_import_completes_it(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("this machine refuses to mount a tmpfs")
    try:
        db, sessions = mount / "a.db", many_sessions(tmp_path / "s", 120)
        first = subprocess.run(
            [*python_cli(), "--db", str(db), "import", str(sessions)], env=env(), capture_output=True, text=True
        )
        assert first.returncode == 1 and first.stderr.startswith("Error: the disk is full"), first.stderr
        assert len(first.stderr.strip().splitlines()) == 1
        subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
        again = subprocess.run(
            [*python_cli(), "--db", str(db), "import", str(sessions), "--json"],
            env=env(),
            capture_output=True,
            text=True,
        )
        assert again.returncode == 0, again.stderr
        with Archive.open(db) as archive:
            assert archive.stats().messages == 120 * 23 and archive.check() == []
    finally:
        subprocess.run(["umount", str(mount)])


def _capture(n: int, i: int) -> bytes:
    message = {"role": "user", "content": f"writer {n} message {i} zebrafish", "timestamp": 1790000000000 + i}
    request = {"id": i, "method": "capture", "params": {"session_id": f"sess-kill-{n}", "message": message}}
    return json.dumps(request).encode() + b"\n"


def _texts(archive: Archive, n: int) -> set[str]:
    rows = archive.store.rows("SELECT text FROM msg WHERE session_id = ?", (f"sess-kill-{n}",))
    return {decode_text(r[0]) for r in rows}


def test_concurrent_writers_beside_an_import_one_killed_mid_work_lose_nothing_acknowledged(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    Archive.open(db).close()
    importer = subprocess.Popen(
        [*python_cli(), "--db", str(db), "import", str(many_sessions(tmp_path / "s", 80)), "--json"],
        env=env(PI_MEMORY_IMPORT_WORKERS="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    bridges = [
        subprocess.Popen(
            [*python_cli(), "--db", str(db), "bridge"],
            env=env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(3)
    ]
    for n, bridge in enumerate(bridges):
        assert bridge.stdin is not None
        start = {"id": -1, "method": "session_start", "params": {"session_id": f"sess-kill-{n}", "cwd": "/w/kill"}}
        bridge.stdin.write(json.dumps(start).encode() + b"\n" + b"".join(_capture(n, i) for i in range(200)))
        bridge.stdin.flush()
    victim = bridges[0]
    assert victim.stdout is not None
    answers: list[dict[str, Any]] = []
    while sum(a["id"] >= 0 for a in answers) < 50:  # it has answered 50 of its 200 writes
        answers.append(json.loads(victim.stdout.readline()))
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=WAIT_S)
    acked = {0: [int(a["id"]) for a in answers if a["id"] >= 0 and "result" in a]}
    assert 50 <= len(acked[0]) < 200  # the kill landed mid-work
    for n, bridge in enumerate(bridges[1:], start=1):
        out, _ = bridge.communicate(timeout=WAIT_S)  # EOF after its requests: it answers all, then ends
        acked[n] = [int(a["id"]) for a in map(json.loads, out.splitlines()) if a["id"] >= 0 and "result" in a]
        assert len(acked[n]) == 200
    out, err = importer.communicate(timeout=WAIT_S * 5)
    assert importer.returncode == 0 and json.loads(out)["added"] == 80 * 23, err
    with Archive.open(db) as archive:
        for n, ids in acked.items():
            assert {f"writer {n} message {i} zebrafish" for i in ids} <= _texts(archive, n)
        assert archive.check() == [] and archive.stats().messages == 80 * 23 + 400 + len(_texts(archive, 0))
