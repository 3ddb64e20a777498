import json
import os
import shutil
import stat
from pathlib import Path

import apsw
import pytest

from conftest import BAD_DATA, PI_DATA
from pi_memory import Archive
from pi_memory.storage.schema import SCHEMA_VERSION
from pi_memory.storage.store import Store, decompress

VUE = PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl"


def test_a_new_archive_is_private_and_at_the_current_schema(db_path: Path):
    with Archive.open(db_path) as a:
        assert a.store.user_version == SCHEMA_VERSION
        assert a.store.scalar("PRAGMA journal_mode") == "wal"
    assert stat.S_IMODE(os.stat(db_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(db_path.parent).st_mode) == 0o700


def test_migrations_run_from_an_empty_database(tmp_path: Path):
    path = tmp_path / "empty.db"
    conn = apsw.Connection(str(path))  # an existing SQLite file that holds no table
    conn.execute("CREATE TABLE t(x); DROP TABLE t;")
    conn.close()
    store = Store.open(path)
    tables = {r[0] for r in store.rows("SELECT name FROM sqlite_master WHERE type IN ('table')")}
    assert {"session", "msg", "entry", "msg_fts", "source_file", "counter"} <= tables
    store.migrate()  # idempotent
    assert store.user_version == SCHEMA_VERSION
    store.close()


def test_a_newer_schema_is_refused_with_a_clear_error(tmp_path: Path):
    path = tmp_path / "future.db"
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 5}")
    conn.close()
    with pytest.raises(Exception, match="newer than this pi-memory"):
        Store.open(path)


def test_importing_the_same_file_twice_adds_nothing(archive: Archive):
    first = archive.import_paths([VUE])
    assert first.added == 23 and first.skipped == 0
    second = archive.import_paths([VUE], force=True)
    assert second.added == 0 and second.skipped == 23
    assert archive.stats().messages == 23


def test_an_unchanged_file_is_not_read_again(archive: Archive):
    archive.import_paths([VUE])
    again = archive.import_paths([VUE])
    assert again.unchanged == 1 and again.added == 0 and again.skipped == 0


def test_a_file_reached_through_a_linked_folder_or_a_link_is_the_same_file(archive: Archive, tmp_path: Path):
    real = tmp_path / "real"
    real.mkdir()
    shutil.copy(VUE, real / "s.jsonl")
    (tmp_path / "via-folder").symlink_to(real, target_is_directory=True)
    (tmp_path / "link.jsonl").symlink_to(real / "s.jsonl")
    assert archive.import_paths([real]).added == 23
    assert archive.import_paths([tmp_path / "via-folder"]).unchanged == 1
    assert archive.import_paths([tmp_path / "link.jsonl"]).unchanged == 1
    paths = [r[0] for r in archive.store.rows("SELECT path FROM source_file")]
    assert paths == [str((real / "s.jsonl").resolve())]


def test_seq_counts_up_in_file_order_without_gaps(archive: Archive):
    archive.import_paths([VUE])
    rows = archive.store.rows("SELECT seq, role FROM msg ORDER BY ts, seq")
    assert [r[0] for r in rows] == list(range(1, 24))
    assert rows[0][1] == "user"


def test_a_duplicate_consumes_no_seq(archive: Archive, tmp_path: Path):
    lines = VUE.read_bytes().splitlines(keepends=True)
    part = tmp_path / "part.jsonl"
    part.write_bytes(b"".join(lines[:10]))
    archive.import_paths([part])
    n = archive.stats().messages
    part.write_bytes(b"".join(lines))  # the session grew
    archive.import_paths([part])
    seqs = [r[0] for r in archive.store.rows("SELECT seq FROM msg ORDER BY seq")]
    assert seqs == list(range(1, 24)) and n < 23


def _live(i: int, role: str = "user") -> dict[str, object]:
    return {"role": role, "content": [{"type": "text", "text": f"message {i}"}], "timestamp": 1_700_000_000_000 + i}


@pytest.mark.sqlite_only("the seq a connection remembers between its writes")
def test_seq_stays_the_sessions_max_plus_one_when_two_writers_and_a_rollback_interleave(db_path: Path):
    a, b = Archive.open(db_path), Archive.open(db_path)
    try:
        for archive in (a, b):
            archive.live_mode()
        a.ensure_session("s", "/w")
        a.ensure_session("t", "/w")
        a.capture_message("s", _live(0))
        b.capture_message("s", _live(1))  # another connection adds to the session in between
        a.capture_message("s", _live(2))
        a.capture_message("t", _live(3))  # a newer row of another session
        a.capture_message("s", _live(4))
        with pytest.raises(RuntimeError), a.store.write():  # a write that rolls back
            a.store.conn.execute("DELETE FROM msg WHERE session_id = 's'")
            raise RuntimeError
        b.store.conn.execute("DELETE FROM msg WHERE id = (SELECT max(id) FROM msg)")  # forgotten by another process
        a.capture_message("s", _live(5))
        a.capture_message("s", _live(6))
        rows = a.store.rows("SELECT seq FROM msg WHERE session_id = 's' ORDER BY id")
        assert [r[0] for r in rows] == [1, 2, 3, 4, 5]
    finally:
        a.close()
        b.close()


def test_every_source_line_is_kept_verbatim_and_compressed(archive: Archive):
    archive.import_paths([VUE])
    lines = [line for line in VUE.read_bytes().splitlines() if line.strip()][1:]
    rows = archive.store.rows("SELECT e.raw, m.text FROM entry e LEFT JOIN msg m ON m.id = e.msg_id")
    raws = {decompress(raw, text) for raw, text in rows}
    assert raws == set(lines)
    stored = sum(len(r[0]) for r in archive.store.rows("SELECT raw FROM entry"))
    assert stored < sum(len(line) for line in lines)


def test_successful_tool_output_is_replayable_but_not_indexed(archive: Archive, backend: str):
    archive.import_paths([PI_DATA / "pi-0.73.1-long-output-en.jsonl"])
    row = archive.store.rows(
        "SELECT m.id, m.indexed, e.raw FROM msg m JOIN entry e ON e.msg_id = m.id WHERE m.role='tool_result' ORDER BY m.id LIMIT 1 OFFSET 0"
    )
    assert row and not row[0][1]
    index = "SELECT rowid FROM msg_fts" if backend == "sqlite" else "SELECT id FROM msg WHERE tokens <> ''"
    ids = {r[0] for r in archive.store.rows(index)}
    tool_ids = {r[0] for r in archive.store.rows("SELECT id FROM msg WHERE role='tool_result'")}
    assert ids and not (ids & tool_ids)
    longest = max(
        len(json.loads(decompress(r[0], r[1]))["message"]["content"][0]["text"])
        for r in archive.store.rows(
            "SELECT e.raw, m.text FROM msg m JOIN entry e ON e.msg_id = m.id WHERE m.role='tool_result'"
        )
    )
    assert longest > 20_000


def test_a_fork_that_copies_entries_under_the_same_ids_adds_nothing(archive: Archive, tmp_path: Path):
    lines = VUE.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["id"] = "fork-0000-session"
    header["parentSession"] = str(VUE)
    fork = tmp_path / "fork.jsonl"
    fork.write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
    archive.import_paths([VUE])
    report = archive.import_paths([fork])
    assert report.added == 0
    assert archive.stats().messages == 23


def test_the_same_session_in_two_files_is_one_session(archive: Archive, tmp_path: Path):
    original = PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl"
    copy = tmp_path / "backup" / original.name
    copy.parent.mkdir()
    shutil.copy(original, copy)
    archive.import_paths([original, copy])
    assert archive.stats().sessions == 1 and archive.stats().messages == 23


def test_one_conversation_recorded_by_two_pi_versions_is_two_sessions(archive: Archive):
    archive.import_paths(
        [PI_DATA / "pi-0.73.1-cache-index-zh-continue.jsonl", PI_DATA / "pi-1.6.0-cache-index-zh-continue.jsonl"]
    )
    assert archive.stats().sessions == 2  # each version gave the session its own id


def test_v1_file_then_its_migrated_rewrite_adds_no_duplicate(archive: Archive, tmp_path: Path):
    v1 = BAD_DATA / "pi-v1-legacy.jsonl"
    archive.import_paths([v1])
    n = archive.stats().messages
    # pi rewrites v1 files as v3: same messages, now with ids and parent ids
    lines = v1.read_bytes().splitlines()
    header = json.loads(lines[0])
    header["version"] = 3
    out, parent = [json.dumps(header)], None
    for i, line in enumerate(lines[1:]):
        entry = json.loads(line)
        entry["id"], entry["parentId"] = f"{i:08x}", parent
        parent = entry["id"]
        out.append(json.dumps(entry, ensure_ascii=False))
    migrated = tmp_path / "migrated.jsonl"
    migrated.write_text("\n".join(out) + "\n")
    report = archive.import_paths([migrated])
    assert report.added == 0 and archive.stats().messages == n
    # the entry ids pi assigned are now known
    assert archive.store.scalar("SELECT count(*) FROM msg WHERE entry_id IS NOT NULL") == n


def test_bad_files_report_line_numbers_and_keep_the_good_lines(archive: Archive):
    report = archive.import_paths([BAD_DATA])
    by_file = {}
    for e in report.errors:
        by_file.setdefault(Path(e.path).name, []).append(e.line)
    assert by_file["pi-non-json-line-in-middle.jsonl"] == [7]
    assert by_file["pi-truncated-mid-line.jsonl"] == [13]
    assert "binary-random.jsonl" in by_file
    assert "empty.jsonl" not in by_file  # nothing in it, nothing bad in it: not an error
    assert "pi-bom-crlf.jsonl" not in by_file
    # the damaged copies all hold the same real session: every one of its 10 messages is in
    sid = json.loads((BAD_DATA / "pi-bom-crlf.jsonl").read_bytes().lstrip(b"\xef\xbb\xbf").splitlines()[0])["id"]
    assert archive.store.scalar("SELECT count(*) FROM msg WHERE session_id=?", (sid,)) >= 10
    # the 2 MB tool output line was archived too
    assert archive.store.scalar("SELECT max(length(raw)) FROM entry") > 10_000


def test_counters_track_indexed_documents(archive: Archive):
    archive.import_paths([PI_DATA])
    c = archive.store.counters()
    assert c["indexed_docs"] == archive.store.scalar("SELECT count(*) FROM msg WHERE indexed=TRUE")
    assert c["indexed_chars"] == archive.store.scalar("SELECT sum(nchars) FROM msg WHERE indexed=TRUE")


def test_two_connections_write_at_once_without_busy_errors(db_path: Path):
    a, b = Archive.open(db_path), Archive.open(db_path)
    try:
        a.import_paths([VUE])
        b.import_paths([PI_DATA / "pi-0.73.1-sse-stream-mixed.jsonl"])
        assert a.stats().sessions == 2
    finally:
        a.close()
        b.close()


def _open_and_close(path: str) -> str:
    try:
        Store.open(path).close()
        return "ok"
    except Exception as exc:  # reported back to the test, which shows it
        return repr(exc)


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path: Path):
    """Both switch a fresh file to WAL; SQLite refuses one without calling the busy handler."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(4) as pool:
        for attempt in range(12):
            path = str(tmp_path / f"fresh-{attempt}.db")
            assert list(pool.map(_open_and_close, [path] * 4)) == ["ok"] * 4


def test_verbatim_lines_round_trip_and_older_plain_zlib_blobs_still_read():
    import zlib

    from pi_memory.storage.store import compress

    line = b'{"type":"message","id":"ab12cd34","parentId":null,"message":{"role":"user","content":"\xe7\xbc\x93\xe5\xad\x98"}}'
    assert decompress(compress(line)) == line
    assert decompress(zlib.compress(line)) == line  # a blob written before the dictionary
    assert len(compress(line)) < len(zlib.compress(line, 9))  # the preset dictionary pays off on short lines


def test_many_files_import_the_same_with_a_parsing_worker_as_without(tmp_path: Path, monkeypatch):
    import pi_memory.ingest.importer as ingest

    lines = VUE.read_bytes().splitlines(keepends=True)
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(ingest.PARALLEL_MIN_FILES + 3):  # enough files for the worker to start
        header = json.loads(lines[0])
        header["id"] = f"copy-{i:04d}"
        (folder / f"s{i:04d}.jsonl").write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
    (folder / "torn.jsonl").write_bytes(lines[0] + lines[1] + b'{"type":"message", torn')
    results = {}
    for workers in ("0", "1"):
        monkeypatch.setenv("PI_MEMORY_IMPORT_WORKERS", workers)
        with Archive.open(tmp_path / f"w{workers}.db") as a:
            report = a.import_paths([folder])
            again = a.import_paths([folder])
            hits = [(h.session_id, h.seq) for h in a.search("响应式", limit=20)]
            results[workers] = (report.added, len(report.errors), again.unchanged, a.stats().messages, hits)
    assert results["0"] == results["1"]
    assert results["1"][0] == 23 * (ingest.PARALLEL_MIN_FILES + 3)
    assert results["1"][1] == 1  # the torn line, reported by line number either way


def test_message_text_is_stored_compressed_and_its_verbatim_line_against_it():
    from pi_memory.storage.store import compress, decode_text, encode_text

    text = "缓存索引重建之后 SSE 断流: proxy_buffering off\n→ bash(grep -r nginx)"
    line = json.dumps({"type": "message", "message": {"content": [{"type": "text", "text": text}]}}, ensure_ascii=False)
    raw = line.encode()
    stored = encode_text(text, 0)
    assert isinstance(stored, bytes)
    assert decode_text(stored) == text and decode_text(text) == text  # rows from before stay plain TEXT
    against_text = compress(raw, text)
    assert decompress(against_text, stored) == raw == decompress(against_text, text)
    assert len(against_text) < len(compress(raw)) / 2  # the words are not stored twice
    with pytest.raises(ValueError):
        decompress(against_text)


def _fts_sql(migration_sql: str, table: str) -> str:
    """The CREATE VIRTUAL TABLE statement of `table` in some schema SQL."""
    start = migration_sql.index(f"CREATE VIRTUAL TABLE {table}")
    return migration_sql[start : migration_sql.index(");", start) + 2]


def test_a_new_archive_gets_indexes_without_column_lists_and_a_migrated_one_keeps_its_own(tmp_path: Path):
    from pi_memory.storage.schema import MIGRATIONS

    with Archive.open(tmp_path / "new.db") as a:
        for table in ("msg_fts", "run_fts"):
            assert "detail = 'none'" in a.store.scalar("SELECT sql FROM sqlite_schema WHERE name = ?", (table,))
    legacy = tmp_path / "old.db"
    legacy.write_bytes((Path(__file__).parent / "data" / "legacy" / "schema5-pi.db").read_bytes())
    with Archive.open(legacy) as a:  # holds messages: its indexes stay as they were built
        assert "detail = 'column'" in a.store.scalar("SELECT sql FROM sqlite_schema WHERE name = 'msg_fts'")
    assert "detail = 'column'" in _fts_sql(MIGRATIONS[0][1], "msg_fts")


def test_every_query_token_finds_the_same_rows_in_a_column_index_filtered_and_a_compact_index_unfiltered():
    """Why queries need no column filter: a token's shape says which channel holds it."""
    from pi_memory.core.text import query_tokens, tokenize
    from pi_memory.storage.schema import COMPACT_FTS, MIGRATIONS

    docs = [
        "缓存索引的方案 rebuild the cache",
        "OPENAI_API_KEY is read by openAiKey()",
        "the api key lives in .env; 寶玉 read 红楼梦",
        "索 引 分开写, 缓 存 also",
        "rebuild_index rebuilds; key value store",
    ]
    old, new = apsw.Connection(":memory:"), apsw.Connection(":memory:")
    old.execute(_fts_sql(MIGRATIONS[0][1], "msg_fts"))
    new.execute(_fts_sql(COMPACT_FTS, "msg_fts"))
    for rowid, doc in enumerate(docs, start=1):
        cut = tokenize(doc)
        for conn in (old, new):
            conn.execute(
                "INSERT INTO msg_fts(rowid, chars, grams) VALUES (?,?,?)", (rowid, cut.chars_text(), cut.grams_text())
            )
    tokens = query_tokens("缓存 索引 索 api key openai_api_key rebuild rebuild_index 宝玉 红 value")
    assert {t.kind for t in tokens} == {"word", "gram", "char", "part"}
    found = 0
    for t in tokens:
        filtered = old.execute(
            "SELECT rowid FROM msg_fts WHERE msg_fts MATCH ? ORDER BY rowid", (f'{t.column}:"{t.text}"',)
        )
        unfiltered = new.execute("SELECT rowid FROM msg_fts WHERE msg_fts MATCH ? ORDER BY rowid", (t.fts(),))
        rows = filtered.fetchall()
        assert rows == unfiltered.fetchall(), t
        found += bool(rows)
        assert old.execute("SELECT count(*) FROM msg_fts WHERE msg_fts MATCH ?", (t.fts(),)).fetchone()[0] == len(
            new.execute("SELECT rowid FROM msg_fts WHERE msg_fts MATCH ?", (t.fts(),)).fetchall()
        )
    assert found == len(tokens)  # every token is somewhere: the comparison is not between empty sets


def test_an_idle_checkpoint_starts_the_next_wal_after_a_write_and_writes_nothing_for_a_reader(db_path: Path):
    a = Archive.open(db_path)
    try:
        a.live_mode()
        a.ensure_session("s", "/w")
        a.capture_message("s", _live(0))
        a.catch_up()
        a.checkpoint()
        # the WAL was started over at the idle moment: one frame (that restart), not the write's frames
        assert a.store.rows("PRAGMA wal_checkpoint(PASSIVE)") == [(0, 1, 1)]
        other = apsw.Connection(str(db_path))
        seen = other.execute("PRAGMA data_version").fetchall()
        a.search("message")
        a.catch_up()
        a.checkpoint()  # an idle moment after a read only
        assert other.execute("PRAGMA data_version").fetchall() == seen  # nothing was committed
        other.close()
    finally:
        a.close()


def test_a_writer_waits_for_a_lock_held_by_another_connection_then_writes(tmp_path) -> None:
    import threading

    from pi_memory.storage.store import Store

    first, second = Store.open(tmp_path / "a.db"), Store.open(tmp_path / "a.db")
    first.conn.execute("BEGIN IMMEDIATE")
    released = threading.Event()

    def release() -> None:
        released.wait()
        first.conn.execute("COMMIT")

    holder = threading.Thread(target=release)
    holder.start()
    threading.Timer(0.05, released.set).start()
    with second.write():  # looks again every millisecond until the first commits
        second.conn.execute("UPDATE counter SET value = value + 1 WHERE name = 'indexed_docs'")
    holder.join()
    assert second.scalar("SELECT value FROM counter WHERE name = 'indexed_docs'") == 1


def test_a_writer_gives_up_once_the_busy_timeout_has_passed(tmp_path, monkeypatch) -> None:
    import apsw

    import pi_memory.storage.store as store_module
    from pi_memory.storage.store import Store

    first, second = Store.open(tmp_path / "a.db"), Store.open(tmp_path / "a.db")
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 30)
    first.conn.execute("BEGIN IMMEDIATE")
    with pytest.raises(apsw.BusyError):
        with second.write():
            pass
    first.conn.execute("COMMIT")


def test_the_cli_process_turns_sqlite_memory_statistics_off_only_before_any_database_is_open(tmp_path: Path) -> None:
    """`tune_own_process` (what `pi-memory`'s main does first) changes a process-wide setting: it
    must take effect in a fresh process and refuse once a connection exists (a host's process)."""
    import subprocess
    import sys

    code = """
import sys, apsw
from pi_memory.archive import Archive, tune_own_process
first = sys.argv[2] == "first"
if not first:
    held = apsw.Connection(":memory:")
print(tune_own_process())
with Archive.open(sys.argv[1]) as archive:
    archive.store.conn.execute("CREATE TABLE t(x); INSERT INTO t VALUES (randomblob(100000))")
    print(apsw.status(apsw.SQLITE_STATUS_MEMORY_USED)[0] > 0)
"""
    for order, expected in (("first", ["True", "False"]), ("after", ["False", "True"])):
        out = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / f"{order}.db"), order],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out.split() == expected
