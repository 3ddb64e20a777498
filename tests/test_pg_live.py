"""Live writers on the team archive: the pi extension's bridge, `watch`, and `forget` from the CLI."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import PI_DATA, claude_line, python_cli
from pg_support import connect
from pi_memory import Archive
from pi_memory.storage.store import decode_text
from reliability import eventually
from test_capture import lines
from test_pg_team import apply_roles, one_session

RPC_COMPACTION = PI_DATA / "pi-0.73.1-cli-rpc-faux-compaction.jsonl"
APPEAR_S = 120.0  # the bound of a wait for appended lines (an event, not a budget: bench/watch_latency.py times it)
START_S = 120.0  # the bound of a wait for the watcher to start


def bridge(url: str, *requests: dict[str, Any]) -> list[dict[str, Any]]:
    """Run a real `pi-memory bridge` on the team archive (PI_MEMORY_DB) and answer the requests in order."""
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests)
    env = dict(os.environ, PI_MEMORY_DB=url)
    done = subprocess.run(
        [*python_cli(), "bridge"], input=body.encode(), capture_output=True, env=env, timeout=60, check=True
    )
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(out) == len(requests), done.stderr.decode()
    return out


def texts(url: str, session_id: str) -> list[tuple[Any, ...]]:
    with connect(url) as conn:
        return conn.execute(
            "SELECT role, text, entry_id FROM msg WHERE session_id=%s ORDER BY ts, seq", (session_id,)
        ).fetchall()


def test_the_bridge_captures_into_the_team_archive_once_and_backfills_entry_ids(pg_url: str, tmp_path: Path):
    header, *entries = lines(RPC_COMPACTION)
    sid = header["id"]
    live = [e["message"] for e in entries if e["type"] == "message"]
    requests: list[dict[str, Any]] = [
        {"id": 0, "method": "hello"},
        {"id": 1, "method": "session_start", "params": {"session_id": sid, "cwd": header["cwd"]}},
    ]
    for i, message in enumerate(live + live):  # every message_end twice: a replay adds nothing
        requests.append({"id": 10 + i, "method": "capture", "params": {"session_id": sid, "message": message}})
    requests += [
        {"id": 100, "method": "backfill", "params": {"session_id": sid, "entries": entries}},
        {"id": 101, "method": "backfill", "params": {"session_id": sid, "entries": entries}},
        {"id": 102, "method": "set_name", "params": {"session_id": sid, "name": "compaction demo"}},
    ]
    out = bridge(pg_url, *requests)
    assert [o for o in out if "error" in o] == []
    assert out[0]["result"]["db"].startswith("postgresql://")
    captured = [o["result"] for o in out if 10 <= o["id"] < 100]
    assert all(isinstance(r, int) for r in captured[: len(live)]) and captured[len(live) :] == [None] * len(live)
    first, second = out[-3]["result"], out[-2]["result"]
    assert first["reconciled"] == len(live) and first["added"] == 1  # the compaction summary was never live
    assert (second["added"], second["reconciled"]) == (0, 0)

    rows = texts(pg_url, sid)
    with Archive.open(tmp_path / "reference.db") as ref:
        ref.import_paths([RPC_COMPACTION])
        expected = ref.store.rows("SELECT role, text, entry_id FROM msg WHERE session_id=? ORDER BY ts, seq", (sid,))
    assert rows == [
        (role, decode_text(text), eid) for role, text, eid in expected
    ]  # each message once, with the file's entry ids
    # a later import (or push) of the same file adds nothing
    with Archive.open(pg_url) as team:
        assert team.session_info(sid).name == "compaction demo"
        assert team.import_paths([RPC_COMPACTION]).added == 0

    word = next(t for _r, t, _e in rows if len(t) > 20).split()[0]
    (found,) = bridge(pg_url, {"id": 1, "method": "search", "params": {"query": word}})
    assert sid in {h["session_id"] for h in found["result"]["hits"]}


def test_a_custom_message_captured_live_is_rekeyed_by_the_backfill(pg_url: str):
    sid = "01a2364c-0000-7000-8000-00000000c0de"
    live = {"role": "custom", "customType": "hint", "content": "记忆提示 memory hint", "timestamp": 1_796_206_613_450}
    entry = {
        "type": "custom_message",
        "id": "aa11bb22",
        "parentId": None,
        "timestamp": "2026-12-02T10:16:53.457Z",  # stamped 7 ms after the live message
        "customType": "hint",
        "content": "记忆提示 memory hint",
    }
    out = bridge(
        pg_url,
        {"id": 1, "method": "capture", "params": {"session_id": sid, "message": live}},  # no session_start
        {"id": 2, "method": "backfill", "params": {"session_id": sid, "entries": [entry]}},
        {"id": 3, "method": "capture_entry", "params": {"session_id": sid, "entry": entry}},
    )
    assert out[1]["result"]["reconciled"] == 1 and out[2]["result"] is None
    assert texts(pg_url, sid) == [("custom", "记忆提示 memory hint", "aa11bb22")]


def _until(condition: Callable[[], bool], timeout: float) -> bool:
    return eventually(condition, timeout, every_s=0.05)


def _claude(uuid: str, role: str, content: Any, n: int, sid: str = "sess-team-0001") -> bytes:
    stamp = f"2026-11-01T10:00:{n:02d}.000Z"
    return claude_line(uuid, role, content, session=sid, cwd="/home/dev/team-app", timestamp=stamp)


def _count(url: str, text: str) -> int:
    with connect(url) as conn:
        return int(conn.execute("SELECT count(*) FROM msg WHERE text LIKE %s", (f"%{text}%",)).fetchone()[0])


@pytest.fixture
def claude_file(isolated_home: Path) -> Path:
    folder = isolated_home / ".claude" / "projects" / "-home-dev-team-app"
    folder.mkdir(parents=True)
    path = folder / "sess-team-0001.jsonl"
    path.write_bytes(_claude("u01", "user", "first alpha", 1))
    return path


def _watch(url: str, folder: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PI_MEMORY_DB=url)
    return subprocess.Popen(
        [*python_cli(), "watch", str(folder)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


@pytest.fixture
def watching(pg_url: str, claude_file: Path) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    with Archive.open(pg_url):  # the tables exist before the first poll
        pass

    def start() -> subprocess.Popen[bytes]:
        procs.append(_watch(pg_url, claude_file.parent.parent))
        return procs[-1]

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=10)


def test_watch_writes_appended_lines_to_the_team_archive_where_they_become_searchable(
    pg_url: str, claude_file: Path, watching: Callable[[], subprocess.Popen[bytes]]
):
    proc = watching()
    assert _until(lambda: _count(pg_url, "first alpha") == 1, START_S), "watch did not start"
    with claude_file.open("ab") as fh:
        fh.write(_claude("u02", "user", "watchword bravo 断流", 2))
    with Archive.open(pg_url) as team:
        assert _until(lambda: bool(team.search("watchword bravo")), APPEAR_S)
        assert _until(lambda: bool(team.search("断流")), APPEAR_S)
    # stopped, appended meanwhile, restarted: only the new line comes in, nothing twice
    proc.terminate()
    proc.wait(timeout=10)
    with claude_file.open("ab") as fh:
        fh.write(_claude("u03", "user", "while away charlie", 3))
    watching()
    assert _until(lambda: _count(pg_url, "while away charlie") == 1, START_S)
    assert (_count(pg_url, "first alpha"), _count(pg_url, "watchword bravo")) == (1, 1)
    with connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM msg").fetchone() == (3,)


def test_forget_on_the_team_archive_from_the_cli_obeys_the_writer_rule(pg_url: str, make_role, tmp_path: Path):
    apply_roles(pg_url)
    alice, bob = make_role("pi_memory_writer"), make_role("pi_memory_writer")
    reader, lead = make_role("pi_memory_reader"), make_role("pi_memory_admin")
    with Archive.open(alice) as a:
        a.import_paths([one_session(tmp_path / "a", "aaaaaaaa-0001", ["alice 的缓存方案", "按 shard 路由"])])
        a.import_paths([one_session(tmp_path / "a2", "aaaaaaaa-0002", ["第二个会话", "也是 alice 的"])])

    def forget(url: str, target: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*python_cli(), "--db", url, "forget", target, "--yes"], capture_output=True, text=True, timeout=60
        )

    for other in (bob, reader):
        refused = forget(other, "aaaaaaaa-0001")
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert refused.stderr.strip().splitlines() == [refused.stderr.strip()]
        assert refused.stderr.startswith("Error: permission denied")
    assert _count(pg_url, "alice 的缓存方案") == 1

    done = forget(alice, "aaaaaaaa-0001")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("forgot session aaaaaaaa-0001: 2 messages") and "for everyone" in done.stdout
    by_admin = forget(lead, "aaaaaaaa-0002")
    assert by_admin.returncode == 0, by_admin.stderr
    with Archive.open(lead) as team:
        st = team.stats()
        assert (st.messages, st.sessions, st.indexed) == (0, 0, 0)
    missing = forget(lead, "aaaaaaaa-0002")
    assert missing.returncode != 0 and "no session" in missing.stderr


def test_the_bridge_imports_a_folder_into_the_team_archive_in_batches(pg_url: str, tmp_path: Path):
    folder = tmp_path / "sessions"
    for i in range(3):
        one_session(folder, f"cccccccc-000{i}", [f"batch 第{i}个 question", f"answer {i}"])
    out = bridge(
        pg_url,
        {"id": 1, "method": "import", "params": {"paths": [str(folder)], "limit": 2}},
        {"id": 2, "method": "import", "params": {"paths": [str(folder)], "limit": 2, "offset": 2}},
        {"id": 3, "method": "import", "params": {"paths": [str(folder)], "limit": 5}},
    )
    first, second, again = (o["result"] for o in out)
    assert (first["added"], first["next_offset"], second["added"], second["next_offset"]) == (4, 2, 2, None)
    assert again["added"] == 0 and again["total_files"] == 3


def test_a_restarted_watcher_takes_an_unchanged_file_over_without_reading_it_again(pg_url: str, tmp_path: Path):
    path = one_session(tmp_path / "w", "dddddddd-0001", ["first 的问题", "first answer"])
    with Archive.open(pg_url) as team:
        first = team.follower().sync(path)
        unchanged = team.follower().sync(path)  # a new watcher: the offsets are this host's rows
        with path.open("a", encoding="utf-8") as fh:
            fh.write(path.read_text(encoding="utf-8").splitlines()[-1].replace("first answer", "later line") + "\n")
        grown = team.follower().sync(path)
        assert (first.added, unchanged.added, unchanged.duplicates) == (2, 0, 0)  # taken over, not re-parsed
        assert (grown.added, grown.reread) == (1, False)  # grown while no watcher ran: read from the offset
        assert team.stats().messages == 3


def test_a_read_only_role_capturing_gets_a_clear_error_and_the_bridge_goes_on(pg_url: str, make_role):
    apply_roles(pg_url)
    reader = make_role("pi_memory_reader")
    message = {"role": "user", "content": "not allowed here", "timestamp": 1_796_000_000_000}
    out = bridge(
        reader,
        {"id": 1, "method": "session_start", "params": {"session_id": "s-ro", "cwd": "/p"}},
        {"id": 2, "method": "capture", "params": {"session_id": "s-ro", "message": message}},
        {"id": 3, "method": "stats"},
    )
    assert [o["error"]["message"].split(":")[0] for o in out[:2]] == ["permission denied"] * 2
    assert "Error" not in out[0]["error"]["message"] and out[2]["result"]["stats"]["messages"] == 0
