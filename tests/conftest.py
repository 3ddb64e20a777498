"""Shared fixtures: every test gets its own archive file and agent folders under tmp_path."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
PI_DATA = DATA / "pi"
BAD_DATA = DATA / "bad"
SRC = Path(__file__).resolve().parent.parent / "src"

pytest_plugins = ["pg_support"]  # PostgreSQL fixtures (pg_url, make_role), skipped without PI_MEMORY_TEST_PG


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No test touches the real ~/.pi: the archive and agent folders live under tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("PI_MEMORY_DB", str(home / ".pi" / "memory" / "sessions.db"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(home / ".pi" / "agent"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    # subprocesses (`python -m pi_memory`) import this checkout's code
    monkeypatch.setenv("PYTHONPATH", str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    yield home


@pytest.fixture
def db_path(isolated_home: Path) -> Path:
    return Path(os.environ["PI_MEMORY_DB"])


@pytest.fixture
def archive(db_path: Path) -> Iterator[object]:
    from pi_memory import Archive

    with Archive.open(db_path) as a:
        yield a


@pytest.fixture
def imported(archive: object) -> object:
    """An archive holding every real pi fixture session."""
    archive.import_paths([PI_DATA])  # type: ignore[attr-defined]
    return archive


def python_cli() -> list[str]:
    return [sys.executable, "-m", "pi_memory"]
