"""An import's write transactions: whole new sessions go in with their runs, headline and source
file in one transaction, each transaction writes one full-text segment per index, and
transactions are cut by the time they take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pi_memory.storage.writes as writes
from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.ingest.importer import Importer, ImportReport
from pi_memory.ingest.prepare import parse_and_tokenize
from pi_memory.runs.table import load_fields
from pi_memory.storage.rows import NewMessage
from pi_memory.storage.store import Store
from pi_memory.storage.writes import SessionWrite

VUE = PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl"


def session_copies(folder: Path, n: int) -> list[Path]:
    """`n` copies of a real pi session (23 messages) under distinct session ids."""
    lines = VUE.read_bytes().splitlines(keepends=True)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        header = {**json.loads(lines[0]), "id": f"copy-{i:04d}"}
        path = folder / f"s{i:04d}.jsonl"
        path.write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
        paths.append(path)
    return paths


def planned_units(store: Store, paths: list[Path]) -> list[SessionWrite]:
    """What an import hands the write path for these files: each parsed, cut and its runs planned."""
    importer = Importer(store)
    units = []
    for path in paths:
        unit = importer.plan_session(parse_and_tokenize(str(path), None), path, ImportReport())
        assert unit is not None and unit.planned is not None
        unit.source = (str(path), path.stat().st_size, path.stat().st_mtime_ns)
        units.append(unit)
    return units


def segments(store: Store, index: str) -> int:
    return int(store.scalar(f"SELECT count(DISTINCT segid) FROM {index}_idx"))


def test_new_sessions_go_in_with_their_runs_headline_and_source_in_one_transaction(tmp_path: Path) -> None:
    paths = session_copies(tmp_path / "in", 3)
    with Archive.open(tmp_path / "a.db") as a:
        units = planned_units(a.store, paths)
        before = a.store._txn
        added, skipped = a.store.write_sessions(units)
        assert (added, skipped) == (69, 0)
        assert a.store._txn - before == 1  # messages, runs, headlines and source files: one transaction
        runs = a.store.rows("SELECT session_id, count(*) FROM run GROUP BY session_id")
        assert sorted(runs) == [(f"copy-{i:04d}", 3) for i in range(3)]
        for (session_id,) in a.store.rows("SELECT id FROM session"):
            head = a.store.scalar("SELECT first_user FROM session WHERE id = ?", (session_id,))
            a.store.update_first_user(session_id)  # what the general path would have set
            assert head and head == a.store.scalar("SELECT first_user FROM session WHERE id = ?", (session_id,))
        assert a.store.scalar("SELECT count(*) FROM source_file") == 3
        counters = a.store.counters()
        assert counters["run_docs"] == 9
        assert counters["indexed_docs"] == a.store.scalar("SELECT count(*) FROM msg WHERE indexed") == 51
        assert a.check() == []


def test_the_runs_written_with_their_messages_are_those_built_from_the_archived_messages(tmp_path: Path) -> None:
    paths = session_copies(tmp_path / "in", 2)
    columns = "first_msg, start_ts, end_ts, status, n_msgs, tool_calls, tool_errors, fields, indexed_chars"

    def runs(store: Store) -> list[tuple[object, ...]]:  # the fields as their readers see them
        return [(*r[:7], load_fields(r[7], r[0]), r[8]) for r in store.rows(f"SELECT {columns} FROM run ORDER BY id")]

    with Archive.open(tmp_path / "planned.db") as a:
        a.store.write_sessions(planned_units(a.store, paths))
        planned = runs(a.store)
        planned_msgs = a.store.rows("SELECT msg_id, run_id, pos FROM run_msg ORDER BY msg_id")
        planned_files = a.store.rows("SELECT * FROM run_file ORDER BY path, msg_id, action")
    with Archive.open(tmp_path / "built.db") as b:
        units = planned_units(b.store, paths)
        for unit in units:
            unit.planned = None  # the runs hook reads the sessions back and summarizes them
        b.store.write_sessions(units)
        assert runs(b.store) == planned
        assert b.store.rows("SELECT msg_id, run_id, pos FROM run_msg ORDER BY msg_id") == planned_msgs
        assert b.store.rows("SELECT * FROM run_file ORDER BY path, msg_id, action") == planned_files


def test_tokens_sent_as_utf8_index_byte_for_byte_as_the_same_tokens_as_text(tmp_path: Path) -> None:
    """A parse worker sends tokens as UTF-8 bytes (`ingest.prepare.MessageLine`); a live write has them
    as text. FTS5 must read both the same: the same index, down to its pages."""
    paths = session_copies(tmp_path / "in", 3)
    paths[0].write_bytes(paths[0].read_bytes().replace("响应".encode(), "響應".encode()))  # for msg_typed

    def index(store: Store) -> list[list[tuple[object, ...]]]:
        tables = ("msg_fts_data", "msg_fts_docsize", "msg_typed_data", "run_fts_data", "run_fts_docsize")
        return [store.rows(f"SELECT * FROM {table} ORDER BY 1") for table in tables]

    with Archive.open(tmp_path / "utf8.db") as a:
        units = planned_units(a.store, paths)
        sent = [m for unit in units for m in unit.messages]
        assert all(isinstance(m.chars, bytes) and isinstance(m.grams, bytes) for m in sent)
        assert any(m.typed for m in sent) and all(isinstance(m.typed, bytes) for m in sent)
        a.store.write_sessions(units)
        as_bytes = index(a.store)
    with Archive.open(tmp_path / "text.db") as b:
        units = planned_units(b.store, paths)
        for unit in units:
            for m in unit.messages:
                assert isinstance(m.chars, bytes) and isinstance(m.grams, bytes) and isinstance(m.typed, bytes)
                m.chars, m.grams, m.typed = m.chars.decode(), m.grams.decode(), m.typed.decode()
            for run in unit.planned:
                run.chars, run.grams = run.chars.decode(), run.grams.decode()
        b.store.write_sessions(units)
        assert index(b.store) == as_bytes
    assert all(rows for rows in as_bytes)
    with Archive.open(tmp_path / "utf8.db") as a, Archive.open(tmp_path / "text.db") as b:
        hits = a.search("响应式 watchEffect", limit=5)
        assert hits and hits == b.search("响应式 watchEffect", limit=5)


def test_a_write_transaction_writes_one_segment_per_full_text_index(tmp_path: Path) -> None:
    """An insert that opens a statement journal (a plain INSERT ... RETURNING) makes FTS5 flush what
    the transaction indexed so far into a segment of its own: one per run or message, not one."""
    paths = session_copies(tmp_path / "in", 4)
    with Archive.open(tmp_path / "a.db") as a:
        for index in ("msg_fts", "run_fts", "msg_typed"):
            a.store.execute(f"INSERT INTO {index}({index}, rank) VALUES ('automerge', 0)")
        before = a.store._txn
        a.store.write_sessions(planned_units(a.store, paths))
        assert a.store._txn - before == 1
        assert segments(a.store, "msg_fts") == 1
        assert segments(a.store, "run_fts") == 1


def test_transactions_are_cut_by_the_time_they_are_expected_to_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = session_copies(tmp_path / "in", 6)
    with Archive.open(tmp_path / "fast.db") as a:
        a.store.write_pace = 1e-12  # a machine this fast takes the whole write in one transaction
        # and no clock cuts it: on a busy machine the write itself may outlast the real target
        monkeypatch.setattr(writes, "TXN_TARGET_S", 3600.0)
        monkeypatch.setattr(writes, "CONTENDED_TXN_S", 3600.0)
        before = a.store._txn
        a.store.write_sessions(planned_units(a.store, paths))
        assert a.store._txn - before == 1
    monkeypatch.undo()
    with Archive.open(tmp_path / "slow.db") as b:
        monkeypatch.setattr(writes, "CHUNK_BUDGET", 2_000)  # small pieces: a session spans transactions
        b.store.write_pace = 1.0  # this slow: every piece is a transaction of its own
        before = b.store._txn
        added, _ = b.store.write_sessions(planned_units(b.store, paths))
        txns = b.store._txn - before
        assert added == 6 * 23 and txns > 6
        # a session cut across transactions still gets its runs planned, written with its last piece
        assert b.store.scalar("SELECT count(*) FROM run") == 18
        assert b.store.scalar("SELECT count(*) FROM source_file") == 6
        assert b.check() == []


def test_the_write_pace_is_learned_from_the_transactions_of_a_write(tmp_path: Path) -> None:
    paths = session_copies(tmp_path / "in", 4)
    with Archive.open(tmp_path / "a.db") as a:
        assert a.store.write_pace == 0.0
        a.store.write_sessions(planned_units(a.store, paths))
        assert 0 < a.store.write_pace < 1e-3


def test_a_batch_that_meets_messages_already_there_keeps_seqs_without_gaps_and_fills_their_entry_ids(
    tmp_path: Path,
) -> None:
    with Archive.open(tmp_path / "a.db") as a:
        store = a.store
        from pi_memory.storage.rows import SessionRow

        row = SessionRow("s1", "pi", "/tmp/p", "p", 1, 1)

        def message(i: int, entry_id: str | None) -> NewMessage:
            m = NewMessage("s1", 1_000 + i, "user", f"message number {i}", True, entry_id, None, {}, f"h{i}")
            m.prepare()
            return m

        store.write_sessions([SessionWrite("s1", [message(1, None), message(3, "e3")], row=row)])
        batch = [message(0, "e0"), message(1, "e1"), message(2, "e2"), message(2, "e2"), message(3, "e3")]
        ids = store.write_sessions([SessionWrite("s1", batch)])
        assert ids == (2, 3)  # two new, three already there (one of them twice in the batch)
        rows = store.rows("SELECT seq, hash, entry_id FROM msg ORDER BY seq")
        assert [r[0] for r in rows] == [1, 2, 3, 4]
        assert dict((h, e) for _, h, e in rows) == {"h0": "e0", "h1": "e1", "h2": "e2", "h3": "e3"}
        indexed = store.scalar("SELECT count(*) FROM msg_fts WHERE msg_fts MATCH 'message'")
        assert indexed == 4
        assert a.check() == []


def test_a_session_whose_messages_did_not_get_consecutive_ids_gets_its_runs_from_the_archive(tmp_path: Path) -> None:
    """A planned run counts its message ids from its first message, which holds only for ids in a
    row: a live writer that slipped a message in between two of the session's pieces breaks that."""
    from pi_memory.runs.planned import write_planned

    paths = session_copies(tmp_path / "in", 1)
    with Archive.open(tmp_path / "a.db") as a:
        (unit,) = planned_units(a.store, paths)
        ids = list(range(1, 24))
        gapped = ids[:10] + [i + 1 for i in ids[10:]]
        with a.store.write():
            assert write_planned(a.store, [(unit.session_id, unit.planned, gapped)], {}) == set()
            assert a.store.scalar("SELECT count(*) FROM run") == 0


def test_a_bulk_write_ends_its_transaction_at_the_next_piece_when_another_writer_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = session_copies(tmp_path / "in", 6)
    monkeypatch.setattr(writes, "WAITER_LOOK_S", 0.0)  # look before every piece
    with Archive.open(tmp_path / "a.db") as a:
        a.store.write_pace = 1e-12  # nothing would end a transaction early but a waiting writer
        units = planned_units(a.store, paths)
        with a.store.yielding_to_waiters():  # a bulk write, as an import's
            monkeypatch.setattr(a.store._line, "someone_waiting", lambda: True)
            monkeypatch.setattr(a.store._line, "let_waiters_in", lambda: None)
            before = a.store._txn
            assert a.store.write_sessions(units) == (6 * 23, 0)
            assert a.store._txn - before == 6  # one session a transaction: a waiter gets in between
        assert a.store.scalar("SELECT count(*) FROM source_file") == 6
    with Archive.open(tmp_path / "b.db") as b:
        b.store.write_pace = 1e-12
        monkeypatch.setattr(b.store._line, "someone_waiting", lambda: True)
        before = b.store._txn
        b.store.write_sessions(planned_units(b.store, paths))
        assert b.store._txn - before == 1  # not a bulk write: it does not look
