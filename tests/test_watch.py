"""`pi-memory watch` as a real process: appends show up; rewrites, deletions, partial lines, stop.

Every wait is for an event, bounded only so that a hung watcher fails the test (how soon lines
appear is measured by `bench/watch_latency.py`, never asserted here)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import claude_line, python_cli
from pi_memory import Archive
from pi_memory.storage.store import decode_text
from reliability import eventually

APPEAR_S = 120.0  # the bound of a wait for appended lines to be archived (an event, not a budget)
START_S = 120.0  # ... for the watcher to start and catch up
V1 = Path(__file__).parent / "data" / "bad" / "pi-v1-legacy.jsonl"
CODEX_DAY = Path(__file__).parent / "data" / "codex" / "daaain-claude-code-log" / "sessions" / "2026" / "01" / "02"


def _claude(uuid: str, kind: str, content: object, second: int, msg_id: str | None = None) -> bytes:
    stamp = f"2026-01-01T10:00:{second:02d}Z"
    return claude_line(uuid, kind, content, session="sess-watch-0001", cwd="/w/app", timestamp=stamp, msg_id=msg_id)


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def _until(check: Callable[[], bool], seconds: float) -> bool:
    return eventually(check, seconds, every_s=0.02)


def _count(db: Path, needle: str) -> int:
    with Archive.open(db) as archive:
        return sum(_like(needle, decode_text(r[0])) for r in archive.store.rows("SELECT text FROM msg"))


@pytest.fixture
def claude_file(isolated_home: Path) -> Path:
    folder = isolated_home / ".claude" / "projects" / "-w-app"
    folder.mkdir(parents=True)
    path = folder / "sess-watch-0001.jsonl"
    path.write_bytes(_claude("u01", "user", "first alpha", 1))
    return path


def _stop(proc: subprocess.Popen[Any], sig: signal.Signals = signal.SIGTERM) -> None:
    """Stop a watch process; kill it if it does not stop, so no test leaves one running."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        raise


@pytest.fixture
def watcher(archive_target: str, claude_file: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([*python_cli(), "watch"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        started = _until(lambda: _count(archive_target, "first alpha") == 1, START_S)
        if not started:
            proc.kill()
            pytest.fail(f"watch did not start: {proc.stderr.read() if proc.stderr else ''}")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.fixture
def watcher_ignoring_sigint(archive_target: str, claude_file: Path) -> Iterator[subprocess.Popen[str]]:
    """`watch` started with SIGINT ignored, as a shell starts a background job (`pi-memory watch &`)."""
    proc = subprocess.Popen(
        [*python_cli(), "watch"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        if not _until(lambda: _count(archive_target, "first alpha") == 1, START_S):
            pytest.fail("watch did not start")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_appended_lines_become_searchable(
    watcher: subprocess.Popen[str], archive_target: str, claude_file: Path
) -> None:
    _append(claude_file, _claude("u02", "user", "watchword bravo", 2))
    with Archive.open(archive_target) as archive:
        assert _until(lambda: bool(archive.search("watchword bravo")), APPEAR_S)


def test_a_partial_last_line_is_taken_once_completed(
    watcher: subprocess.Popen[str], archive_target: str, claude_file: Path
) -> None:
    line = _claude("u03", "user", "completed charlie", 3)
    _append(claude_file, line[:30])
    # a line in another file, written after the half line: once it is archived, the watcher has seen both
    other = claude_file.with_name("sess-watch-0002.jsonl")
    other.write_bytes(_claude("o01", "user", "other file kilo", 1).replace(b"sess-watch-0001", b"sess-watch-0002"))
    assert _until(lambda: _count(archive_target, "other file kilo") == 1, APPEAR_S)
    assert _count(archive_target, "completed charlie") == 0  # the half line waits for its newline
    _append(claude_file, line[30:])
    assert _until(lambda: _count(archive_target, "completed charlie") == 1, APPEAR_S)
    _append(claude_file, _claude("u05", "user", "after delta", 5))
    assert _until(lambda: _count(archive_target, "after delta") == 1, APPEAR_S)
    assert _count(archive_target, "completed charlie") == 1


def test_streamed_blocks_of_one_message_become_one_message(
    watcher: subprocess.Popen[str], archive_target: str, claude_file: Path
) -> None:
    # both blocks in one write: whenever the watcher looks, it sees the message whole (a reader that
    # looked between two writes would depend on how long the writer paused: `SETTLE_S`)
    first = _claude("a06", "assistant", [{"type": "text", "text": "streamed echo"}], 6, "msg-6")
    second = _claude(
        "a07", "assistant", [{"type": "tool_use", "id": "t7", "name": "Bash", "input": {"command": "ls"}}], 7, "msg-6"
    )
    _append(claude_file, first + second)
    assert _until(lambda: _count(archive_target, "streamed echo") == 1, APPEAR_S)
    assert _count(archive_target, '→ Bash({"command":"ls"})') == 1
    assert _count(archive_target, "streamed echo%→ Bash") == 1  # one message holds both blocks


def test_a_migration_rewrite_adds_only_the_new_message(archive_target: str, isolated_home: Path) -> None:
    folder = isolated_home / ".pi" / "agent" / "sessions" / "--home-dev-legacy-app--"
    folder.mkdir(parents=True)
    path = folder / "legacy.jsonl"
    path.write_bytes(V1.read_bytes())
    proc = subprocess.Popen([*python_cli(), "watch", "--agent", "pi"], stderr=subprocess.DEVNULL)
    try:
        assert _until(lambda: _count(archive_target, "旧格式会话") == 1, START_S)
        with Archive.open(archive_target) as archive:
            before = archive.stats().messages
        migrated = _migrate_v1_to_v3(V1.read_bytes())
        new_entry = {
            "type": "message",
            "id": "0000ffff",
            "parentId": "00000009",
            "timestamp": "2025-12-20T09:00:00.000Z",
            "message": {"role": "user", "content": "after migration foxtrot", "timestamp": 1766221200000},
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(migrated + json.dumps(new_entry).encode() + b"\n")
        os.replace(tmp, path)  # an atomic rewrite, as careful writers do
        assert _until(lambda: _count(archive_target, "after migration foxtrot") == 1, APPEAR_S)
        with Archive.open(archive_target) as archive:
            assert archive.stats().messages == before + 1
    finally:
        _stop(proc, signal.SIGINT)


def test_a_deleted_file_stays_in_the_archive_and_is_marked(
    watcher: subprocess.Popen[str], archive_target: str, claude_file: Path
) -> None:
    claude_file.unlink()

    def flagged() -> bool:
        with Archive.open(archive_target) as archive:
            return archive.store.scalar("SELECT source_missing FROM session WHERE id = 'sess-watch-0001'") == 1

    assert _until(flagged, APPEAR_S)
    assert _count(archive_target, "first alpha") == 1


def test_an_agent_folder_created_after_the_start_is_followed(archive_target: str, isolated_home: Path) -> None:
    """No folder exists at the start (a user service before any agent ran): watch waits for them."""
    proc = subprocess.Popen([*python_cli(), "watch"], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        assert "waiting for" in proc.stderr.readline()
        day = isolated_home / ".codex" / "sessions" / "2026" / "01" / "02"
        day.mkdir(parents=True)
        rollout = next(CODEX_DAY.glob("*.jsonl"))
        (day / rollout.name).write_bytes(rollout.read_bytes())
        assert _until(lambda: _count(archive_target, "synthetic files are alpha") == 1, APPEAR_S)
    finally:
        try:
            _stop(proc)
        finally:
            proc.stderr.close()  # type: ignore[union-attr]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_watch_stops_cleanly_on_a_signal(watcher: subprocess.Popen[str], sig: signal.Signals) -> None:
    watcher.send_signal(sig)
    assert watcher.wait(timeout=10) == 0
    assert watcher.stderr is not None
    err = watcher.stderr.read()
    assert "stopped" in err and "Traceback" not in err


def _migrate_v1_to_v3(raw: bytes) -> bytes:
    out, previous = [], None
    for n, line in enumerate(raw.splitlines()):
        data = json.loads(line)
        if n == 0:
            data["version"] = 3
        else:
            data["id"], data["parentId"] = f"{n:08x}", previous
            previous = data["id"]
        out.append(json.dumps(data, ensure_ascii=False).encode())
    return b"\n".join(out) + b"\n"


def test_watch_stops_on_sigint_even_when_started_with_sigint_ignored(
    watcher_ignoring_sigint: subprocess.Popen[str],
) -> None:
    watcher_ignoring_sigint.send_signal(signal.SIGINT)
    assert watcher_ignoring_sigint.wait(timeout=10) == 0
    assert watcher_ignoring_sigint.stderr is not None
    assert "stopped" in watcher_ignoring_sigint.stderr.read()


def _like(pattern: str, text: str) -> bool:
    """SQL's `LIKE '%pattern%'` (`%` inside matches anything) on a decoded message text."""
    return re.search(".*".join(map(re.escape, pattern.split("%"))), text, re.S) is not None
