"""Codex rollouts: wrapped and legacy formats, event/response twins, call pairing, injected context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pi_memory.core.sources import codex
from pi_memory.core.sources.readers import read_session_file, sniff_file

DATA = Path(__file__).parent / "data" / "codex"
DAAAIN = DATA / "daaain-claude-code-log"
STRUCTURED = (
    DAAAIN
    / "sessions"
    / "2026"
    / "01"
    / "02"
    / "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl"
)
CHILD = (
    DAAAIN
    / "sessions"
    / "2026"
    / "01"
    / "03"
    / "rollout-2026-01-03T04-05-10-33333333-3333-4333-8333-333333333333.jsonl"
)
ALL_FILES = sorted(DATA.rglob("*.jsonl"))


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_every_codex_fixture_is_sniffed_and_parsed(path: Path) -> None:
    assert sniff_file(path) == "codex"
    parsed = read_session_file(path)
    assert parsed.header is not None and parsed.header.agent == "codex"
    assert parsed.header.session_id in path.name or path.name == "sample_codex_session.jsonl"
    assert parsed.messages
    expected_skips = [3] if "malformed" in str(path) else []
    assert [s.line_no for s in parsed.skipped] == expected_skips


def _texts(path: Path) -> list[tuple[str, str]]:
    return [(e.rendered.role, e.rendered.text) for e in read_session_file(path).messages if e.rendered]


def test_structured_rollout_keeps_each_message_once_and_pairs_calls() -> None:
    assert _texts(STRUCTURED) == [
        ("user", "List the synthetic files."),
        ("assistant", '→ exec_command({"cmd":"find . -maxdepth 1 -type f"})'),
        ("tool_result", "✓ exec_command: ./alpha.txt\n./beta.txt"),
        ("assistant", "→ apply_patch(*** Begin Patch\n*** Add File: gamma.txt\n+synthetic\n*** End Patch)"),
        ("tool_result", "✓ apply_patch: Done!"),
        ("assistant", '→ mcp__synthetic__lookup({"query":"fixture"})'),
        ("tool_result", '✓ mcp__synthetic__lookup: {"status":"ok"}'),
        ("assistant", "The synthetic files are alpha.txt and beta.txt."),
    ]


def test_encrypted_reasoning_is_never_rendered_but_kept_verbatim() -> None:
    parsed = read_session_file(STRUCTURED)
    assert not any("SYNTHETIC_ENCRYPTED" in e.rendered.text for e in parsed.messages if e.rendered)
    assert any(b"SYNTHETIC_ENCRYPTED" in e.raw for e in parsed.entries if e.rendered is None)


def test_unknown_record_types_are_kept_verbatim_not_rendered() -> None:
    parsed = read_session_file(STRUCTURED)
    unknown = [e for e in parsed.entries if e.type == "future_synthetic_record"]
    assert len(unknown) == 1 and unknown[0].rendered is None


def test_event_messages_count_when_a_file_has_only_events() -> None:
    archived = DAAAIN / "archived_sessions" / "rollout-55555555-5555-4555-8555-555555555555.jsonl"
    assert _texts(archived) == [("user", "Archived synthetic prompt.")]


def test_a_subagent_thread_names_its_parent() -> None:
    parsed = read_session_file(CHILD)
    assert parsed.header is not None and parsed.header.parent_session == "22222222-2222-4222-8222-222222222222"
    # the replayed parent lines (dated before the child's start) are not the child's messages
    assert _texts(CHILD) == [("user", "Inspect fixtures."), ("assistant", "The fixtures are fully synthetic.")]
    assert len(parsed.entries) == 4


def test_legacy_bare_rollout_is_read_in_file_order() -> None:
    legacy = DAAAIN / "sessions" / "rollout-44444444-4444-4444-8444-444444444444.jsonl"
    parsed = read_session_file(legacy)
    assert _texts(legacy) == [
        ("user", "Open the synthetic legacy session."),
        ("assistant", "The synthetic legacy session is open."),
    ]
    assert parsed.messages[0].ts < parsed.messages[1].ts


def test_injected_agents_md_and_environment_context_are_dropped() -> None:
    sample = DATA / "simonw-claude-code-transcripts" / "sample_codex_session.jsonl"
    texts = _texts(sample)
    assert len(texts) == 1 and texts[0][0] == "user"
    assert texts[0][1].startswith("can you analyse the MD files")
    assert "<environment_context>" not in texts[0][1]


def test_failed_call_output_is_an_indexed_tool_error() -> None:
    lines = [
        _wrapped("session_meta", {"id": "77777777-0000-4000-8000-000000000000", "cwd": "/w"}),
        _wrapped(
            "response_item",
            {"type": "function_call", "name": "shell", "arguments": '{"command":["false"]}', "call_id": "c1"},
        ),
        _wrapped(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": json.dumps({"output": "boom", "metadata": {"exit_code": 1}}),
            },
        ),
        _wrapped(
            "response_item",
            {"type": "function_call_output", "call_id": "c2", "output": {"content": "denied", "success": False}},
        ),
    ]
    rendered = [e.rendered for e in codex.parse_lines(lines).messages]
    assert [(r.role, r.text, r.indexed) for r in rendered if r] == [
        ("assistant", '→ shell({"command":["false"]})', True),
        ("tool_error", "✗ shell: boom", True),
        ("tool_error", "✗ tool: denied", True),
    ]


def test_compacted_line_is_a_summary() -> None:
    lines = [
        _wrapped("session_meta", {"id": "77777777-0000-4000-8000-000000000000", "cwd": "/w"}),
        _wrapped("compacted", {"message": "Summary of earlier work", "replacement_history": []}),
        _wrapped("compacted", {"message": ""}),
    ]
    rendered = [e.rendered for e in codex.parse_lines(lines).messages if e.rendered]
    assert [(r.role, r.indexed) for r in rendered] == [("summary", True), ("summary", False)]
    assert rendered[0].text == "Summary of earlier work"


def test_twins_are_dropped_however_the_file_is_cut_into_chunks() -> None:
    raw = STRUCTURED.read_bytes().splitlines()
    whole = [e.rendered.hash for e in codex.parse_lines(raw).messages if e.rendered]
    for cut in range(1, len(raw)):
        reader = codex.CodexReader()
        parts = reader.parse(raw[:cut]).messages + reader.parse(raw[cut:], start_line=cut + 1).messages
        assert [e.rendered.hash for e in parts if e.rendered] == whole


def _wrapped(kind: str, payload: dict[str, object]) -> bytes:
    return json.dumps({"timestamp": "2026-03-01T00:00:00.000Z", "type": kind, "payload": payload}).encode()
