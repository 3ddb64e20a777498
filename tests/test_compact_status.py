"""`pi-memory status`: settings in effect and where from, archive size, the last compaction; read-only."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner

from conftest import PI_DATA, python_cli
from pi_memory import Archive
from pi_memory.frontends.cli.main import cli
from test_compact_plan import busy_session
from test_compact_window import SID, commit


def test_status_reports_defaults_and_no_compaction(archive: Archive, tmp_path: Path) -> None:
    st = archive.compact_status(tmp_path).to_dict()
    assert st["settings"]["source"] == "defaults" and st["takeover"] is True
    assert st["last_compaction"] is None and st["windows"] == 0 and st["chain_ok"]
    assert st["archive"]["messages"] == 0


def test_status_shows_the_last_compaction_stats(archive: Archive, tmp_path: Path) -> None:
    archive.import_paths([PI_DATA])
    b = busy_session(2)
    entry = commit(b, b.user("next"), reason="threshold")
    archive.compact_committed(SID, entry, b.entries)
    st = archive.compact_status(tmp_path).to_dict()
    last = st["last_compaction"]
    assert last["reason"] == "threshold" and last["source_count"] == 16
    assert last["checkpoint_chars"] == len(entry["summary"]) and last["plan_ms"] is not None
    assert st["windows"] == 1 and st["archive"]["messages"] > 50


def test_status_cli_json_reports_a_broken_project_file(archive_target: str, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".pi").mkdir(parents=True)
    (project / ".pi" / "pi-memory.json").write_text("{nope")
    result = CliRunner().invoke(cli, ["--db", archive_target, "status", "--cwd", str(project), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["settings"]["source"] == "defaults" and "broken JSON" in out["settings"]["notes"][0]
    assert out["settings"]["values"]["summaryMaxChars"] == 12000


def test_status_text_names_the_settings_source_and_the_last_compaction(archive_target: str, tmp_path: Path) -> None:
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "pi-memory.json").write_text('{"summaryMaxChars": 999999}')
    with Archive.open(archive_target) as archive:
        b = busy_session(1)
        archive.compact_committed(SID, commit(b, b.user("x"), reason="overflow"), b.entries)
    result = subprocess.run(
        [*python_cli(), "status", "--cwd", str(tmp_path)], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "from project file" in result.stdout and "100000 chars" in result.stdout
    assert "note: summaryMaxChars: 999999 is outside" in result.stdout
    assert (
        "reason overflow" in result.stdout
        and "8 records compacted" in result.stdout
        and "hash chain ok" in result.stdout
    )


def test_status_for_an_unknown_session_is_a_one_line_error(archive_target: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--db", archive_target, "status", "--cwd", str(tmp_path), "--session", "zzzzzzzzzz"]
    )
    assert result.exit_code != 0 and "no session matches" in result.output and "Traceback" not in result.output
