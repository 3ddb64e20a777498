"""`pi-memory doctor`: will the agents delete sessions before the archive has them?

Design idea: Claude Code deletes transcripts older than `cleanupPeriodDays`
(default 30) from `~/.claude/projects`. The archive keeps whatever it has read,
so the risk is a session that grows old in Claude's folder without ever being
imported. We compare each transcript's age with the cleanup period and the
archive's record of that file (same size and mtime as when it was last read),
and say what to do: run `watch`, import regularly, or raise the period. The
policy (`retention_advice`) is a pure function of the facts; `doctor` gathers
them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import jsonline
from ..core.sources.readers import claude_dir
from ..storage.store import Store

DEFAULT_CLEANUP_DAYS = 30
WARN_MARGIN_DAYS = 10  # warn this long before Claude Code's cleanup would delete a transcript
DAY_S = 86_400


@dataclass
class ClaudeFile:
    path: str
    age_days: float
    archived: bool  # the archive has read this file as it is now


@dataclass
class Advice:
    settings_path: str
    cleanup_days: int
    cleanup_is_default: bool
    files: int
    unarchived: int
    at_risk: list[str] = field(default_factory=list)  # unarchived and close to deletion
    warnings: list[str] = field(default_factory=list)
    missing_sources: int = 0  # archived sessions whose file is gone (kept here, nowhere else)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def cleanup_period(settings_path: Path) -> tuple[int, bool]:
    """Claude Code's `cleanupPeriodDays` and whether it is left at its default."""
    try:
        settings = jsonline.loads(settings_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return DEFAULT_CLEANUP_DAYS, True
    value = settings.get("cleanupPeriodDays") if isinstance(settings, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value, value == DEFAULT_CLEANUP_DAYS
    return DEFAULT_CLEANUP_DAYS, True


def retention_advice(settings_path: str, cleanup_days: int, is_default: bool, files: list[ClaudeFile]) -> Advice:
    """The warnings for these facts (pure)."""
    warn_age = max(0, cleanup_days - WARN_MARGIN_DAYS)
    unarchived = [f for f in files if not f.archived]
    at_risk = sorted((f for f in unarchived if f.age_days >= warn_age), key=lambda f: -f.age_days)
    advice = Advice(settings_path, cleanup_days, is_default, len(files), len(unarchived), [f.path for f in at_risk])
    if not files:
        return advice
    keep = (
        "keep them by running `pi-memory watch` (as a user service, see the README), or `pi-memory import` "
        f'regularly, or set "cleanupPeriodDays" higher in {settings_path}'
    )
    if at_risk:
        advice.warnings.append(
            f"{len(at_risk)} Claude Code session file(s) are {warn_age}+ days old and not archived yet; Claude Code "
            f"deletes them after {cleanup_days} days: run `pi-memory import --agent claude` now, then {keep}"
        )
    elif is_default:
        advice.warnings.append(
            f"Claude Code deletes sessions after {cleanup_days} days (cleanupPeriodDays is at its default); {keep}"
        )
    return advice


def scan_claude(store: Store, projects: Path, now: float) -> list[ClaudeFile]:
    files = []
    for path in sorted(projects.rglob("*.jsonl")) if projects.is_dir() else []:
        try:
            st = path.stat()
        except OSError:
            continue
        known = store.source_file_state(str(path.resolve()))
        files.append(ClaudeFile(str(path), (now - st.st_mtime) / DAY_S, known == (st.st_size, st.st_mtime_ns)))
    return files


def doctor(store: Store, now: float | None = None) -> Advice:
    root = claude_dir()
    settings = root / "settings.json"
    days, is_default = cleanup_period(settings)
    files = scan_claude(store, root / "projects", time.time() if now is None else now)
    advice = retention_advice(str(settings), days, is_default, files)
    advice.missing_sources = int(store.scalar("SELECT count(*) FROM session WHERE source_missing = 1") or 0)
    return advice
