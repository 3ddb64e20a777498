"""The projection (replay of events) and the policy rules, without a database."""

from __future__ import annotations

from typing import Any

import pytest

from pi_memory.memory import policy
from pi_memory.memory.model import MemoryRecord
from pi_memory.memory.projection import Projections, apply, project

DAY_MS = 24 * 3600 * 1000


def ev(seq: int, type_: str, author: str = "user", session_id: str | None = None, **data: Any) -> dict[str, Any]:
    return {"seq": seq, "ts": 1_000 + seq, "type": type_, "author": author, "session_id": session_id, **data}


def create(
    seq: int, id_: str, body: str, author: str = "user", session_id: str | None = None, **data: Any
) -> dict[str, Any]:
    fields = {"kind": "note", "scope": "workspace", "priority": 0, "pinned": False, "source_entry_ids": []}
    fields.update(data)
    return ev(seq, "create", author, session_id, id=id_, body=body, **fields)


def record(**overrides: Any) -> MemoryRecord:
    base = dict(
        id="mem_1",
        body="b",
        kind="note",
        scope="workspace",
        session_id=None,
        author="model",
        priority=0,
        pinned=False,
        status="provisional",
        confirmed=False,
        created_seq=1,
        created_ts=0,
        updated_seq=1,
        updated_ts=0,
    )
    base.update(overrides)
    return MemoryRecord(**base)


EVENTS = [
    create(1, "mem_a", "使用 pnpm 而不是 npm", kind="preference"),
    create(2, "mem_b", "不要修改生产数据库", kind="constraint", pinned=True),
    create(3, "mem_c", "tests are in tests/", author="model", kind="fact"),
    ev(
        4,
        "supersede",
        id="mem_d",
        supersedes="mem_a",
        body="使用 pnpm 9",
        kind="preference",
        scope="workspace",
        pinned=False,
    ),
    ev(5, "unpin", id="mem_b"),
    ev(6, "pin", id="mem_b"),
    ev(7, "confirm", id="mem_c", pin=False),
    create(8, "mem_e", "forget me"),
    ev(9, "resolve", id="mem_e"),
]


def test_the_same_events_always_give_the_same_state() -> None:
    first, second = project(EVENTS), project([dict(e) for e in EVENTS])
    assert first.records == second.records
    assert list(first.records) == ["mem_a", "mem_b", "mem_c", "mem_d", "mem_e"]


def chained(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events as a verified chain gives them: each names the hash of the one before it."""
    return [{**e, "prev_hash": f"hash-{e['seq'] - 1}"} for e in events]


def test_a_remembered_projection_extended_by_new_events_equals_a_full_replay() -> None:
    events, projections = chained(EVENTS), Projections()
    for end in (3, 3, 5, 9, 7):  # a repeat, two extensions, then an older prefix
        state = projections.project(events[:end], f"hash-{end}")
        full = project(events[:end])
        assert (state.records, state.last_seq, state.ignored) == (full.records, full.last_seq, full.ignored)


def test_a_projection_handed_out_is_a_copy_the_caller_may_change() -> None:
    events, projections = chained(EVENTS), Projections()
    state = projections.project(events[:8], "hash-8")
    apply(state, events[8])
    state.records.clear()
    again = projections.project(events[:8], "hash-8")
    assert again.records == project(events[:8]).records and again.last_seq == 8


def test_projections_keep_the_most_recently_used_states_within_their_records_budget() -> None:
    events, projections = chained(EVENTS), Projections(budget=7)  # a state costs its records + 1
    for end in (1, 2, 3):
        projections.project(events[:end], f"hash-{end}")
    assert len(projections) == 2  # 2 + 3 + 4 > 7: the oldest went
    assert projections.project(events[:1], "hash-1").last_seq == 1  # replayed again: evicted, still right


def test_supersede_marks_the_old_record_and_links_both_ways() -> None:
    state = project(EVENTS)
    assert state.records["mem_a"].status == "superseded" and state.records["mem_a"].superseded_by == "mem_d"
    assert state.records["mem_d"].status == "active" and state.records["mem_d"].supersedes == "mem_a"


def test_pin_unpin_resolve_and_confirm_change_the_record() -> None:
    state = project(EVENTS)
    assert state.records["mem_b"].pinned and state.records["mem_b"].updated_seq == 6
    assert state.records["mem_c"].status == "active" and state.records["mem_c"].confirmed
    assert state.records["mem_c"].authoritative
    assert state.records["mem_e"].status == "resolved"
    assert state.ignored == []


def test_a_model_proposal_is_provisional_and_never_pinned_even_if_the_event_says_so() -> None:
    state = project([create(1, "mem_m", "x", author="model", pinned=True)])
    assert state.records == {} and state.ignored == [1]
    state = project([create(1, "mem_m", "x", author="model")])
    assert state.records["mem_m"].status == "provisional" and not state.records["mem_m"].pinned


def test_replay_ignores_a_model_confirming_or_pinning_its_own_proposal() -> None:
    state = project(
        [
            create(1, "mem_m", "x", author="model"),
            ev(2, "confirm", "model", id="mem_m"),
            ev(3, "pin", "model", id="mem_m"),
        ]
    )
    assert state.records["mem_m"].status == "provisional" and not state.records["mem_m"].pinned
    assert state.ignored == [2, 3]


def test_replay_ignores_a_model_resolving_a_user_record_or_another_authors_proposal() -> None:
    events = [
        create(1, "mem_u", "user's"),
        create(2, "mem_r", "rule's", author="rule"),
        ev(3, "resolve", "model", id="mem_u"),
        ev(4, "resolve", "model", id="mem_r"),
    ]
    state = project(events)
    assert state.records["mem_u"].status == "active" and state.records["mem_r"].status == "provisional"
    assert state.ignored == [3, 4]


def test_a_model_may_edit_and_resolve_its_own_proposal() -> None:
    events = [
        create(1, "mem_m", "draft", author="model"),
        ev(2, "edit", "model", id="mem_m", body="better"),
        ev(3, "resolve", "model", id="mem_m"),
    ]
    state = project(events)
    assert state.records["mem_m"].body == "better" and state.records["mem_m"].edits == 1
    assert state.records["mem_m"].status == "resolved"


def test_legacy_project_and_user_scopes_read_as_workspace() -> None:
    state = project([create(1, "mem_p", "old", scope="project"), create(2, "mem_q", "older", scope="user")])
    assert {r.scope for r in state.records.values()} == {"workspace"}


def test_events_about_unknown_ids_are_ignored() -> None:
    assert project([ev(1, "pin", id="mem_nope")]).ignored == [1]


# --- policy --------------------------------------------------------------------------


def test_a_body_over_8000_chars_is_refused_not_cut() -> None:
    assert policy.body_problem("x" * 8000) is None
    assert "refused, not cut" in (policy.body_problem("x" * 8001) or "")
    assert policy.body_problem("   ") is not None


def test_source_entry_ids_are_deduplicated_and_capped_at_64_ids() -> None:
    capped = policy.cap_source_ids([f"e{i}" for i in range(100)] + ["e1", "e2"])
    assert len(capped.ids) == 64 and capped.truncated and capped.dropped == 36
    assert policy.cap_source_ids(["a", "b", "a", " b "]).ids == ("a", "b")


def test_source_entry_ids_are_capped_at_4096_chars() -> None:
    capped = policy.cap_source_ids(["x" * 1000 + str(i) for i in range(6)])
    assert len(capped.ids) == 4 and capped.truncated and capped.dropped == 2


def test_model_proposals_hide_from_the_default_listing_after_30_days() -> None:
    old = record(created_ts=0, updated_ts=30 * DAY_MS)  # an edit does not extend the 30 days
    assert policy.matches_status(old, None, 29 * DAY_MS)
    assert not policy.matches_status(old, None, 31 * DAY_MS)
    assert policy.matches_status(old, "provisional", 31 * DAY_MS)
    user = record(author="user", status="active")
    assert policy.matches_status(user, None, 400 * DAY_MS)


def test_status_filters_pinned_and_all() -> None:
    pinned = record(author="user", status="active", pinned=True)
    resolved = record(author="user", status="resolved")
    assert policy.matches_status(pinned, "pinned", 0) and not policy.matches_status(record(), "pinned", 0)
    assert not policy.matches_status(resolved, None, 0) and policy.matches_status(resolved, "resolved", 0)
    assert policy.matches_status(resolved, "all", 0)


def test_session_records_are_visible_only_to_their_session() -> None:
    mine = record(scope="session", session_id="s1")
    assert policy.visible_to(mine, "s1") and not policy.visible_to(mine, "s2") and not policy.visible_to(mine, None)
    assert policy.visible_to(record(), None)


def test_duplicate_proposals_are_found_in_the_same_scope_and_session_only() -> None:
    recs = [record(body="use pnpm"), record(id="mem_2", body="in s1", scope="session", session_id="s1")]
    assert policy.find_duplicate(recs, "use  pnpm", "workspace", None) is recs[0]
    assert policy.find_duplicate(recs, "use pnpm", "session", "s1") is None
    assert policy.find_duplicate(recs, "in s1", "session", "s1") is recs[1]
    assert policy.find_duplicate(recs, "in s1", "session", "s2") is None


def test_scope_kind_and_status_values_are_checked() -> None:
    assert policy.normalize_scope("project") == "workspace" and policy.normalize_scope(None) == "workspace"
    with pytest.raises(ValueError, match="unknown scope"):
        policy.normalize_scope("global")
    with pytest.raises(ValueError, match="unknown kind"):
        policy.normalize_kind("wish")
    with pytest.raises(ValueError, match="unknown status"):
        policy.normalize_status("gone")


def test_text_with_a_lone_surrogate_is_refused_and_such_source_ids_are_dropped() -> None:
    assert "invalid Unicode" in (policy.body_problem("bad \ud800 text") or "")
    assert policy.cap_source_ids(["ok", "bad\udc00"]).ids == ("ok",)
