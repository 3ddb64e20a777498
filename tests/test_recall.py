"""Recall inside a session: branch / session / all scopes, ids, file, kind, source class, list, paging, raw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.core.format import EVIDENCE_HEADER
from pi_memory.core.sources.pi import active_branch, read_session_file
from pi_memory.errors import BadInput
from pi_memory.frontends.cli.main import cli
from pi_memory.recall import RECALL_MAX_CHARS, allowed_roles, parse_request
from pi_memory.runs.detail import message_detail_text

SSE_FILE = PI_DATA / "pi-0.73.1-sse-stream-mixed.jsonl"
LONG_FILE = PI_DATA / "pi-0.73.1-long-output-en.jsonl"
SSE = "01a2364c-47af-74be-8d7c-46780d07ec0e"
LONG = "01a2364c-a7f6-75cb-ba8a-42838165f27d"
ABANDONED = {"a35c822d", "b72bc7c1", "cbe3c884", "bccdbf20", "bdd86e58", "dc668fab", "27df0a75"}


def branch_ids(path: Path) -> list[str]:
    return [e.entry_id for e in active_branch(read_session_file(path).entries) if e.entry_id]


def source_line(path: Path, entry_id: str) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if json.loads(line).get("id") == entry_id:
            return line
    raise AssertionError(entry_id)


def on_branch(archive: Archive, **params: Any) -> dict[str, Any]:
    return archive.recall({"session": SSE, "branch_ids": branch_ids(SSE_FILE), **params})


def ids(result: dict[str, Any]) -> list[str]:
    return [r["entry_id"] for r in result["results"]]


# --- the request, without a database ---------------------------------------------------


def test_spec_parameter_names_are_accepted_and_limits_clamped() -> None:
    req = parse_request({"entryIds": "[a],b", "rawLimit": 99_999, "scope": "active-lineage", "limit": 50, "page": 0})
    assert req.entry_ids == ("a", "b") and req.raw_limit == 12_000 and req.scope == "branch"
    assert req.limit == 30 and req.page == 1 and req.action == "read"


def test_unknown_parameters_kinds_and_scopes_are_one_line_errors() -> None:
    for params in ({"qeury": "x"}, {"kind": "thinking"}, {"scope": "everything"}, {"limit": "many"}):
        with pytest.raises(BadInput):
            parse_request(params)


def test_kind_and_source_class_narrow_the_roles() -> None:
    assert allowed_roles("tool_result", "all") == ("tool_result", "tool_error")
    assert allowed_roles("user", "derived") == ()
    assert allowed_roles(None, "derived") == ("summary",)
    assert "summary" not in (allowed_roles(None, "primary") or ())
    assert allowed_roles(None, "all") is None


# --- scopes ------------------------------------------------------------------------------


def test_branch_scope_leaves_out_the_abandoned_branch(imported: Archive) -> None:
    found = on_branch(imported, query="heartbeat")
    assert found["scope"] == "branch" and found["results"]
    assert not set(ids(found)) & ABANDONED
    assert ids(found) == ["4a107d51"]


def test_session_scope_includes_every_branch(imported: Archive) -> None:
    found = imported.recall({"session": SSE, "scope": "session", "query": "heartbeat"})
    assert {"a35c822d", "27df0a75", "4a107d51"} <= set(ids(found))
    assert {r["session_id"] for r in found["results"]} == {SSE}


def test_all_scope_reaches_other_sessions(imported: Archive) -> None:
    found = imported.recall({"scope": "all", "query": "proxy_read_timeout", "limit": 30})
    assert len({r["session_id"] for r in found["results"]}) > 1


def test_branch_scope_without_branch_ids_is_refused_not_widened(imported: Archive) -> None:
    with pytest.raises(BadInput, match="branch_ids"):
        imported.recall({"session": SSE, "scope": "branch", "query": "nginx"})


def test_a_branch_with_no_archived_messages_finds_nothing(imported: Archive) -> None:
    found = imported.recall({"session": SSE, "branch_ids": ["00000000"], "query": "nginx"})
    assert found["results"] == []
    listed = imported.recall({"session": SSE, "branch_ids": ["00000000"], "action": "list"})
    assert listed["results"] == []


# --- selecting by entry id --------------------------------------------------------------


def test_entry_ids_come_back_in_session_order_with_full_text(imported: Archive) -> None:
    found = imported.recall(
        {"session": SSE, "scope": "session", "entry_ids": ["a9ca8037", "12a82452", "78092ca6", "nothere1"]}
    )
    assert found["action"] == "read" and ids(found) == ["12a82452", "78092ca6", "a9ca8037"]
    assert found["missing"] == ["nothere1"]
    user, custom, _ = found["results"]
    assert user["role"] == "user" and "SSE stream" in user["body"] and user["body_format"] == "text"
    assert custom["msg_id"] is None and json.loads(custom["body"])["data"]["note"] == "extension state / 扩展状态"


def test_entry_ids_ignore_query_kind_file_and_page(imported: Archive) -> None:
    found = imported.recall(
        {"session": SSE, "scope": "session", "entry_ids": "12a82452", "query": "zzz", "kind": "bash", "page": 3}
    )
    assert ids(found) == ["12a82452"]


def test_entry_ids_off_the_branch_are_reported_missing(imported: Archive) -> None:
    found = on_branch(imported, entry_ids=["a35c822d", "c36e4a87"])
    assert ids(found) == ["c36e4a87"] and found["missing"] == ["a35c822d"]


def test_entry_ids_respect_the_limit_and_name_the_rest(imported: Archive) -> None:
    found = on_branch(imported, entry_ids=["12a82452", "462e9538", "b0b7ba02"], limit=2)
    assert ids(found) == ["12a82452", "462e9538"] and found["omitted"] == ["b0b7ba02"]


# --- filters -------------------------------------------------------------------------------


def test_file_filter_keeps_records_that_touched_the_file(imported: Archive) -> None:
    found = imported.recall({"session": SSE, "scope": "session", "file": "deploy/nginx.conf"})
    assert set(ids(found)) == {"ea1e5eaf", "b72bc7c1"}  # the read, and the edit on the other branch
    for item in found["results"]:
        assert "deploy/nginx.conf" in imported.read_address(item["address"]).text
    on_this_branch = on_branch(imported, file="nginx.conf")
    assert ids(on_this_branch) == ["ea1e5eaf"]  # the edit on the abandoned branch is left out
    assert on_branch(imported, query="nginx", file="deploy/nginx.conf")["results"]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("user", {"12a82452", "c36e4a87", "fbf035d9"}),
        ("tool_call", {"b0b7ba02", "ea1e5eaf"}),
        ("tool_result", {"a781a769", "4820eea2"}),
        ("bash", {"669896d5"}),
        ("custom", {"9b5d06c7"}),
    ],
)
def test_each_kind_lists_only_its_records(imported: Archive, kind: str, expected: set[str]) -> None:
    found = on_branch(imported, action="list", kind=kind, limit=30)
    assert set(ids(found)) == expected
    assert {r["kind"] for r in found["results"]} == {kind}


def test_assistant_kind_includes_replies_with_and_without_tool_calls(imported: Archive) -> None:
    found = on_branch(imported, action="list", kind="assistant", limit=30)
    assert {r["role"] for r in found["results"]} == {"assistant"}
    assert {"a9ca8037", "b0b7ba02"} <= set(ids(found))


def test_tool_result_search_matches_the_full_output_not_only_the_preview(imported: Archive) -> None:
    # k2599 is deep inside a 27 KB bash output: the stored preview has only its first 300 chars
    found = imported.recall({"session": LONG, "scope": "session", "kind": "tool_result", "query": "k2599"})
    assert ids(found) == ["c66606fd"] and "⟦k2599⟧" in found["results"][0]["snippet"]
    assert ids(imported.recall({"kind": "tool_result", "query": "k2599"})) == ["c66606fd"]
    assert not imported.recall({"session": LONG, "scope": "session", "kind": "user", "query": "k2599"})["results"]


def test_source_class_separates_summaries_from_primary_records(imported: Archive) -> None:
    derived = on_branch(imported, action="list", source_class="derived", limit=30)
    assert set(ids(derived)) == {"56b476a0", "0537094e"}
    assert {r["kind"] for r in derived["results"]} == {"branch_summary", "compaction"}
    assert {r["source_class"] for r in derived["results"]} == {"derived"}
    primary = on_branch(imported, action="list", source_class="primary", limit=30)
    assert not set(ids(primary)) & {"56b476a0", "0537094e"}
    assert not on_branch(imported, action="list", source_class="derived", kind="user")["results"]


def test_an_empty_query_with_only_a_kind_lists_nothing(imported: Archive) -> None:
    with pytest.raises(BadInput, match="query"):
        on_branch(imported, kind="user")
    with pytest.raises(BadInput):
        on_branch(imported, query="   ")


# --- list mode and paging -----------------------------------------------------------------


def test_list_mode_is_newest_first_and_bounded(imported: Archive) -> None:
    found = on_branch(imported, action="list", limit=3)
    assert ids(found) == ["a9ca8037", "fbf035d9", "0537094e"]
    assert found["next_page"] == 2
    stamps = [r["ts"] for r in found["results"]]
    assert stamps == sorted(stamps, reverse=True)


def test_pages_cover_the_branch_once_without_overlap(imported: Archive) -> None:
    seen: list[str] = []
    page: int | None = 1
    while page is not None:
        found = on_branch(imported, action="list", limit=4, page=page)
        seen += ids(found)
        page = found["next_page"]
    archived = imported.recall({"session": SSE, "scope": "session", "action": "list", "limit": 30})
    expected = set(branch_ids(SSE_FILE)) & set(ids(archived))
    assert len(seen) == len(set(seen)) and set(seen) == expected and not expected & ABANDONED


def test_search_results_page_too(imported: Archive) -> None:
    first = imported.recall({"scope": "all", "query": "nginx", "limit": 2})
    second = imported.recall({"scope": "all", "query": "nginx", "limit": 2, "page": 2})
    assert first["next_page"] == 2 and len(first["results"]) == 2
    assert second["results"] and not set(ids(first)) & set(ids(second))


def test_paging_a_query_over_all_sessions_reaches_the_tool_outputs_too(imported: Archive) -> None:
    seen: list[dict[str, Any]] = []
    page: int | None = 1
    while page:
        found = imported.recall({"scope": "all", "query": "nginx", "limit": 3, "page": page})
        seen += found["results"]
        page = found["next_page"]
    whole = imported.recall({"scope": "all", "query": "nginx", "limit": 30})["results"]
    assert [r["msg_id"] for r in seen] == [r["msg_id"] for r in whole]
    assert any(r["role"] == "tool_result" for r in seen)  # stored, not indexed: found by the bounded scan


def test_results_carry_ids_address_role_time_and_snippet(imported: Archive) -> None:
    hit = on_branch(imported, query="Last-Event-ID")["results"][0]
    assert hit["entry_id"] and hit["msg_id"] and hit["ts"] and hit["role"]
    assert hit["address"].startswith("r") and "/m" in hit["address"]
    assert "⟦" in hit["snippet"]
    detail = imported.read_address(hit["address"])
    assert detail.msg_id == hit["msg_id"]  # type: ignore[union-attr]


# --- raw segments and the budget ---------------------------------------------------------


def test_raw_segments_concatenate_to_the_original_entry(imported: Archive) -> None:
    pieces, offset = [], 0
    while True:
        found = imported.recall(
            {
                "session": LONG,
                "scope": "session",
                "entry_ids": ["c66606fd"],
                "raw": True,
                "offset": offset,
                "raw_limit": 5000,
            }
        )
        item = found["results"][0]
        assert item["body_format"] == "raw" and item["offset"] == offset and len(item["body"]) <= 5000
        pieces.append(item["body"])
        if item["next_offset"] is None:
            break
        assert item["truncated"] is True
        offset = item["next_offset"]
    assert "".join(pieces) == source_line(LONG_FILE, "c66606fd")
    assert len(pieces) == 6


def test_full_text_segments_join_to_the_complete_tool_output(imported: Archive) -> None:
    pieces, offset = [], 0
    while offset is not None:
        item = imported.recall(
            {"session": LONG, "scope": "session", "entry_ids": ["c66606fd"], "offset": offset, "raw_limit": 5000}
        )["results"][0]
        pieces.append(item["body"])
        offset = item["next_offset"]
    expected = message_detail_text(json.loads(source_line(LONG_FILE, "c66606fd"))["message"])
    assert "".join(pieces) == expected and len(pieces) == 3 and "\nk2600\n" in expected


def test_thinking_is_shown_only_when_asked(imported: Archive) -> None:
    plain = imported.recall({"session": SSE, "scope": "session", "entry_ids": ["4a107d51"]})["results"][0]["body"]
    with_thinking = imported.recall(
        {"session": SSE, "scope": "session", "entry_ids": ["4a107d51"], "include_thinking": True}
    )["results"][0]["body"]
    assert "[thinking:" in plain and "[thinking]\n" in with_thinking
    # words only a thinking block holds are not searched, in any scope
    assert not imported.recall({"session": SSE, "scope": "session", "query": "incidents"})["results"]
    assert imported.recall({"session": SSE, "scope": "session", "query": "SSE"})["results"]


def test_output_stays_within_16k_and_names_what_was_left_out(imported: Archive) -> None:
    found = imported.recall(
        {"session": LONG, "scope": "session", "action": "list", "raw": True, "raw_limit": 12000, "limit": 30}
    )
    text = found["text"]
    assert text.startswith(EVIDENCE_HEADER) and len(text) <= RECALL_MAX_CHARS
    assert found["omitted"] and "left out" in text and all(i in text for i in found["omitted"])
    assert len(json.dumps(found["results"], ensure_ascii=False)) < 2 * RECALL_MAX_CHARS


def test_many_ids_in_raw_are_whole_entries_or_named(imported: Archive) -> None:
    found = imported.recall(
        {
            "session": LONG,
            "scope": "session",
            "entry_ids": ["80b093f0", "c66606fd", "c18b8b77"],
            "raw": True,
            "raw_limit": 12000,
        }
    )
    shown = ids(found)
    assert len(found["text"]) <= RECALL_MAX_CHARS and set(shown) | set(found["omitted"]) == {
        "c18b8b77",
        "80b093f0",
        "c66606fd",
    }
    for item in found["results"]:
        assert item["body"] == source_line(LONG_FILE, item["entry_id"])[: item["total_chars"]][: len(item["body"])]


@pytest.mark.parametrize(
    "query",
    [
        '"unterminated',
        "nginx AND OR NEAR(",
        "chars: grams:",
        "*",
        "^",
        "a\x00b",
        "(((",
        "'; DROP TABLE msg; --",
        "x" * 1000,
    ],
)
def test_hostile_queries_are_just_text(imported: Archive, query: str) -> None:
    found = imported.recall({"session": SSE, "scope": "session", "query": query})
    assert isinstance(found["results"], list) and found["text"].startswith(EVIDENCE_HEADER)
    assert imported.stats().messages > 0


def test_a_query_over_the_length_cap_is_one_clear_refusal(imported: Archive) -> None:
    with pytest.raises(BadInput, match="the query is 5000 characters long: at most 1000"):
        imported.recall({"session": SSE, "scope": "session", "query": "x" * 5000})


# --- the CLI -------------------------------------------------------------------------------


def test_recall_cli_reads_the_branch_from_the_session_file(archive_target: str) -> None:
    with Archive.open(archive_target) as archive:
        archive.import_paths([PI_DATA])
    runner = CliRunner()
    out = runner.invoke(
        cli, ["--db", archive_target, "recall", "--session", SSE[:13], "--branch-ids", str(SSE_FILE), "heartbeat"]
    )
    assert out.exit_code == 0 and out.output.startswith(EVIDENCE_HEADER)
    assert "[4a107d51]" in out.output and "a35c822d" not in out.output
    raw = runner.invoke(
        cli,
        [
            "--db",
            archive_target,
            "recall",
            "--session",
            SSE,
            "--scope",
            "session",
            "--entry-ids",
            "78092ca6",
            "--raw",
            "--json",
        ],
    )
    data = json.loads(raw.stdout)
    assert data["results"][0]["body_format"] == "raw" and "text" not in data
    bad = runner.invoke(cli, ["--db", archive_target, "recall", "--session", SSE, "--kind", "user"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output and "query" in bad.output


def test_branch_scope_of_a_fork_reaches_the_entries_copied_from_its_parent(imported: Archive, tmp_path: Path) -> None:
    # pi's /fork writes a new file whose header names the parent file and copies the branch's entries
    lines = SSE_FILE.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0]) | {"id": "01a2364c-fork-7000-8000-000000000001", "parentSession": str(SSE_FILE)}
    keep = set(branch_ids(SSE_FILE)[: branch_ids(SSE_FILE).index("c36e4a87") + 1])
    copied = [line for line in lines[1:] if json.loads(line).get("id") in keep]
    new = {
        "type": "message",
        "id": "f0f0f0f0",
        "parentId": "c36e4a87",
        "timestamp": "2026-12-02T11:00:00.000Z",
        "message": {"role": "user", "content": "fork: try websockets instead", "timestamp": 1796209200000},
    }
    fork = tmp_path / "2026-12-02T11-00-00-000Z_01a2364c-fork-7000-8000-000000000001.jsonl"
    fork.write_text("\n".join([json.dumps(header), *copied, json.dumps(new)]) + "\n", encoding="utf-8")
    imported.import_paths([fork])
    params = {"session": header["id"], "branch_ids": branch_ids(fork)}
    assert ids(imported.recall(params | {"query": "heartbeat"})) == ["4a107d51"]  # stored under the parent
    assert ids(imported.recall(params | {"query": "websockets"})) == ["f0f0f0f0"]
    own = imported.recall({"session": header["id"], "scope": "session", "action": "list", "limit": 30})
    assert "4a107d51" not in ids(own) and "f0f0f0f0" in ids(own)


def test_summary_action_reads_the_newest_summary_on_the_branch_in_full(imported: Archive) -> None:
    found = on_branch(imported, action="summary")
    assert found["action"] == "summary" and ids(found) == ["0537094e"]
    assert found["results"][0]["body_format"] == "text" and "𠮷 survives compaction" in found["results"][0]["body"]
    searched = on_branch(imported, action="summary_search", query="abandoned")
    assert ids(searched) == ["56b476a0"] and searched["results"][0]["source_class"] == "derived"


def test_tool_result_kind_includes_failed_tool_calls(imported: Archive) -> None:
    found = imported.recall({"session": LONG, "scope": "session", "kind": "tool_result", "query": "gzip"})
    assert ids(found) == ["f010c6b2"] and found["results"][0]["role"] == "tool_error"


def test_bridge_recall_takes_session_and_branch_from_the_host_not_the_model(imported: Archive) -> None:
    from pi_memory.frontends.tools.recall import RECALL_TOOL_SPEC, bridge_recall

    json.dumps(RECALL_TOOL_SPEC)
    model_args = {"query": "heartbeat", "session_id": LONG, "branch_ids": sorted(ABANDONED)}
    answer = bridge_recall(imported, {"session_id": SSE, "branch_ids": branch_ids(SSE_FILE), "args": model_args})
    assert answer["result"]["scope"] == "branch" and ids(answer["result"]) == ["4a107d51"]
    assert answer["text"].startswith(EVIDENCE_HEADER)
    with pytest.raises(BadInput, match="branch_ids"):  # no lineage from the host: refused, not widened
        bridge_recall(imported, {"session_id": SSE, "branch_ids": [], "args": {"query": "heartbeat"}})


def test_when_the_index_finds_nothing_in_a_session_the_newest_records_are_scanned(
    imported: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the index's tracks are bounded (rare postings budget, recent rowid window): simulate an old session,
    # too long to be scored whole
    import pi_memory.search.messages as search
    import pi_memory.search.pg as pg_search

    indexed = on_branch(imported, query="Last-Event-ID", kind="assistant")
    monkeypatch.setattr(search, "RARE_POSTINGS_BUDGET", 0)
    monkeypatch.setattr(search, "RECENT_WINDOW", 0)
    monkeypatch.setattr(search, "SCOPE_SCORED_WHOLE", 0)
    monkeypatch.setattr(pg_search, "PG_RARE_POSTINGS_BUDGET", 0)
    monkeypatch.setattr(pg_search, "PG_RECENT_WINDOW", 0)
    assert not imported.search("Last-Event-ID", session=SSE)
    found = on_branch(imported, query="Last-Event-ID", kind="assistant")
    assert set(ids(found)) == set(ids(indexed)) == {"a9ca8037", "75a684c5"}
    assert ids(found) == ["a9ca8037", "75a684c5"]  # newest first
    assert all("⟦" in r["snippet"] for r in found["results"])


@pytest.mark.parametrize(
    ("path", "session"),
    [(SSE_FILE, SSE), (PI_DATA / "pi-1.6.0-sse-stream-mixed.jsonl", "01a2364c-8bc4-729b-b5d9-c54d6aa2dbdd")],
)
def test_branch_and_session_scopes_on_both_pi_lines(imported: Archive, path: Path, session: str) -> None:
    on = set(branch_ids(path))
    everything = imported.recall({"session": session, "scope": "session", "action": "list", "limit": 30})
    branch = imported.recall({"session": session, "branch_ids": sorted(on), "action": "list", "limit": 30})
    assert set(ids(branch)) == set(ids(everything)) & on
    assert set(ids(everything)) - on  # the abandoned branch is archived, and only the session scope shows it
    hits = imported.recall({"session": session, "branch_ids": sorted(on), "query": "heartbeat nginx"})
    assert hits["results"] and set(ids(hits)) <= on
