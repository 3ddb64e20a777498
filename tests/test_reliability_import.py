"""Reliability of `import` beside other processes: openers, other imports, kill -9 mid-work.

Each test makes the event it is about happen while the import is under way (a paused child
import, `reliability.PausedImport`), never by hoping two processes overlap.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

from conftest import DATA, PI_DATA, python_cli
from pi_memory import Archive
from pi_memory.ingest import importer as importer_module
from pi_memory.ingest.importer import Importer
from pi_memory.storage.store import FTS_INDEXES, Store, decode_text, decompress
from reliability import PausedImport, env, many_sessions


def _automerge(db: Path) -> dict[str, int]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.setbusytimeout(5000)
    try:
        return {
            t: int(conn.execute(f"SELECT v FROM {t}_config WHERE k = 'automerge'").fetchone()[0]) for t in FTS_INDEXES
        }
    finally:
        conn.close()


def _records_left(db: Path) -> list[str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [str(r[0]) for r in conn.execute("SELECT name FROM counter WHERE name LIKE 'automerge before import%'")]
    finally:
        conn.close()


def test_an_import_keeps_its_report_while_stats_search_and_a_bridge_open_the_archive_under_it(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    importing = PausedImport(db, many_sessions(tmp_path / "s", 6))
    importing.wait_paused()
    assert _automerge(db) == dict.fromkeys(FTS_INDEXES, 0)  # the import's own settings are in force
    for command in (["stats", "--json"], ["search", "响应式", "--json"]):
        done = subprocess.run(
            [*python_cli(), "--db", str(db), *command], env=env(), capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
    with Archive.open(db) as bridge_like:  # another connection of another kind, in this process
        bridge_like.live_mode()
        assert bridge_like.stats().messages > 0
    assert _automerge(db) == dict.fromkeys(FTS_INDEXES, 0)  # nobody gave the settings back under the import
    report = importing.finish()
    assert report["added"] == 6 * 23 and report["errors"] == []
    assert _automerge(db) == dict.fromkeys(FTS_INDEXES, 2) and _records_left(db) == []


def test_two_imports_at_once_both_report_and_the_last_to_end_gives_the_settings_back(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    first = PausedImport(db, many_sessions(tmp_path / "one", 4, prefix="one"))
    first.wait_paused()
    second = subprocess.run(
        [*python_cli(), "import", str(many_sessions(tmp_path / "two", 4, prefix="two")), "--db", str(db), "--json"],
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["added"] == 4 * 23
    assert _automerge(db) == dict.fromkeys(FTS_INDEXES, 0)  # the first import still runs: its settings stay
    assert first.finish()["added"] == 4 * 23
    assert _automerge(db) == dict.fromkeys(FTS_INDEXES, 2) and _records_left(db) == []


def test_a_killed_import_s_settings_come_back_at_the_next_opening_once_it_is_dead(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    importing = PausedImport(db, many_sessions(tmp_path / "s", 60))  # flushed 50 files at a time
    importing.wait_paused()  # mid-work: its first batch is written, the rest is not
    Store.open(db).close()  # an opening while it lives leaves its settings
    assert _automerge(db) == dict.fromkeys(FTS_INDEXES, 0)
    importing.kill()
    Store.open(db).close()
    assert _automerge(db) == dict.fromkeys(FTS_INDEXES, 2) and _records_left(db) == []
    with Archive.open(db) as archive:
        assert 0 < archive.stats().messages < 60 * 23  # the kill landed mid-work
        assert archive.import_paths([tmp_path / "s"]).errors == []
        assert archive.stats().messages == 60 * 23 and archive.check() == []


def test_the_cli_import_is_not_stopped_by_other_processes_opening_the_archive(tmp_path: Path) -> None:
    """The probe as it was run: a CLI import of many files through the parse worker, with a
    `stats` run (a child of its own) started at each of its first flushes."""
    db = tmp_path / "a.db"
    script = f"""
import subprocess, sys
from pi_memory.frontends.cli import main
from pi_memory.ingest.importer import Importer
flush, runs = Importer.flush, []
def flush_with_stats(self, report):
    flush(self, report)
    if len(runs) < 3:
        runs.append(subprocess.run([sys.executable, "-m", "pi_memory", "--db", {str(db)!r}, "stats"], stdout=subprocess.DEVNULL).returncode)
        sys.stderr.write(f"stats {{runs[-1]}}\\n")
Importer.flush = flush_with_stats
sys.argv = ["pi-memory", "--db", {str(db)!r}, "import", {str(many_sessions(tmp_path / "s", 40))!r}, "--json"]
main()
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env(PI_MEMORY_IMPORT_WORKERS="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("stats 0") >= 1 and "Traceback" not in done.stderr
    assert json.loads(done.stdout)["added"] == 40 * 23


LARGE = [
    PI_DATA / "pi-0.73.1-sse-stream-mixed.jsonl",
    PI_DATA / "pi-1.6.0-vue-reactive-zh.jsonl",
    DATA / "claude" / "daaain-claude-code-log" / "minimal_showcase" / "55550000-0000-4000-8000-000000000003.jsonl",
    DATA / "claude" / "daaain-claude-code-log" / "sidechain_integrated.jsonl",
    DATA / "codex" / "simonw-claude-code-transcripts" / "sample_codex_session.jsonl",
]


def _everything(db: Path) -> tuple[Any, ...]:
    """Messages, other lines, runs (their summaries as read back) and the index, as a reader sees them."""
    with Archive.open(db) as a:
        rows = a.store.rows
        messages = sorted(
            (str(s), int(q), str(h), decode_text(t))
            for s, q, h, t in rows("SELECT session_id, seq, hash, text FROM msg")
        )
        others = sorted(bytes(decompress(r[0])) for r in rows("SELECT raw FROM entry WHERE msg_id IS NULL"))
        runs = [
            (r.session_id, r.status, r.messages, r.summary)
            for r in sorted(a.runs(limit=1000), key=lambda r: (r.session_id, r.start_ts))
        ]
        return messages, others, runs, [h.msg_id for h in a.search("the", limit=50)], a.stats().indexed


@pytest.mark.parametrize("path", LARGE, ids=[p.name for p in LARGE])
def test_a_large_session_file_read_in_chunks_stores_what_a_whole_read_stores(
    tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole, chunked = tmp_path / "whole.db", tmp_path / "chunked.db"
    with Archive.open(whole) as a:
        assert not a.import_paths([path]).errors
    monkeypatch.setattr(importer_module, "LARGE_FILE_BYTES", 1000)  # every fixture is "large": chunks of ~1.5 KB
    monkeypatch.setattr(importer_module, "CHUNK_BYTES", 1500)
    chunks: list[int] = []
    accept = Importer._accept_chunk

    def counted(self: Importer, *args: Any) -> None:
        chunks.append(1)
        accept(self, *args)

    monkeypatch.setattr(Importer, "_accept_chunk", counted)
    with Archive.open(chunked) as a:
        report = a.import_paths([path])
        assert not report.errors and len(chunks) > 2
        assert a.import_paths([path]).unchanged == 1  # remembered as read with its last chunk
    assert _everything(chunked) == _everything(whole)
