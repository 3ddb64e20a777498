"""The test run's closing summary: what was skipped, grouped by reason, with counts; and in CI
(PI_MEMORY_NO_SKIP) which skips fail the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import must_run_kind, skip_reasons
from pg_support import NO_PG_REASON


def skipped(reason: str, n: int, nodeid: str = "") -> pytest.TestReport:
    nodeid = nodeid or f"tests/test_t.py::t{n}"
    return pytest.TestReport(nodeid, ("t.py", n, "t"), {}, "skipped", ("t.py", n, f"Skipped: {reason}"), "setup")


def module_skipped(reason: str, nodeid: str) -> pytest.CollectReport:
    return pytest.CollectReport(nodeid, "skipped", (nodeid, 20, f"Skipped: {reason}"), [])


def test_skips_are_grouped_by_reason_most_first():
    reports = [skipped("no PostgreSQL", 1), skipped("npm is missing", 2), skipped("no PostgreSQL", 3)]
    assert skip_reasons(reports) == [(2, "no PostgreSQL"), (1, "npm is missing")]


def test_a_skipped_module_is_counted_and_named():
    reports = [skipped("x", 1), module_skipped("no Chromium at /usr/bin/chromium", "tests/test_web_browser.py")]
    assert skip_reasons(reports) == [
        (1, "no Chromium at /usr/bin/chromium [the whole module tests/test_web_browser.py]"),
        (1, "x"),
    ]


def test_end_to_end_postgresql_and_browser_skips_are_the_ones_ci_must_not_have():
    assert must_run_kind(skipped("npm is missing", 1, "tests/e2e/test_pi_live.py::test_x[0.73.1]")) == "end-to-end"
    assert must_run_kind(module_skipped("no Chromium", "tests/test_web_pages_browser.py")) == "browser"
    assert must_run_kind(skipped(f"{NO_PG_REASON}: x", 2, "tests/test_pg_team.py::test_y")) == "PostgreSQL"
    assert must_run_kind(skipped("y", 3, "tests/test_store.py::test_z[postgres]")) == "PostgreSQL"
    assert must_run_kind(skipped("needs more than the demo archive", 4, "tests/test_cli_help.py::t[x]")) is None


def test_with_pi_memory_no_skip_a_skipped_browser_module_fails_the_run(tmp_path: Path):
    """A real pytest run of a module that skips itself, as the browser modules do without Chromium."""
    tests = Path(__file__).parent
    (tmp_path / "conftest.py").write_text(
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(tests)!r})\n"
        f"spec = importlib.util.spec_from_file_location('project_conftest', {str(tests / 'conftest.py')!r})\n"
        "project = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(project)\n"
        "for hook in ('pytest_runtest_logreport', 'pytest_collectreport', 'pytest_sessionfinish',\n"
        "             'pytest_terminal_summary'):\n"
        "    globals()[hook] = getattr(project, hook)\n"
    )
    (tmp_path / "test_fake_browser.py").write_text(
        "import pytest\npytest.skip('no Chromium here', allow_module_level=True)\n"
    )
    (tmp_path / "test_other.py").write_text("def test_ok():\n    pass\n")

    def run(no_skip: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PI_MEMORY_NO_SKIP": no_skip}
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path), str(tmp_path)],
            cwd=tmp_path, capture_output=True, text=True, env=env,
        )  # fmt: skip

    relaxed, strict = run("0"), run("1")
    assert relaxed.returncode == 0, relaxed.stdout
    assert "0 tests and 1 whole modules skipped (1 ran)" in relaxed.stdout
    assert "no Chromium here [the whole module test_fake_browser.py]" in relaxed.stdout
    assert strict.returncode == 1 and "browser tests were skipped" in strict.stdout
