"""The memory log in SQLite: append-only rows, the hash chain, tamper detection, export/import, repair."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest

from pi_memory import Archive
from pi_memory.errors import ArchiveError, BadInput
from pi_memory.memory import Memories, MemoryChainBroken, workspace_key
from pi_memory.memory.chain import GENESIS, ChainRow, canonical, event_hash, make_row, verify_chain
from pi_memory.memory.log import parse_export
from pi_memory.storage.store import Store


@pytest.fixture
def store(archive_target: str) -> Store:
    s = Archive.open(archive_target).store
    yield s
    s.close()


@pytest.fixture
def mem(store: Store) -> Memories:
    return Memories(store)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def _fill(mem: Memories, ws: Path, n: int = 4) -> list[str]:
    return [mem.remember(ws, f"memory number {i}", kind="fact").record.id for i in range(n)]


def _behind_the_librarys_back(
    archive_target: str, sql: str, params: tuple[object, ...] = ()
) -> list[tuple[object, ...]]:
    """Run SQL on the archive with the memory log's guard triggers off (the owner can do that)."""
    if archive_target.startswith("postgresql"):
        import psycopg

        with psycopg.connect(archive_target, autocommit=True) as conn:
            conn.execute("ALTER TABLE memory_event DISABLE TRIGGER memory_event_append_only")
            cur = conn.execute(sql.replace("?", "%s").encode(), params)
            return list(cur.fetchall()) if cur.description else []
    conn = apsw.Connection(archive_target)
    for trigger in ("memory_event_no_update", "memory_event_no_delete"):
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    rows = list(conn.execute(sql, params))
    conn.close()
    return rows


def _tamper(archive_target: str, seq: int, new_body: str) -> None:
    """Edit one stored event behind the library's back."""
    ((event_text,),) = _behind_the_librarys_back(archive_target, "SELECT event FROM memory_event WHERE seq=?", (seq,))
    event = json.loads(str(event_text))
    event["body"] = new_body
    _behind_the_librarys_back(archive_target, "UPDATE memory_event SET event=? WHERE seq=?", (canonical(event), seq))


def test_workspace_key_is_the_resolved_path_without_trailing_slash(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert workspace_key(str(tmp_path / "a") + "/") == str((tmp_path / "a").resolve())
    assert workspace_key(tmp_path / "link") == workspace_key(tmp_path / "a")
    assert not workspace_key(tmp_path / "a").endswith("/")


def test_events_get_consecutive_seqs_and_each_prev_hash_is_the_previous_hash(mem: Memories, ws: Path) -> None:
    _fill(mem, ws, 3)
    rows = mem.log.chain_rows(mem.log.active_chain(workspace_key(ws)))
    assert [r.seq for r in rows] == [1, 2, 3]
    assert rows[0].prev_hash == GENESIS
    assert rows[1].prev_hash == rows[0].hash and rows[2].prev_hash == rows[1].hash
    assert all(event_hash(r.event) == r.hash for r in rows)
    assert verify_chain(rows).ok


def test_triggers_refuse_update_and_delete_of_memory_events(mem: Memories, ws: Path, store: Store) -> None:
    _fill(mem, ws, 1)
    for sql in ("UPDATE memory_event SET event='{}'", "DELETE FROM memory_event", "DELETE FROM memory_chain"):
        with pytest.raises((apsw.ConstraintError, ArchiveError), match="append-only"):
            store.execute(sql)
    assert store.scalar("SELECT count(*) FROM memory_event") == 1


def test_a_tampered_row_fails_verification_at_its_seq(
    mem: Memories, ws: Path, store: Store, archive_target: str
) -> None:
    _fill(mem, ws, 4)
    _tamper(archive_target, 3, "use npm after all")
    report = mem.log.report(workspace_key(ws))
    assert not report.ok
    assert report.broken_at == 3 and report.trusted == 2 and report.rows == 4
    assert "hash does not match" in (report.reason or "")


def test_reads_of_a_broken_chain_return_only_the_trusted_prefix(mem: Memories, ws: Path, archive_target: str) -> None:
    _fill(mem, ws, 4)
    _tamper(archive_target, 3, "use npm after all")
    bodies = [f.record.body for f in mem.list(ws).found]
    assert bodies == ["memory number 0", "memory number 1"]


def test_appends_to_a_broken_chain_are_refused_with_a_repair_hint(mem: Memories, ws: Path, archive_target: str) -> None:
    _fill(mem, ws, 4)
    _tamper(archive_target, 2, "changed")
    with pytest.raises(MemoryChainBroken) as err:
        mem.remember(ws, "one more")
    message = str(err.value)
    assert "broken at event 2" in message and "pi-memory memory repair" in message and "\n" not in message
    assert mem.log.report(workspace_key(ws)).rows == 4


def test_a_deleted_row_breaks_the_chain_at_the_gap(mem: Memories, ws: Path, archive_target: str) -> None:
    _fill(mem, ws, 3)
    _behind_the_librarys_back(archive_target, "DELETE FROM memory_event WHERE seq=2")
    report = mem.log.report(workspace_key(ws))
    assert report.broken_at == 2 and report.trusted == 1
    assert "seq 3 where 2 was expected" in (report.reason or "")


def test_repair_starts_a_new_chain_from_the_trusted_prefix_and_keeps_the_broken_rows(
    mem: Memories, ws: Path, archive_target: str, store: Store
) -> None:
    _fill(mem, ws, 4)
    _tamper(archive_target, 3, "x")
    key = workspace_key(ws)
    result = mem.log.repair(key)
    assert (result.kept, result.left_behind, result.broken_at) == (2, 2, 3)
    assert mem.log.report(key).ok
    mem.remember(ws, "after the repair")
    assert [f.record.body for f in mem.list(ws).found][-1] == "after the repair"
    assert store.scalar("SELECT count(*) FROM memory_event WHERE chain=?", (result.old_chain,)) == 4


def test_repair_of_an_intact_chain_is_refused(mem: Memories, ws: Path) -> None:
    _fill(mem, ws, 1)
    with pytest.raises(BadInput, match="intact"):
        mem.log.repair(workspace_key(ws))


def test_export_then_import_into_another_workspace_gives_the_same_state(
    mem: Memories, ws: Path, tmp_path: Path
) -> None:
    ids = _fill(mem, ws, 3)
    mem.pin(ws, ids[1])
    mem.forget(ws, ids[2])
    lines, report = mem.log.export_lines(workspace_key(ws))
    assert report.ok and len(lines) == 5
    other = tmp_path / "other"
    other.mkdir()
    rows, torn = parse_export(lines)
    result = mem.log.import_rows(workspace_key(other), rows)
    assert (result.added, result.already, torn) == (5, 0, False)
    assert mem.state(other)[1].records == mem.state(ws)[1].records
    assert mem.log.export_lines(workspace_key(other))[0] == lines


def test_import_extends_a_chain_that_is_a_prefix_of_the_file_and_skips_what_it_has(
    mem: Memories, ws: Path, tmp_path: Path
) -> None:
    _fill(mem, ws, 2)
    first, _ = mem.log.export_lines(workspace_key(ws))
    mem.remember(ws, "a third memory")
    full, _ = mem.log.export_lines(workspace_key(ws))
    other = workspace_key(tmp_path)
    mem.log.import_rows(other, parse_export(first)[0])
    again = mem.log.import_rows(other, parse_export(full)[0])
    assert (again.added, again.already) == (1, 2)


def test_import_of_a_diverging_chain_is_refused(mem: Memories, ws: Path, tmp_path: Path) -> None:
    _fill(mem, ws, 2)
    lines, _ = mem.log.export_lines(workspace_key(ws))
    other = tmp_path / "other"
    other.mkdir()
    mem.remember(other, "something else entirely")
    with pytest.raises(BadInput, match="differ from event 1"):
        mem.log.import_rows(workspace_key(other), parse_export(lines)[0])


def test_import_of_an_edited_export_is_refused_at_the_edited_event(mem: Memories, ws: Path, tmp_path: Path) -> None:
    _fill(mem, ws, 3)
    lines, _ = mem.log.export_lines(workspace_key(ws))
    lines[1] = lines[1].replace("memory number 1", "memory number 9")
    with pytest.raises(BadInput, match="broken at event 2"):
        mem.log.import_rows(workspace_key(tmp_path), parse_export(lines)[0])


def test_export_parser_skips_a_torn_last_line_but_refuses_a_bad_middle_line(mem: Memories, ws: Path) -> None:
    _fill(mem, ws, 2)
    lines, _ = mem.log.export_lines(workspace_key(ws))
    rows, torn = parse_export([*lines, lines[0][:20]])
    assert len(rows) == 2 and torn
    with pytest.raises(BadInput, match="line 2"):
        parse_export([lines[0], "not json", lines[1]])


def test_verify_reports_a_non_canonical_event_text() -> None:
    row = make_row(1, GENESIS, {"type": "create", "body": "x"})
    spaced = ChainRow(1, GENESIS, event_hash(row.event.replace(",", ", ")), row.event.replace(",", ", "))
    report = verify_chain([spaced])
    assert report.broken_at == 1 and "canonical" in (report.reason or "")


def test_two_stores_appending_in_turn_never_reuse_a_seq(archive_target: str, ws: Path) -> None:
    a, b = Archive.open(archive_target).store, Archive.open(archive_target).store
    try:
        for i in range(5):
            Memories(a).remember(ws, f"from a {i}")
            Memories(b).remember(ws, f"from b {i}")
        report = Memories(a).log.report(workspace_key(ws))
        assert report.ok and report.trusted == 10
    finally:
        a.close()
        b.close()


WRITER = """
import sys
from pi_memory import Archive
from pi_memory.memory import Memories
store = Archive.open(sys.argv[1]).store
for i in range(int(sys.argv[4])):
    Memories(store).remember(sys.argv[2], f"{sys.argv[3]} memory {i}")
store.close()
"""


def test_concurrent_writer_processes_lose_no_event_and_keep_one_chain(archive_target: str, ws: Path) -> None:
    import subprocess
    import sys

    Archive.open(archive_target).store.close()  # migrate once, before the race
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, archive_target, str(ws), f"writer{n}", "15"]) for n in range(3)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    store = Archive.open(archive_target).store
    try:
        mem = Memories(store)
        report = mem.log.report(workspace_key(ws))
        assert report.ok and report.trusted == 45
        assert len(mem.list(ws).found) == 45
    finally:
        store.close()
