"""The parse worker packs message text with the archive's dictionary once it has one; the writer
keeps a text so packed as it is, and packs any other again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pi_memory.ingest.importer as ingest
import pi_memory.storage.rows as rows
from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.core.sources.readers import read_session_file
from pi_memory.storage.codec import decode_text, decompress, packed_with, register_dictionary, train_dictionary
from pi_memory.storage.rows import NewMessage
from pi_memory.storage.store import Store

VUE = PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl"
FILES = 80  # 1,840 messages: the archive trains its dictionary after the first 1,000


def many_sessions(folder: Path, n: int, prefix: str = "copy") -> Path:
    """`n` copies of a real pi session (23 messages) under distinct session ids."""
    lines = VUE.read_bytes().splitlines(keepends=True)
    folder.mkdir(parents=True)
    for i in range(n):
        header = {**json.loads(lines[0]), "id": f"{prefix}-{i:04d}"}
        (folder / f"s{i:04d}.jsonl").write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
    return folder


def stored(db: Path) -> tuple[list[tuple[str, int, str]], list[bytes], list[Any]]:
    """(session, seq, text) of every message, every verbatim line, and the stored text values."""
    with Archive.open(db) as a:
        values = a.store.rows("SELECT session_id, seq, text FROM msg ORDER BY session_id, seq")
        lines = a.store.rows("SELECT e.raw, m.text FROM entry e JOIN msg m ON m.id = e.msg_id ORDER BY m.id")
        assert a.check() == []
    texts = [(str(s), int(q), decode_text(t)) for s, q, t in values]
    return texts, [decompress(raw, text) for raw, text in lines], [t for _, _, t in values]


def wait_for_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer waits for its worker to start (an event, bounded) instead of parsing files itself
    meanwhile: on a loaded machine the worker, at a lower priority, was ready only once the writer
    had parsed every file, and tests of what the worker does saw it do nothing."""
    from pi_memory.ingest.workers import Worker

    monkeypatch.setattr(Worker, "ready", property(lambda self: self.started.wait(120) or True))


def count_worker_answers(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The files the worker parsed (its answers, as the writer takes them)."""
    from pi_memory.ingest.workers import Worker

    answers: list[Any] = []
    result = Worker.result

    def counted(self: Worker) -> Any:
        answers.append(result(self))
        return answers[-1]

    monkeypatch.setattr(Worker, "result", counted)
    return answers


def import_through_a_worker(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: int = FILES,
    prefix: str = "copy",
    dictionaries: list[int | None] | None = None,
) -> tuple[Path, int, list[bool], int]:
    """Import `files` sessions through one worker into `worker.db`: (the archive, its dictionary, for
    each text that came packed from the worker whether the writer stored that very value, the
    writer's `encode_text` calls, whose dictionaries go to `dictionaries`). Every file is parsed by
    the worker (asserted): the writer waits for it to start and never parses ahead of it."""
    folder = many_sessions(tmp_path / prefix, files, prefix)
    monkeypatch.setenv("PI_MEMORY_IMPORT_WORKERS", "1")
    monkeypatch.setattr(ingest, "AHEAD_BYTES", 64 << 10)  # a few files ahead: most are handed out after training
    monkeypatch.setattr(ingest, "PARSED_HERE_BYTES", 0)  # the worker parses them all
    wait_for_workers(monkeypatch)
    answers = count_worker_answers(monkeypatch)
    kept: list[bool] = []
    encoded = []
    pack, encode_text = NewMessage.pack, rows.encode_text

    def spy_pack(m: NewMessage, dict_id: int = 0, later: bool = False) -> None:
        before = m.packed
        pack(m, dict_id, later)
        if isinstance(before, bytes):
            kept.append(m.packed is before)

    def spy_encode(text: str, dict_id: int | None = None) -> str | bytes:
        encoded.append(dict_id)
        if dictionaries is not None:
            dictionaries.append(dict_id)
        return encode_text(text, dict_id)

    monkeypatch.setattr(NewMessage, "pack", spy_pack)
    monkeypatch.setattr(rows, "encode_text", spy_encode)
    db = tmp_path / "worker.db"
    with Archive.open(db) as a:
        assert a.import_paths([folder]).added == 23 * files
        dict_id = a.store.text_dict_id
    assert len(answers) == files  # the worker parsed every file
    return db, dict_id, kept, len(encoded)


def test_an_import_through_a_worker_stores_texts_packed_with_the_archives_dictionary_and_reads_back_identically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, dict_id, kept, _ = import_through_a_worker(tmp_path, monkeypatch)
    assert dict_id and kept  # the worker got the dictionary and packed with it
    monkeypatch.setenv("PI_MEMORY_IMPORT_WORKERS", "0")
    with Archive.open(tmp_path / "here.db") as a:
        a.import_paths([tmp_path / "copy"])
    texts, lines, values = stored(db)
    assert all(packed_with(v, dict_id) for v in values)
    assert (texts, lines) == stored(tmp_path / "here.db")[:2]


def test_a_worker_that_got_the_dictionary_packs_the_text_and_the_writer_does_not_pack_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, kept, encoded = import_through_a_worker(tmp_path, monkeypatch)
    assert len(kept) > 23 * FILES // 4 and all(kept)
    # every other text was packed once, by the writer: those in flight when the dictionary came as
    # they were written, the first 1,000 (written as they are before it) when it was learned
    assert 0 < encoded and encoded + len(kept) < 23 * FILES - 1000


def test_a_first_import_keeps_its_first_texts_as_they_are_until_the_dictionary_then_packs_them_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repacked: list[int] = []
    repack = Store._repack_first_messages

    def spy(self: Store, dict_id: int) -> None:
        plain = self.scalar("SELECT count(*) FROM msg WHERE typeof(text) = 'text'")
        repack(self, dict_id)
        repacked.append(plain - self.scalar("SELECT count(*) FROM msg WHERE typeof(text) = 'text'"))

    monkeypatch.setattr(Store, "_repack_first_messages", spy)
    dictionaries: list[int | None] = []
    db, dict_id, kept, encoded = import_through_a_worker(tmp_path, monkeypatch, dictionaries=dictionaries)
    assert dict_id and set(dictionaries) == {dict_id}  # the writer packed nothing without the dictionary
    assert len(repacked) == 1 and repacked[0] >= 1000  # the first messages, packed once it was learned
    assert all(packed_with(v, dict_id) for v in stored(db)[2])


def test_an_archive_that_has_its_dictionary_hands_it_to_the_worker_before_its_first_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_MEMORY_IMPORT_WORKERS", "0")
    with Archive.open(tmp_path / "worker.db") as a:
        a.import_paths([many_sessions(tmp_path / "first", 50, "first")])
        assert a.store.text_dict_id
    files = ingest.PARALLEL_MIN_FILES + 2
    _, _, kept, encoded = import_through_a_worker(tmp_path, monkeypatch, files, "later")
    assert encoded == 0 and len(kept) == 23 * files and all(kept)


def foreign_dictionary() -> int:
    """A dictionary trained elsewhere (from the fixtures' texts), registered in this process."""
    samples = [
        e.rendered.text.encode()
        for p in sorted(VUE.parent.glob("*.jsonl"))
        for e in read_session_file(p, None).entries
        if e.rendered is not None
    ]
    data = train_dictionary(samples * 2)
    assert data is not None
    return register_dictionary(data)


@pytest.mark.parametrize("archive", ["without a dictionary", "with its own dictionary"])
def test_a_text_packed_with_a_dictionary_the_archive_does_not_use_is_packed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, archive: str
) -> None:
    foreign = foreign_dictionary()
    parse = ingest.parse_and_tokenize
    monkeypatch.setenv("PI_MEMORY_IMPORT_WORKERS", "0")
    db = tmp_path / "a.db"
    with Archive.open(db) as a:
        if archive == "with its own dictionary":
            a.import_paths([many_sessions(tmp_path / "first", 50)])
            assert a.store.text_dict_id not in (0, foreign)
        # as a worker holding another archive's dictionary would leave the file
        monkeypatch.setattr(
            ingest,
            "parse_and_tokenize",
            lambda path, agent, text_dict=0, keep_lines=False: parse(path, agent, foreign, keep_lines),
        )
        assert a.import_paths([VUE]).added == 23
        own = a.store.text_dict_id
    texts, _, values = stored(db)
    assert not any(packed_with(v, foreign) for v in values)
    # packed with the archive's own dictionary; kept as they are while it has none yet
    assert all(packed_with(v, own) for v in values) if own else all(isinstance(v, str) for v in values)
    expected = [e.rendered.text for e in read_session_file(VUE, None).entries if e.rendered is not None]
    assert [t for s, _, t in texts if not s.startswith("copy-")] == expected


def test_an_import_of_many_files_into_the_team_archive_goes_through_the_worker_with_text_plain(
    tmp_path: Path, pg_url: str
) -> None:
    folder = many_sessions(tmp_path / "s", ingest.PARALLEL_MIN_FILES + 2, prefix="team")
    with Archive.open(pg_url) as team:
        report = team.import_paths([folder])
        assert report.added == (ingest.PARALLEL_MIN_FILES + 2) * len(read_session_file(VUE).messages)
        assert not report.errors
        assert team.search("响应式", limit=3)


def test_while_the_workers_start_the_writer_parses_files_itself_and_stores_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_memory.ingest.workers import Worker

    folder = many_sessions(tmp_path / "s", ingest.PARALLEL_MIN_FILES + 4)
    monkeypatch.setenv("PI_MEMORY_IMPORT_WORKERS", "1")
    with Archive.open(tmp_path / "worker.db") as a:
        a.import_paths([folder])
    handed: list[str] = []
    submit = Worker.submit

    def spy(self: Worker, path: str, agent: str | None, keep_lines: bool = False) -> None:
        handed.append(path)
        submit(self, path, agent, keep_lines)

    monkeypatch.setattr(Worker, "submit", spy)
    monkeypatch.setattr(Worker, "ready", property(lambda self: False))  # a worker that never finishes starting
    with Archive.open(tmp_path / "writer.db") as a:
        report = a.import_paths([folder])
    assert report.added == 23 * (ingest.PARALLEL_MIN_FILES + 4) and not handed
    assert stored(tmp_path / "writer.db")[:2] == stored(tmp_path / "worker.db")[:2]


def test_while_a_worker_has_not_answered_the_writer_parses_later_files_itself_and_stores_the_same_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_memory.ingest.workers import Worker

    folder = many_sessions(tmp_path / "s", FILES)
    monkeypatch.setenv("PI_MEMORY_IMPORT_WORKERS", "0")
    with Archive.open(tmp_path / "serial.db") as a:
        a.import_paths([folder])
    monkeypatch.setenv("PI_MEMORY_IMPORT_WORKERS", "1")
    monkeypatch.setattr(ingest, "AHEAD_BYTES", 64 << 10)  # a few files handed out ahead: the rest are left to take
    monkeypatch.setattr(ingest, "PARSED_HERE_BYTES", 3 * (folder / "s0000.jsonl").stat().st_size)
    monkeypatch.setattr(Worker, "answered", lambda self: False)  # a worker always behind the writer
    wait_for_workers(monkeypatch)  # ... once it has started: files parsed while it starts are not the point
    parsed_here: list[str] = []  # files parsed ahead of their turn (not those parsed while the worker starts)
    parse_here, parse_while_waiting = ingest._Ahead._parse_here, ingest._Ahead.parse_while_waiting
    waiting = [False]

    def spy(self: Any, path: Path) -> Any:
        if waiting[0]:
            parsed_here.append(path.name)
        return parse_here(self, path)

    def spy_waiting(self: Any) -> None:
        waiting[0] = True
        try:
            parse_while_waiting(self)
        finally:
            waiting[0] = False

    monkeypatch.setattr(ingest._Ahead, "_parse_here", spy)
    monkeypatch.setattr(ingest._Ahead, "parse_while_waiting", spy_waiting)
    with Archive.open(tmp_path / "ahead.db") as a:
        report = a.import_paths([folder])
        dict_id = a.store.text_dict_id
    assert report.added == 23 * FILES and not report.errors
    # not before the archive has its dictionary (the first 1,000 messages), then whenever the
    # worker has not answered, at most three files' source ahead: the worker still parses most
    assert 0 < len(parsed_here) < FILES // 2 and "s0000.jsonl" not in parsed_here
    texts, lines, values = stored(tmp_path / "ahead.db")
    assert all(packed_with(v, dict_id) for v in values)
    assert (texts, lines) == stored(tmp_path / "serial.db")[:2]
    with Archive.open(tmp_path / "ahead.db") as ahead, Archive.open(tmp_path / "serial.db") as serial:
        order = "SELECT session_id, seq FROM msg ORDER BY id"  # written in the files' order
        assert ahead.store.rows(order) == serial.store.rows(order)


def test_a_worker_gets_the_dictionary_without_the_writer_waiting_for_it_to_read(tmp_path: Path) -> None:
    import os
    import signal
    import threading

    from pi_memory.ingest.workers import Worker

    folder = many_sessions(tmp_path / "s", 3)
    data = (VUE.read_bytes() * 20)[: 100 << 10]  # a raw-content dictionary, as large as a trained one
    dict_id = register_dictionary(data)
    assert len(data) > 64 << 10  # more than a pipe holds
    worker = Worker()
    try:
        worker.started.wait(30)
        os.kill(worker.proc.pid, signal.SIGSTOP)  # a child busy elsewhere: it reads nothing

        def ask() -> None:
            worker.submit(str(folder / "s0000.jsonl"), None)
            worker.send_dictionary(dict_id, data)
            worker.submit(str(folder / "s0001.jsonl"), None)

        asking = threading.Thread(target=ask)
        asking.start()
        asking.join(10)
        waited = asking.is_alive()  # blocked on the full pipe until the child reads again
        os.kill(worker.proc.pid, signal.SIGCONT)
        asking.join()
        before, after = worker.result(), worker.result()
    finally:
        worker.close()
    assert not waited
    packed = 12  # a message line's packed text (`prepare.MessageLine`)
    assert before.messages and not any(packed_with(m[packed], dict_id) for m in before.messages)
    assert after.messages and all(packed_with(m[packed], dict_id) for m in after.messages)


def test_a_parse_worker_runs_at_a_lower_priority_than_the_writer_that_started_it() -> None:
    import os

    from pi_memory import parse_worker
    from pi_memory.ingest.workers import Worker

    worker = Worker()
    try:
        assert worker.started.wait(30)
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, worker.proc.pid) == min(ours + parse_worker.NICENESS, 19)
    finally:
        worker.close()
