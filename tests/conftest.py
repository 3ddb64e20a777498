"""Shared fixtures: every test gets its own archive file and agent folders under tmp_path."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
PI_DATA = DATA / "pi"
BAD_DATA = DATA / "bad"
SRC = Path(__file__).resolve().parent.parent / "src"

pytest_plugins = ["pg_support"]  # PostgreSQL fixtures (pg_url, make_role): a server of their own, or PI_MEMORY_TEST_PG


@pytest.fixture(scope="session", autouse=True)
def isolated_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Before any fixture of a module's or the session's scope (the browser tests' archive): the
    memory key and pins (`memory/seal.py`) never go to the real ~/.config."""
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No test touches the real ~/.pi: the archive and agent folders live under tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("PI_MEMORY_DB", str(home / ".pi" / "memory" / "sessions.db"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(home / ".pi" / "agent"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))  # the memory key and pins (`memory/seal.py`)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))  # the demo archive (`pi-memory demo`)
    # subprocesses (`python -m pi_memory`) import this checkout's code
    monkeypatch.setenv("PYTHONPATH", str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    yield home


@pytest.fixture
def db_path(isolated_home: Path) -> Path:
    return Path(os.environ["PI_MEMORY_DB"])


BACKENDS = ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sqlite_only(reason): the test is about the local SQLite file itself; no PostgreSQL variant"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test of the `archive` fixture runs on both backends, unless marked `sqlite_only`."""
    if "backend" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("sqlite_only")
        metafunc.parametrize("backend", ["sqlite"] if only else list(BACKENDS))


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def is_module(report: pytest.TestReport | pytest.CollectReport) -> bool:
    """A skip at collection (`pytest.skip(..., allow_module_level=True)`, `importorskip`): a whole
    module, whose tests are never counted because they are never collected."""
    return isinstance(report, pytest.CollectReport)


def skip_reasons(reports: list[pytest.TestReport | pytest.CollectReport]) -> list[tuple[int, str]]:
    """Skips grouped by reason, most first: (count, reason); a skipped module is named as one."""
    counts: dict[str, int] = {}
    for report in reports:
        reason = skip_reason(report)
        if is_module(report):
            reason = f"{reason} [the whole module {report.nodeid}]"
        counts[reason] = counts.get(reason, 0) + 1
    return sorted(((n, r) for r, n in counts.items()), key=lambda nr: (-nr[0], nr[1]))


# What CI must run (`PI_MEMORY_NO_SKIP=1`, set by .ci/run): a skip of these fails the run there.
MUST_RUN = ("end-to-end", "PostgreSQL", "browser")


def must_run_kind(report: pytest.TestReport | pytest.CollectReport) -> str | None:
    """Which of MUST_RUN a skipped test or module is: by its folder or file, or its PostgreSQL variant."""
    from pg_support import NO_PG_REASON  # a plugin module (pytest_plugins): imported once registered

    path = report.nodeid.split("::", 1)[0]
    if path.startswith("tests/e2e/"):
        return "end-to-end"
    if path.endswith("_browser.py"):
        return "browser"
    if "[postgres" in report.nodeid or skip_reason(report).startswith(NO_PG_REASON):
        return "PostgreSQL"
    return None


SKIPPED: list[pytest.TestReport | pytest.CollectReport] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        SKIPPED.append(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:
        SKIPPED.append(report)


def no_skip_wanted() -> bool:
    return os.environ.get("PI_MEMORY_NO_SKIP", "") not in ("", "0")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With PI_MEMORY_NO_SKIP (CI), a skipped end-to-end, PostgreSQL or browser test fails the run."""
    if no_skip_wanted() and exitstatus == pytest.ExitCode.OK and any(must_run_kind(r) for r in SKIPPED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """A green run must say what it did not run: every skip reason with its count, without -rs."""
    if not SKIPPED:
        return
    modules = sum(1 for r in SKIPPED if is_module(r))
    ran = sum(len(terminalreporter.stats.get(k, [])) for k in ("passed", "failed", "error", "xfailed", "xpassed"))
    what = f"{len(SKIPPED) - modules} tests" + (f" and {modules} whole modules" if modules else "")
    terminalreporter.write_sep("=", f"{what} skipped ({ran} ran), by reason", yellow=True)
    for count, reason in skip_reasons(SKIPPED):
        terminalreporter.write_line(f"{count:>5}  {reason}")
    required = sorted({kind for r in SKIPPED if (kind := must_run_kind(r))})
    if required and no_skip_wanted():
        terminalreporter.write_line(
            f"FAILED: PI_MEMORY_NO_SKIP is set and {', '.join(required)} tests were skipped", red=True, bold=True
        )


@pytest.fixture
def archive_target(backend: str, db_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """What `Archive.open` takes for this backend: the test's file, or a fresh PostgreSQL schema.

    It is also the default archive (`PI_MEMORY_DB`) of the CLI commands the test runs.
    """
    if backend == "sqlite":
        return str(db_path)
    url = str(request.getfixturevalue("pg_url"))
    monkeypatch.setenv("PI_MEMORY_DB", url)
    return url


@pytest.fixture
def archive(archive_target: str) -> Iterator[object]:
    from pi_memory import Archive

    with Archive.open(archive_target) as a:
        yield a


@pytest.fixture
def imported(archive: object) -> object:
    """An archive holding every real pi fixture session."""
    archive.import_paths([PI_DATA])  # type: ignore[attr-defined]
    return archive


def claude_line(
    uuid: str, role: str, content: object, *, session: str, cwd: str, timestamp: str, msg_id: str | None = None
) -> bytes:
    """One line of a Claude Code transcript (`~/.claude/projects/<dir>/<uuid>.jsonl`), newline included."""
    message: dict[str, object] = {"role": role, "content": content}
    if msg_id:
        message["id"] = msg_id
    line = {
        "type": role,
        "uuid": uuid,
        "parentUuid": None,
        "sessionId": session,
        "cwd": cwd,
        "timestamp": timestamp,
        "message": message,
    }
    return json.dumps(line).encode() + b"\n"


def python_cli() -> list[str]:
    return [sys.executable, "-m", "pi_memory"]
