"""Real pi (0.73.1 and 1.6.0) compacting with pi-memory's deterministic checkpoint instead of an LLM summary.

Each test runs the real pi CLI in RPC mode with the scripted fake model, the test-only
`e2e-compact-hooks.ts` (provider payload recorder, a proposed cut moved onto a tool result, an aborted
signal) and the pi-memory extension from `extensions/pi/` talking to this checkout's bridge. pi's
compaction settings are small (`keepRecentTokens` 60) so there is always something to compact.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_install import InstallUnavailable, PiInstall, ensure_pi
from pi_rpc import PiRpc
from test_pi_live import HERE, PI_VERSIONS, World, bridge_pid, wait_for

from conftest import python_cli
from pi_memory import Archive

EXTENSION = HERE.parent.parent / "extensions" / "pi" / "index.ts"
MARKER = "[pi-memory checkpoint v1]"
CODE_WORD = "斑马-42"
FILLER = "The build cache keeps stale entries after a branch switch, and the index rebuild runs twice. " * 5
ALPHA = f"turn alpha: please keep this in mind. {FILLER}The deploy code word is {CODE_WORD}."
CONTINUED = "Continuing in the fresh window."
SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "turn alpha",
            "replies": [
                {
                    "content": [
                        {"type": "text", "text": "Reading the notes."},
                        {"type": "toolCall", "name": "bash", "arguments": {"command": "cat notes.txt"}},
                    ]
                },
                {"content": "Noted."},
            ],
        },
        {
            "match": "turn beta",
            "replies": [
                {
                    "content": [
                        {"type": "toolCall", "name": "bash", "arguments": {"command": "echo one"}},
                        {"type": "toolCall", "name": "bash", "arguments": {"command": "echo two"}},
                    ]
                },
                {"content": "Both commands ran."},
            ],
        },
        {
            "match": "turn gamma",
            "replies": [
                {
                    "content": [
                        {"type": "toolCall", "name": "session_read", "arguments": {"entry_ids": ["FROM_CHECKPOINT"]}}
                    ]
                },
                {"content": "The archive has it."},
            ],
        },
        {"match": "turn delta", "replies": [{"content": "Still fine."}]},
        {
            "match": "turn search",
            "replies": [
                {
                    "content": [
                        {
                            "type": "toolCall",
                            "name": "session_search",
                            "arguments": {"query": "deploy code word", "scope": "branch", "kind": "user"},
                        }
                    ]
                },
                {"content": "Found it on this branch."},
            ],
        },
        {
            "match": "turn overflow",
            "replies": [
                {
                    "content": "",
                    "stopReason": "error",
                    "errorMessage": "prompt is too long: 213462 tokens > 200000 maximum",
                },
                {"content": "Recovered after the overflow compaction."},
            ],
        },
        {
            "match": "turn epsilon",
            "replies": [
                {"content": [{"type": "toolCall", "name": "new_context", "arguments": {"note": "write the report"}}]}
            ],
        },
        {"match": "(new_context)", "replies": [{"content": CONTINUED}]},
        {
            "match": "turn slow",
            "replies": [
                {
                    "content": [
                        {"type": "toolCall", "name": "new_context", "arguments": {"note": "write the report"}},
                        {"type": "toolCall", "name": "bash", "arguments": {"command": "sleep 3; echo slept"}},
                    ]
                },
                {"content": "Done with the slow step."},
            ],
        },
        {"match": "turn steer", "replies": [{"content": "Doing the other thing instead."}]},
    ],
    "fallback": "OK.",
}


@pytest.fixture(scope="session", params=PI_VERSIONS)
def pi(request: pytest.FixtureRequest) -> PiInstall:
    try:
        return ensure_pi(str(request.param))
    except InstallUnavailable as exc:
        pytest.skip(str(exc))


class CompactWorld(World):
    """The live tests' world with the compaction hooks instead of `e2e-hooks.ts` (whose summary would win)."""

    def __init__(self, pi: PiInstall, home: Path, tmp_path: Path) -> None:
        super().__init__(pi, home, tmp_path)
        settings = {"compaction": {"keepRecentTokens": 60}, "retry": {"baseDelayMs": 100}}
        (self.agent_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        script = tmp_path / "faux-script.json"
        script.write_text(json.dumps(SCRIPT, ensure_ascii=False), encoding="utf-8")
        self.payloads = tmp_path / "payloads.jsonl"
        self.env.update(PI_FAUX_SCRIPT=str(script), PI_E2E_PAYLOADS=str(self.payloads))

    def base_cmd(self) -> list[str]:
        return [
            str(self.pi.pi),
            *("-e", str(HERE / "faux-provider.ts")),
            *("-e", str(HERE / "e2e-compact-hooks.ts")),
            *("-e", str(EXTENSION)),
            *("--model", "faux/faux-1", "-nc", "-ns", "-np"),
        ]

    def start(self, cwd: Path, **env: str) -> PiRpc:
        return self.rpc(cwd, env=dict(self.env, **env))

    def session(self) -> tuple[str, list[dict[str, Any]]]:
        (path,) = self.session_files()
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        return lines[0]["id"], lines[1:]

    def windows(self, session_id: str) -> list[Any]:
        with Archive.open(self.db) as archive:
            return archive.compact_windows(session_id)


@pytest.fixture
def world(pi: PiInstall, isolated_home: Path, tmp_path: Path) -> Iterator[CompactWorld]:
    w = CompactWorld(pi, isolated_home, tmp_path)
    yield w
    w.stop_all()


def compactions(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("type") == "compaction"]


def message(entry: dict[str, Any]) -> dict[str, Any]:
    return entry.get("message") or {} if entry.get("type") == "message" else {}


def text_of(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def tool_result(entries: list[dict[str, Any]], tool: str) -> str:
    return next(text_of(message(e)) for e in entries if message(e).get("toolName") == tool)


def pairing_problems(messages: list[dict[str, Any]]) -> list[str]:
    """What a provider would reject: a tool result before (or without) its call, a call never answered."""
    problems, open_calls = [], set()
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            open_calls |= {b["id"] for b in m.get("content") or [] if b.get("type") == "toolCall"}
        elif m.get("role") == "toolResult":
            if m.get("toolCallId") not in open_calls:
                problems.append(f"message {i}: result {m.get('toolCallId')} without its call before it")
            open_calls.discard(m.get("toolCallId"))
    return problems + [f"call {c} never answered" for c in sorted(open_calls)]


def test_manual_compact_writes_our_checkpoint_moves_an_unsafe_cut_and_keeps_details_reachable(
    world: CompactWorld,
) -> None:
    rpc = world.start(world.project("shop"), PI_E2E_CUT_AT_RESULT="1")
    rpc.prompt(ALPHA)
    rpc.prompt("turn beta: run both echoes")
    rpc.prompt("turn filler: one more step")  # pi 1.6 keeps the last turns whole: give it one to keep
    rpc.request({"type": "compact"})
    rpc.prompt("turn gamma: what was the code word?")
    rpc.prompt("turn search: where was that word?")
    rpc.command("/memory-status")
    assert rpc.close() == 0

    session_id, entries = world.session()
    (compaction,) = compactions(entries)
    details = compaction["details"]
    assert compaction["fromHook"] is True and compaction["summary"].startswith(MARKER)
    assert details["compactor"] == "pi-memory" and details["reason"] == "manual"
    # the proposed cut (the second parallel result) was moved back to the assistant turn holding both calls
    before = entries[: entries.index(compaction)]
    results = [e for e in before if message(e).get("role") == "toolResult"]
    calls = next(e for e in before if sum(b.get("type") == "toolCall" for b in message(e).get("content") or []) == 2)
    assert details["movedBoundary"] is True and compaction["firstKeptEntryId"] == calls["id"]
    assert details["proposedKeptEntryId"] == results[-1]["id"]

    # the detail is not in the checkpoint, but the model's session_read of a cited id finds it
    assert CODE_WORD not in compaction["summary"]
    read = tool_result(entries, "session_read")
    assert read.startswith("[archived history") and CODE_WORD in read
    # and a scoped search of the current branch (recall) finds the compacted user message
    found = tool_result(entries, "session_search")
    assert "scope branch" in found and CODE_WORD in found
    cited = compaction["summary"].split("session_read with entry_ids, for example ")[1].split(";")[0]
    shell = subprocess.run([*python_cli(), "entries", session_id, cited], capture_output=True, text=True, timeout=60)
    assert shell.returncode == 0 and CODE_WORD in shell.stdout

    # provider payloads: valid pairing everywhere; after the compaction the prefix never changes
    payloads = [json.loads(line) for line in world.payloads.read_text(encoding="utf-8").splitlines()]
    assert all(not pairing_problems(p["messages"]) for p in payloads)
    # the summary message comes first (after pi 1.x's system message)
    first = next(i for i, p in enumerate(payloads) if MARKER in json.dumps(p["messages"][:2], ensure_ascii=False))
    after = payloads[first:]
    assert len(after) == 4  # gamma and the search turn: a tool call, then the answer, each
    prefix = json.dumps(after[0]["messages"], ensure_ascii=False)
    for later in after[1:]:
        assert later.get("systemPrompt") == after[0].get("systemPrompt")
        head = later["messages"][: len(after[0]["messages"])]
        assert json.dumps(head, ensure_ascii=False) == prefix

    # one window recorded, its hash chain holds, and /memory-status reports it
    (window,) = world.windows(session_id)
    assert window.compaction_entry_id == compaction["id"] and window.reason == "manual"
    status = next(n for n in rpc.notifications if n.startswith("settings: "))
    assert "compaction takeover: on" in status and "reason manual" in status
    assert f"checkpoint {len(compaction['summary'])} chars" in status


def test_an_overflow_compaction_uses_the_checkpoint_and_pi_retries_the_turn(world: CompactWorld) -> None:
    rpc = world.start(world.project("shop"))
    rpc.prompt(ALPHA)
    rpc.prompt("turn beta: run both echoes")
    rpc.prompt("turn overflow: a huge request")
    wait_for(lambda: "Recovered after the overflow compaction." in json.dumps(world.session()[1]), timeout=30)
    assert rpc.close() == 0
    session_id, entries = world.session()
    (compaction,) = compactions(entries)
    assert compaction["fromHook"] is True and compaction["summary"].startswith(MARKER)
    assert compaction["details"]["reason"] == "overflow"
    (window,) = world.windows(session_id)
    assert window.reason == "overflow"


def test_an_aborted_compaction_is_cancelled_and_leaves_nothing_behind(world: CompactWorld) -> None:
    rpc = world.start(world.project("shop"), PI_E2E_ABORT_COMPACTION="1")
    rpc.prompt(ALPHA)
    rpc.prompt("turn beta: run both echoes")
    rpc.prompt("turn filler: one more step")
    with pytest.raises(RuntimeError, match="cancelled"):
        rpc.request({"type": "compact"})
    rpc.prompt("turn delta: anything else?")  # pi goes on as usual
    assert rpc.close() == 0
    session_id, entries = world.session()
    assert compactions(entries) == []
    assert world.windows(session_id) == []


def test_with_the_takeover_off_pi_writes_its_own_summary(world: CompactWorld) -> None:
    shop = world.project("shop")
    (shop / ".pi").mkdir()
    (shop / ".pi" / "pi-memory.json").write_text(json.dumps({"overrideDefaultCompaction": False}), encoding="utf-8")
    rpc = world.start(shop)
    rpc.prompt(ALPHA)
    rpc.prompt("turn beta: run both echoes")
    rpc.prompt("turn filler: one more step")  # pi 1.6 keeps the last turns whole: give it one to keep
    rpc.request({"type": "compact"})
    assert rpc.close() == 0
    session_id, entries = world.session()
    (compaction,) = compactions(entries)
    assert not compaction.get("fromHook") and MARKER not in compaction["summary"]
    (window,) = world.windows(session_id)  # pi's own compaction is recorded too, without a source hash
    assert window.compactor != "pi-memory" and window.source_hash is None


def test_new_context_compacts_after_the_tool_batch_and_continues_the_task_once(world: CompactWorld) -> None:
    rpc = world.start(world.project("shop"))
    rpc.prompt(ALPHA)
    rpc.prompt("turn beta: run both echoes")
    rpc.prompt("turn epsilon: the context is full, start fresh")
    wait_for(lambda: CONTINUED in json.dumps(world.session()[1], ensure_ascii=False), timeout=30)
    assert rpc.close() == 0
    session_id, entries = world.session()
    (compaction,) = compactions(entries)
    assert compaction["details"]["reason"] == "new_context" and compaction["summary"].startswith(MARKER)
    order = [e["id"] for e in entries]
    asked = next(e for e in entries if message(e).get("toolName") == "new_context")
    notes = [e for e in entries if e.get("type") == "custom_message" and e.get("customType") == "pi-memory-new-context"]
    (note,) = notes  # the task continues once
    answer = next(e for e in entries if text_of(message(e)) == CONTINUED)
    assert (
        order.index(asked["id"]) < order.index(compaction["id"]) < order.index(note["id"]) < order.index(answer["id"])
    )
    assert "write the report" in note["content"]
    (window,) = world.windows(session_id)
    assert window.reason == "new_context"


def test_a_threshold_compaction_is_recorded_with_its_reason(world: CompactWorld) -> None:
    settings = {"compaction": {"keepRecentTokens": 60, "reserveTokens": 127_000}}  # threshold: ~1,000 tokens
    (world.agent_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    rpc = world.start(world.project("shop"))
    rpc.prompt(ALPHA)
    rpc.prompt("turn beta: run both echoes")
    rpc.prompt("turn filler: one more step")
    rpc.prompt("turn delta: anything else?")
    assert rpc.close() == 0
    session_id, entries = world.session()
    found = compactions(entries)
    assert found and all(c["fromHook"] is True and c["summary"].startswith(MARKER) for c in found)
    assert {c["details"]["reason"] for c in found} == {"threshold"}
    assert [w.reason for w in world.windows(session_id)] == ["threshold"] * len(found)


def test_a_bridge_that_cannot_plan_cancels_the_compaction_instead_of_an_llm_summary(
    world: CompactWorld, tmp_path: Path
) -> None:
    flag = tmp_path / "bridge-broken"
    rpc = world.start(
        world.project("shop"),
        PI_MEMORY_BRIDGE=f"{sys.executable} {HERE / 'bridge-wrapper.py'}",
        PI_MEMORY_E2E_BROKEN=str(flag),
    )
    rpc.prompt(ALPHA)
    rpc.prompt("turn beta: run both echoes")
    rpc.prompt("turn filler: one more step")
    flag.touch()  # from now on the bridge cannot start
    os.kill(bridge_pid(rpc.pid), signal.SIGKILL)
    with pytest.raises(RuntimeError, match="cancelled"):
        rpc.request({"type": "compact"})
    with pytest.raises(RuntimeError, match="cancelled"):
        rpc.request({"type": "compact"})
    assert rpc.close() == 0
    _session_id, entries = world.session()
    assert compactions(entries) == []  # and no LLM summary either
    notices = [n for n in rpc.notifications if "compaction cancelled" in n]
    assert len(notices) == 1 and "overrideDefaultCompaction" in notices[0]


def test_new_context_does_not_continue_when_the_compaction_fails(world: CompactWorld) -> None:
    rpc = world.start(world.project("shop"))
    rpc.prompt("turn epsilon: the context is full, start fresh")  # nothing to compact yet
    wait_for(lambda: any("new_context" in n for n in rpc.notifications), timeout=30)
    rpc.prompt("turn delta: anything else?")
    assert rpc.close() == 0
    _session_id, entries = world.session()
    assert compactions(entries) == []
    assert not [e for e in entries if e.get("type") == "custom_message"]
    assert CONTINUED not in json.dumps(entries, ensure_ascii=False)
    (notice,) = [n for n in rpc.notifications if "new_context" in n]
    assert "did not happen" in notice


def start_slow_new_context(rpc: PiRpc) -> None:
    """The model asks for new_context next to a slow command; returns once that command runs."""
    rpc.send({"type": "prompt", "message": "turn slow: start fresh after this"})
    deadline = time.time() + 30
    while time.time() < deadline:
        ev = rpc.next_event(timeout=1)
        if ev and ev.get("type") == "tool_execution_start" and ev.get("toolName") == "bash":
            return
    raise AssertionError("the slow command never started")


def no_new_window(world: CompactWorld) -> None:
    time.sleep(3)  # a scheduled new_context compaction starts right after the run; give it the chance
    _session_id, entries = world.session()
    assert compactions(entries) == []
    assert not [e for e in entries if e.get("type") == "custom_message"]
    assert CONTINUED not in json.dumps(entries, ensure_ascii=False)


def test_new_context_is_dropped_when_the_user_steers_in_before_the_batch_ends(world: CompactWorld) -> None:
    rpc = world.start(world.project("shop"))
    rpc.prompt(ALPHA)
    rpc.prompt("turn beta: run both echoes")
    start_slow_new_context(rpc)
    rpc.send({"type": "steer", "message": "turn steer: no, do the other thing"})
    wait_for(lambda: "Doing the other thing instead." in json.dumps(world.session()[1]), timeout=30)
    no_new_window(world)
    assert rpc.close() == 0


def test_new_context_is_dropped_when_the_user_aborts_the_run(world: CompactWorld) -> None:
    rpc = world.start(world.project("shop"))
    rpc.prompt(ALPHA)
    rpc.prompt("turn beta: run both echoes")
    start_slow_new_context(rpc)
    rpc.request({"type": "abort"})
    no_new_window(world)
    assert rpc.close() == 0
