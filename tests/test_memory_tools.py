"""Model tool handlers, pi slash commands and the injection text, as the front ends call them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pi_memory import Archive
from pi_memory.errors import ArchiveError, BadInput
from pi_memory.frontends.tools.memory import (
    MEMORY_COMMANDS,
    MEMORY_TOOL_SPECS,
    MEMORY_TOOLS,
    OUTPUT_CAP,
    injection_text,
)
from pi_memory.memory.find import render_injection


@pytest.fixture
def ws(tmp_path: Path) -> str:
    path = tmp_path / "proj"
    path.mkdir()
    return str(path)


def call(archive: Archive, tool: str, ws: str, session: str | None = "s1", **params: Any) -> Any:
    return MEMORY_TOOLS[tool](archive, {**params, "cwd": ws, "session_id": session})


def test_every_tool_has_a_spec_and_returns_json(archive: Archive, ws: str) -> None:
    assert (
        set(MEMORY_TOOLS)
        == set(MEMORY_TOOL_SPECS)
        == {"memory_search", "memory_read", "memory_propose", "memory_update"}
    )
    made = call(archive, "memory_propose", ws, body="tests live in tests/", kind="fact")
    for result in (made, call(archive, "memory_search", ws), call(archive, "memory_read", ws, id=made["memory"]["id"])):
        json.dumps(result)


def test_propose_writes_a_provisional_model_record_once(archive: Archive, ws: str) -> None:
    made = call(
        archive, "memory_propose", ws, body="prefer pnpm", kind="preference", source_entry_ids=["a1", "a1", "b2"]
    )
    assert made["written"] and made["memory"]["status"] == "provisional" and made["memory"]["author"] == "model"
    assert made["memory"]["source_entry_ids"] == ["a1", "b2"] and not made["source_entry_ids"]["truncated"]
    again = call(archive, "memory_propose", ws, session="s2", body="prefer pnpm", kind="preference")
    assert not again["written"] and again["memory"]["id"] == made["memory"]["id"]


def test_update_edits_and_resolves_only_the_models_own_proposals(archive: Archive, ws: str) -> None:
    user = archive.memory_remember(ws, "user's own rule")
    made = call(archive, "memory_propose", ws, body="draft")
    edited = call(archive, "memory_update", ws, id=made["memory"]["id"], action="edit", body="final")
    assert edited["memory"]["body"] == "final" and edited["memory"]["status"] == "provisional"
    with pytest.raises(ArchiveError, match="own provisional"):
        call(archive, "memory_update", ws, id=user.record.id, action="resolve")
    with pytest.raises(BadInput, match="edit or resolve"):
        call(archive, "memory_update", ws, id=made["memory"]["id"], action="pin")
    assert (
        call(archive, "memory_update", ws, id=made["memory"]["id"], action="resolve")["memory"]["status"] == "resolved"
    )


def test_the_model_cannot_choose_the_workspace_the_front_end_sets_it(archive: Archive, ws: str) -> None:
    with pytest.raises(BadInput, match="cwd"):
        MEMORY_TOOLS["memory_search"](archive, {"query": "x"})


def test_search_finds_chinese_memories_and_lists_without_a_query(archive: Archive, ws: str) -> None:
    archive.memory_remember(ws, "使用 pnpm 而不是 npm", kind="preference")
    archive.memory_remember(ws, "不要修改生产数据库", kind="constraint", pin=True)
    call(archive, "memory_propose", ws, body="a proposal")
    assert [r["snippet"] for r in call(archive, "memory_search", ws, query="使用")["results"]] == [
        "使用 pnpm 而不是 npm"
    ]
    listed = call(archive, "memory_search", ws)
    assert [r["status"] for r in listed["results"]] == ["active", "active", "provisional"]
    assert listed["results"][0]["pinned"]
    pinned = call(archive, "memory_search", ws, status="pinned")
    assert [r["snippet"] for r in pinned["results"]] == ["不要修改生产数据库"]


def test_search_finds_another_form_of_an_english_word_and_ranks_the_rarer_match_first(
    archive: Archive, ws: str
) -> None:
    archive.memory_remember(ws, "The deploy script lives in ops/deploy.sh")
    archive.memory_remember(ws, "Paola watched a movie about the deploy of a rocket")
    archive.memory_remember(ws, "Use the staging database for deploy tests")
    found = call(archive, "memory_search", ws, query="which movies did Paola watch")["results"]
    assert found[0]["snippet"] == "Paola watched a movie about the deploy of a rocket"
    assert len(found) == 1  # the others hold none of the question's words
    assert call(archive, "memory_search", ws, query="movies")["results"][0]["snippet"].startswith("Paola")


def test_search_pages_with_next_offset_and_keeps_snippets_within_600_chars(archive: Archive, ws: str) -> None:
    for i in range(12):
        archive.memory_remember(ws, f"memory {i:02d} " + "长文本 " * 500 + "needle")
    first = call(archive, "memory_search", ws, query="needle", limit=5)
    assert len(first["results"]) == 5 and first["nextOffset"] == 5 and first["total"] == 12
    assert all(len(r["snippet"]) <= 600 and r["clipped"] for r in first["results"])
    assert "needle" in first["results"][0]["snippet"]
    last = call(archive, "memory_search", ws, query="needle", offset=10, limit=5)
    assert len(last["results"]) == 2 and last["nextOffset"] is None


def test_search_output_stays_within_16000_chars_of_json(archive: Archive, ws: str) -> None:
    for i in range(50):
        archive.memory_remember(ws, f"entry {i} " + '"quoted\\text" ' * 200)
    result = call(archive, "memory_search", ws, limit=50)
    assert len(json.dumps(result, ensure_ascii=False)) <= OUTPUT_CAP
    assert result["nextOffset"] == len(result["results"]) < 50


def test_read_pages_a_long_body_in_4000_char_segments(archive: Archive, ws: str) -> None:
    body = "".join(f"{i:05d}" for i in range(1600))  # 8,000 chars
    ref = archive.memory_remember(ws, body).record.id
    first = call(archive, "memory_read", ws, id=ref)
    assert first["text"] == body[:4000] and first["nextOffset"] == 4000 and first["chars"] == 8000
    second = call(archive, "memory_read", ws, id=ref, offset=first["nextOffset"])
    assert first["text"] + second["text"] == body and second["nextOffset"] is None


def test_read_stays_within_16000_chars_even_when_escaping_doubles_the_text(archive: Archive, ws: str) -> None:
    ref = archive.memory_remember(ws, '"\\' * 4000).record.id
    result = call(archive, "memory_read", ws, id=ref, limit=16000)
    assert len(json.dumps(result, ensure_ascii=False)) <= OUTPUT_CAP
    rest = call(archive, "memory_read", ws, id=ref, offset=result["nextOffset"], limit=16000)
    assert result["text"] + rest["text"] == '"\\' * 4000


def test_session_scoped_memories_are_invisible_to_other_sessions(archive: Archive, ws: str) -> None:
    made = call(archive, "memory_propose", ws, session="s1", body="session idea", scope="session")
    assert call(archive, "memory_search", ws, session="s2")["results"] == []
    with pytest.raises(ArchiveError, match="no memory"):
        call(archive, "memory_read", ws, session="s2", id=made["memory"]["id"])
    with pytest.raises(BadInput, match="session id"):
        call(archive, "memory_propose", ws, session=None, body="x", scope="session")


# --- injection ---------------------------------------------------------------------------


def test_injection_holds_only_the_users_active_memories_pinned_first(archive: Archive, ws: str) -> None:
    archive.memory_remember(ws, "使用 pnpm 而不是 npm", kind="preference")
    archive.memory_remember(ws, "不要修改生产数据库", kind="constraint", pin=True)
    forgotten = archive.memory_remember(ws, "forgotten rule")
    archive.memory_forget(ws, forgotten.record.id)
    call(archive, "memory_propose", ws, body="model proposal")
    archive.memories.propose(ws, "rule derived", author="rule", scope="session", session_id="s1")
    archive.memory_remember(ws, "only in s1", scope="session", session_id="s1")
    text = injection_text(archive, ws, "s1")
    assert text.index("不要修改生产数据库") < text.index("使用 pnpm")
    assert "only in s1" in text
    for excluded in ("forgotten rule", "model proposal", "rule derived"):
        assert excluded not in text
    assert "only in s1" not in injection_text(archive, ws, "s2")


def test_injection_is_byte_identical_while_memories_do_not_change(archive: Archive, ws: str, tmp_path: Path) -> None:
    archive.memory_remember(ws, "rule one", pin=True)
    archive.memory_remember(ws, "rule two", priority=3)
    first = injection_text(archive, ws, "s1")
    call(archive, "memory_search", ws, query="rule")  # reads change nothing
    call(archive, "memory_propose", ws, body="a proposal changes nothing injected")
    assert injection_text(archive, ws, "s1") == first
    assert injection_text(archive, ws, "s2") == first  # another session of the same workspace
    with Archive.open(tmp_path / "reopened.db") as other:
        other.memory_import(ws, archive.memory_export(ws)[0])
        assert injection_text(other, ws, "s9") == first  # same events, same bytes
    archive.memory_remember(ws, "rule three")
    assert injection_text(archive, ws, "s1") != first


def test_injection_respects_the_budget_and_says_what_was_left_out(archive: Archive, ws: str) -> None:
    for i in range(30):
        archive.memory_remember(ws, f"rule {i:02d} " + "x" * 150)
    text = injection_text(archive, ws, None, budget=1500)
    assert len(text) <= 1500 and "rule 00" in text and "more not shown" in text
    assert injection_text(archive, ws, None, budget=50) == ""
    assert injection_text(archive, ws, None, budget=1500) == text


def test_render_injection_of_nothing_is_empty() -> None:
    assert render_injection([], None) == ""


# --- slash commands ------------------------------------------------------------------------


def test_slash_remember_parses_pin_kind_scope_priority_and_supersede(archive: Archive, ws: str) -> None:
    remember = MEMORY_COMMANDS["remember"]
    out = remember(archive, "pin kind:constraint 不要修改生产数据库", ws, "s1")
    assert out.startswith("remembered mem_") and "pinned, constraint" in out
    record = archive.memory_list(ws).found[0].record
    assert record.body == "不要修改生产数据库" and record.pinned and record.kind == "constraint"
    remember(archive, f"supersede:{record.id} priority:2 不要碰生产数据库 (pin me)", ws, "s1")
    newest = archive.memory_list(ws).found[0].record
    assert newest.body == "不要碰生产数据库 (pin me)" and newest.priority == 2 and newest.supersedes == record.id
    remember(archive, "scope:session  keep   my spacing", ws, "s1")
    assert archive.memory_list(ws, "spacing", session_id="s1").found[0].record.body == "keep   my spacing"


def test_slash_remember_confirms_a_proposal(archive: Archive, ws: str) -> None:
    made = call(archive, "memory_propose", ws, body="use ruff")
    out = MEMORY_COMMANDS["remember"](archive, f"confirm:{made['memory']['id']} pin", ws, "s1")
    assert out.startswith("confirmed") and "pinned" in out
    assert "use ruff" in injection_text(archive, ws, "s1")


def test_slash_memories_filters_by_status_kind_and_keywords(archive: Archive, ws: str) -> None:
    archive.memory_remember(ws, "token budget is 4000", pin=True)
    archive.memory_remember(ws, "token refresh happens hourly")
    out = MEMORY_COMMANDS["memories"](archive, "status:pinned token", ws, "s1")
    assert "token budget" in out and "hourly" not in out and out.startswith("1 memory (status pinned)")


def test_slash_forget_and_usage_errors(archive: Archive, ws: str) -> None:
    made = archive.memory_remember(ws, "temporary")
    assert MEMORY_COMMANDS["forget"](archive, made.record.id, ws, "s1").startswith("forgot")
    with pytest.raises(BadInput, match="usage"):
        MEMORY_COMMANDS["forget"](archive, "  ", ws, "s1")
    with pytest.raises(BadInput, match="usage"):
        MEMORY_COMMANDS["remember"](archive, "pin kind:fact", ws, "s1")


def test_call_tool_ignores_a_cwd_or_session_the_model_sends(archive: Archive, ws: str, tmp_path: Path) -> None:
    from pi_memory.frontends.tools.memory import call_tool

    archive.memory_remember(ws, "here only")
    params = {"query": "here", "cwd": str(tmp_path), "session_id": "forged"}
    result = call_tool(archive, "memory_search", params, cwd=ws, session_id="s1")
    assert [r["snippet"] for r in result["results"]] == ["here only"]
    with pytest.raises(BadInput, match="unknown memory tool"):
        call_tool(archive, "memory_delete_all", {}, cwd=ws, session_id="s1")


def test_numeric_strings_are_accepted_and_other_bad_params_are_one_line_errors(archive: Archive, ws: str) -> None:
    archive.memory_remember(ws, "one")
    archive.memory_remember(ws, "two")
    assert len(call(archive, "memory_search", ws, limit="1")["results"]) == 1
    with pytest.raises(BadInput, match="whole number"):
        call(archive, "memory_search", ws, limit="many")
    with pytest.raises(BadInput, match="non-empty"):
        call(archive, "memory_propose", ws, body="")
    with pytest.raises(BadInput, match="list"):
        call(archive, "memory_propose", ws, body="x", source_entry_ids="abc")


def test_bridge_methods_return_text_for_tools_commands_and_injection(archive: Archive, ws: str) -> None:
    from pi_memory.frontends.tools.memory import BRIDGE_METHODS

    host = {"cwd": ws, "session_id": "s1"}
    note = BRIDGE_METHODS["memory_command"](archive, {**host, "name": "remember", "args": "pin 使用 pnpm"})
    assert note["text"].startswith("remembered mem_")
    found = BRIDGE_METHODS["memory_search"](archive, {**host, "query": "pnpm"})
    assert json.loads(found["text"]) == found["result"] and found["result"]["results"][0]["snippet"] == "使用 pnpm"
    block = BRIDGE_METHODS["memory_injection"](archive, {**host, "budget": 4000})["text"]
    assert block == injection_text(archive, ws, "s1") and "使用 pnpm" in block
    with pytest.raises(BadInput, match="unknown memory command"):
        BRIDGE_METHODS["memory_command"](archive, {**host, "name": "drop"})
