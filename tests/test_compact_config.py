"""Settings: project file over global file over defaults, normalised with limits, broken files reported."""

from __future__ import annotations

import json
from pathlib import Path

from pi_memory.compact.config import DEFAULTS, load_settings, normalize


def write(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return path


def global_file(home: Path) -> Path:
    return home / ".pi" / "agent" / "pi-memory.json"


def test_defaults_when_no_file_exists(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert settings.source == "defaults" and settings.values == DEFAULTS and settings.notes == []
    assert settings.get("summaryMaxChars") == 12000 and settings.get("sessionSummary.maxChars") == 6000
    assert settings.get("memory.hintMaxChars") == 4000 and settings.takeover


def test_out_of_range_values_are_clamped_and_wrong_types_defaulted() -> None:
    values, notes = normalize(
        {
            "summaryMaxChars": 10**9,
            "sessionSummary": {"maxChars": 5},
            "memory": {"hintMaxChars": "big", "enabled": "yes"},
        }
    )
    assert values["summaryMaxChars"] == 100000 and values["sessionSummary"]["maxChars"] == 200
    assert values["memory"]["hintMaxChars"] == 4000 and values["memory"]["enabled"] is True
    assert len(notes) == 4 and any("summaryMaxChars" in n and "100000" in n for n in notes)


def test_unknown_keys_are_ignored_and_missing_keys_filled() -> None:
    values, notes = normalize({"enabled": False, "mystery": 1, "window": {"manifest": False, "extra": True}})
    assert values["enabled"] is False and "mystery" not in values and values["window"] == {"manifest": False}
    assert values["memory"] == DEFAULTS["memory"] and notes == []


def test_booleans_are_not_numbers() -> None:
    values, notes = normalize({"summaryMaxChars": True, "overrideDefaultCompaction": 0})
    assert values["summaryMaxChars"] == 12000 and values["overrideDefaultCompaction"] is True and len(notes) == 2


def test_the_project_file_wins_over_the_global_file_as_a_whole(tmp_path: Path, isolated_home: Path) -> None:
    write(global_file(isolated_home), {"summaryMaxChars": 5000, "memory": {"deriveOnCompact": False}})
    project = tmp_path / "proj"
    write(project / ".pi" / "pi-memory.json", {"overrideDefaultCompaction": False})
    settings = load_settings(project)
    assert settings.source == "project" and not settings.takeover
    assert settings.get("summaryMaxChars") == 12000 and settings.get("memory.deriveOnCompact") is True


def test_the_global_file_applies_when_the_project_has_none(tmp_path: Path, isolated_home: Path) -> None:
    path = write(global_file(isolated_home), {"summaryMaxChars": 5000})
    settings = load_settings(tmp_path)
    assert settings.source == "global" and settings.path == str(path) and settings.get("summaryMaxChars") == 5000


def test_a_broken_project_file_falls_back_to_defaults_and_is_reported(tmp_path: Path, isolated_home: Path) -> None:
    write(global_file(isolated_home), {"summaryMaxChars": 5000})
    write(tmp_path / ".pi" / "pi-memory.json", '{"enabled": false,')
    settings = load_settings(tmp_path)
    assert settings.source == "defaults" and settings.values == DEFAULTS
    assert len(settings.notes) == 1 and "broken JSON" in settings.notes[0] and "pi-memory.json" in settings.notes[0]


def test_a_file_that_is_not_an_object_gives_defaults_with_a_note(tmp_path: Path) -> None:
    write(tmp_path / ".pi" / "pi-memory.json", "[1, 2]")
    settings = load_settings(tmp_path)
    assert settings.source == "project" and settings.values == DEFAULTS and "not a JSON object" in settings.notes[0]
