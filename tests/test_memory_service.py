"""Memory operations through `Archive`: scopes, authorship, policy limits, search in Chinese and English."""

from __future__ import annotations

from pathlib import Path

import pytest

from pi_memory import Archive
from pi_memory.errors import BadInput, NotFound
from pi_memory.memory import MemoryRefused

DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return path


@pytest.fixture
def other_ws(tmp_path: Path) -> Path:
    path = tmp_path / "elsewhere"
    path.mkdir()
    return path


def bodies(archive: Archive, cwd: Path, query: str = "", **filters: object) -> list[str]:
    return [f.record.body for f in archive.memory_list(cwd, query, **filters).found]


def test_a_workspace_memory_is_shared_by_sessions_in_the_same_cwd_only(
    archive: Archive, ws: Path, other_ws: Path
) -> None:
    archive.memory_remember(ws, "使用 pnpm 而不是 npm", session_id="s1")
    assert bodies(archive, ws, session_id="s2") == ["使用 pnpm 而不是 npm"]
    assert bodies(archive, str(ws) + "/") == ["使用 pnpm 而不是 npm"]
    assert bodies(archive, other_ws, session_id="s1") == []


def test_a_session_memory_is_visible_and_changeable_only_in_its_session(archive: Archive, ws: Path) -> None:
    done = archive.memory_remember(ws, "this session only", scope="session", session_id="s1")
    assert bodies(archive, ws, session_id="s1") == ["this session only"]
    assert bodies(archive, ws, session_id="s2") == [] and bodies(archive, ws) == []
    with pytest.raises(NotFound):
        archive.memory_forget(ws, done.record.id, session_id="s2")
    assert archive.memory_forget(ws, done.record.id, session_id="s1").record.status == "resolved"


def test_a_session_memory_needs_a_session_id(archive: Archive, ws: Path) -> None:
    with pytest.raises(BadInput, match="session"):
        archive.memory_remember(ws, "x", scope="session")


def test_a_body_over_8000_chars_is_refused_and_nothing_is_written(archive: Archive, ws: Path) -> None:
    with pytest.raises(BadInput, match="8,000"):
        archive.memory_remember(ws, "长" * 8001)
    with pytest.raises(BadInput, match="8,000"):
        archive.memory_propose(ws, "x" * 8001)
    assert archive.memory_verify(ws)[0][1].rows == 0


def test_identical_model_proposals_in_the_same_scope_are_written_once(archive: Archive, ws: Path) -> None:
    first = archive.memory_propose(ws, "tests live in tests/", kind="fact", session_id="s1")
    again = archive.memory_propose(ws, "tests  live in tests/", kind="fact", session_id="s2")
    assert first.written and not again.written and again.record.id == first.record.id
    in_session = archive.memory_propose(ws, "tests live in tests/", scope="session", session_id="s1")
    assert in_session.written and in_session.record.id != first.record.id
    assert archive.memory_verify(ws)[0][1].rows == 2


def test_proposals_are_provisional_and_the_user_confirms_them(archive: Archive, ws: Path) -> None:
    proposal = archive.memory_propose(ws, "prefer small commits", kind="preference")
    assert proposal.record.status == "provisional" and not proposal.record.pinned
    assert archive.memory_injection_text(ws, None) == ""
    confirmed = archive.memory_confirm(ws, proposal.record.id, pin=True)
    assert confirmed.record.status == "active" and confirmed.record.pinned and confirmed.record.confirmed
    assert "prefer small commits" in archive.memory_injection_text(ws, None)


def test_remembering_the_text_of_an_open_proposal_confirms_it(archive: Archive, ws: Path) -> None:
    proposal = archive.memory_propose(ws, "deploy on fridays is forbidden", kind="constraint")
    done = archive.memory_remember(ws, "deploy on fridays is forbidden")
    assert done.action == "confirmed" and done.record.id == proposal.record.id and done.record.status == "active"
    again = archive.memory_remember(ws, "deploy on fridays is forbidden")
    assert again.action == "unchanged" and not again.written
    pinned = archive.memory_remember(ws, "deploy on fridays is forbidden", pin=True)
    assert pinned.action == "pinned" and pinned.record.pinned and pinned.record.id == proposal.record.id


def test_a_model_can_edit_and_resolve_only_its_own_provisional_proposals(archive: Archive, ws: Path) -> None:
    users = archive.memory_remember(ws, "the user's rule")
    rules = archive.memory_propose(ws, "derived by a rule", author="rule", scope="session", session_id="s1")
    mine = archive.memory_propose(ws, "my draft")
    with pytest.raises(MemoryRefused, match="own provisional"):
        archive.memories.edit(ws, users.record.id, "changed", author="model")
    with pytest.raises(MemoryRefused, match="own provisional"):
        archive.memories.forget(ws, rules.record.id, session_id="s1", author="model")
    assert archive.memories.edit(ws, mine.record.id, "my better draft", author="model").record.body == "my better draft"
    assert archive.memories.forget(ws, mine.record.id, author="model").record.status == "resolved"
    archive.memory_confirm(ws, archive.memory_propose(ws, "confirmed one").record.id)
    confirmed = archive.memory_list(ws, "confirmed one").found[0].record
    with pytest.raises(MemoryRefused, match="own provisional"):
        archive.memories.forget(ws, confirmed.id, author="model")


def test_supersede_replaces_a_memory_and_keeps_kind_and_pin(archive: Archive, ws: Path) -> None:
    old = archive.memory_remember(ws, "use node 18", kind="constraint", pin=True)
    new = archive.memory_remember(ws, "use node 22", supersede=old.record.id[:8])
    assert new.record.kind == "constraint" and new.record.pinned and new.record.supersedes == old.record.id
    assert bodies(archive, ws) == ["use node 22"]
    assert bodies(archive, ws, status="superseded") == ["use node 18"]


def test_forget_hides_a_memory_from_default_listings_but_status_resolved_finds_it(archive: Archive, ws: Path) -> None:
    done = archive.memory_remember(ws, "temporary note")
    archive.memory_forget(ws, done.record.id)
    assert bodies(archive, ws) == [] and bodies(archive, ws, status="resolved") == ["temporary note"]
    with pytest.raises(BadInput, match="already resolved"):
        archive.memory_forget(ws, done.record.id)


def test_old_model_proposals_hide_after_30_days_but_status_provisional_finds_them(archive: Archive, ws: Path) -> None:
    archive.memories.propose(ws, "stale idea", ts=0)
    archive.memory_remember(ws, "old user rule", ts=0)
    now = 31 * DAY_MS
    assert bodies(archive, ws, now=now) == ["old user rule"]
    assert bodies(archive, ws, status="provisional", now=now) == ["stale idea"]


def test_pin_and_unpin_need_an_active_memory(archive: Archive, ws: Path) -> None:
    proposal = archive.memory_propose(ws, "a proposal")
    with pytest.raises(MemoryRefused, match="confirm a proposal first"):
        archive.memory_pin(ws, proposal.record.id)
    user = archive.memory_remember(ws, "a rule")
    assert archive.memory_pin(ws, user.record.id).record.pinned
    assert not archive.memory_pin(ws, user.record.id, pinned=False).record.pinned


def test_source_entry_ids_are_capped_and_the_cut_is_reported(archive: Archive, ws: Path) -> None:
    done = archive.memory_propose(ws, "with sources", source_entry_ids=[f"e{i:07d}" for i in range(70)] + ["e0000001"])
    assert len(done.record.source_entry_ids) == 64
    assert done.to_dict()["source_entry_ids"] == {"count": 64, "truncated": True, "dropped": 6}


def test_chinese_memories_are_found_by_an_english_word_or_a_chinese_word(archive: Archive, ws: Path) -> None:
    archive.memory_remember(ws, "使用 pnpm 而不是 npm", kind="preference")
    archive.memory_remember(ws, "不要修改生产数据库", kind="constraint")
    archive.memory_remember(ws, "Run the linter before committing")
    assert bodies(archive, ws, "pnpm") == ["使用 pnpm 而不是 npm"]
    assert bodies(archive, ws, "使用") == ["使用 pnpm 而不是 npm"]
    assert bodies(archive, ws, "数据库") == ["不要修改生产数据库"]
    assert bodies(archive, ws, "資料庫 生產") == ["不要修改生产数据库"]
    assert bodies(archive, ws, "linter") == ["Run the linter before committing"]
    assert bodies(archive, ws, "yarn") == []


def test_listing_order_is_pinned_then_priority_then_oldest(archive: Archive, ws: Path) -> None:
    archive.memory_remember(ws, "plain one")
    archive.memory_remember(ws, "important", priority=5)
    archive.memory_remember(ws, "pinned", pin=True)
    archive.memory_remember(ws, "plain two")
    assert bodies(archive, ws) == ["pinned", "important", "plain one", "plain two"]


def test_ids_resolve_by_unique_prefix_with_or_without_mem(archive: Archive, ws: Path) -> None:
    done = archive.memory_remember(ws, "x")
    assert archive.memory_get(ws, done.record.id[4:10]).id == done.record.id
    with pytest.raises(BadInput, match="too short"):
        archive.memory_get(ws, "mem_a")
    with pytest.raises(NotFound):
        archive.memory_get(ws, "mem_ffffffffffff")


def test_bad_kind_scope_and_status_are_one_line_errors(archive: Archive, ws: Path) -> None:
    with pytest.raises(BadInput, match="unknown kind"):
        archive.memory_remember(ws, "x", kind="wish")
    with pytest.raises(BadInput, match="unknown scope"):
        archive.memory_remember(ws, "x", scope="global")
    with pytest.raises(BadInput, match="unknown status"):
        archive.memory_list(ws, status="gone")


def test_an_id_from_another_workspace_is_refused_with_a_pointer_to_it(
    archive: Archive, ws: Path, other_ws: Path
) -> None:
    done = archive.memory_remember(other_ws, "lives elsewhere")
    with pytest.raises(NotFound, match=f"belongs to workspace {other_ws.resolve()}"):
        archive.memory_forget(ws, done.record.id)
    assert archive.memory_get(other_ws, done.record.id).body == "lives elsewhere"
