"""Bulk import from any caller, after a kill -9, and on an archive made by an older schema."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

import pi_memory
from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.ingest.importer import PARALLEL_MIN_FILES
from pi_memory.runs.detail import RunWindow
from pi_memory.storage.store import decode_text, decompress

VUE = PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl"
LEGACY = Path(__file__).parent / "data" / "legacy" / "schema5-pi.db"
PACKAGE_ROOT = str(Path(pi_memory.__file__).resolve().parent.parent)


def many_sessions(folder: Path, n: int, prefix: str = "copy") -> Path:
    """`n` copies of a real pi session under distinct session ids: enough files for the parse worker."""
    lines = VUE.read_bytes().splitlines(keepends=True)
    folder.mkdir(parents=True)
    for i in range(n):
        header = json.loads(lines[0])
        header["id"] = f"{prefix}-{i:04d}"
        (folder / f"s{i:04d}.jsonl").write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
    return folder


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": PACKAGE_ROOT, "PI_MEMORY_IMPORT_WORKERS": "1"}


def content(db: Path) -> tuple[list[tuple[str, str, str]], int, int, list[tuple[str, int]]]:
    """What an import leaves: messages (session, hash, text), index rows, verbatim entries, runs per session."""
    with Archive.open(db) as a:
        msgs = sorted(
            (str(s), str(h), decode_text(t)) for s, h, t in a.store.rows("SELECT session_id, hash, text FROM msg")
        )
        fts = int(a.store.scalar("SELECT count(*) FROM msg_fts"))
        entries = int(a.store.scalar("SELECT count(*) FROM entry"))
        runs = sorted(a.store.rows("SELECT session_id, count(*) FROM run GROUP BY session_id"))
    return msgs, fts, entries, [(str(s), int(n)) for s, n in runs]


SCRIPT = """
import sys
from pi_memory import Archive

archive = Archive.open(sys.argv[1])
report = archive.import_paths([sys.argv[2]])
print(report.added, len(report.sessions))
"""


@pytest.mark.parametrize("how", ["script", "stdin"])
def test_import_paths_works_from_a_script_without_a_main_guard(tmp_path: Path, how: str) -> None:
    folder = many_sessions(tmp_path / "sessions", PARALLEL_MIN_FILES + 2)
    db = tmp_path / "a.db"
    if how == "script":
        script = tmp_path / "one_off.py"
        script.write_text(SCRIPT, encoding="utf-8")
        cmd = [sys.executable, str(script), str(db), str(folder)]
        done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    else:
        cmd = [sys.executable, "-", str(db), str(folder)]
        done = subprocess.run(cmd, env=env(), input=SCRIPT, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(23 * (PARALLEL_MIN_FILES + 2)), str(PARALLEL_MIN_FILES + 2)]
    assert "Error" not in done.stderr


# An import that stops inside a write transaction once it has written `at_least` messages (the
# transaction open, its rows not committed), says so, and waits: the kill -9 lands there, mid-work.
STOPS_INSIDE = """
import sys
from pi_memory.frontends.cli import main
from pi_memory.storage import writes
write_chunk, written, at_least = writes._write_chunk, [0], int(sys.argv[1])
def write_then_stop(store, unit, chunk, first, totals):
    duplicates = write_chunk(store, unit, chunk, first, totals)
    written[0] += len(chunk)
    if written[0] >= at_least and store.conn.in_transaction:
        print("inside", flush=True)
        sys.stdin.readline()
    return duplicates
writes._write_chunk = write_then_stop
sys.argv = ["pi-memory", *sys.argv[2:]]
main()
"""


@pytest.mark.parametrize("kill_at", [1, 400])
def test_a_kill_9_during_import_then_a_reimport_gives_exactly_a_clean_import(tmp_path: Path, kill_at: int) -> None:
    folder = many_sessions(tmp_path / "sessions", PARALLEL_MIN_FILES + 8)
    clean, killed = tmp_path / "clean.db", tmp_path / "killed.db"
    with Archive.open(clean) as a:
        a.import_paths([folder])
    cmd = [sys.executable, "-c", STOPS_INSIDE, str(kill_at), "import", str(folder), "--db", str(killed)]
    proc = subprocess.Popen(cmd, env=env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None and proc.stdout.readline() == b"inside\n"  # bounded: it stops there or ends
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL  # killed mid-transaction, not ended by itself
    with Archive.open(killed) as a:
        assert a.stats().messages < len(content(clean)[0])  # what the kill cut short is not there yet
        a.import_paths([folder])
        assert a.check() == []
    assert content(killed) == content(clean)


def test_an_archive_of_the_previous_schema_keeps_every_message_searchable_and_replayable(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    shutil.copy(LEGACY, db)
    before = apsw.Connection(str(db))
    old_texts = dict(before.execute("SELECT id, text FROM msg").fetchall())
    old_raw = {
        int(mid): decompress(raw)
        for mid, raw in before.execute("SELECT msg_id, raw FROM entry WHERE msg_id IS NOT NULL")
    }
    before.close()
    with Archive.open(db) as a:
        assert a.check() == []
        assert a.search("响应式") and a.search("proxy_buffering")
        # every indexed message is still in the index (its length read from the index, as search reads it)
        indexed = [int(r[0]) for r in a.store.rows("SELECT id FROM msg WHERE indexed")]
        assert indexed and set(a.store.msg_token_counts(indexed)) == set(indexed)
        for msg_id, text in old_texts.items():
            assert decode_text(a.store.scalar("SELECT text FROM msg WHERE id=?", (msg_id,))) == text
        addresses = a.store.rows("SELECT msg_id, run_id, pos FROM run_msg")
        replayed = {int(m): whole_raw(a, f"r{r}/m{p}") for m, r, p in addresses if int(m) in old_raw}
        assert replayed and all(replayed[m] == old_raw[m] for m in replayed)
        # new messages land beside the old rows, in the new format, and both are found
        new = many_sessions(tmp_path / "new", 1) / "s0000.jsonl"
        assert a.import_paths([new]).added == 23
        sessions = {h.session_id for h in a.search("响应式", limit=50)}
        assert "copy-0000" in sessions and sessions - {"copy-0000"}


def whole_raw(a: Archive, address: str) -> bytes:
    """`read rN/mK --raw`, every page joined."""
    pages, offset = [], 0
    while True:
        detail = a.read_address(address, offset=offset, raw=True)
        assert not isinstance(detail, RunWindow)
        pages.append(detail.text)
        if detail.next_offset is None:
            return "".join(pages).encode("utf-8", "surrogatepass")
        offset = detail.next_offset


def test_import_transactions_are_cut_by_message_count_and_by_index_cost() -> None:
    from pi_memory.storage.store import NewMessage
    from pi_memory.storage.writes import BATCH, INDEX_BUDGET, SessionWrite, pack

    def msg(i: int, tokens: int) -> NewMessage:
        return NewMessage("s", i, "user", "x", True, None, None, {}, f"h{i}", chars="a" * tokens)

    many_short = SessionWrite("s", [msg(i, 10) for i in range(BATCH * 2 + 5)])
    assert [sum(len(c[1]) for c in t) for t in pack([many_short])] == [BATCH, BATCH, 5]
    heavy = SessionWrite("s", [msg(i, INDEX_BUDGET // 4) for i in range(10)])
    sizes = [sum(len(c[1]) for c in t) for t in pack([heavy])]
    assert sum(sizes) == 10 and max(sizes) <= 4 and len(sizes) >= 3
    units = [SessionWrite(f"s{i}", [msg(i, 5)]) for i in range(3)] + [SessionWrite("empty", [])]
    assert [[(u.session_id, first, last) for u, _, first, last in t] for t in pack(units)] == [
        [("s0", True, True), ("s1", True, True), ("s2", True, True), ("empty", True, True)]
    ]


def test_plain_and_packed_message_rows_live_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pi_memory.storage.codec as store
    from pi_memory.storage.store import Store

    monkeypatch.setattr(Store, "TRAIN_AFTER", 200)
    folder = many_sessions(tmp_path / "sessions", 14)
    with Archive.open(tmp_path / "a.db") as a:
        a.import_paths([folder / f"s{i:04d}.jsonl" for i in range(2, 14)])  # enough to learn a dictionary from
        monkeypatch.setattr(store, "PACK_TEXT", False)  # an older version's rows: plain TEXT
        a.import_paths([folder / "s0000.jsonl"])
        monkeypatch.setattr(store, "PACK_TEXT", True)
        a.import_paths([folder / "s0001.jsonl"])
        assert a.store.text_dict_id
        kinds = {
            sid: {type(t) for (t,) in a.store.rows("SELECT text FROM msg WHERE session_id=?", (sid,))}
            for sid in ("copy-0000", "copy-0001")
        }
        assert kinds == {"copy-0000": {str}, "copy-0001": {bytes}}
        assert {"copy-0000", "copy-0001"} <= {h.session_id for h in a.search("响应式", limit=100)}
        texts = [[m.text for m in a.read(sid, before=50, after=0).messages] for sid in ("copy-0000", "copy-0001")]
        assert texts[0] == texts[1] and texts[0]


AHEAD_SCRIPT = """
import sys
from pi_memory import Archive
from pi_memory.ingest import importer

importer.AHEAD_BYTES = 1 << 40  # only the request bound holds the workers back
archive = Archive.open(sys.argv[1])
print(archive.import_paths([sys.argv[2]]).added)
"""


def test_a_worker_far_ahead_with_long_paths_never_blocks_the_import(tmp_path: Path) -> None:
    # answers larger than the worker's pipe and more requests than the request pipe holds: were
    # the requests not bounded, the writer would block on a full request pipe while the worker
    # blocks on a full answer pipe, and the import would hang
    deep = tmp_path / ("d" * 100) / ("e" * 100) / ("f" * 40)
    folder = many_sessions(deep, 240)
    assert len(str(next(folder.iterdir()))) > 250
    db = tmp_path / "a.db"
    cmd = [sys.executable, "-", str(db), str(folder)]
    done = subprocess.run(cmd, env=env(), input=AHEAD_SCRIPT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(23 * 240)]


def test_an_import_checkpoints_in_larger_steps_on_a_thread_and_gives_the_setting_back(
    tmp_path: Path, monkeypatch
) -> None:
    from pi_memory.ingest.importer import Importer
    from pi_memory.storage.store import BULK_CHECKPOINT_PAGES, WAL_SIZE_LIMIT

    archive = Archive.open(tmp_path / "a.db")
    store = archive.store
    seen: list[tuple[int, int]] = []
    flush = Importer.flush

    def flush_and_look(self: Importer, report) -> None:
        assert store.aside_checkpointer is not None
        seen.append((int(store.scalar("PRAGMA wal_autocheckpoint")), store.aside_checkpointer.pages))
        # the WAL keeps its pages when it starts over: no cut to the size limit inside a commit
        assert int(store.scalar("PRAGMA journal_size_limit")) == -1
        flush(self, report)

    monkeypatch.setattr(Importer, "flush", flush_and_look)
    for deferred, after in ((False, 1000), (True, 0)):
        if deferred:
            store.defer_checkpoints()
        archive.import_paths([many_sessions(tmp_path / f"s{deferred}", 3)])
        # SQLite's own checkpoints are off while the thread checkpoints every BULK_CHECKPOINT_PAGES
        assert seen and set(seen) == {(0, BULK_CHECKPOINT_PAGES)}
        assert int(store.scalar("PRAGMA wal_autocheckpoint")) == after
        assert store.aside_checkpointer is None
        seen.clear()
    assert int(store.scalar("PRAGMA journal_size_limit")) == WAL_SIZE_LIMIT


def test_an_import_merges_the_full_text_indexes_in_steps_and_gives_automerge_back(tmp_path: Path, monkeypatch) -> None:
    from pi_memory.ingest.importer import Importer
    from pi_memory.storage.store import FTS_INDEXES, IMPORT_CRISIS_MERGE, IMPORT_HASH_BYTES, IMPORT_MERGE_RULE

    archive = Archive.open(tmp_path / "a.db")
    store = archive.store
    before = {t: store._automerge(t) for t in FTS_INDEXES}
    during: list[dict[str, int]] = []
    rules: list[dict[str, int]] = []
    crises: list[dict[str, int]] = []
    steps: list[int] = []
    flush, merge_steps = Importer.flush, type(store).merge_steps

    def flush_and_look(self: Importer, report) -> None:
        during.append({t: store._automerge(t) for t in FTS_INDEXES})
        rules.append({t: _usermerge(store, t) for t in FTS_INDEXES})
        crises.append({t: (_config(store, t, "crisismerge"), _config(store, t, "hashsize")) for t in FTS_INDEXES})
        flush(self, report)

    def counted(self, whole=frozenset()) -> int:
        steps.append(merge_steps(self, whole))
        return steps[-1]

    monkeypatch.setattr(Importer, "flush", flush_and_look)
    monkeypatch.setattr(type(store), "merge_steps", counted)
    report = archive.import_paths([many_sessions(tmp_path / "s", 40)])
    assert report.added > 0 and during and all(d == dict.fromkeys(FTS_INDEXES, 0) for d in during)
    assert steps and sum(steps) > 3 * len(steps)  # some merging was done, a step at a time
    assert all(r == dict.fromkeys(FTS_INDEXES, IMPORT_MERGE_RULE) for r in rules)  # wider levels while importing
    limits = (IMPORT_CRISIS_MERGE, IMPORT_HASH_BYTES)  # no merge inside a commit, one segment a transaction
    assert all(c == dict.fromkeys(FTS_INDEXES, limits) for c in crises)
    assert {t: store._automerge(t) for t in FTS_INDEXES} == before == dict.fromkeys(FTS_INDEXES, 2)
    assert {t: _usermerge(store, t) for t in FTS_INDEXES} == dict.fromkeys(FTS_INDEXES, 2)
    assert {t: _config(store, t, "crisismerge") for t in FTS_INDEXES} == dict.fromkeys(FTS_INDEXES, 16)
    assert {t: _config(store, t, "hashsize") for t in FTS_INDEXES} == dict.fromkeys(FTS_INDEXES, 1 << 20)
    assert not store.rows("SELECT name FROM counter WHERE name LIKE 'automerge%'")
    assert store.merge_steps() == len(FTS_INDEXES)  # merged as far as the index's own rule goes: one idle look each
    one = Archive.open(tmp_path / "one.db")
    one.import_paths([VUE])
    matches = "SELECT count(*) FROM msg_fts WHERE msg_fts MATCH '\"响应\"'"
    assert store.scalar(matches) == 40 * one.store.scalar(matches) > 0


def _usermerge(store, table: str) -> int:
    return _config(store, table, "usermerge")


def _config(store, table: str, key: str) -> int:
    return int(store.scalar(f"SELECT v FROM {table}_config WHERE k = ?", (key,)))


def test_a_killed_import_s_automerge_comes_back_at_the_next_opening(tmp_path: Path) -> None:
    from pi_memory.storage.store import FTS_INDEXES, Store

    store = Store.open(tmp_path / "a.db")
    with store.write():  # what an import killed while it merged in steps leaves behind
        for table in FTS_INDEXES:
            store.execute("INSERT INTO counter(name, value) VALUES (?, 2)", ("automerge before import: " + table,))
            store.execute(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', 0)")
            store.execute(f"INSERT INTO {table}({table}, rank) VALUES ('usermerge', 8)")
            store.execute(f"INSERT INTO {table}({table}, rank) VALUES ('crisismerge', 64)")
            store.execute(f"INSERT INTO {table}({table}, rank) VALUES ('hashsize', 8388608)")
    store.close()
    reopened = Store.open(tmp_path / "a.db")
    assert {t: reopened._automerge(t) for t in FTS_INDEXES} == dict.fromkeys(FTS_INDEXES, 2)
    assert {t: _usermerge(reopened, t) for t in FTS_INDEXES} == dict.fromkeys(FTS_INDEXES, 2)
    assert {t: _config(reopened, t, "crisismerge") for t in FTS_INDEXES} == dict.fromkeys(FTS_INDEXES, 16)
    assert {t: _config(reopened, t, "hashsize") for t in FTS_INDEXES} == dict.fromkeys(FTS_INDEXES, 1 << 20)
    assert not reopened.rows("SELECT name FROM counter WHERE name LIKE 'automerge%'")


def test_an_import_leaves_no_free_pages_in_a_new_archive(tmp_path: Path) -> None:
    archive = Archive.open(tmp_path / "a.db")
    archive.import_paths([many_sessions(tmp_path / "s", 40)])
    store = archive.store
    assert int(store.scalar("PRAGMA auto_vacuum")) == 2  # incremental: made so when the file was new
    assert int(store.scalar("PRAGMA freelist_count")) == 0  # the merges' freed pages were given back
    assert store.shrink() == 0


def test_an_archive_made_without_auto_vacuum_still_imports_and_keeps_its_free_pages(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = apsw.Connection(str(db))  # an archive of an earlier version: no auto-vacuum
    conn.execute("PRAGMA page_size=8192; PRAGMA journal_mode=WAL; CREATE TABLE t(x)")
    conn.close()
    archive = Archive.open(db)
    assert int(archive.store.scalar("PRAGMA auto_vacuum")) == 0
    report = archive.import_paths([many_sessions(tmp_path / "s", 40)])
    assert report.added > 0 and not report.errors
    assert archive.store.shrink() == 0
    assert archive.search("响应")


def test_a_first_import_leaves_each_full_text_index_in_one_segment_and_a_small_later_one_does_not_rewrite_it(
    tmp_path: Path, monkeypatch
) -> None:
    from pi_memory.storage.store import FTS_INDEXES, Store

    wholes: list[set[str]] = []
    merge_steps = Store.merge_steps

    def spy(self: Store, whole=frozenset()) -> int:
        wholes.append(set(whole))
        return merge_steps(self, whole)

    monkeypatch.setattr(Store, "merge_steps", spy)
    with Archive.open(tmp_path / "a.db") as a:
        a.import_paths([many_sessions(tmp_path / "first", 40)])
        assert wholes[-1] == set(FTS_INDEXES)  # every index is this import's: merged into one segment
        segments = {t: a.store.scalar(f"SELECT count(DISTINCT segid) FROM {t}_idx") for t in FTS_INDEXES}
        assert segments == {"msg_fts": 1, "run_fts": 1, "msg_typed": 0}  # these sessions type no traditional character
        wholes.clear()
        a.import_paths([many_sessions(tmp_path / "later", 3, prefix="later")])
        assert wholes[-1] == set()  # a few sessions more: merged by the index's own rule
