"""Following growing files (no watcher process): offsets, partial lines, rewrites, deletions, restarts."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from pathlib import Path

import pytest

from conftest import claude_line
from pi_memory import Archive
from pi_memory.ingest.tail import Follower, complete_lines
from pi_memory.storage.store import decode_text

DATA = Path(__file__).parent / "data"
V1 = DATA / "bad" / "pi-v1-legacy.jsonl"


class FakeClock:
    def __init__(self) -> None:
        self.now = 4_000_000_000.0  # far after any file's mtime: nothing is "just written"

    def __call__(self) -> float:
        return self.now


def _claude(uuid: str, kind: str, content: object, msg_id: str | None = None) -> bytes:
    stamp = f"2026-01-01T10:00:{len(uuid):02d}Z"
    return claude_line(uuid, kind, content, session="sess-tail-0001", cwd="/w/app", timestamp=stamp, msg_id=msg_id)


def _count(archive: Archive, needle: str) -> int:
    return sum(_like(needle, decode_text(r[0])) for r in archive.store.rows("SELECT text FROM msg"))


def test_complete_lines_leaves_a_partial_last_line_out() -> None:
    assert complete_lines(b"a\nb\nc") == [b"a", b"b"]
    assert complete_lines(b"a\n") == [b"a"]
    assert complete_lines(b"partial") == []


def test_appended_lines_are_read_from_the_offset_and_a_partial_line_waits(archive: Archive, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_claude("u1", "user", "first alpha"))
    follower = Follower(archive.store, clock=FakeClock())
    assert follower.sync(path).added == 1
    whole = _claude("u22", "user", "second bravo")
    with open(path, "ab") as fh:
        fh.write(whole[:20])
    assert follower.sync(path).added == 0 and _count(archive, "bravo") == 0
    with open(path, "ab") as fh:
        fh.write(whole[20:])
    assert follower.sync(path).added == 1 and _count(archive, "bravo") == 1
    assert follower.sync(path).added == 0
    assert follower.state(str(path.resolve())).offset == path.stat().st_size  # type: ignore[union-attr]


def test_a_streamed_tail_is_held_until_the_file_is_quiet(archive: Archive, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    clock = FakeClock()
    follower = Follower(archive.store, clock=clock)
    path.write_bytes(
        _claude("u1", "user", "go") + _claude("a1", "assistant", [{"type": "text", "text": "charlie"}], "m1")
    )
    clock.now = path.stat().st_mtime + 0.1  # just written
    result = follower.sync(path)
    assert result.added == 1 and result.held == 1 and follower.due() == []
    with open(path, "ab") as fh:
        fh.write(
            _claude(
                "a2", "assistant", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}], "m1"
            )
        )
    clock.now = path.stat().st_mtime + 1.0  # quiet now
    assert follower.due() == [path]
    assert follower.sync(path).added == 1
    texts = [decode_text(r[0]) for r in archive.store.rows("SELECT text FROM msg WHERE role = 'assistant'")]
    assert texts == ['charlie\n→ Bash({"command":"ls"})']


def test_a_rewritten_file_is_reread_without_duplicates(archive: Archive, tmp_path: Path) -> None:
    """pi migrates a v1 file to v3 by rewriting it whole: ids appear, nothing else changes."""
    path = tmp_path / "v1.jsonl"
    shutil.copy(V1, path)
    follower = Follower(archive.store, clock=FakeClock())
    first = follower.sync(path)
    before = archive.stats().messages
    assert first.added == before > 0
    path.write_bytes(_migrate_v1_to_v3(V1.read_bytes()))
    result = follower.sync(path)
    assert result.reread and result.added == 0
    assert archive.stats().messages == before
    assert archive.store.scalar("SELECT count(*) FROM msg WHERE entry_id IS NULL") == 0  # ids filled in


def test_a_truncated_file_is_reread(archive: Archive, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_claude("u1", "user", "one") + _claude("u22", "user", "two"))
    follower = Follower(archive.store, clock=FakeClock())
    follower.sync(path)
    path.write_bytes(_claude("u1", "user", "one"))
    assert follower.sync(path).reread
    assert archive.stats().messages == 2


def test_a_deleted_file_keeps_its_messages_and_flags_the_session(archive: Archive, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_claude("u1", "user", "kept forever"))
    follower = Follower(archive.store, clock=FakeClock())
    follower.sync(path)
    path.unlink()
    assert follower.sync(path).missing
    assert archive.store.scalar("SELECT source_missing FROM session WHERE id = 'sess-tail-0001'") == 1
    assert _count(archive, "kept forever") == 1
    path.write_bytes(_claude("u1", "user", "kept forever") + _claude("u22", "user", "back again"))
    assert follower.sync(path).added == 1
    assert archive.store.scalar("SELECT source_missing FROM session WHERE id = 'sess-tail-0001'") == 0


def test_a_new_follower_continues_at_the_remembered_offset(archive: Archive, tmp_path: Path) -> None:
    """After a restart the reader is rebuilt from the lines before the offset, so tool names still pair."""
    path = tmp_path / "s.jsonl"
    call = [{"type": "tool_use", "id": "t9", "name": "Grep", "input": {"pattern": "x"}}]
    path.write_bytes(_claude("a1", "assistant", call, "m1"))
    Follower(archive.store, clock=FakeClock()).sync(path)
    with open(path, "ab") as fh:
        fh.write(
            _claude(
                "r1", "user", [{"type": "tool_result", "tool_use_id": "t9", "content": "no match", "is_error": True}]
            )
        )
    assert Follower(archive.store, clock=FakeClock()).sync(path).added == 1
    assert _count(archive, "✗ Grep: no match") == 1


def test_codex_and_pi_files_follow_the_same_way(archive: Archive, tmp_path: Path) -> None:
    codex_src = DATA / "codex" / "daaain-claude-code-log" / "sessions" / "2026" / "01" / "02"
    rollout = next(codex_src.glob("*.jsonl"))
    pi_src = next((DATA / "pi").glob("pi-0.73.1-vue*.jsonl"))
    follower = Follower(archive.store, clock=FakeClock())
    for src in (rollout, pi_src):
        lines = src.read_bytes().splitlines(keepends=True)
        path = tmp_path / src.name
        for line in lines:  # one line at a time, as the agent writes them
            with open(path, "ab") as fh:
                fh.write(line)
            follower.sync(path)
    incremental = archive.stats().messages
    with Archive.open(tmp_path / "whole.db") as whole:
        whole.import_paths([rollout, pi_src])
        assert whole.stats().messages == incremental


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


def test_a_file_already_imported_is_taken_over_without_parsing_it_again(archive: Archive, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_claude("u1", "user", "imported golf") + _claude("u22", "user", "imported hotel"))
    archive.import_paths([path])
    follower = Follower(archive.store, clock=FakeClock())
    result = follower.sync(path)
    assert result.added == 0 and result.duplicates == 0 and not result.reread  # adopted, not re-read
    state = follower.state(str(path.resolve()))
    assert state is not None and (state.offset, state.line_no) == (path.stat().st_size, 2)
    with open(path, "ab") as fh:
        fh.write(_claude("u333", "user", "appended india"))
    assert follower.sync(path).added == 1
    assert archive.stats().messages == 3


def test_watch_falls_back_to_polling_when_native_watching_is_refused(
    archive: Archive, tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E.g. the per-user inotify instance limit is reached: watchdog's polling observer takes over."""
    import pi_memory.frontends.watch as watch_module

    class RefusingObserver(watch_module.Observer):  # type: ignore[misc,valid-type]
        def start(self) -> None:
            raise OSError(24, "inotify instance limit reached")

    monkeypatch.setattr(watch_module, "Observer", RefusingObserver)
    folder = tmp_path / "sessions"
    folder.mkdir()
    path = folder / "s.jsonl"
    path.write_bytes(_claude("u1", "user", "before lima"))
    said: list[str] = []
    watcher = watch_module.Watcher(Follower(archive.store), [folder], said.append)

    def append_then_stop() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(line.startswith("watching") for line in said):
            time.sleep(0.01)  # the catch-up is over: what follows can only be seen by the observer
        with open(path, "ab") as fh:
            fh.write(_claude("u22", "user", "polled mike"))
        with Archive.open(db_path) as other:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not other.search("polled mike"):
                time.sleep(0.05)
        watcher.stop.set()

    helper = threading.Thread(target=append_then_stop)
    helper.start()
    watcher.run()
    helper.join()
    assert any("polling every" in line for line in said)
    assert _count(archive, "polled mike") == 1 and _count(archive, "before lima") == 1


def _like(pattern: str, text: str) -> bool:
    """SQL's `LIKE '%pattern%'` (`%` inside matches anything) on a decoded message text."""
    return re.search(".*".join(map(re.escape, pattern.split("%"))), text, re.S) is not None
