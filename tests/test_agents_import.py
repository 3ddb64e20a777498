"""Importing Claude Code and Codex sessions into the archive: defaults, --agent, idempotence, filters."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from click.testing import CliRunner

from conftest import python_cli
from pi_memory import Archive
from pi_memory.frontends.cli.main import cli

DATA = Path(__file__).parent / "data"
CLAUDE_DATA = DATA / "claude" / "daaain-claude-code-log"
CODEX_DATA = DATA / "codex" / "daaain-claude-code-log"


def _install_agent_folders(home: Path) -> None:
    """Lay the fixtures out where each agent keeps them (the env vars point under home)."""
    shutil.copytree(DATA / "pi" / "agent-dir" / "sessions", home / ".pi" / "agent" / "sessions")
    shutil.copytree(CLAUDE_DATA / "minimal_showcase", home / ".claude" / "projects" / "-workspace-example-app")
    shutil.copytree(CODEX_DATA / "sessions", home / ".codex" / "sessions")
    shutil.copytree(CODEX_DATA / "archived_sessions", home / ".codex" / "archived_sessions")


def _agents(archive: Archive) -> dict[str, int]:
    return {str(a): int(n) for a, n in archive.store.rows("SELECT agent, count(*) FROM session GROUP BY agent")}


def test_import_with_no_path_reads_every_agent_folder_that_exists(archive: Archive, isolated_home: Path) -> None:
    _install_agent_folders(isolated_home)
    report = archive.import_paths()
    assert report.errors == []
    assert _agents(archive) == {"pi": 3, "claude": 5, "codex": 5}
    subagent = archive.session_info("55550000-0000-4000-8000-000000000001/agent-showcol1")
    assert subagent.name == "general-purpose: Survey the web module" and subagent.agent == "claude"


def test_agent_option_limits_the_default_folders(archive: Archive, isolated_home: Path) -> None:
    _install_agent_folders(isolated_home)
    archive.import_paths(agent="codex")
    assert _agents(archive) == {"codex": 5}


def test_reimporting_claude_and_codex_adds_nothing(archive: Archive) -> None:
    first = archive.import_paths([CLAUDE_DATA, CODEX_DATA])
    assert first.added > 40 and first.errors[0].line == 3  # the malformed codex line
    again = archive.import_paths([CLAUDE_DATA, CODEX_DATA], force=True)
    assert again.added == 0 and again.skipped > 0
    messages = archive.stats().messages
    archive.import_paths([CLAUDE_DATA, CODEX_DATA], force=True)
    assert archive.stats().messages == messages


def test_a_forked_codex_thread_does_not_duplicate_its_replayed_parent_lines(archive: Archive) -> None:
    archive.import_paths([CODEX_DATA / "sessions" / "2026" / "01" / "03"])
    counts = dict(archive.store.rows("SELECT session_id, count(*) FROM msg GROUP BY session_id"))
    assert counts["22222222-2222-4222-8222-222222222222"] == 3
    assert counts["33333333-3333-4333-8333-333333333333"] == 2  # only the child's own turn


def test_search_can_filter_by_agent(archive: Archive) -> None:
    archive.import_paths([CLAUDE_DATA, CODEX_DATA, DATA / "pi"])
    codex_session = "11111111-1111-4111-8111-111111111111"
    assert codex_session in {h.session_id for h in archive.search("synthetic files alpha")}
    for agent in ("claude", "codex", "pi"):
        hits = archive.search("synthetic files alpha scheduled jobs", agent=agent)
        assert {archive.session_info(h.session_id).agent for h in hits} <= {agent}
    assert codex_session in {h.session_id for h in archive.search("synthetic files alpha", agent="codex")}
    assert codex_session not in {h.session_id for h in archive.search("synthetic files alpha", agent="claude")}


def test_successful_tool_output_is_stored_but_not_searchable(archive: Archive) -> None:
    archive.import_paths([CODEX_DATA])
    assert not archive.search("beta.txt alpha.txt find maxdepth", roles=["tool_result"])
    window = archive.read("11111111-1111-4111-8111-111111111111", before=20)
    assert any(m.role == "tool_result" and "./beta.txt" in m.text for m in window.messages)


def test_cli_import_and_search_take_an_agent_option(db_path: Path, isolated_home: Path) -> None:
    _install_agent_folders(isolated_home)
    runner = CliRunner()
    result = runner.invoke(cli, ["import", "--agent", "claude", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sessions"] == 5
    result = runner.invoke(cli, ["search", "column layout", "--agent", "claude", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["hits"]
    result = runner.invoke(cli, ["search", "column layout", "--agent", "codex", "--json"])
    assert json.loads(result.stdout)["hits"] == []


def test_import_with_no_agent_folders_says_where_it_looked(db_path: Path) -> None:
    result = subprocess.run([*python_cli(), "import"], capture_output=True, text=True)
    assert result.returncode == 1
    assert "no agent session folders found" in result.stderr and ".claude" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_explicit_file_is_sniffed_whatever_its_name(archive: Archive, tmp_path: Path) -> None:
    odd = tmp_path / "whatever.jsonl"
    shutil.copy(CLAUDE_DATA / "dag_compact_after_rewind.jsonl", odd)
    archive.import_paths([odd])
    assert archive.session_info("s1").agent == "claude"
    roles = [m.role for m in archive.read("s1", before=50).messages]
    assert roles.count("summary") == 1 and len(roles) == 11  # 12 lines, the boundary is not a message


def test_sessions_lists_newest_first_and_filters_by_agent(archive: Archive) -> None:
    archive.import_paths([CLAUDE_DATA, CODEX_DATA])
    listed = archive.sessions(limit=100)
    assert [s.last_at for s in listed] == sorted((s.last_at for s in listed), reverse=True)
    assert {s.agent for s in listed} == {"claude", "codex"}
    codex_only = archive.sessions(agent="codex")
    assert codex_only and {s.agent for s in codex_only} == {"codex"}
    child = next(s for s in listed if s.id.endswith("/agent-showcol2"))
    assert child.parent_session == "55550000-0000-4000-8000-000000000001" and child.messages == 4


def test_sessions_command_prints_one_line_per_session(db_path: Path) -> None:
    runner = CliRunner()
    runner.invoke(cli, ["import", str(CODEX_DATA)])
    result = runner.invoke(cli, ["sessions", "--agent", "codex"])
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 6 and all("codex" in line for line in lines)
    assert json.loads(runner.invoke(cli, ["sessions", "--json", "--limit", "2"]).stdout)[0]["agent"] == "codex"
