"""`doctor`'s installation checks: a pure function of what imports, what is on PATH, what pi loads."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pi_memory.frontends.cli.install import Facts, extension_sources, installation_checks, problems

ROOT = Path(__file__).resolve().parent.parent


def facts(**over: object) -> Facts:
    base = Facts({"watchdog": True, "mcp": True, "psycopg": True}, {"pi": "/bin/pi", "pi-memory": "/bin/pi-memory"})
    for key, value in over.items():
        setattr(base, key, value)
    return base


def test_a_missing_extra_says_the_pip_line_without_being_a_problem():
    checks = installation_checks(facts(modules={"watchdog": False, "mcp": True, "psycopg": True}))
    watch = next(c for c in checks if c.name == "watch extra")
    assert not watch.ok and "pip install 'pi-memory[watch]'" in watch.detail and not problems(checks)


def test_the_extension_without_pi_memory_on_path_is_a_problem():
    checks = installation_checks(facts(on_path={"pi": "/bin/pi", "pi-memory": None}, extension_sources=["/x"]))
    assert [c.name for c in problems(checks)] == ["pi-memory on PATH"]
    with_bridge = installation_checks(
        facts(on_path={"pi": "/bin/pi", "pi-memory": None}, extension_sources=["/x"], bridge_command="python3 -m x")
    )
    assert not problems(with_bridge)


def test_without_the_extension_pi_is_not_required():
    checks = installation_checks(facts(on_path={"pi": None, "pi-memory": None}))
    assert not problems(checks)


def test_the_extension_is_found_in_pis_settings_by_its_package_name(tmp_path: Path):
    settings = Path(os.environ["PI_CODING_AGENT_DIR"]) / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"packages": [str(ROOT / "extensions" / "pi"), "npm:other@1"]}))
    assert extension_sources(tmp_path) == [str(ROOT / "extensions" / "pi")]
    settings.write_text(json.dumps({"packages": ["npm:other@1"]}))
    assert extension_sources(tmp_path) == []
