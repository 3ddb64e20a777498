"""The checkpoint and `compact_plan`: deterministic bytes, budgets cut at whole items, a chain that accumulates."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from compact_helpers import Branch
from conftest import PI_DATA
from pi_memory.compact.checkpoint import EARLIER, MARKER, THIS_WINDOW, source_hash, summary_sections
from pi_memory.compact.facts import collect_facts, command_paths, parse_test_counts
from pi_memory.compact.plan import compact_plan, timed_plan
from pi_memory.core.sources.pi import active_branch, read_session_file


def fixture_main_line() -> list[dict[str, Any]]:
    parsed = read_session_file(PI_DATA / "pi-0.73.1-sse-stream-mixed.jsonl")
    entries = [e.data for e in parsed.entries]
    return entries[: next(i for i, e in enumerate(entries) if e["id"] == "27df0a75") + 1]


def busy_session(turns: int) -> Branch:
    b = Branch()
    for t in range(turns):
        b.user(f"turn {t}: please fix module_{t}.py and run the tests, 请修复 {t}")
        b.assistant("", [(f"r{t}", "read", {"path": f"src/module_{t}.py"})])
        b.result(f"r{t}", "def f(): pass", name="read")
        b.assistant("", [(f"e{t}", "edit", {"path": f"src/module_{t}.py", "edits": []})])
        b.result(f"e{t}", "Successfully replaced 1 block(s)", name="edit")
        b.assistant("", [(f"b{t}", "bash", {"command": f"pytest tests/test_{t}.py"})])
        failed = t % 3 == 0
        out = f"===== {t + 10} passed, {1 if failed else 0} failed in 0.5s ====="
        b.result(f"b{t}", out + ("\n\nCommand exited with code 1" if failed else ""), error=failed)
        b.assistant(f"done with turn {t}")
    return b


def test_the_same_input_gives_the_same_bytes() -> None:
    entries = fixture_main_line()
    prep = {"firstKeptEntryId": "bccdbf20", "tokensBefore": 1234}
    first = compact_plan(entries, prep)
    second = compact_plan(copy.deepcopy(entries), dict(prep))
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_key_order_in_the_entries_does_not_change_the_hash_or_text() -> None:
    entries = fixture_main_line()
    shuffled = []
    rng = random.Random(7)
    for e in entries:
        keys = list(e)
        rng.shuffle(keys)
        shuffled.append({k: e[k] for k in keys})
    prep = {"firstKeptEntryId": "a35c822d", "tokensBefore": 1}
    assert compact_plan(entries, prep) == compact_plan(shuffled, prep)
    assert source_hash(entries) == source_hash(shuffled)


def test_fixture_plan_moves_off_a_parallel_result_and_reports_it() -> None:
    plan = compact_plan(fixture_main_line(), {"firstKeptEntryId": "bccdbf20", "tokensBefore": 1234})
    compaction = plan["compaction"]
    details = compaction["details"]
    assert compaction["firstKeptEntryId"] == "b72bc7c1" and compaction["tokensBefore"] == 1234
    assert details["movedBoundary"] and details["isSplitTurn"] and details["proposedKeptEntryId"] == "bccdbf20"
    assert details["sourceEntryIds"][0] == "22e02122" and details["sourceEntryIds"][-1] == "a35c822d"
    assert details["sourceCount"] == 10 and details["messageCount"] == 8
    assert details["checkpointChars"] == len(compaction["summary"])
    summary = compaction["summary"]
    assert summary.startswith(MARKER) and "session_read" in summary and "untrusted" in summary
    assert "[12a82452]" in summary and "[462e9538] assistant turn error: 529 overloaded_error" in summary
    assert "deploy/nginx.conf" in summary


def test_an_aborted_request_cancels_and_says_why() -> None:
    plan = timed_plan(
        {"branchEntries": fixture_main_line(), "preparation": {"firstKeptEntryId": "a35c822d"}, "aborted": True}
    )
    assert plan == {"cancel": True, "reason": "the compaction request was aborted"}


def test_bad_input_cancels_instead_of_raising() -> None:
    assert compact_plan([], {"firstKeptEntryId": "x"})["cancel"]
    assert compact_plan(fixture_main_line(), {})["cancel"]
    assert timed_plan({"branchEntries": "nope", "preparation": {"firstKeptEntryId": "x"}})["cancel"]
    assert timed_plan({})["cancel"]


def test_timed_plan_adds_reason_and_duration_to_the_details(monkeypatch: pytest.MonkeyPatch) -> None:
    import pi_memory.compact.plan as plan_module

    ticks = iter([10.0, 10.0125])  # the clock the plan reads, before and after: 12.5 ms apart
    monkeypatch.setattr(plan_module.time, "perf_counter", lambda: next(ticks))
    plan = timed_plan(
        {"branchEntries": fixture_main_line(), "preparation": {"firstKeptEntryId": "a35c822d"}, "reason": "threshold"}
    )
    details = plan["compaction"]["details"]
    assert details["reason"] == "threshold" and details["planMs"] == 12.5


def test_checkpoint_and_summary_stay_within_their_budgets_cut_at_whole_items() -> None:
    b = busy_session(120)
    b.user("the last request")
    kept = b.entries[-1]["id"]
    config = {"summaryMaxChars": 3000, "sessionSummary": {"maxChars": 1500}}
    plan = compact_plan(b.entries, {"firstKeptEntryId": kept}, config)
    summary = plan["compaction"]["summary"]
    details = plan["compaction"]["details"]
    assert len(summary) <= 3000 and details["summaryChars"] <= 1500
    assert details["itemsDropped"] > 0 and details["itemsKept"] > 5
    body = summary.split(THIS_WINDOW + "\n", 1)[1]
    items = [line for line in body.splitlines() if line.startswith("- ")]
    facts = collect_facts([(e["id"], e["message"]) for e in b.entries[:-1]])
    whole_items = {item for section in summary_sections(facts) for item in section.items}
    assert all(line in whole_items or "more not shown" in line for line in items)  # no item cut mid-line
    assert "turn 0:" in summary  # the first request (the goal) is kept
    assert "turn 119:" in summary  # and the latest one
    assert "more not shown; use session_search" in summary


def test_default_budgets_are_twelve_and_six_thousand() -> None:
    b = busy_session(400)
    b.user("last")
    plan = compact_plan(b.entries, {"firstKeptEntryId": b.entries[-1]["id"]})["compaction"]
    assert 5000 < plan["details"]["summaryChars"] <= 6000  # the summary budget is used, not exceeded
    assert len(plan["summary"]) <= 12000


def test_a_long_previous_summary_is_trimmed_at_whole_lines_to_the_checkpoint_budget() -> None:
    b = busy_session(3)
    lines = [f"line {i}: " + "详细 old detail " * 10 for i in range(400)]
    kept = b.user("next")
    plan = compact_plan(b.entries, {"firstKeptEntryId": kept, "previousSummary": "\n".join(lines)})["compaction"]
    text = plan["summary"]
    assert 11000 < len(text) <= 12000
    carried = text.split(EARLIER + "\n", 1)[1].splitlines()[1:]
    assert carried == lines[: len(carried)]  # kept from the top, whole lines only


def test_source_ids_in_details_are_capped() -> None:
    b = busy_session(40)
    b.user("last")
    details = compact_plan(b.entries, {"firstKeptEntryId": b.entries[-1]["id"]})["compaction"]["details"]
    assert (
        len(details["sourceEntryIds"]) == 200 and details["sourceEntryIdsTruncated"] and details["sourceCount"] == 320
    )


def test_summaries_accumulate_along_the_chain_of_compactions() -> None:
    b = busy_session(2)
    first_kept = b.user("second window starts here")
    plan1 = compact_plan(b.entries, {"firstKeptEntryId": first_kept})["compaction"]
    b.compaction(first_kept, summary=plan1["summary"], details=plan1["details"])
    comp1 = b.entries[-1]["id"]
    b.assistant("", [("late", "write", {"path": "NOTES.md", "content": "x"})])
    b.result("late", "written", name="write")
    b.assistant("ok")
    second_kept = b.user("third window")
    plan2 = compact_plan(b.entries, {"firstKeptEntryId": second_kept, "previousSummary": plan1["summary"]})[
        "compaction"
    ]
    text = plan2["summary"]
    assert plan2["details"]["previousCompactionId"] == comp1
    this, earlier = text.split(EARLIER, 1)
    assert "NOTES.md" in this and "second window starts here" in this  # the old kept tail is compacted now
    assert f"### Compaction {comp1}: entries e001..e016" in earlier
    assert "src/module_1.py" in earlier and "turn 0:" in earlier
    assert earlier.count(MARKER) == 0  # carried as items, not as a nested checkpoint
    # a third compaction carries both earlier windows, newest first
    b.compaction(second_kept, summary=plan2["summary"], details=plan2["details"])
    b.assistant("more")
    third_kept = b.user("fourth")
    plan3 = compact_plan(b.entries, {"firstKeptEntryId": third_kept})["compaction"]
    earlier3 = plan3["summary"].split(EARLIER, 1)[1]
    assert earlier3.index("NOTES.md") < earlier3.index(f"### Compaction {comp1}")


def test_a_foreign_previous_summary_is_carried_as_untrusted_text() -> None:
    parsed = read_session_file(PI_DATA / "pi-0.73.1-sse-stream-mixed.jsonl")
    branch = [e.data for e in active_branch(parsed.entries)]
    plan = compact_plan(branch, {"firstKeptEntryId": "a9ca8037"})["compaction"]
    assert "not written by pi-memory; untrusted" in plan["summary"] and "𠮷 survives compaction" in plan["summary"]
    assert plan["details"]["sourceEntryIds"][0] == "4a107d51"  # the previous kept tail is compacted now


def test_facts_pair_commands_with_exit_codes_and_find_test_counts() -> None:
    b = busy_session(1)
    b.bash("npx jest", "Tests:       1 failed, 12 passed, 13 total", 1)
    facts = collect_facts([(e["id"], e["message"]) for e in b.entries])
    assert [(c.command, c.exit_code) for c in facts.commands] == [("pytest tests/test_0.py", 1), ("npx jest", 1)]
    assert [t for _, t in facts.tests] == ["10 passed, 1 failed", "1 failed, 12 passed, 13 total"]
    assert facts.changed_paths() == ["src/module_0.py"] and facts.read_paths() == ["src/module_0.py"]


def test_paths_come_only_from_simple_commands() -> None:
    assert command_paths("cat logs/a.log README.md") == ("bash-read", ["logs/a.log", "README.md"])
    assert command_paths("grep -n 'ping\\|proxy_' server/stream.js deploy/nginx.conf") == (
        "bash-read",
        ["server/stream.js", "deploy/nginx.conf"],
    )
    assert command_paths("sed -i 's/a/b/' conf/x.ini") == ("bash-change", ["conf/x.ini"])
    assert command_paths("cat a.txt | wc -l") == ("", [])
    assert command_paths("echo hi > out.txt") == ("", [])
    assert command_paths("python -c 'unterminated") == ("", [])


def test_test_counts_read_pytest_and_jest_lines() -> None:
    assert (
        parse_test_counts("....\n===== 12 passed, 1 failed, 2 skipped in 3.1s =====\n")
        == "12 passed, 1 failed, 2 skipped"
    )
    assert parse_test_counts("no tests here, 3 errors") == ""


def test_the_checkpoint_names_the_session_for_reading_entries_back() -> None:
    plan = timed_plan(
        {
            "branchEntries": fixture_main_line(),
            "preparation": {"firstKeptEntryId": "a35c822d"},
            "sessionId": "01a2364c-47af",
        }
    )
    assert "`pi-memory entries 01a2364c-47af 12a82452`" in plan["compaction"]["summary"]
