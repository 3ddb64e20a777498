"""The pi extension's memory calls through the real bridge loop: start, commands, tools, injection, settings."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from pi_memory.frontends.bridge.server import serve
from pi_memory.frontends.tools.memory import COMMAND_DESCRIPTIONS, MEMORY_COMMANDS, MEMORY_TOOL_SPECS


def run(db: Path, *requests: dict[str, Any]) -> list[dict[str, Any]]:
    body = b"".join(json.dumps({"id": i, **r}, ensure_ascii=False).encode() + b"\n" for i, r in enumerate(requests))
    out = io.BytesIO()
    assert serve(db, io.BytesIO(body), out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def project(tmp_path: Path, name: str, settings: dict[str, Any] | None = None) -> str:
    path = tmp_path / name
    (path / ".pi").mkdir(parents=True)
    if settings is not None:
        (path / ".pi" / "pi-memory.json").write_text(json.dumps(settings), encoding="utf-8")
    return str(path)


def test_memory_start_gives_the_tool_specs_and_command_descriptions_from_the_library(
    archive_target: str, tmp_path: Path
) -> None:
    shop = project(tmp_path, "shop")
    (out,) = run(archive_target, {"method": "memory_start", "params": {"cwd": shop, "session_id": "s1"}})
    started = out["result"]
    assert started["enabled"] is True and started["budget"] == 4000 and started["notes"] == []
    assert started["tools"] == MEMORY_TOOL_SPECS
    assert set(started["commands"]) == set(MEMORY_COMMANDS) == set(COMMAND_DESCRIPTIONS)


def test_memory_enabled_false_in_the_project_settings_turns_tools_commands_and_injection_off(
    archive_target: str, tmp_path: Path
) -> None:
    quiet = project(tmp_path, "quiet", {"memory": {"enabled": False}})
    host = {"cwd": quiet, "session_id": "s1"}
    start, remembered, injected = run(
        archive_target,
        {"method": "memory_start", "params": host},
        {"method": "memory_command", "params": {**host, "name": "remember", "args": "pin use pnpm"}},
        {"method": "memory_injection", "params": host},
    )
    assert start["result"]["enabled"] is False and start["result"]["tools"] == {} and start["result"]["commands"] == {}
    assert remembered["result"]["text"].startswith("remembered mem_")  # the CLI and library still work
    assert injected["result"]["text"] == ""


def test_injection_without_a_budget_uses_the_settings_hint_max_chars(archive_target: str, tmp_path: Path) -> None:
    small = project(tmp_path, "small", {"memory": {"hintMaxChars": 450}})
    host = {"cwd": small, "session_id": "s1"}
    long_rule = "keep every migration reversible " * 20  # about 640 chars: over the small budget
    out = run(
        archive_target,
        {"method": "memory_command", "params": {**host, "name": "remember", "args": "use pnpm"}},
        {"method": "memory_command", "params": {**host, "name": "remember", "args": long_rule}},
        {"method": "memory_injection", "params": host},
        {"method": "memory_injection", "params": {**host, "budget": 4000}},
    )
    settled, explicit = out[2]["result"]["text"], out[3]["result"]["text"]
    assert len(settled) <= 450 and "use pnpm" in settled and "reversible" not in settled
    assert "1 more not shown" in settled
    assert "reversible" in explicit


def test_the_injected_block_is_byte_identical_until_a_memory_changes(archive_target: str, tmp_path: Path) -> None:
    shop = project(tmp_path, "shop")
    host = {"cwd": shop, "session_id": "s1"}
    out = run(
        archive_target,
        {"method": "memory_command", "params": {**host, "name": "remember", "args": "pin 用 pnpm"}},
        {"method": "memory_injection", "params": host},
        {"method": "memory_propose", "params": {**host, "body": "the user likes tabs"}},
        {"method": "memory_injection", "params": {**host, "session_id": "s2"}},
        {"method": "memory_command", "params": {**host, "name": "remember", "args": "tests live in tests/"}},
        {"method": "memory_injection", "params": host},
    )
    first, after_proposal, after_remember = (out[i]["result"]["text"] for i in (1, 3, 5))
    assert "用 pnpm" in first and after_proposal == first  # a proposal changes nothing injected
    assert after_remember != first and after_remember.startswith(first.removesuffix("</long-term-memory>"))


def test_a_tool_call_lands_in_the_workspace_the_host_names(archive_target: str, tmp_path: Path) -> None:
    shop, blog = project(tmp_path, "shop"), project(tmp_path, "blog")
    proposed, in_shop, in_blog = run(
        archive_target,
        {"method": "memory_propose", "params": {"body": "prefer tabs", "cwd": shop, "session_id": "s1"}},
        {"method": "memory_search", "params": {"query": "tabs", "status": "provisional", "cwd": shop}},
        {"method": "memory_search", "params": {"query": "tabs", "status": "provisional", "cwd": blog}},
    )
    assert proposed["result"]["result"]["memory"]["status"] == "provisional"
    assert json.loads(proposed["result"]["text"]) == proposed["result"]["result"]
    assert in_shop["result"]["result"]["total"] == 1 and in_blog["result"]["result"]["total"] == 0
