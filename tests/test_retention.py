"""`doctor`: Claude Code's cleanup period against what the archive already holds."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from click.testing import CliRunner

from pi_memory import Archive
from pi_memory.frontends.cli.main import cli
from pi_memory.ingest.retention import ClaudeFile, cleanup_period, retention_advice

DATA = Path(__file__).parent / "data" / "claude" / "daaain-claude-code-log"


def _old_claude_session(home: Path, days: float) -> Path:
    folder = home / ".claude" / "projects" / "-tmp"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "s1.jsonl"
    shutil.copy(DATA / "dag_compact_after_rewind.jsonl", path)
    then = time.time() - days * 86_400
    os.utime(path, (then, then))
    return path


def test_cleanup_period_defaults_to_30_when_unset_or_unreadable(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    assert cleanup_period(settings) == (30, True)
    settings.write_text("{not json")
    assert cleanup_period(settings) == (30, True)
    settings.write_text(json.dumps({"cleanupPeriodDays": 365}))
    assert cleanup_period(settings) == (365, False)


def test_old_unarchived_sessions_are_at_risk_and_the_advice_says_how_to_keep_them() -> None:
    files = [
        ClaudeFile("/a.jsonl", 25.0, False),
        ClaudeFile("/b.jsonl", 3.0, False),
        ClaudeFile("/c.jsonl", 28.0, True),
    ]
    advice = retention_advice("/s.json", 30, True, files)
    assert advice.at_risk == ["/a.jsonl"] and advice.unarchived == 2
    assert len(advice.warnings) == 1
    assert "pi-memory import --agent claude" in advice.warnings[0] and "pi-memory watch" in advice.warnings[0]


def test_a_default_period_warns_even_when_everything_is_archived() -> None:
    advice = retention_advice("/s.json", 30, True, [ClaudeFile("/a.jsonl", 25.0, True)])
    assert advice.at_risk == [] and "after 30 days" in advice.warnings[0]
    assert retention_advice("/s.json", 365, False, [ClaudeFile("/a.jsonl", 25.0, True)]).warnings == []
    assert retention_advice("/s.json", 30, True, []).warnings == []


def test_doctor_sees_an_old_session_until_it_is_imported(archive: Archive, isolated_home: Path) -> None:
    path = _old_claude_session(isolated_home, 25)
    advice = archive.doctor()
    assert advice.at_risk == [str(path)] and advice.cleanup_is_default
    archive.import_paths(agent="claude")
    advice = archive.doctor()
    assert advice.at_risk == [] and advice.unarchived == 0
    assert "cleanupPeriodDays is at its default" in advice.warnings[0]


def test_doctor_command_prints_warnings_and_json(archive_target: str, isolated_home: Path) -> None:
    _old_claude_session(isolated_home, 25)
    (isolated_home / ".claude" / "settings.json").write_text(json.dumps({"cleanupPeriodDays": 30}))
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 0 and "warning: 1 Claude Code session file(s)" in result.output
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    data = json.loads(result.stdout)
    assert data["cleanup_days"] == 30 and data["files"] == 1 and len(data["at_risk"]) == 1
