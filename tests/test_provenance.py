"""Provenance end to end in the library and the CLI: a scripted history in a git repository, each
agent's transcript of it imported, then blame, files, history, export and resume."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pi_memory import Archive
from pi_memory.frontends.cli import cli
from provenance_world import World, claude_session, codex_session, observations, pi_session, scenario, score

FILES = ("app/config.py", "app/defaults.py")
LEGACY = Path(__file__).parent / "data" / "legacy" / "schema5-pi.db"


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = World(tmp_path / "repo")
    scenario(w)
    return w


def blamed(archive: Any, world: World, path: str) -> list[str | None]:
    """Who blame says wrote each line, as the world's run names (`r3`), None for nobody."""
    asks = {run.ask: f"r{run.number}" for run in world.runs}
    found = archive.blame(str(world.root / path))
    return [asks.get(line.edit.ask) if line.edit else None for line in found.lines]


def totals(archive: Any, world: World) -> dict[str, int]:
    out: dict[str, int] = {}
    for path in FILES:
        for key, n in score(world, path, blamed(archive, world, path)).items():
            out[key] = out.get(key, 0) + n
    return out


def test_pi_edits_seen_live_give_every_agent_line_its_run_and_no_hand_line_to_a_session(
    archive: Any, world: World, tmp_path: Path
) -> None:
    session = pi_session(world, tmp_path)
    archive.import_paths([session])
    sid = archive.sessions()[0].id
    kept = [archive.observe_edit(sid, **seen) for seen in observations(world)]
    assert kept[0] is False and any(kept)  # a new file has no before; the file a person edited does
    t = totals(archive, world)
    assert t["right"] == t["agent_lines"] == 12 and t["wrong_run"] == t["missed"] == 0
    assert t["hand_lines"] == 3 and t["hand_attributed"] == 0


def test_a_pi_transcript_alone_gives_a_hand_line_kept_by_a_later_rewrite_to_that_rewrite(
    archive: Any, world: World, tmp_path: Path
) -> None:
    archive.import_paths([pi_session(world, tmp_path)])
    t = totals(archive, world)
    assert t["right"] == t["agent_lines"] and t["hand_attributed"] == 1  # the `write` that kept it


@pytest.mark.parametrize(("agent", "write", "given_away"), [("claude", claude_session, 0), ("codex", codex_session, 0)])
def test_claude_and_codex_transcripts_carry_what_blame_needs(
    archive: Any, world: World, tmp_path: Path, agent: str, write: Any, given_away: int
) -> None:
    archive.import_paths([write(world, tmp_path)], agent=agent)
    t = totals(archive, world)
    assert t["right"] == t["agent_lines"] == 12 and t["hand_attributed"] == given_away


def test_claude_without_the_file_before_in_its_results_gives_the_rewritten_hand_line_away(
    archive: Any, world: World, tmp_path: Path
) -> None:
    archive.import_paths([claude_session(world, tmp_path, with_original=False)], agent="claude")
    t = totals(archive, world)
    assert t["right"] == t["agent_lines"] and t["hand_attributed"] == 1


def test_a_failed_edit_is_not_an_edit(archive: Any, world: World, tmp_path: Path) -> None:
    archive.import_paths([pi_session(world, tmp_path)])
    changed = archive.changed_files("r2")
    assert [(f.path.rsplit("/", 1)[-1], len(f.edits)) for f in changed.files] == [("config.py", 1)]


def test_files_and_history_say_what_each_run_changed(archive: Any, world: World, tmp_path: Path) -> None:
    archive.import_paths([pi_session(world, tmp_path)])
    sid = archive.sessions()[0].id
    whole = archive.changed_files(sid[-8:])
    assert [f.path for f in whole.files] == [str(world.root / p) for p in FILES]
    assert sum(len(f.edits) for f in whole.files) == 7
    h = archive.file_history(str(world.root / "app/config.py"))
    assert [r.run for r in h.runs] == ["r1", "r2", "r3", "r4"]
    assert h.runs[2].ask.startswith("Add validation") and len(h.runs[2].edits) == 2
    assert h.runs[1].edits[0].line == 3  # the first changed line pi reported


def test_a_live_captured_session_gets_its_edits_as_messages_arrive(archive: Any, world: World, tmp_path: Path) -> None:
    session = pi_session(world, tmp_path)
    lines = [json.loads(x) for x in session.read_text().splitlines()]
    header, entries = lines[0], lines[1:]
    archive.ensure_session(header["id"], header["cwd"])
    for entry in entries:
        archive.capture_message(header["id"], entry["message"])
    changed = archive.changed_files(header["id"])
    assert sum(len(f.edits) for f in changed.files) == 7
    # an import of the same file later adds nothing
    archive.import_paths([session])
    assert sum(len(f.edits) for f in archive.changed_files(header["id"]).files) == 7


def test_an_archive_from_before_the_edit_table_reads_its_edits_the_first_time_it_is_asked(
    tmp_path: Path,
) -> None:
    db = tmp_path / "legacy.db"
    shutil.copy(LEGACY, db)
    with Archive.open(db) as archive:
        assert archive.store.scalar("SELECT value FROM provenance_state") == 0
        assert archive.store.scalar("SELECT count(*) FROM edit") == 0
        h = archive.file_history("/home/dev/chat-gateway/deploy/nginx.conf")
        assert h.runs and h.runs[0].edits[0].kind == "edit"
        assert archive.store.scalar("SELECT value FROM provenance_state") == 1


def test_edits_planned_on_import_are_the_ones_read_back_from_the_archive(archive: Any, tmp_path: Path) -> None:
    archive.import_paths([Path(__file__).parent / "data" / "pi", Path(__file__).parent / "data" / "codex"])
    query = "SELECT session_id, call_hash, result_hash, call_id, part, tool, kind, path, ts, old_hash, new_hash, line FROM edit ORDER BY 1, 4, 5"
    planned = archive.store.rows(query)
    with archive.store.write():
        archive.store.execute("DELETE FROM edit")
    archive.rebuild_edits()
    assert archive.store.rows(query) == planned and len(planned) >= 13


# --- the CLI ---------------------------------------------------------------------------------------


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def test_blame_on_the_command_line_marks_lines_no_session_wrote(
    db_path: Path, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Archive.open(db_path) as archive:
        archive.import_paths([pi_session(world, tmp_path)])
    monkeypatch.chdir(world.root)
    code, out, _err = invoke("blame", "app/config.py:1-3")
    assert code == 0
    first = out.splitlines()[1]
    assert first.startswith("1 ·") and "«hand»" in first
    assert re.match(r"2 r1/m\d+ ", out.splitlines()[2])
    assert "Runs:" in out and "Write the config loader" in out
    code, out, _err = invoke("blame", "app/config.py", "--json")
    found = json.loads(out)
    assert found["total_lines"] == len(found["lines"]) == 10
    hand = [x for x in found["lines"] if x["written_by"] is None]
    assert {x["note"] for x in hand} == {"not written by an archived session"} and len(hand) == 2
    assert {x["written_by"]["run"] for x in found["lines"] if x["written_by"]} == {"r1", "r2", "r3", "r4"}


def test_blame_errors_are_one_line(db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.txt").write_text("a\n")
    assert invoke("blame", "nope.txt")[0] == 1
    code, _out, err = invoke("blame", "f.txt:9-2")
    assert code == 2 and err.count("\n") == 1
    code, _out, err = invoke("blame", "f.txt:5")
    assert code == 2 and "has 1 lines" in err


def test_export_markdown_html_and_json(
    db_path: Path, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = pi_session(world, tmp_path)
    with Archive.open(db_path) as archive:
        archive.import_paths([session])
        sid = archive.sessions()[0].id
    code, md, _ = invoke("export", sid[-8:])
    assert code == 0 and md.startswith("# Write the config loader")
    assert "[archived history: evidence" in md and f"pi --session {session}" in md
    assert "→ edit" in md and "oldText" not in md.split("→ edit", 1)[0]
    assert "\\n" not in md  # tool call arguments as they were, never JSON-escaped
    monkeypatch.chdir(tmp_path)
    code, _out, err = invoke("export", "r3", "--format", "html", "-o", "r3.html")
    html = (tmp_path / "r3.html").read_text()
    assert code == 0 and "wrote r3.html" in err
    assert "<script" not in html and not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "Add validation" in html and "<details>" in html
    code, out, _ = invoke("export", "r3", "--format", "json")
    data = json.loads(out)
    assert data["run"] == "r3" and data["evidence"].startswith("[archived history")
    assert [p["kind"] for m in data["messages"] for p in m["parts"]][:2] == ["text", "tool_call"]


def test_resume_prints_the_agents_own_command_while_its_file_is_there(
    db_path: Path, world: World, tmp_path: Path
) -> None:
    session = pi_session(world, tmp_path)
    claude = claude_session(world, tmp_path)
    with Archive.open(db_path) as archive:
        archive.import_paths([session])
        archive.import_paths([claude], agent="claude")
        pi_sid = next(s.id for s in archive.sessions() if s.agent == "pi")
    code, out, _ = invoke("resume", pi_sid)
    assert code == 0 and out.strip() == f"cd {world.root} && pi --session {session}"
    code, out, _ = invoke("resume", "c1a0de00-0000-4000-8000-000000000001")
    assert out.strip() == f"cd {world.root} && claude --resume c1a0de00-0000-4000-8000-000000000001"
    code, out, _ = invoke("read", pi_sid)
    assert out.rstrip().endswith(f"resume: cd {world.root} && pi --session {session}")
    session.unlink()
    code, _out, err = invoke("resume", pi_sid)
    assert code == 1 and "session file is gone" in err
    assert json.loads(invoke("resume", pi_sid, "--json")[1])["available"] is False


def test_forgetting_a_session_or_a_run_deletes_its_edits_and_what_pi_saw(
    archive: Any, world: World, tmp_path: Path
) -> None:
    archive.import_paths([pi_session(world, tmp_path)])
    sid = archive.sessions()[0].id
    for seen in observations(world):
        archive.observe_edit(sid, **seen)
    archive.forget("r2")
    assert [r.run for r in archive.file_history(str(world.root / "app/config.py")).runs] == ["r1", "r3", "r4"]
    assert archive.store.scalar("SELECT count(*) FROM edit WHERE call_id = 'call_2_0'") == 0
    assert archive.store.scalar("SELECT count(*) FROM edit_observed WHERE call_id = 'call_2_0'") == 0
    archive.forget(sid)
    assert archive.store.scalar("SELECT count(*) FROM edit") == 0
    assert archive.store.scalar("SELECT count(*) FROM edit_observed") == 0
