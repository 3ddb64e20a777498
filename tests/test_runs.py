"""Runs: boundaries, status, summary fields with their entry ids, incremental building on the write path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import BAD_DATA, PI_DATA
from pi_memory import Archive
from pi_memory.core.summary import RunMessage, clip_sentences, command_paths, compose_line, segment
from pi_memory.runs.table import RunInfo

VUE = "01a2364c-1ceb-71c5-bb77-67f902437018"  # pi 0.73.1 vue-reactive-zh
COMPACTION = "01a23641-d2b6-75f5-bc3b-b9a1fddc9155"  # pi 0.73.1 cli-rpc-faux-compaction
SSE = "01a2364c-47af-74be-8d7c-46780d07ec0e"  # pi 0.73.1 sse-stream-mixed
LONG = "01a2364c-a7f6-75cb-ba8a-42838165f27d"  # pi 0.73.1 long-output-en


def runs_of(archive: Archive, session: str) -> list[RunInfo]:
    return list(reversed(archive.runs(session=session, limit=1000)))


def roles(archive: Archive, run: RunInfo) -> list[str]:
    window = archive.read_address(run.address)
    return [m.role for m in window.messages]  # type: ignore[union-attr]


def entry_ids(path: Path) -> dict[str, dict[str, Any]]:
    """pi entry id -> the entry, read straight from the fixture file."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        data = json.loads(line)
        out[data["id"]] = data
    return out


def test_every_message_belongs_to_exactly_one_run(imported: Archive) -> None:
    total = imported.store.scalar("SELECT count(*) FROM msg")
    in_runs = imported.store.scalar("SELECT count(DISTINCT msg_id) FROM run_msg")
    assert total == in_runs == 160


def test_runs_start_at_user_messages_and_hold_the_turn(imported: Archive) -> None:
    runs = runs_of(imported, VUE)
    assert [r.messages for r in runs] == [8, 6, 9]
    assert roles(imported, runs[0]) == ["user"] + ["assistant", "tool_result"] * 3 + ["assistant"]
    assert [r.status for r in runs] == ["ok", "ok", "ok"]
    assert [(r.tool_calls, r.tool_errors) for r in runs] == [(3, 0), (2, 1), (3, 1)]


def test_a_bang_command_stays_in_the_run_it_follows(imported: Archive) -> None:
    last = runs_of(imported, VUE)[-1]
    assert roles(imported, last)[-1] == "bash"
    commands = last.fields["commands"]
    assert [(c["text"], c["exit"]) for c in commands] == [("ls -R src docs", 0)]


def test_a_compaction_summary_after_a_reply_opens_the_next_run(imported: Archive) -> None:
    runs = runs_of(imported, COMPACTION)
    assert len(runs) == 3
    assert roles(imported, runs[2])[:2] == ["summary", "user"]
    assert runs[2].fields["goal"]["text"] == "after compaction"


def test_branch_and_compaction_summaries_each_open_a_run_in_the_sse_session(imported: Archive) -> None:
    runs = runs_of(imported, SSE)
    assert [roles(imported, r)[0] for r in runs] == ["user", "user", "summary", "summary"]
    assert roles(imported, runs[2])[-2:] == ["bash", "custom"]


def test_an_error_reply_that_is_retried_counts_as_an_error_but_the_run_is_ok(imported: Archive) -> None:
    first = runs_of(imported, SSE)[0]
    assert first.status == "ok"
    assert first.fields["errors"]["count"] == 1
    assert "(1 error)" in first.summary


def test_summary_fields_carry_the_entry_ids_they_came_from(imported: Archive) -> None:
    entries = entry_ids(PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl")
    first = runs_of(imported, VUE)[0]
    goal = first.fields["goal"]
    assert goal["text"].startswith("购物车角标的数量不更新")
    assert entries[goal["entries"][0]]["message"]["role"] == "user"
    outcome = first.fields["outcome"]
    assert outcome["text"].startswith("已修复：`CartBadge.vue` 现在用 `toRefs(cart)` 解构")
    assert entries[outcome["entries"][0]]["message"]["stopReason"] == "stop"
    read = {f["text"]: f for f in first.fields["files_read"]}
    assert set(read) == {"src/store/cart.js", "src/components/CartBadge.vue"}
    call = entries[read["src/store/cart.js"]["entries"][0]]["message"]["content"]
    assert any(b.get("arguments", {}).get("path") == "src/store/cart.js" for b in call)
    assert [f["text"] for f in first.fields["files_changed"]] == ["src/components/CartBadge.vue"]


def test_a_file_changed_three_times_lists_all_three_tool_calls(imported: Archive) -> None:
    last = runs_of(imported, VUE)[-1]
    changed = last.fields["files_changed"]
    assert [f["text"] for f in changed] == ["docs/响应式说明.md"]
    assert len(changed[0]["entries"]) == 3  # write, failed edit, edit
    assert last.fields["errors"]["count"] == 1


def test_bash_tool_commands_get_exit_codes_from_their_results(imported: Archive) -> None:
    first = runs_of(imported, LONG)[0]
    commands = first.fields["commands"]
    assert [(c["text"], c["exit"]) for c in commands] == [("zcat logs/app.log.1.gz", 1)]
    assert len(commands[0]["entries"]) == 2  # the call and its result
    assert {f["text"] for f in first.fields["files_read"]} == {"logs/app.log.1.gz", "logs/app.log"}


def test_summary_lines_are_short_navigation_lines(imported: Archive) -> None:
    runs = imported.runs(limit=1000)
    assert all(len(r.summary) <= 150 for r in runs)
    with_outcome = [r for r in runs if r.fields.get("outcome") and r.fields.get("goal")]
    long_enough = [r for r in with_outcome if len(r.summary) >= 50]
    assert len(long_enough) >= len(with_outcome) * 2 // 3


def test_runs_are_built_incrementally_as_a_session_file_grows(archive: Archive, tmp_path: Path) -> None:
    source = (PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    growing = tmp_path / "growing.jsonl"
    cut = next(i for i, line in enumerate(source) if '"stopReason":"toolUse"' in line)  # mid first turn
    growing.write_text("".join(source[: cut + 1]), encoding="utf-8")
    archive.import_paths([growing])
    (first,) = runs_of(archive, VUE)
    assert first.status == "open"
    growing.write_text("".join(source), encoding="utf-8")
    archive.import_paths([growing])
    runs = runs_of(archive, VUE)
    assert runs[0].id == first.id  # the open run was completed in place
    assert [r.status for r in runs] == ["ok", "ok", "ok"]
    assert [r.messages for r in runs] == [8, 6, 9]


def message_from_entry(session_id: str, entry: Any) -> Any:
    """A parsed message line as live capture would write it (not yet cut: `NewMessage.prepare`)."""
    from pi_memory.ingest.prepare import message_ts
    from pi_memory.storage.rows import NewMessage

    r = entry.rendered
    return NewMessage(
        session_id, message_ts(entry), r.role, r.text, r.indexed, entry.entry_id, entry.parent_id, r.meta, r.hash,
        entry.raw, entry.type,
    )  # fmt: skip


def test_messages_written_one_at_a_time_give_the_same_runs_as_an_import(archive: Archive, tmp_path: Path) -> None:
    from pi_memory.core.sources.pi import read_session_file
    from pi_memory.storage.store import SessionRow
    from pi_memory.storage.writes import write_messages

    parsed = read_session_file(PI_DATA / "pi-0.73.1-sse-stream-mixed.jsonl")
    with archive.store.write():
        archive.store.ensure_session(SessionRow(SSE, "pi", "/home/dev/chat-gateway", "chat-gateway", 0, 0))
    statuses = []
    for entry in parsed.messages:
        m = message_from_entry(SSE, entry)
        m.prepare()
        write_messages(archive.store, SSE, [m])  # what live capture does, message by message
        statuses.append(runs_of(archive, SSE)[-1].status)
    assert "open" in statuses and statuses[-1] == "ok"
    live = [(r.id, r.messages, r.status, r.tool_calls, r.tool_errors, r.summary) for r in runs_of(archive, SSE)]
    archive.rebuild_runs()
    rebuilt = [(r.id, r.messages, r.status, r.tool_calls, r.tool_errors, r.summary) for r in runs_of(archive, SSE)]
    assert live == rebuilt
    assert [x[1] for x in live] == [7, 7, 5, 3]


def test_a_bulk_import_writes_the_same_runs_as_segmenting_each_session_alone(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pi_memory.runs.table as runs

    monkeypatch.setattr(runs, "RUNS_PER_WRITE", 3)  # transactions that end inside a session's runs
    archive.import_paths([PI_DATA])  # one write covers many sessions: their runs share transactions
    bulk = [(r.id, r.session_id, r.messages, r.status, r.tool_calls, r.summary) for r in archive.runs(limit=1000)]
    archive.rebuild_runs()  # one session at a time
    alone = [(r.id, r.session_id, r.messages, r.status, r.tool_calls, r.summary) for r in archive.runs(limit=1000)]
    assert len(bulk) > 20 and bulk == alone
    assert archive.store.counters()["run_docs"] == len(bulk)


def test_a_turn_without_a_reply_before_the_next_prompt_is_aborted() -> None:
    msgs = [
        RunMessage(1, "a", "user", "do it"),
        RunMessage(2, "b", "assistant", "→ bash", {"tools": ["bash"], "stopReason": "toolUse"}),
        RunMessage(3, "c", "user", "never mind"),
        RunMessage(4, "d", "assistant", "ok", {"stopReason": "stop"}),
    ]
    from pi_memory.core.summary import run_status

    runs = segment(msgs)
    assert [[m.msg_id for m in r] for r in runs] == [[1, 2], [3, 4]]
    assert run_status(runs[0], is_last=False) == "aborted"
    assert run_status(runs[1], is_last=True) == "ok"
    assert run_status(runs[0], is_last=True) == "open"


def test_rebuild_keeps_run_ids_and_summaries(imported: Archive) -> None:
    before = {r.id: (r.summary, r.messages) for r in imported.runs(limit=1000)}
    assert imported.rebuild_runs() == len(before)
    after = {r.id: (r.summary, r.messages) for r in imported.runs(limit=1000)}
    assert after == before
    assert imported.store.counters()["run_docs"] == len(after)


def test_an_optional_summarizer_can_write_the_line_and_is_off_by_default(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_memory.runs import table as runs_module

    assert runs_module.SUMMARIZER is None
    seen: list[int] = []

    def summarizer(messages: list[RunMessage], summary: object) -> str:
        seen.append(len(messages))
        if len(seen) == 2:
            raise RuntimeError("model unavailable")
        return "LLM line " * 30

    monkeypatch.setattr(runs_module, "SUMMARIZER", summarizer)
    archive.import_paths([PI_DATA / "pi-0.73.1-cache-index-zh-continue.jsonl"])
    first, second = runs_of(archive, "01a2364c-6ad9-7626-8e7a-d5d6590121f3")
    assert first.summary.startswith("LLM line") and len(first.summary) == 150
    assert first.fields["line_by"] == "summarizer"
    assert second.fields["line_by"] == "rules"  # the summarizer failed: the rule-based line stays


def test_clip_sentences_keeps_whole_sentences() -> None:
    text = "Why are requests slow? Look at logs/app.log. Then fix everything in the whole gateway please."
    assert clip_sentences(text, 50) == "Why are requests slow? Look at logs/app.log."
    assert clip_sentences("先查一下。然后修复所有的问题并且写一份很长很长的报告。", 10) == "先查一下。"


def test_sentences_are_the_pieces_the_lookbehind_pattern_splits_text_into() -> None:
    import random
    import re

    from pi_memory.core.summary import _sentence, _sentences

    lookbehind = re.compile(r"(?<=[。！？!?；])|(?<=[.;])(?=\s)|\n")  # what `_SENTENCE_END` was
    rng = random.Random(5)
    alphabet = list("。！？!?；.;\n \t\r\x0b\x0c\x1c\x85\u3000\u2028ab中1-*#>") + ["1. ", "- ", "file.py", "3.14"]
    texts = ["", ".", "a.", "a. b", "a.b", "看。\n", "end;", "x;\ty", "Done. Next!", "1. one\n2) two"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(40))) for _ in range(50_000)]
    for text in texts:
        expected = [c for c in map(_sentence, lookbehind.split(text)) if c]
        assert list(_sentences(text)) == expected, repr(text)


def test_simple_bash_commands_name_their_files() -> None:
    assert command_paths("cat .env") == ([".env"], [])
    assert command_paths("grep -n 'ping' server/stream.js deploy/nginx.conf") == (
        ["server/stream.js", "deploy/nginx.conf"],
        [],
    )
    assert command_paths("echo hi > out.txt && rm -f old/a.log") == ([], ["out.txt", "old/a.log"])
    assert command_paths("seq -f 'k%g' 1 2600") == ([], [])


def test_compose_line_says_errors_and_status() -> None:
    from pi_memory.core.summary import Field

    line = compose_line(Field("Fix the build."), None, ["src/a.py"], 2, "aborted")
    assert line == "Fix the build. [a.py] (2 errors, aborted)"


def run_tables(archive: Archive) -> dict[str, list[Any]]:
    """Everything the runs component wrote, row by row; a run's fields as its readers see them
    (`load_fields`: a planned run counts its message ids from its first message)."""
    from pi_memory.runs.table import load_fields

    queries = {
        "run": "SELECT * FROM run ORDER BY id",
        "run_msg": "SELECT * FROM run_msg ORDER BY msg_id",
        "run_file": "SELECT * FROM run_file ORDER BY path, run_id, msg_id, action",
        "run_fts": "SELECT rowid FROM run_fts ORDER BY rowid",
    }
    tables = {name: [tuple(r) for r in archive.store.rows(sql)] for name, sql in queries.items()}
    columns = [str(c[1]) for c in archive.store.rows("PRAGMA table_info(run)")]
    fields, first = columns.index("fields"), columns.index("first_msg")
    tables["run"] = [(*r[:fields], load_fields(r[fields], r[first]), *r[fields + 1 :]) for r in tables["run"]]
    return tables


def test_a_first_import_writes_the_runs_planned_from_the_file_exactly_as_reading_the_messages_back_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pi_memory.ingest.prepare as prepare
    import pi_memory.runs.table as runs

    sources = [PI_DATA, PI_DATA.parent / "claude", PI_DATA.parent / "codex"]
    read_back: list[str] = []
    real_load = runs.load_messages
    monkeypatch.setattr(
        runs, "load_messages", lambda store, sid, after=None: read_back.append(sid) or real_load(store, sid, after)
    )
    with Archive.open(tmp_path / "planned.db") as planned:
        for source in sources:
            planned.import_paths([source])
        from_plans = run_tables(planned)
    assert read_back == []  # every session was new: no run was built by reading messages back
    monkeypatch.setattr(prepare, "plan_file_runs", lambda messages: None)
    with Archive.open(tmp_path / "read-back.db") as other:
        for source in sources:
            other.import_paths([source])
        from_messages = run_tables(other)
    assert len(read_back) > 20
    assert len(from_plans["run"]) > 50 and len(from_plans["run_file"]) > 10
    assert from_plans == from_messages


def test_a_planned_run_sees_each_message_as_reading_its_verbatim_line_back_would() -> None:
    """The planner takes pi's parsed JSON instead of parsing a line again, except where the two
    differ: a line of invalid UTF-8 is read with replacement characters, but cannot be read back."""
    from pi_memory.core.sources.readers import read_session_file
    from pi_memory.ingest.prepare import _source
    from pi_memory.runs.table import source_message

    files = [*sorted(PI_DATA.glob("*.jsonl")), *sorted(BAD_DATA.glob("*.jsonl"))]
    assert BAD_DATA / "pi-invalid-utf8.jsonl" in files
    compared = unreadable = 0
    for path in files:
        for entry in read_session_file(path).messages:
            assert _source(entry) == source_message(entry.raw), (path.name, entry.line_no)
            compared += 1
            unreadable += source_message(entry.raw) is None
    assert compared > 200 and unreadable >= 1


def test_a_session_that_gets_a_live_message_before_its_import_is_written_is_segmented_from_the_archive(
    tmp_path: Path,
) -> None:
    from pi_memory.core.sources.readers import read_session_file
    from pi_memory.ingest.importer import Importer, ImportReport
    from pi_memory.ingest.prepare import parse_and_tokenize
    from pi_memory.storage.store import Store
    from pi_memory.storage.writes import write_messages

    path = PI_DATA / "pi-0.73.1-sse-stream-mixed.jsonl"
    parsed = read_session_file(path)
    with Archive.open(tmp_path / "a.db") as archive:
        importer = Importer(archive.store)
        unit = importer.plan_session(parse_and_tokenize(str(path), None), path, ImportReport())
        assert unit is not None and unit.planned and unit.row is not None  # the archive has no such session yet
        bridge = Store.open(tmp_path / "a.db")
        bridge.defer_hooks()  # like the bridge: runs are built at its next idle moment
        with bridge.write():
            bridge.ensure_session(unit.row)
        earlier = message_from_entry(SSE, parsed.messages[0])
        earlier.text, earlier.hash, earlier.raw = "a prompt pi captured live", "live-only", None
        earlier.ts -= 1000
        earlier.prepare()
        write_messages(bridge, SSE, [earlier])  # pi captured a prompt the file does not hold
        importer.write_units([unit])
        in_runs = [
            m
            for r in runs_of(archive, SSE)
            for m in archive.store.rows("SELECT msg_id FROM run_msg WHERE run_id=?", (r.id,))
        ]
        messages = archive.store.rows("SELECT id FROM msg WHERE session_id=?", (SSE,))
        bridge.close()
    assert len(messages) == len(parsed.messages) + 1
    assert sorted(in_runs) == sorted(messages)  # the live prompt is in a run: nothing waits for the bridge


def test_a_planned_summary_counts_message_ids_from_its_first_message_and_readers_add_it_back() -> None:
    from pi_memory.core.summary import summarize
    from pi_memory.runs.planned import relative_fields
    from pi_memory.runs.table import load_fields

    msgs = [
        RunMessage(0, "a", "user", "fix src/app.py please"),
        RunMessage(
            1,
            "b",
            "assistant",
            "→ edit",
            {"tools": ["edit"]},
            {"content": [{"type": "toolCall", "id": "c1", "name": "edit", "arguments": {"path": "src/app.py"}}]},
        ),
        RunMessage(2, "c", "tool_error", "✗ edit: no match", {"tool": "edit"}),
        RunMessage(3, "d", "assistant", "Fixed it.", {"stopReason": "stop"}),
    ]
    stored = relative_fields(summarize(msgs), first=0)
    assert json.loads(stored)["errors"]["msgs"] == [2]  # positions counted from the first message
    fields = load_fields(stored, first_msg=101)  # the messages got ids 101..104
    assert "rel" not in fields
    assert fields["goal"]["msgs"] == [101]
    assert fields["files_changed"][0]["msgs"] == [102]
    assert fields["errors"]["msgs"] == [103]
    assert fields["outcome"]["msgs"] == [104]


@pytest.mark.parametrize(
    "text",
    [
        'fix "src/app.py" \\ now',
        "修复缓存\x00\x001\x00 索引",
        "emoji 🎉 and \ud800 a lone surrogate",
        '"msgs": [1, 2] and "rel": 1',
    ],
)
def test_a_planned_runs_fields_read_back_as_the_summarys_own_with_the_ids_its_messages_got(text: str) -> None:
    """Relative ids read back, packed or not, as the fields `write_run` would store with absolute
    ids, whatever the text holds (quotes, NULs, text that looks like the marker)."""
    from pi_memory.core.summary import Field, summarize
    from pi_memory.runs.planned import relative_fields
    from pi_memory.runs.table import load_fields
    from pi_memory.storage import codec

    msgs = [
        RunMessage(0, "a", "user", text),
        RunMessage(
            1,
            "b",
            "assistant",
            "→ bash",
            {"tools": ["bash"]},
            {"content": [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": f"cat {text}"}}]},
        ),
        RunMessage(2, "c", "tool_result", text, {"toolCallId": "c1"}),
        RunMessage(3, "d", "assistant", text, {"stopReason": "stop"}),
    ]
    summary = summarize(msgs)
    stored = relative_fields(summary, first=0)
    for f in [summary.goal, summary.outcome, *summary.files_read, *summary.commands, summary.errors]:
        if isinstance(f, Field):
            f.msgs = [7000 + p for p in f.msgs]
    absolute = json.loads(json.dumps(summary.to_dict(), ensure_ascii=False))
    assert load_fields(stored, 7000) == absolute
    assert load_fields(codec.encode_text(stored, 0, codec.FIELDS_LEVEL), 7000) == absolute
