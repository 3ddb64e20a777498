"""The safe-boundary check: pi's cut is kept when sound, moved back when it splits a call from its result."""

from __future__ import annotations

from compact_helpers import Branch
from conftest import PI_DATA
from pi_memory.compact.boundary import choose_boundary, context_start, is_split_turn, pairing_problems, visible_messages
from pi_memory.core.sources.pi import active_branch, read_session_file


def two_turns() -> tuple[Branch, dict[str, str]]:
    b = Branch()
    ids = {
        "u1": b.user("look at the config"),
        "a1": b.assistant("reading", [("c1", "read", {"path": "a.conf"})]),
        "r1": b.result("c1", "key=1", name="read"),
        "a1b": b.assistant("done"),
        "u2": b.user("now run the tests"),
        "a2": b.assistant("", [("c2", "bash", {"command": "pytest"})]),
        "r2": b.result("c2", "3 passed"),
        "a2b": b.assistant("all green"),
    }
    return b, ids


def test_a_cut_at_a_user_message_is_kept_and_not_split() -> None:
    b, ids = two_turns()
    result = choose_boundary(b.entries, ids["u2"])
    assert result.ok and result.kept_entry_id == ids["u2"] and not result.moved and not result.is_split_turn


def test_a_cut_at_an_assistant_after_a_finished_call_is_kept_as_a_split_turn() -> None:
    b, ids = two_turns()
    result = choose_boundary(b.entries, ids["a1b"])
    assert result.ok and result.kept_entry_id == ids["a1b"] and not result.moved and result.is_split_turn


def test_a_cut_at_a_tool_result_moves_back_to_its_call() -> None:
    b, ids = two_turns()
    result = choose_boundary(b.entries, ids["r2"])
    assert result.ok and result.moved
    assert result.kept_entry_id == ids["a2"] and result.is_split_turn
    assert "r2" not in result.kept_entry_id and result.problems


def test_parallel_results_keep_both_with_their_call() -> None:
    b = Branch()
    b.user("edit both files")
    call = b.assistant("editing", [("p1", "edit", {"path": "x.js"}), ("p2", "edit", {"path": "y.conf"})])
    b.result("p1", "ok", name="edit")
    second = b.result("p2", "ok", name="edit")
    b.assistant("done")
    result = choose_boundary(b.entries, second)
    assert result.ok and result.kept_entry_id == call
    tail = visible_messages(b.entries[result.kept_index :])
    assert pairing_problems(tail) == []
    assert [m["toolCallId"] for _, m in tail if m["role"] == "toolResult"] == ["p1", "p2"]


def test_a_call_whose_result_is_missing_is_unsafe() -> None:
    b = Branch()
    b.user("first")
    b.assistant("ok")
    u = b.user("second")
    b.assistant("", [("c9", "bash", {"command": "ls"})])
    b.user("third, the tool never answered")
    assert pairing_problems(visible_messages(b.entries[2:])) == ["tool call c9 in e004 has no result in the kept tail"]
    result = choose_boundary(b.entries, u)
    assert not result.ok and "no safe boundary" in result.reason


def test_an_aborted_or_error_turn_may_leave_calls_unanswered() -> None:
    for stop in ("aborted", "error"):
        b = Branch()
        b.user("first")
        b.assistant("ok")
        u = b.user("second")
        b.assistant("", [("c9", "bash", {"command": "sleep 100"})], stop=stop)
        b.user("try again")
        result = choose_boundary(b.entries, u)
        assert result.ok and result.kept_entry_id == u, stop


def test_an_aborted_request_is_cancelled_even_when_the_cut_is_safe() -> None:
    b, ids = two_turns()
    result = choose_boundary(b.entries, ids["u2"], aborted=True)
    assert not result.ok and "aborted" in result.reason


def test_no_safe_boundary_when_the_only_earlier_cut_compacts_nothing() -> None:
    b = Branch()
    b.meta("model_change", provider="faux", modelId="faux-1")
    b.assistant("", [("c1", "bash", {"command": "make"})])
    r = b.result("c1", "built")
    result = choose_boundary(b.entries, r)
    assert not result.ok and "no safe boundary" in result.reason


def test_the_walk_back_stops_at_the_previous_kept_tail() -> None:
    b = Branch()
    b.user("old")
    kept_before = b.assistant("", [("c1", "bash", {"command": "ls"})])
    b.result("c1", "a b")
    b.compaction(kept_before)
    r_only = b.result("c1", "late duplicate result")
    b.user("next")
    assert context_start(b.entries) == 1
    result = choose_boundary(b.entries, r_only)
    assert not result.ok  # the only earlier cut is the kept tail's first entry: nothing would be compacted


def test_the_cut_may_fall_inside_the_previous_kept_tail() -> None:
    b = Branch()
    b.user("old")
    b.assistant("ok")
    kept_before = b.user("kept by the last compaction")
    call = b.assistant("", [("c1", "bash", {"command": "ls"})])
    result_id = b.result("c1", "a b")
    b.compaction(kept_before)
    b.user("new")
    b.assistant("fine")
    result = choose_boundary(b.entries, result_id)
    assert result.ok and result.kept_entry_id == call and result.moved and result.is_split_turn
    assert result.compact_start == 2  # only the old kept tail's first message is compacted


def test_a_cut_before_the_previous_kept_tail_is_refused() -> None:
    b = Branch()
    first = b.user("old")
    b.assistant("ok")
    kept_before = b.user("kept")
    b.assistant("fine")
    b.compaction(kept_before)
    b.user("new")
    assert not choose_boundary(b.entries, first).ok


def test_a_proposed_id_not_on_the_branch_cancels() -> None:
    b, _ = two_turns()
    assert not choose_boundary(b.entries, "nothere").ok


def test_a_context_edit_that_omits_a_result_makes_its_call_unpaired() -> None:
    b, ids = two_turns()
    b.meta("context_edit", targetId=ids["r2"], replacement=None)
    b.user("continue")
    result = choose_boundary(b.entries, ids["u2"])
    assert not result.ok and result.problems == [f"tool call c2 in {ids['a2']} has no result in the kept tail"]


def test_a_context_edit_that_omits_an_error_turn_is_honoured() -> None:
    b = Branch()
    b.user("first")
    b.assistant("fine")
    u = b.user("second")
    err = b.assistant("", stop="error")
    b.meta("context_edit", targetId=err, replacement=None)
    b.assistant("retry ok")
    tail = visible_messages(b.entries[2:])
    assert [eid for eid, _ in tail] == [u, "e006"]
    assert choose_boundary(b.entries, u).ok


def test_split_turn_is_recomputed_after_the_move() -> None:
    b, ids = two_turns()
    assert is_split_turn(b.entries, 4) is False  # u2
    moved = choose_boundary(b.entries, ids["r1"])
    assert moved.kept_entry_id == ids["a1"] and moved.is_split_turn


def test_real_fixture_compaction_cut_is_safe_in_both_pi_lines() -> None:
    for name, kept in (
        ("pi-0.73.1-sse-stream-mixed.jsonl", "4a107d51"),
        ("pi-1.6.0-sse-stream-mixed.jsonl", "0c39c1bb"),
    ):
        parsed = read_session_file(PI_DATA / name)
        branch = [e.data for e in active_branch(parsed.entries)]
        upto = next(i for i, e in enumerate(branch) if e["type"] == "compaction")
        result = choose_boundary(branch[:upto], kept)
        assert result.ok and not result.moved and result.is_split_turn, name


def test_real_fixture_cut_between_parallel_results_moves_to_the_edit_call() -> None:
    parsed = read_session_file(PI_DATA / "pi-0.73.1-sse-stream-mixed.jsonl")
    entries = [e.data for e in parsed.entries]
    main = entries[: next(i for i, e in enumerate(entries) if e["id"] == "27df0a75") + 1]
    result = choose_boundary(main, "bccdbf20")  # the second of two parallel edit results
    assert result.ok and result.kept_entry_id == "b72bc7c1" and result.moved and result.is_split_turn


def test_an_unanswered_call_in_the_tail_cancels_without_walking_back() -> None:
    b = Branch()
    b.user("first")
    b.assistant("", [("c1", "bash", {"command": "ls"})])
    r = b.result("c1", "a")
    b.assistant("", [("c2", "bash", {"command": "sleep 9"})])  # its result never came
    result = choose_boundary(b.entries, r)
    assert not result.ok and result.problems == ["tool call c2 in e004 has no result in the kept tail"]
