"""Self-review: signatures, corrections, the ledger's arithmetic (pure), and the report over real fixtures.

The fixtures (`tests/data/review/`, written by `make_fixtures.py` there) hold one failing test command
run 5 times over 3 sessions and then passing, one correction in Chinese and one in English, a one-off
edit error, and look-alikes that are not corrections. The memory "written in the middle" is added here,
on 2026-11-04, between the second and third sessions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pi_memory import Archive
from pi_memory.errors import BadInput
from pi_memory.frontends.cli.main import cli
from pi_memory.frontends.tools.review import parse_args
from pi_memory.review import Collector, RunRow, format_report, normalize_command, normalize_error
from pi_memory.review.corrections import correction_cues
from pi_memory.review.ledger import Side, split, suggested, verdict
from pi_memory.review.rules import draft_rule
from pi_memory.review.signature import command_signature, error_line, finding_key, tool_error_signature

REVIEW_DATA = Path(__file__).parent / "data" / "review"
TEST_COMMAND = "bash: python -m pytest tests/test_cart.py -q"
WORKSPACE = "/home/dev/shop"
MEMORY_TS = 1_793_750_400_000  # 2026-11-04T00:00:00Z: after the second session, before the third
MEMORY = "Run make fixtures before pytest tests/test_cart.py: the cart test fails on stale price fixtures"


# --- signatures (pure) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cd /home/dev/shop && python -m pytest tests/test_cart.py -q", "python -m pytest tests/test_cart.py -q"),
        ("cd '/a b' ; cd src && make test", "make test"),
        ("PYTHONPATH=src CI=1 pytest -x", "pytest -x"),
        ("cat /home/dev/shop/src/cart.py", "cat cart.py"),
        ("cat ~/notes/todo.md", "cat todo.md"),
        ("pytest --basetemp=/tmp/pytest-of-dev/pytest-12 -k t", "pytest --basetemp=<tmp> -k t"),
        ("ls tmpab12_x.txt", "ls <tmp>"),
        ("git show 3f9a2c1d7e", "git show <hash>"),
        ("curl localhost:8080/api/7", "curl localhost:<n>/api/<n>"),
        ("rm -rf build 2>&1 | tail -20", "rm -rf build 2>&1 | tail -<n>"),
        ("python3 run.py   --n  5", "python3 run.py --n <n>"),
        ("kill 4c7e1a5e-1b9d-4c56-8f0e-5a1f3c2d0001", "kill <id>"),
    ],
)
def test_normalize_command_strips_folders_numbers_hashes_and_temp_names(command: str, expected: str) -> None:
    assert normalize_command(command) == expected


def test_the_same_command_in_two_worktrees_has_one_signature() -> None:
    a = command_signature("cd /home/ann/wt/a && pytest /home/ann/wt/a/tests/test_x.py --timeout 30")
    b = command_signature("cd /srv/ci/b && pytest /srv/ci/b/tests/test_x.py --timeout 60")
    assert a == b == "bash: pytest test_x.py --timeout <n>"
    assert finding_key(a) == finding_key(b) and finding_key(a).startswith("sig_") and len(finding_key(a)) == 12


def test_an_error_signature_keeps_the_telling_line_not_the_exit_code_line() -> None:
    output = (
        "F.\n====== FAILURES ======\nFAILED tests/test_cart.py::test_total - AssertionError: assert 41 == 42\n"
        "1 failed, 1 passed in 0.11s\n\n\nCommand exited with code 1"
    )
    assert error_line(output).startswith("FAILED tests/test_cart.py::test_total")
    assert normalize_error(output) == "FAILED tests/test_cart.py::test_total - AssertionError: assert <n> == <n>"
    assert tool_error_signature("edit", "Could not find the exact text in /home/dev/shop/src/cart.py.") == (
        "edit: Could not find the exact text in cart.py."
    )
    assert tool_error_signature("read", "") == "read: (no message)"


# --- corrections (pure) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cue"),
    [
        ("不对，别改 src/cart.py 的接口", "不对"),
        ("别再跑全量测试了", "别"),
        ("不要动 fixtures", "不要"),
        ("你又把参数改了", "又"),
        ("怎么又错了", "又"),
        ("改回去，撤销刚才的修改", "撤销"),
        ("我说过只改 src/", "我说过"),
        ("Don't touch the fixtures", "don't"),
        ("ok. do not rename the module", "don't"),
        ("Stop editing the tests", "stop"),
        ("That's the wrong file", "wrong"),
        ("Please revert that", "revert"),
        ("I said only src/ may change", "I said"),
        ("No, use pnpm", "no,"),
        ("why did you delete it?", "why did you"),
        ("you broke it again", "again"),
    ],
)
def test_pushback_in_chinese_and_english_is_a_correction(text: str, cue: str) -> None:
    assert cue in correction_cues(text)


@pytest.mark.parametrize(
    "text",
    [
        "特别感谢，区别在哪里？",
        "别人的代码先不管",  # 别人: other people
        "Now add a line about make fixtures to the README",
        "The cart test is red again, please fix it",
        "I don't know how the cache works, explain it",
        "Run the tests once more",
        "What does the stop() method do?".replace("stop()", "halt()"),
        "```\nAssertionError: wrong value\nstop\n```\nwhat does this mean?",
    ],
)
def test_words_that_only_contain_a_cue_are_not_corrections(text: str) -> None:
    assert correction_cues(text) == []


# --- the ledger (pure) -------------------------------------------------------------------------


def test_the_ledger_splits_runs_and_hits_at_the_memory_time() -> None:
    runs = [10, 20, 30, 40, 50, 60, 70]
    hits = [10, 30, 50, 60]
    before, after = split(45, runs, hits)
    assert (before.runs, before.hits, before.rate, before.start, before.end) == (4, 2, 50.0, 10, 40)
    assert (after.runs, after.hits, after.rate, after.start, after.end) == (3, 2, 66.7, 50, 70)
    assert verdict(before, after) == "more"
    # a run starting exactly when the memory was written is after it: the memory existed
    assert split(50, runs, hits)[1].runs == 3


def test_the_ledger_says_stopped_fewer_and_when_a_side_is_empty() -> None:
    assert verdict(Side(4, 2, 1, 4), Side(3, 0, 5, 7)) == "stopped"
    assert verdict(Side(10, 5, 1, 4), Side(10, 1, 5, 7)) == "fewer"
    assert verdict(Side(4, 1, 1, 4), Side(8, 2, 5, 7)) == "same"
    before, after = split(5, [10, 20], [10])
    assert before.rate is None and verdict(before, after) == "no runs before"
    assert split(99, [10, 20], [])[1].to_dict() == {"runs": 0, "hits": 0, "rate": None, "from": None, "to": None}


def test_a_memory_is_suggested_for_a_finding_by_shared_words_only_when_they_are_content_words() -> None:
    assert suggested(MEMORY, f"{TEST_COMMAND} FAILED tests/test_cart.py::test_total")
    assert not suggested(MEMORY, "correction: tests/fixtures/prices.json")
    assert not suggested("Use tabs, never spaces", TEST_COMMAND)


# --- the collector and draft rules (pure: runs built by hand) ------------------------------------


def _run(
    rid: int, session: str, ts: int, fields: dict[str, Any], errors: dict[int, tuple[str, str]] | None = None
) -> RunRow:
    return RunRow(rid, session, "/w", "w", "pi", ts, ts + 1000, 4, 1, len(errors or {}), fields, errors or {})


def _cmd(text: str, code: int | None, *msgs: int) -> dict[str, Any]:
    return {"text": text, "exit": code, "msgs": list(msgs)}


def test_the_collector_groups_failures_and_finds_the_run_where_the_command_passed_again() -> None:
    c = Collector()
    c.add(
        _run(
            1, "a", 100, {"commands": [_cmd("cd /w && make test", 2, 1, 2)]}, {2: ("bash", "make: *** [test] Error 2")}
        )
    )
    c.add(_run(2, "b", 200, {"commands": [_cmd("cd /x && make test", 2, 5, 6), _cmd("make test", 0, 7, 8)]}))
    c.add(_run(3, "b", 300, {"commands": [_cmd("make test", 0, 9, 10)]}))
    (found,) = c.recurring()
    assert (found.signature, found.count, len(found.sessions), found.runs) == ("bash: make test", 2, 2, 2)
    assert list(found.hit_times) == [100, 200]
    assert found.fixed_in == [2] and found.last_ok and found.detail == "make: *** [test] Error 2"
    assert found.evidence.msg_ids() == [2, 6]
    assert "passed again in r2" in draft_rule(found)


def test_a_command_whose_result_is_a_tool_error_without_an_exit_code_failed_too() -> None:
    c = Collector()
    for rid in (1, 2):
        timeout = {rid * 10 + 1: ("bash", "Command timed out after 120 seconds")}
        c.add(_run(rid, "s", rid * 100, {"commands": [_cmd("npm run e2e", None, rid * 10, rid * 10 + 1)]}, timeout))
    (found,) = c.recurring()
    assert found.signature == "bash: npm run e2e" and found.count == 2 and found.detail.startswith("Command timed out")
    assert not [f for f in c.failures.values() if f.kind == "tool_error"]  # counted once, as the command


def test_a_correction_is_about_what_the_previous_run_of_its_session_did() -> None:
    c = Collector()
    c.add(
        _run(
            1,
            "s",
            100,
            {"goal": {"text": "Don't touch it", "msgs": [1]}, "files_changed": [{"text": "/w/a.py", "msgs": [2]}]},
        )
    )
    c.add(_run(2, "s", 200, {"goal": {"text": "No, wrong file: keep a.py as it was", "msgs": [3]}}))
    c.add(_run(3, "t", 300, {"goal": {"text": "stop", "msgs": [4]}}))  # first run of its session: nothing to correct
    (found,) = c.correction_groups()
    assert found.signature == "correction: a.py" and found.corrects == {3: 1} and found.count == 1
    assert "ask before changing a.py" in draft_rule(found)


def test_what_a_correction_is_about_is_kept_for_the_most_recently_active_sessions_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pi_memory.review import collect

    monkeypatch.setattr(collect, "SESSIONS_KEPT", 2)
    c = Collector()
    for rid, session in enumerate(("a", "b", "c", "a", "c"), start=1):
        c.add(_run(rid, session, rid * 100, {"goal": {"text": "Don't do that", "msgs": [rid]}}))
    assert [f.corrects for f in c.correction_groups()] == [{5: 3}]  # a's first run was dropped when c came
    assert len(c.previous) == 2


def test_retries_are_the_same_call_repeated_within_a_run() -> None:
    c = Collector()
    c.add(
        _run(
            1,
            "s",
            100,
            {
                "commands": [_cmd("ls", 0, 1, 2), _cmd("ls", 0, 3, 4)],
                "files_read": [{"text": "x.py", "msgs": [5, 6, 7]}],
            },
        )
    )
    assert [(r.call, r.times) for r in c.top_retries()] == [("read: x.py", 3), ("bash: ls", 2)]


# --- the report over the fixtures (both backends) ------------------------------------------------


@pytest.fixture
def reviewed(archive: Archive) -> Archive:
    archive.import_paths([REVIEW_DATA])
    archive.memory_remember(WORKSPACE, MEMORY, kind="constraint", ts=MEMORY_TS)
    return archive


def _address_text(archive: Archive, address: str) -> str:
    found = archive.read_address(address)
    return str(getattr(found, "text", ""))


def test_review_finds_exactly_the_repeated_failure_with_its_addresses_and_the_fix(reviewed: Archive) -> None:
    report = reviewed.review(cwd=WORKSPACE)
    assert report.totals["runs"] == 7 and report.totals["sessions"] == 3
    (failure,) = report.failures  # the one-off edit error is not recurring
    assert failure["signature"] == TEST_COMMAND and failure["kind"] == "command"
    assert (failure["count"], failure["runs"], failure["sessions"]) == (5, 4, 3)
    assert failure["error"] == "FAILED tests/test_cart.py::test_total - AssertionError: assert 41 == 42"
    assert len(failure["evidence"]) == 5 and failure["last_ok"] is True
    for address in failure["evidence"]:
        text = _address_text(reviewed, address)
        assert "test_total" in text and "exited with code 1" in text  # each cites the failing result itself
    (fixed,) = failure["fixed_in"]
    assert "All green" in reviewed.run(fixed).summary
    assert report.totals["failure_signatures"] == 2  # the pytest command and the edit error


def test_review_finds_the_chinese_and_the_english_correction_and_what_they_corrected(reviewed: Archive) -> None:
    report = reviewed.review(cwd=WORKSPACE)
    assert report.totals["corrections"] == 2
    by_about = {c["about"]: c for c in report.corrections}
    assert set(by_about) == {"src/cart.py", "tests/fixtures/prices.json"}
    zh, en = by_about["src/cart.py"], by_about["tests/fixtures/prices.json"]
    assert {"不对", "别", "又"} <= set(zh["cues"]) and {"don't", "I said", "revert"} <= set(en["cues"])
    for group, said in ((zh, "不对，别改"), (en, "Don't touch")):
        (cited,) = group["evidence"]
        assert cited["address"].endswith("/m1") and said in _address_text(reviewed, cited["address"])
        corrected = reviewed.run(cited["corrects"])
        assert corrected.session_id == reviewed.run(cited["address"].split("/")[0]).session_id
        assert corrected.id < int(cited["address"][1:].split("/")[0])


def test_candidate_rules_are_drafted_for_findings_seen_at_least_k_times(reviewed: Archive) -> None:
    (rule,) = reviewed.review(cwd=WORKSPACE).rules  # default K=3: only the 5x failure
    assert rule["signature"] == TEST_COMMAND and rule["count"] == 5 and len(rule["evidence"]) == 5
    assert "python -m pytest tests/test_cart.py -q" in rule["text"] and "failed 5 times in 3 sessions" in rule["text"]
    assert len(reviewed.review(cwd=WORKSPACE, min_count=1).rules) == 3


def test_the_ledger_counts_the_failure_before_and_after_the_memory(reviewed: Archive) -> None:
    suggested_row = [r for r in reviewed.review(cwd=WORKSPACE).ledger if r["signature"] == TEST_COMMAND]
    assert [r["link"] for r in suggested_row] == ["suggested"]
    memory_id = suggested_row[0]["memory_id"]
    done = reviewed.review_link(memory_id[:8], TEST_COMMAND, cwd=WORKSPACE)
    assert done["added"] and done["memory_id"] == memory_id and done["key"] == finding_key(TEST_COMMAND)
    assert not reviewed.review_link(memory_id, "cd /x && python -m pytest tests/test_cart.py -q", cwd=WORKSPACE)[
        "added"
    ]
    (row,) = reviewed.review(cwd=WORKSPACE).ledger
    assert row["link"] == "linked" and row["created_ts"] == MEMORY_TS
    assert row["before"] == {
        "runs": 5,
        "hits": 3,
        "rate": 60.0,
        "from": row["before"]["from"],
        "to": row["before"]["to"],
    }
    assert (row["after"]["runs"], row["after"]["hits"], row["after"]["rate"]) == (2, 1, 50.0)
    assert row["before"]["to"] < MEMORY_TS <= row["after"]["from"] and row["verdict"] == "fewer"


def test_a_link_by_key_counts_a_correction_and_survives_reopening(reviewed: Archive, archive_target: str) -> None:
    report = reviewed.review(cwd=WORKSPACE)
    key = next(c["key"] for c in report.corrections if c["about"] == "tests/fixtures/prices.json")
    memory_id = report.ledger[0]["memory_id"]
    reviewed.review_link(memory_id, key, cwd=WORKSPACE)
    with Archive.open(archive_target) as again:
        rows = {r["key"]: r for r in again.review(cwd=WORKSPACE).ledger}
    row = rows[key]
    assert row["link"] == "linked" and row["signature"] == "correction: tests/fixtures/prices.json"
    assert (row["before"]["hits"], row["after"]["hits"], row["verdict"]) == (1, 0, "stopped")


def test_since_until_project_and_agent_bound_the_window(reviewed: Archive) -> None:
    late = reviewed.review(since="2026-11-03", cwd=WORKSPACE)
    assert late.totals["runs"] == 5 and late.failures[0]["count"] == 3
    early = reviewed.review(until="2026-11-01", cwd=WORKSPACE)
    assert early.totals["runs"] == 2 and early.failures[0]["count"] == 2 and early.totals["corrections"] == 1
    assert reviewed.review(project="elsewhere").totals["runs"] == 0
    assert reviewed.review(project=WORKSPACE).totals["runs"] == 7
    assert reviewed.review(agent="codex").totals["runs"] == 0
    with pytest.raises(BadInput):
        reviewed.review(agent="vim")
    with pytest.raises(BadInput):
        reviewed.review(since="last tuesday")


def test_the_review_reads_the_window_page_by_page_without_losing_runs(
    reviewed: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_memory.review import reader

    whole = reviewed.review(cwd=WORKSPACE).to_dict()
    monkeypatch.setattr(reader, "PAGE_RUNS", 2)
    paged = reviewed.review(cwd=WORKSPACE).to_dict()
    for part in ("failures", "corrections", "cost", "rules", "ledger", "totals"):
        assert paged[part] == whole[part]


def test_the_text_report_cites_addresses_and_names_every_section(reviewed: Archive) -> None:
    text = format_report(reviewed.review(cwd=WORKSPACE))
    assert text.startswith("review: 7 runs in 3 sessions")
    for heading in ("Recurring failures", "User corrections", "Cost of work", "Candidate rules", "Ledger"):
        assert heading in text
    assert "5x in 3 sessions  " + TEST_COMMAND in text and "passed again in r" in text and "evidence: r1/m3" in text
    assert "retried in r" in text and "/m1 (on r" in text


# --- front ends ------------------------------------------------------------------------------------


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_cli_review_prints_text_or_json_and_links_a_memory(reviewed: Archive) -> None:
    code, out, _ = _cli("review", "--cwd", WORKSPACE)
    assert code == 0 and "Recurring failures" in out
    code, out, _ = _cli("review", "--json", "--min-count", "1", "--since", "2026-11-01", "--cwd", WORKSPACE)
    report = json.loads(out)
    assert code == 0 and len(report["rules"]) == 3 and report["window"]["min_count"] == 1
    memory_id = report["ledger"][0]["memory_id"]
    code, out, _ = _cli(
        "review", "link", memory_id, "python", "-m", "pytest", "tests/test_cart.py", "-q", "--cwd", WORKSPACE
    )
    assert code == 0 and out.startswith("linked: " + memory_id) and TEST_COMMAND in out
    code, out, _ = _cli("review", "link", memory_id, TEST_COMMAND, "--cwd", WORKSPACE, "--json")
    assert json.loads(out)["added"] is False


def test_cli_review_bad_input_is_one_line_without_a_traceback(reviewed: Archive) -> None:
    for args in (["review", "--since", "yesterday"], ["review", "link", "mem_nope", "x", "--cwd", WORKSPACE]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code != 0 and "Traceback" not in result.output
        assert len(result.stderr.strip().splitlines()) == 1


def test_pi_commands_default_to_this_workspace_and_the_last_30_days() -> None:
    now = MEMORY_TS
    options = parse_args("review", "", WORKSPACE, now)
    assert options["project"] == WORKSPACE and options["since"] == now - 30 * 24 * 3600 * 1000
    options = parse_args("dream", "since:all project:all agent:pi min:2 until:2026-11-05", WORKSPACE, now)
    assert options["since"] is None and options["project"] is None and options["min_count"] == 2
    assert options["agent"] == "pi" and options["until"] == "2026-11-05"
    for bad in ("frobnicate", "min:0", "colour:blue"):
        with pytest.raises(BadInput):
            parse_args("review", bad, WORKSPACE, now)


def _bridge(target: str, *requests: dict[str, Any]) -> list[dict[str, Any]]:
    import io

    from pi_memory.frontends.bridge.server import serve

    body = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in requests)
    out = io.BytesIO()
    assert serve(target, io.BytesIO(body), out) == 0  # type: ignore[arg-type]
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_the_bridge_review_shows_the_report_and_dream_frames_it_as_evidence(
    reviewed: Archive, archive_target: str
) -> None:
    from pi_memory.core.format import EVIDENCE_HEADER

    show, dream, empty, bad = _bridge(
        archive_target,
        {"id": 1, "method": "review", "params": {"args": "since:all", "cwd": WORKSPACE}},
        {"id": 2, "method": "review_dream", "params": {"args": "since:2026-11-01 min:2", "cwd": WORKSPACE}},
        {"id": 3, "method": "review_dream", "params": {"args": "since:2027-01-01", "cwd": WORKSPACE}},
        {"id": 4, "method": "review", "params": {"args": "colour:blue", "cwd": WORKSPACE}},
    )
    assert show["result"]["text"].startswith("review: 7 runs") and show["result"]["report"]["failures"]
    text = dream["result"]["text"]
    assert dream["result"]["findings"] == 3 and "memory_propose" in text and "/remember confirm:ID" in text
    assert EVIDENCE_HEADER in text and text.index("memory_propose") < text.index(EVIDENCE_HEADER)
    assert "not instructions" in text.split(EVIDENCE_HEADER)[0] and "5x in 3 sessions" in text
    assert empty["result"]["findings"] == 0 and empty["result"]["summary"].startswith("review: 0 runs")
    assert bad["error"]["code"] == "bad_input" and "usage: /review" in bad["error"]["message"]


def test_the_mcp_server_offers_the_review_as_a_tool(reviewed: Archive, monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio
    from mcp import Client

    from pi_memory.core.format import EVIDENCE_HEADER
    from pi_memory.frontends.mcp_server import build_server

    monkeypatch.chdir(Path(__file__).parent)  # the server's cwd is the ledger's workspace: no memories there

    async def go() -> tuple[Any, Any, Any]:
        async with Client(build_server(reviewed)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            ok = await client.call_tool("session_review", {"since": "2026-11-03", "min_count": 2})
            bad = await client.call_tool("session_review", {"agent": "vim"})
            return tools["session_review"], ok, bad

    tool, ok, bad = anyio.run(go)
    assert set(tool.input_schema["properties"]) == {"since", "until", "project", "agent", "min_count"}
    text = "\n".join(block.text for block in ok.content)
    assert text.startswith(EVIDENCE_HEADER) and "review: 5 runs" in text and "3x in 2 sessions" in text
    assert "Ledger: no memory" in text
    assert bad.is_error and "unknown agent" in bad.content[0].text
