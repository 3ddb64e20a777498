"""pi-memory settings for compaction and memory: files, precedence, normalisation.

Design idea: the first file that exists wins as a whole (project
`.pi/pi-memory.json`, then global `$PI_CODING_AGENT_DIR/pi-memory.json`), its
missing keys filled from the defaults; files are not merged key by key, so
what a user sees in one file is what runs. A broken project file does not fall
through to the global one (that would silently run settings the project
meant to override): it falls back to the defaults and the problem is reported.
`normalize` is pure: unknown keys are ignored, a value of the wrong type takes
the default, numbers out of range are clamped, and every change is noted.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import jsonline
from ..core.sources.pi import agent_dir

CONFIG_NAME = "pi-memory.json"

DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "overrideDefaultCompaction": True,
    "summaryMaxChars": 12000,
    "sessionSummary": {"enabled": True, "maxChars": 6000},
    "memory": {"enabled": True, "deriveOnCompact": True, "hintMaxChars": 4000},
    "window": {"manifest": True},
    # in-session folding (pi_memory.fold): the `fold` tool, /fold, and the deterministic auto-fold
    "fold": {
        "enabled": True,
        "auto": True,
        "afterRuns": 3,
        "budgetTokens": 12000,
        "minChars": 1000,
        "mergeTokens": 8000,
        "argsMaxChars": 80,
        "summaryMaxChars": 2000,
    },
}

# key path -> (lowest, highest) for integer settings; the low end keeps a checkpoint readable
LIMITS: dict[str, tuple[int, int]] = {
    "summaryMaxChars": (1000, 100000),
    "sessionSummary.maxChars": (200, 30000),
    "memory.hintMaxChars": (0, 50000),
    "fold.afterRuns": (1, 1000),
    "fold.budgetTokens": (500, 1_000_000),
    "fold.minChars": (0, 1_000_000),
    "fold.mergeTokens": (500, 1_000_000),
    "fold.argsMaxChars": (20, 2000),
    "fold.summaryMaxChars": (200, 20000),
}


@dataclass
class Settings:
    """The effective settings and where they came from."""

    values: dict[str, Any]
    source: str  # "project" | "global" | "defaults"
    path: str | None = None
    notes: list[str] = field(default_factory=list)  # clamped / defaulted values, a broken file

    def get(self, dotted: str) -> Any:
        value: Any = self.values
        for part in dotted.split("."):
            value = value[part]
        return value

    @property
    def takeover(self) -> bool:
        """Whether the extension answers `session_before_compact` (off: pi's own summary runs)."""
        return bool(self.values["enabled"] and self.values["overrideDefaultCompaction"])

    def to_dict(self) -> dict[str, Any]:
        return {"values": self.values, "source": self.source, "path": self.path, "notes": self.notes}


def _normalize_value(key: str, default: Any, raw: Any, notes: list[str]) -> Any:
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        notes.append(f"{key}: {raw!r} is not true/false, using {default}")
        return default
    if isinstance(default, int):
        if isinstance(raw, bool) or not isinstance(raw, int):
            notes.append(f"{key}: {raw!r} is not a whole number, using {default}")
            return default
        low, high = LIMITS[key]
        clamped = min(max(raw, low), high)
        if clamped != raw:
            notes.append(f"{key}: {raw} is outside {low}..{high}, using {clamped}")
        return clamped
    return default


def normalize(raw: Any, defaults: dict[str, Any] = DEFAULTS, prefix: str = "") -> tuple[dict[str, Any], list[str]]:
    """(settings with every key valid, notes on what was changed). Pure."""
    notes: list[str] = []
    if not isinstance(raw, dict):
        if raw is not None:
            notes.append(f"{prefix or 'settings'}: not a JSON object, using defaults")
        return copy.deepcopy(defaults), notes
    out: dict[str, Any] = {}
    for key, default in defaults.items():
        name = prefix + key
        if key not in raw:
            out[key] = copy.deepcopy(default)
        elif isinstance(default, dict):
            out[key], sub = normalize(raw[key], default, name + ".")
            notes.extend(sub)
        else:
            out[key] = _normalize_value(name, default, raw[key], notes)
    return out, notes


def _read(path: Path) -> tuple[Any, str | None]:
    try:
        return jsonline.loads(path.read_text(encoding="utf-8")), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path}: cannot be read ({exc.__class__.__name__}), using defaults"
    except ValueError as exc:
        return None, f"{path}: broken JSON ({exc}), using defaults"


def config_paths(cwd: Path | str) -> tuple[Path, Path]:
    """(project file, global file) for a working directory."""
    return Path(cwd) / ".pi" / CONFIG_NAME, agent_dir() / CONFIG_NAME


def load_settings(cwd: Path | str) -> Settings:
    """The effective settings for a pi session started in `cwd`. Never raises on bad files."""
    for source, path in zip(("project", "global"), config_paths(cwd), strict=True):
        if not path.is_file():
            continue
        raw, problem = _read(path)
        if problem is not None:
            return Settings(copy.deepcopy(DEFAULTS), "defaults", str(path), [problem])
        values, notes = normalize(raw)
        return Settings(values, source, str(path), notes)
    return Settings(copy.deepcopy(DEFAULTS), "defaults")
