"""Packed message text (format 2: zstd with the archive's own dictionary) beside the older forms."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.storage import codec
from pi_memory.storage.store import Store, decode_text, decompress
from test_import_robust import whole_raw

VUE = PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl"
TEXTS = ["", "ok", "响应式 proxy_buffering → read(path=src/a.py)\n" * 40, "lone surrogate \ud800 kept", "é" * 5000]


def samples(n: int) -> list[bytes]:
    words = "reactive ref computed watch 响应式 组件 数据 更新 proxy buffering nginx upstream".split()
    return [" ".join(words[(i * 7 + k) % len(words)] for k in range(40 + i % 60)).encode() for i in range(n)]


def test_text_is_left_plain_for_the_writer_when_no_dictionary_is_named() -> None:
    assert codec.encode_text("响应式", None) == "响应式"


def test_text_packed_without_a_dictionary_reads_back_exactly() -> None:
    for text in TEXTS:
        packed = codec.encode_text(text, 0)
        assert isinstance(packed, bytes) and packed[:5] == b"\x02\x00\x00\x00\x00"
        assert decode_text(packed) == text


def test_text_packed_with_a_trained_dictionary_reads_back_exactly_and_smaller() -> None:
    data = codec.train_dictionary(samples(400))
    assert data is not None
    dict_id = codec.register_dictionary(data)
    assert dict_id == codec.dictionary_id(data) != 0
    text = samples(401)[-1].decode()
    packed = codec.encode_text(text, dict_id)
    assert codec.packed_with(packed, dict_id) and not codec.packed_with(packed, 0)
    assert decode_text(packed) == text
    assert len(packed) < len(codec.encode_text(text, 0))
    for t in TEXTS:
        assert decode_text(codec.encode_text(t, dict_id)) == t


def test_too_little_text_trains_no_dictionary() -> None:
    assert codec.train_dictionary(samples(5)) is None
    assert codec.train_dictionary([b"x"] * 100) is None


def test_every_older_form_of_the_text_still_reads() -> None:
    text = TEXTS[2]
    deflated = codec._TEXT_V1 + codec._deflate(text.encode(), codec._TEXT_DICT_V1)
    assert decode_text(deflated) == text
    assert decode_text(text) == text and decode_text(None) == ""
    with pytest.raises(ValueError, match="unknown message text format"):
        decode_text(b"\x09abc")


def test_text_naming_a_dictionary_nobody_holds_is_one_clear_error() -> None:
    orphan = b"\x02" + (0x7FFFFFFE).to_bytes(4, "little") + b"whatever"
    with pytest.raises(ValueError, match="dictionary 7ffffffe"):
        decode_text(orphan)


def sessions(folder: Path, first: int, n: int) -> Path:
    lines = VUE.read_bytes().splitlines(keepends=True)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(first, first + n):
        header = json.loads(lines[0])
        header["id"] = f"copy-{i:04d}"
        (folder / f"s{i:04d}.jsonl").write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
    return folder


def chatter(folder: Path, first: int, n: int) -> Path:
    """`n` pi sessions of 40 varied ~600-char messages: text enough to train a dictionary from."""
    words = "reactive ref computed watch 响应式 组件 数据 更新 proxy buffering nginx upstream the a of to".split()
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(first, first + n):
        head = {
            "type": "session",
            "version": 3,
            "id": f"chat-{s:04d}",
            "timestamp": "2026-12-02T10:28:07.533Z",
            "cwd": "/w",
        }
        lines, parent = [json.dumps(head)], None
        for k in range(40):
            text = " ".join(words[(s * 131 + k * 17 + j * j) % len(words)] for j in range(120))
            role = "user" if k % 2 == 0 else "assistant"
            message = {"role": role, "content": [{"type": "text", "text": f"{s}-{k} {text}"}], "timestamp": 1}
            entry_id = f"{s:04d}{k:04d}"
            ts = f"2026-12-02T10:{k:02d}:00.000Z"
            lines.append(
                json.dumps({"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts, "message": message})
            )
            parent = entry_id
        (folder / f"c{s:04d}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def forms(a: Archive) -> dict[str, set[str]]:
    """session -> the forms its message texts are stored in (plain, deflate, zstd without / with a dictionary)."""
    out: dict[str, set[str]] = {}
    for sid, text in a.store.rows("SELECT session_id, text FROM msg"):
        kind = "plain" if isinstance(text, str) else {1: "deflate", 2: "zstd"}[text[0]]
        if kind == "zstd":
            kind += "+dict" if text[1:5] != b"\0\0\0\0" else ""
        out.setdefault(str(sid), set()).add(kind)
    return out


def test_an_archive_trains_its_dictionary_once_and_every_form_stays_searchable_and_replayable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Store, "TRAIN_AFTER", 40)
    db = tmp_path / "a.db"
    with Archive.open(db) as a:
        # before the first 40 messages there is nothing to learn from: the text is kept as it is
        a.import_paths([sessions(tmp_path / "one", 0, 1)])
        assert forms(a)["copy-0000"] == {"plain"}
        # rows of older archives: deflate (format 1)
        with a.store.write():
            for msg_id, text in a.store.rows("SELECT id, text FROM msg WHERE session_id = 'copy-0000' AND id % 2 = 0"):
                deflated = codec._TEXT_V1 + codec._deflate(decode_text(text).encode(), codec._TEXT_DICT_V1)
                a.store.execute("UPDATE msg SET text = ? WHERE id = ?", (deflated, msg_id))
        a.import_paths([chatter(tmp_path / "chat", 0, 3)])
        a.import_paths([sessions(tmp_path / "three", 9, 1)])
        assert a.store.scalar("SELECT count(*) FROM codec_dict") == 1
        # rows of older archives: plain TEXT (written by a version that did not pack)
        monkeypatch.setattr(codec, "PACK_TEXT", False)
        a.import_paths([sessions(tmp_path / "two", 1, 1)])
        monkeypatch.setattr(codec, "PACK_TEXT", True)
        # the first messages, kept as they were before the dictionary existed, were packed with it
        assert forms(a)["copy-0000"] == {"zstd+dict", "deflate"}
        assert forms(a)["copy-0001"] == {"plain"}
        assert forms(a)["copy-0009"] == {"zstd+dict"}
        # a run's fields are packed with the dictionary too
        fields = a.store.rows("SELECT fields FROM run r JOIN session s ON s.id = r.session_id WHERE s.id = 'copy-0009'")
        assert fields and all(codec.packed_with(f, a.store.text_dict_id) for (f,) in fields)
        assert all(json.loads(decode_text(f)) for (f,) in fields)
        found = {h.session_id for h in a.search("响应式", limit=100)}
        assert {"copy-0000", "copy-0001", "copy-0009"} <= found
        texts = {
            sid: [m.text for m in a.read(sid, before=50, after=0).messages]
            for sid in ("copy-0000", "copy-0001", "copy-0009")
        }
        assert texts["copy-0000"] == texts["copy-0001"] == texts["copy-0009"] and texts["copy-0000"]
        # `read rN/mK --raw` gives the source line byte for byte, whatever form its text is in
        source = {json.loads(line)["id"]: line.rstrip(b"\n") for line in VUE.read_bytes().splitlines()[1:]}
        addresses = a.store.rows(
            """SELECT r.id, rm.pos, m.entry_id, m.session_id FROM run_msg rm JOIN run r ON r.id = rm.run_id
               JOIN msg m ON m.id = rm.msg_id WHERE m.session_id IN ('copy-0000', 'copy-0001', 'copy-0009')"""
        )
        assert len(addresses) == 3 * 23
        for run_id, pos, entry_id, _ in addresses:
            assert whole_raw(a, f"r{run_id}/m{pos}") == source[entry_id]


def test_a_dictionary_another_process_trained_is_found_when_a_row_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Store, "TRAIN_AFTER", 40)
    db = tmp_path / "a.db"
    reader = Store.open(db)
    try:
        assert reader.text_dict_id == 0
        with Archive.open(db) as writer:
            writer.import_paths([chatter(tmp_path / "chat", 0, 3)])
            writer.import_paths([sessions(tmp_path / "t", 4, 1)])
            dict_id = writer.store.text_dict_id
        assert dict_id
        # this process forgets it, as a process that opened the archive before the training would not know it
        monkeypatch.setattr(codec, "_DICTIONARIES", {})
        monkeypatch.setattr(codec, "_local", type(codec._local)())
        packed = reader.scalar("SELECT text FROM msg WHERE session_id = 'copy-0004' LIMIT 1")
        assert codec.packed_with(packed, dict_id)
        assert "响应式" in "".join(decode_text(t) for (t,) in reader.rows("SELECT text FROM msg"))
        assert reader.text_codec() == dict_id
    finally:
        reader.close()


def test_the_legacy_archive_gets_the_dictionary_table_and_reads_as_before(tmp_path: Path) -> None:
    legacy = Path(__file__).parent / "data" / "legacy" / "schema5-pi.db"
    db = tmp_path / "old.db"
    shutil.copy(legacy, db)
    with Archive.open(db) as a:
        assert a.store.scalar("SELECT count(*) FROM codec_dict") == 0
        raw = a.store.rows("SELECT e.raw, m.text FROM entry e JOIN msg m ON m.id = e.msg_id LIMIT 5")
        assert all(decompress(blob, text) for blob, text in raw)


def test_a_live_message_is_written_plain_and_packed_with_its_index_entry_at_the_idle_moment(tmp_path: Path) -> None:
    from pi_memory.storage.writes import run_deferred_hooks

    with Archive.open(tmp_path / "a.db") as archive:
        archive.store.defer_hooks()
        archive.ensure_session("live", "/home/dev/shop")
        archive.capture_message("live", {"role": "user", "content": "响应式 nextTick 为什么不更新", "timestamp": 1})
        assert [type(t) for (t,) in archive.store.rows("SELECT text FROM msg")] == [str]  # nothing packed on the write
        assert run_deferred_hooks(archive.store)
        stored = archive.store.rows("SELECT text FROM msg")
        assert [type(t) for (t,) in stored] == [bytes] and decode_text(stored[0][0]) == "响应式 nextTick 为什么不更新"
        assert [h.text for h in archive.search("nextTick")] == ["响应式 nextTick 为什么不更新"]


def test_a_live_writer_leaves_the_dictionary_to_its_idle_moment_and_an_import_through_it_learns_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # training and packing the first messages again take ~0.1-0.15 s: no live write waits for them
    from pi_memory.storage.writes import run_deferred_hooks

    monkeypatch.setattr(Store, "TRAIN_AFTER", 40)
    monkeypatch.setenv("PI_MEMORY_IMPORT_WORKERS", "0")
    trained: list[int] = []
    train = Store._train_dictionary
    monkeypatch.setattr(Store, "_train_dictionary", lambda self: (trained.append(1), train(self))[1])
    with Archive.open(tmp_path / "live.db") as archive:
        archive.store.defer_hooks()
        archive.ensure_session("live", "/home/dev/shop")
        for i in range(60):
            message = {"role": "user", "content": f"{i} 响应式 nextTick reactive ref computed watch 组件 数据 更新" * 8}
            archive.capture_message("live", {**message, "timestamp": i})
        assert not trained and not archive.store.text_dict_id
        assert run_deferred_hooks(archive.store)
        assert trained and archive.store.text_dict_id
        assert all(
            codec.packed_with(t, archive.store.text_dict_id) for (t,) in archive.store.rows("SELECT text FROM msg")
        )
    trained.clear()
    with Archive.open(tmp_path / "import.db") as archive:  # the bridge's store, importing (`/recall import`)
        archive.store.defer_hooks()
        archive.import_paths([chatter(tmp_path / "chat", 0, 12)])  # 480 messages, in batches of 200
        assert trained and archive.store.text_dict_id


def test_a_verbatim_line_stored_as_it_is_reads_back_as_it_is_and_only_it_counts_as_plain() -> None:
    line = '{"type":"message","message":{"role":"user","content":"响应式"}}'.encode()
    assert decompress(codec.plain(line)) == line and codec.plain_line(codec.plain(line)) == line
    assert codec.plain_line(codec.compress(line, "响应式")) is None and codec.plain_line(codec.compress(line)) is None
    assert codec.plain_line(None) is None
