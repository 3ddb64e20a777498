"""Long-term memory inside real pi: the commands, the model tools, and an injection that keeps the prompt cache.

Real pi (0.73.1 and 1.6.0) in RPC mode with the scripted fake model, the pi-memory extension and the
bridge of this checkout, as in `test_pi_live.py` (whose fixtures this reuses). `payload-recorder.ts`
writes every provider request payload (pi's `before_provider_request`) to a JSON-lines file, so the
test sees exactly what a real provider would have been sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_install import InstallUnavailable, PiInstall, ensure_pi
from pi_rpc import PiRpc
from test_pi_live import HERE, PI_VERSIONS, World, file_messages, tool_result_text, wait_for

from pi_memory import Archive
from pi_memory.memory import Memories, MemoryLog, workspace_key

REMEMBERED = "用 pnpm 安装依赖, never npm"
PROPOSED = "The user prefers tabs over spaces"
SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "memo one",
            "replies": [
                {
                    "content": [
                        {
                            "type": "toolCall",
                            "name": "memory_propose",
                            # the model tries to choose the workspace and session: the extension overrides both
                            "arguments": {
                                "body": PROPOSED,
                                "kind": "preference",
                                "cwd": "/forged/elsewhere",
                                "session_id": "forged-session",
                            },
                        }
                    ]
                },
                {"content": "Proposed it."},
            ],
        },
        {
            "match": "memo two",
            "replies": [
                {"content": [{"type": "toolCall", "name": "memory_search", "arguments": {"query": "pnpm"}}]},
                {"content": "pnpm it is."},
            ],
        },
        {"match": "memo three", "replies": [{"content": "Third answer."}]},
    ],
    "fallback": "OK.",
}


class MemoryWorld(World):
    """`World` plus the payload recorder; each pi process writes its payloads to its own file."""

    def __init__(self, pi: PiInstall, home: Path, tmp_path: Path) -> None:
        super().__init__(pi, home, tmp_path)
        script = tmp_path / "faux-script.json"
        script.write_text(json.dumps(SCRIPT, ensure_ascii=False), encoding="utf-8")
        self.tmp = tmp_path
        self.runs = 0

    def base_cmd(self) -> list[str]:
        return [*super().base_cmd(), "-e", str(HERE / "payload-recorder.ts")]

    def session(self, cwd: Path) -> tuple[PiRpc, Path]:
        self.runs += 1
        payloads = self.tmp / f"payloads-{self.runs}.jsonl"
        return self.rpc(cwd, env=dict(self.env, PI_E2E_PAYLOADS=str(payloads))), payloads


@pytest.fixture(scope="session", params=PI_VERSIONS)
def installed_pi(request: pytest.FixtureRequest) -> PiInstall:
    try:
        return ensure_pi(str(request.param))
    except InstallUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def mworld(installed_pi: PiInstall, isolated_home: Path, tmp_path: Path) -> Iterator[MemoryWorld]:
    w = MemoryWorld(installed_pi, isolated_home, tmp_path)
    yield w
    w.stop_all()


def requests(path: Path) -> list[dict[str, Any]]:
    """The recorded payloads of real model requests (pi 1.x cache-warming pings left out)."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [r["payload"] for r in map(json.loads, lines) if r["payload"].get("maxTokens") != 1]


def system_prompt(payload: dict[str, Any]) -> str:
    """pi 0.x sends `systemPrompt`; pi 1.x may carry it as system messages instead."""
    parts = [payload["systemPrompt"]] if payload.get("systemPrompt") else []
    for message in payload["messages"]:
        if message.get("role") == "system":
            parts.append(json.dumps(message, ensure_ascii=False, sort_keys=True))
    return "\n".join(parts)


def canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def notes_with(rpc: PiRpc, text: str) -> list[str]:
    return [n for n in rpc.notifications if text in n]


def test_memories_are_injected_cache_stable_across_turns_and_sessions_of_one_workspace(mworld: MemoryWorld) -> None:
    shop, blog = mworld.project("shop"), mworld.project("blog")

    first, first_payloads = mworld.session(shop)
    first.command(f"/remember pin kind:constraint {REMEMBERED}")
    wait_for(lambda: bool(notes_with(first, "remembered mem_")))
    (remembered,) = notes_with(first, "remembered mem_")
    memory_id = re.search(r"mem_[0-9a-f]+", remembered).group(0)  # type: ignore[union-attr]
    assert "[pinned, constraint, active, workspace, user]" in remembered
    first.prompt("memo one: remember my tab preference")
    first.prompt("memo two: which package manager?")
    first.prompt("memo three: anything else?")
    first.command("/memories")
    wait_for(lambda: bool(notes_with(first, "(pinned, active and provisional) in ")))
    assert first.close() == 0

    # every request of the session: the same system prompt, each earlier message byte-identical
    sent = requests(first_payloads)
    assert len(sent) >= 5, mworld.stderr()  # 2 + 2 + 1 model calls
    for before, after in zip(sent, sent[1:], strict=False):
        assert canonical(after.get("tools")) == canonical(before.get("tools"))
        assert system_prompt(after) == system_prompt(before)
        earlier = [canonical(m) for m in before["messages"]]
        assert [canonical(m) for m in after["messages"][: len(earlier)]] == earlier
    prompt = system_prompt(sent[0])
    assert REMEMBERED in prompt and memory_id in prompt
    assert PROPOSED not in prompt  # a model proposal is never injected

    # the model's proposal stayed provisional, in this workspace (the forged cwd and session were ignored)
    with Archive.open(mworld.db) as archive:
        listing = Memories(archive.store).list(str(shop), "tabs", status="provisional")
    (proposal,) = [f.record for f in listing.found]
    assert proposal.body == PROPOSED and proposal.author == "model" and proposal.status == "provisional"
    (session_file,) = mworld.session_files()
    assert REMEMBERED in tool_result_text(session_file, "memory_search")
    with Archive.open(mworld.db) as archive:
        events, chain = MemoryLog(archive.store).export_lines(workspace_key(str(shop)))
    (created,) = [json.loads(line) for line in events if PROPOSED in line]
    assert chain.ok and created["author"] == "model"
    assert created["session_id"] == file_messages(session_file)[0]  # pi's session id, not the forged one
    (listed,) = notes_with(first, "(pinned, active and provisional) in ")
    assert memory_id in listed and REMEMBERED in listed and PROPOSED in listed and "provisional" in listed

    # a new session in the same workspace gets the memory; one in another workspace does not
    second, second_payloads = mworld.session(shop)
    second.prompt("hello again")
    second.command(f"/forget {memory_id}")
    wait_for(lambda: bool(notes_with(second, "forgot ")))
    assert second.close() == 0
    other, other_payloads = mworld.session(blog)
    other.prompt("hello from the blog")
    assert other.close() == 0
    assert REMEMBERED in system_prompt(requests(second_payloads)[0])
    assert REMEMBERED not in system_prompt(requests(other_payloads)[0])

    # after /forget, the next session of the workspace no longer gets it
    third, third_payloads = mworld.session(shop)
    third.prompt("hello after forgetting")
    assert third.close() == 0
    assert REMEMBERED not in system_prompt(requests(third_payloads)[0])
    problems = [n for rpc in (first, second, other, third) for n in rpc.notifications if "failed" in n]
    assert not problems, mworld.stderr()


def test_memory_enabled_false_in_the_project_settings_leaves_pi_without_memory(mworld: MemoryWorld) -> None:
    quiet = mworld.project("quiet")
    (quiet / ".pi").mkdir()
    (quiet / ".pi" / "pi-memory.json").write_text(json.dumps({"memory": {"enabled": False}}), encoding="utf-8")
    with Archive.open(mworld.db) as archive:
        Memories(archive.store).remember(str(quiet), REMEMBERED, pin=True)  # written outside pi, e.g. by the CLI
    rpc, payloads = mworld.session(quiet)
    rpc.prompt("/remember this is no command now")  # not a command: it goes to the model as a prompt
    assert rpc.close() == 0
    (sent,) = requests(payloads)
    assert REMEMBERED not in system_prompt(sent) and "long-term-memory" not in system_prompt(sent)
    assert "memory_search" not in canonical(sent)
    assert not [n for n in rpc.notifications if "pi-memory" in n or "remembered" in n]
