"""Claude Code transcripts: every fixture parses; merged streaming blocks; compaction; sub-agents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pi_memory.core.sources import claude
from pi_memory.core.sources.readers import read_session_file, sniff_file

DATA = Path(__file__).parent / "data" / "claude" / "daaain-claude-code-log"
SHOWCASE = DATA / "minimal_showcase"
MAIN = SHOWCASE / "55550000-0000-4000-8000-000000000001.jsonl"
SUBAGENT = SHOWCASE / "55550000-0000-4000-8000-000000000001" / "subagents" / "agent-showcol2.jsonl"
ALL_FILES = sorted(DATA.rglob("*.jsonl"))


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_every_claude_fixture_is_sniffed_and_parsed_without_skips(path: Path) -> None:
    assert sniff_file(path) == "claude"
    parsed = read_session_file(path)
    assert parsed.header is not None and parsed.header.agent == "claude"
    assert parsed.skipped == []
    assert parsed.messages, "every fixture holds at least one message"
    for entry in parsed.messages:
        assert entry.rendered is not None and entry.rendered.ts > 0


def test_streamed_assistant_lines_sharing_a_message_id_become_one_message() -> None:
    parsed = read_session_file(DATA / "sidechain_integrated.jsonl")
    merged = [
        e for e in parsed.entries if e.type == "assistant" and e.data["message"]["id"] == "msg_017zj75dqWUNqVxCUrhqbTkf"
    ]
    assert len(merged) == 1
    text = merged[0].rendered.text  # type: ignore[union-attr]
    assert text.startswith("I'll research how `data-border-color`")
    assert '→ Grep({"pattern":"data-border-color"' in text
    assert merged[0].raw.count(b"\n") == 1  # both source lines kept verbatim
    assert [json.loads(line)["uuid"] for line in merged[0].raw.split(b"\n")] == [
        "b674eedd-0d9d-49e7-8116-1f092cd750ed",
        "3c78114e-3de3-471e-b80f-0c86adb361c4",
    ]


def test_sidechain_lines_inside_a_main_file_are_marked_and_stay_in_the_session() -> None:
    parsed = read_session_file(DATA / "sidechain_integrated.jsonl")
    assert parsed.header is not None and parsed.header.session_id == "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"
    sidechain = [e for e in parsed.messages if e.rendered and e.rendered.meta.get("sidechain")]
    assert len(sidechain) == 2


def test_compact_boundary_links_to_the_old_leaf_and_the_summary_line_is_a_summary() -> None:
    parsed = read_session_file(DATA / "dag_compact_after_rewind.jsonl")
    boundary = next(e for e in parsed.entries if e.type == "compact_boundary")
    assert boundary.rendered is None and boundary.entry_id == "cb" and boundary.parent_id == "b2a2"
    summary = next(e for e in parsed.entries if e.entry_id == "cs")
    assert summary.rendered is not None and summary.rendered.role == "summary"
    assert summary.rendered.text.startswith("This session is being continued")
    roles = [e.rendered.role for e in parsed.messages if e.rendered]
    assert roles.count("summary") == 1 and roles.count("user") == 5 and roles.count("assistant") == 5


def test_preserved_segment_keeps_its_older_timestamp_and_new_parent() -> None:
    parsed = read_session_file(DATA / "dag_compact_after_rewind_preserved.jsonl")
    preserved = next(e for e in parsed.entries if e.entry_id == "b2a2")
    assert preserved.parent_id == "cs"
    assert preserved.ts < next(e.ts for e in parsed.entries if e.entry_id == "cs")


def test_tool_use_renders_inside_the_assistant_message_and_results_pair_by_id() -> None:
    parsed = read_session_file(MAIN)
    calls = next(e for e in parsed.messages if e.entry_id == "sc-a4")
    assert calls.rendered is not None and calls.rendered.meta["tools"] == ["Agent", "Agent"]
    assert calls.rendered.text.count("→ Agent(") == 2
    result = next(e for e in parsed.messages if e.entry_id == "sc-r4")
    assert result.rendered is not None
    assert result.rendered.role == "tool_result" and not result.rendered.indexed
    assert result.rendered.text.startswith("✓ Agent: The web module")


def test_a_failed_tool_result_is_an_indexed_tool_error() -> None:
    lines = [
        _line("user", "u1", None, {"role": "user", "content": "run it"}),
        _line(
            "assistant",
            "a1",
            "u1",
            {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "false"}}],
            },
        ),
        _line(
            "user",
            "r1",
            "a1",
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "exit status 1: boom", "is_error": True}
                ],
            },
        ),
    ]
    parsed = claude.parse_lines(lines)
    error = parsed.messages[-1].rendered
    assert error is not None and error.role == "tool_error" and error.indexed
    assert error.text == "✗ Bash: exit status 1: boom"


def test_old_summary_lines_are_summaries_and_snapshots_are_not_kept() -> None:
    lines = [
        json.dumps({"type": "summary", "summary": "Fixing the login bug", "leafUuid": "x1"}).encode(),
        json.dumps({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}).encode(),
        json.dumps({"type": "queue-operation", "operation": "enqueue", "sessionId": "s9"}).encode(),
        _line("user", "u1", None, {"role": "user", "content": "hello"}),
    ]
    parsed = claude.parse_lines(lines)
    assert [e.type for e in parsed.entries] == ["summary", "user"]
    summary = parsed.entries[0].rendered
    assert summary is not None and summary.role == "summary" and summary.text == "Fixing the login bug"
    assert parsed.header is not None and parsed.header.session_id == "s9"


def test_a_subagent_file_is_its_own_session_linked_to_its_parent() -> None:
    parsed = read_session_file(SUBAGENT)
    assert parsed.header is not None
    assert parsed.header.session_id == "55550000-0000-4000-8000-000000000001/agent-showcol2"
    assert parsed.header.parent_session == "55550000-0000-4000-8000-000000000001"
    assert parsed.name == "general-purpose: Survey the jobs module"
    assert not any(e.rendered and e.rendered.meta.get("sidechain") for e in parsed.messages)


def test_a_bad_line_is_skipped_with_its_line_number_and_the_rest_kept() -> None:
    lines = [
        _line("user", "u1", None, {"role": "user", "content": "first"}),
        b"{torn",
        _line("user", "u2", "u1", {"role": "user", "content": "second"}),
    ]
    parsed = claude.parse_lines(lines)
    assert [(s.line_no, s.error.split(" (")[0]) for s in parsed.skipped] == [(2, "not JSON")]
    assert [e.rendered.text for e in parsed.messages if e.rendered] == ["first", "second"]


def test_chunked_parsing_gives_the_same_messages_as_one_pass() -> None:
    raw = MAIN.read_bytes().splitlines()
    whole = claude.parse_lines(raw)
    reader = claude.ClaudeReader()
    parts = reader.parse(raw[:5]).entries + reader.parse(raw[5:], start_line=6).entries
    assert [e.rendered.hash for e in parts if e.rendered] == [e.rendered.hash for e in whole.entries if e.rendered]
    assert [e.line_no for e in parts] == [e.line_no for e in whole.entries]


def test_open_tail_counts_trailing_lines_of_one_streamed_message() -> None:
    a = _line("assistant", "a1", None, {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "x"}]})
    b = _line("assistant", "a2", "a1", {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "y"}]})
    u = _line("user", "u1", None, {"role": "user", "content": "hi"})
    reader = claude.ClaudeReader()
    assert reader.open_tail([u, a, b]) == 2
    assert reader.open_tail([a, b, u]) == 0


def _line(kind: str, uuid: str, parent: str | None, message: dict[str, object]) -> bytes:
    return json.dumps(
        {
            "type": kind,
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": "s9",
            "cwd": "/w/app",
            "timestamp": "2026-01-01T10:00:00Z",
            "message": message,
        }
    ).encode()


def test_an_assistant_message_given_as_a_plain_string_is_its_text() -> None:
    parsed = claude.parse_lines(
        [_line("assistant", "a1", None, {"id": "m1", "role": "assistant", "content": "plain words"})]
    )
    assert [e.rendered.text for e in parsed.messages if e.rendered] == ["plain words"]
