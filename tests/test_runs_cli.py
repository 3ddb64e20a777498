"""The CLI for runs: runs, show, read rN / rN/mK, search --scope, forget."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from conftest import PI_DATA, python_cli
from pi_memory.frontends.cli.main import cli

LONG_FILE = PI_DATA / "pi-0.73.1-long-output-en.jsonl"


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def imported(archive_target: str) -> None:
    run("import", str(PI_DATA))


def newest_run(session_prefix: str) -> dict[str, object]:
    runs = json.loads(run("runs", "--session", session_prefix, "--json"))["runs"]
    return dict(runs[-1])  # the session's first run


def test_runs_lists_recent_runs_with_summaries(archive_target: str) -> None:
    imported(archive_target)
    out = run("runs", "--project", "vue-shop", "--limit", "3")
    lines = out.splitlines()
    assert len(lines) == 3
    assert all(line.startswith("r") and " vue-shop " in line and " · " in line for line in lines)
    data = json.loads(run("runs", "--since", "2026-12-01", "--limit", "100", "--json"))
    assert len(data["runs"]) == 32
    assert {"run", "status", "summary", "tool_calls", "tool_errors", "fields"} <= set(data["runs"][0])
    assert run("runs", "--since", "2027-01-01") == "No runs.\n"


def test_runs_rebuild_reports_the_number_of_runs(archive_target: str) -> None:
    imported(archive_target)
    result = CliRunner().invoke(cli, ["runs", "--rebuild", "--limit", "1"])
    assert result.exit_code == 0
    assert "rebuilt 32 runs" in result.output


def test_show_prints_a_run_readably(archive_target: str) -> None:
    imported(archive_target)
    first = newest_run("01a2364c-1ceb")
    out = run("show", str(first["run"]))
    assert "goal: 购物车角标的数量不更新" in out
    assert "files changed: src/components/CartBadge.vue" in out
    assert f"[{first['run']}/m1]" in out


def test_read_accepts_run_and_message_addresses(archive_target: str) -> None:
    imported(archive_target)
    first = newest_run("01a2364c-a7f6")
    address = str(first["run"])
    assert f"[{address}/m5] tool_result" in run("read", address)
    page1 = json.loads(run("read", address + "/m5", "--json"))
    page2 = json.loads(run("read", address + "/m5", "--offset", str(page1["next_offset"]), "--json"))
    assert page2["next_offset"] is None
    assert len(page1["text"]) + len(page2["text"]) == page1["total_chars"]
    assert page1["evidence"].startswith("[archived history")
    raw = run("read", address + "/m1", "--raw")
    assert '"role":"user"' in raw


def test_read_session_still_works(archive_target: str) -> None:
    imported(archive_target)
    assert "session 8165f27d" in run("read", "01a2364c-a7f6-75cb")  # the short id: its last 8 characters


def test_search_scope_summary_prints_one_line_per_run(archive_target: str) -> None:
    imported(archive_target)
    out = run("search", "nginx", "--scope", "summary")
    assert out.splitlines()[0].startswith("r")
    data = json.loads(run("search", "nginx", "--scope", "summary", "--json"))
    assert data["scope"] == "summary" and data["hits"][0]["run"].startswith("r")
    errors = json.loads(run("search", "legacy", "--kind", "tool_error", "--json"))["hits"]
    assert errors and {h["role"] for h in errors} == {"tool_error"}


def test_forget_yes_then_reimport_does_not_revive(archive_target: str) -> None:
    imported(archive_target)
    out = run("forget", "01a2364c-a7f6-75cb", "--yes")
    assert "forgot session 01a2364c-a7f6-75cb-ba8a-42838165f27d" in out
    report = json.loads(run("import", str(LONG_FILE), "--force", "--json"))
    assert report["added"] == 0 and report["forgotten"] == 10
    hits = json.loads(run("search", "cache misses", "--json"))["hits"]
    assert not [h for h in hits if h["session_id"].startswith("01a2364c-a7f6")]
    back = json.loads(run("import", str(LONG_FILE), "--force", "--include-forgotten", "--json"))
    assert back["added"] == 10


def test_forget_asks_first_on_a_terminal(archive_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import pi_memory.frontends.cli.shell as cli_module

    imported(archive_target)
    monkeypatch.setattr(cli_module, "_interactive", lambda: True)
    result = CliRunner().invoke(cli, ["forget", "01a2364c-a7f6-75cb"], input="n\n")
    assert result.exit_code == 1 and "Forget session 01a2364c-a7f6" in result.output
    assert json.loads(run("runs", "--session", "01a2364c-a7f6-75cb", "--json"))["runs"]  # nothing deleted
    result = CliRunner().invoke(cli, ["forget", "01a2364c-a7f6-75cb"], input="y\n")
    assert result.exit_code == 0 and "forgot session" in result.output
    assert CliRunner().invoke(cli, ["read", "01a2364c-a7f6-75cb"]).exit_code == 1


def test_bad_address_and_unknown_run_are_one_line_errors(archive_target: str) -> None:
    imported(archive_target)
    result = CliRunner().invoke(cli, ["show", "r99999"])
    assert result.exit_code == 1 and "no run r99999" in result.output
    result = CliRunner().invoke(cli, ["forget", "r99999", "--yes"])
    assert result.exit_code == 1 and "Traceback" not in result.output


def test_python_m_read_of_an_address_works_end_to_end(archive_target: str) -> None:
    imported(archive_target)
    proc = subprocess.run(python_cli() + ["read", "r1/m1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# r1/m1 · user")
