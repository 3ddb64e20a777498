"""Two-track search: run summaries (one line per run) vs message content, with kind, path and session filters."""

from __future__ import annotations

from pathlib import Path

import pytest

from pi_memory import Archive
from pi_memory.archive.runview import format_summary_hits
from pi_memory.core.format import EVIDENCE_HEADER
from pi_memory.errors import BadInput
from pi_memory.search.messages import Hit
from pi_memory.search.runs import RunHit
from test_search import write_session

VUE = "01a2364c-1ceb-71c5-bb77-67f902437018"
SSE = "01a2364c-47af-74be-8d7c-46780d07ec0e"


def run_hits(archive: Archive, query: str, **kw: object) -> list[RunHit]:
    hits = archive.search(query, scope="summary", limit=50, **kw)  # type: ignore[arg-type]
    assert all(isinstance(h, RunHit) for h in hits)
    return hits  # type: ignore[return-value]


def msg_hits(archive: Archive, query: str, **kw: object) -> list[Hit]:
    hits = archive.search(query, limit=50, **kw)  # type: ignore[arg-type]
    assert all(isinstance(h, Hit) for h in hits)
    return hits  # type: ignore[return-value]


def test_summary_track_returns_one_hit_per_run(imported: Archive) -> None:
    hits = run_hits(imported, "nginx heartbeat")
    assert hits
    assert len({h.run.id for h in hits}) == len(hits)
    best = hits[0]
    assert best.run.project == "chat-gateway"
    assert "heartbeat" in best.run.summary
    assert set(best.to_dict()) >= {"run", "session_id", "start_ts", "project", "summary"}
    assert best.to_dict()["run"].startswith("r")


def test_summary_track_finds_chinese_goals_and_changed_files(imported: Archive) -> None:
    assert run_hits(imported, "响应式说明")[0].run.fields["files_changed"][0]["text"] == "docs/响应式说明.md"
    assert "购物车" in run_hits(imported, "购物车 角标")[0].run.summary


def test_summary_track_output_is_one_line_per_run(imported: Archive) -> None:
    hits = run_hits(imported, "reactive")
    text = format_summary_hits(hits, "reactive", evidence=True)
    lines = text.splitlines()
    assert lines[0] == EVIDENCE_HEADER
    assert len(lines) == len(hits) + 2  # header, one per run, the hint how to read one
    assert all(line.startswith("r") for line in lines[1:-1])


def test_content_track_is_the_default_and_unchanged(imported: Archive) -> None:
    hits = msg_hits(imported, "proxy_read_timeout")
    assert hits and all(h.msg_id for h in hits)
    assert msg_hits(imported, "proxy_read_timeout", scope="content") == hits


def test_kind_filter_selects_tool_calls_errors_users_and_summaries(imported: Archive) -> None:
    calls = msg_hits(imported, "CartBadge", kinds=["tool_call"])
    assert calls and all(h.role == "assistant" and "→ " in h.text for h in calls)
    errors = msg_hits(imported, "legacy.js", kinds=["tool_error"])
    assert errors and all(h.role == "tool_error" for h in errors)
    users = msg_hits(imported, "legacy.js", kinds=["user"])
    assert users and all(h.role == "user" for h in users)
    both = msg_hits(imported, "legacy.js", kinds=["user", "tool_error"])
    assert len(both) == len(users) + len(errors)
    summaries = msg_hits(imported, "summary", kinds=["summary"])
    assert summaries and all(h.role == "summary" for h in summaries)


def test_path_filter_finds_messages_and_runs_that_touched_a_file(imported: Archive) -> None:
    touched = msg_hits(imported, "cart", path="src/components/CartBadge.vue")
    assert touched and all("CartBadge.vue" in h.text for h in touched)
    assert msg_hits(imported, "cart", path="CartBadge.vue") == touched  # a file name matches its full path
    assert not msg_hits(imported, "cart", path="deploy/nginx.conf")
    runs = run_hits(imported, "reactive", path="CartBadge.vue")
    assert runs and all(
        any(f["text"].endswith("CartBadge.vue") for f in h.run.fields["files_read"] + h.run.fields["files_changed"])
        for h in runs
    )


def test_kind_filter_in_the_summary_track_keeps_runs_holding_such_messages(imported: Archive) -> None:
    runs = run_hits(imported, "reactive", kinds=["tool_error"])
    assert runs and all(h.run.tool_errors > 0 for h in runs)
    assert len(runs) < len(run_hits(imported, "reactive"))


def test_session_filter_applies_to_both_tracks(imported: Archive) -> None:
    assert {h.run.session_id for h in run_hits(imported, "nginx", session=SSE[:13])} == {SSE}
    assert {h.session_id for h in msg_hits(imported, "nginx", session=SSE[:13])} == {SSE}


def test_bad_scope_and_kind_are_clear_errors(imported: Archive) -> None:
    with pytest.raises(BadInput, match="unknown scope"):
        imported.search("x", scope="everything")
    with pytest.raises(BadInput, match="unknown kind"):
        imported.search("x", kinds=["tool"])


def test_a_query_of_operators_is_just_text_in_the_summary_track(imported: Archive) -> None:
    for query in ('"', "AND OR NOT", "chars:x", "*", "^", "\x00", ""):
        run_hits(imported, query)  # no exception


def test_an_old_run_is_found_by_its_rare_word_and_common_words_look_at_the_newest_runs(
    archive: Archive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pi_memory.search.runs as runsearch

    folder = tmp_path / "many"
    folder.mkdir()
    for k in range(20):
        rare = " oldrareword" if k == 0 else ""
        write_session(folder / f"{k:02d}.jsonl", f"run{k:05d}-0001", "/w/p", [f"部署 step {k}{rare}", f"done {k}"])
    monkeypatch.setattr(runsearch, "RARE_RUN_POSTINGS", 3)  # 部署 (20 runs) is common, oldrareword rare
    monkeypatch.setattr(runsearch, "RECENT_RUN_CANDIDATES", 5)
    archive.import_paths([folder])
    (old,) = archive.search("oldrareword", scope="summary")
    assert old.run.session_id == "run00000-0001"  # the oldest run
    both = archive.search("部署 oldrareword", scope="summary", limit=50)
    assert both[0].run.session_id == "run00000-0001"  # the rare word decides, though the run is old
    common = archive.search("部署", scope="summary", limit=50)
    assert {h.run.session_id for h in common} == {f"run{k:05d}-0001" for k in range(15, 20)}
    (in_session,) = archive.search("部署", scope="summary", session="run00002-0001")
    assert in_session.run.session_id == "run00002-0001"  # the filter applies while candidates are chosen


def test_a_project_filter_on_runs_starts_from_the_project_s_sessions_not_every_run(tmp_path: Path) -> None:
    # `s.project = ? OR s.cwd = ?`: both columns indexed, or SQLite reads every run to apply it
    from pi_memory.runs.table import run_filters

    clauses, params = run_filters("demo", None, None)
    sql = f"SELECT r.id FROM run r JOIN session s ON s.id = r.session_id WHERE {' AND '.join(clauses)}"
    with Archive.open(tmp_path / "a.db") as archive:
        plan = " | ".join(str(row[3]) for row in archive.store.rows(f"EXPLAIN QUERY PLAN {sql}", params))
    assert "session_cwd" in plan and "session_project" in plan, plan
    assert "SCAN r" not in plan, plan
