"""Real pi recalling twice: the second recall answers with the original message, never with the first
recall's prompt, call or result, nor with the turn that asks (`core.echo`).

Both pi lines (0.73.1 and 1.6.0), the scripted fake model, the extension and the bridge of this
checkout, as in `test_pi_live.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_install import PiInstall
from test_pi_live import World, pi  # noqa: F401 - `pi` is the fixture of both pi versions

from pi_memory import Archive

FACT = "Please remember: the deploy codename is BLUEFIN-7 and staging listens on port 8443."
SEARCH = {"type": "toolCall", "name": "session_search", "arguments": {"query": "deploy codename BLUEFIN"}}
SCRIPT: dict[str, Any] = {
    "turns": [
        {"match": "Please remember", "replies": [{"content": "Noted."}]},
        {
            "match": "recall: what",
            "replies": [
                {"content": [{"type": "text", "text": "Searching the archive."}, SEARCH]},
                {"content": "The deploy codename is BLUEFIN-7."},
            ],
        },
        {
            "match": "recall it again",
            "replies": [
                {"content": [{"type": "text", "text": "Searching again."}, SEARCH]},
                {"content": "Still BLUEFIN-7."},
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


def search_results(path: Path) -> list[str]:
    """The text of every `session_search` result in the session file, in order."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        msg = json.loads(line).get("message") or {}
        if msg.get("role") == "toolResult" and msg.get("toolName") == "session_search":
            out.append("".join(b.get("text", "") for b in msg.get("content", []) if isinstance(b, dict)))
    return out


def test_the_second_recall_answers_with_the_original_message_not_the_first_recall(world: World) -> None:
    shop = world.project("shop")
    rpc = world.rpc(shop)
    rpc.prompt(FACT)
    rpc.prompt("recall: what was the deploy codename?")
    rpc.prompt("Thanks. Now recall it again, please.")
    assert rpc.close() == 0

    (path,) = world.session_files()
    first, second = search_results(path)
    with Archive.open(world.db) as archive:
        (session,) = archive.sessions()
        window = archive.read(session.id, before=50, after=0).messages
    ids = {m.text: m.msg_id for m in window if m.role == "user"}
    fact, asked = ids[FACT], ids["recall: what was the deploy codename?"]
    hits = [int(n) for n in re.findall(r"msg_id=(\d+)", second)]
    assert hits and hits[0] == fact, second
    # turn 2's prompt, its call, its result and its reply are echoes; turn 3 is the run asking
    echoes = {m.msg_id for m in window if m.msg_id > fact + 1}
    assert asked in echoes and not echoes & set(hits), second
    # the first recall, from inside turn 2, did not find turn 2's own prompt either
    assert [int(n) for n in re.findall(r"msg_id=(\d+)", first)][0] == fact, first
