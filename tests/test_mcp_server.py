"""The MCP server: the SDK's in-memory client, and one real stdio subprocess."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from pi_memory import Archive
from pi_memory.core.format import EVIDENCE_HEADER
from pi_memory.frontends.mcp_server import build_server, memory_tool

DATA = Path(__file__).parent / "data"
CODEX_DATA = DATA / "codex" / "daaain-claude-code-log"


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _call(archive: Archive, name: str, arguments: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(build_server(archive)) as client:
            return await client.call_tool(name, arguments)

    return anyio.run(go)


def test_the_server_lists_session_search_and_session_read(archive: Archive) -> None:
    async def go() -> list[Any]:
        async with Client(build_server(archive)) as client:
            return list((await client.list_tools()).tools)

    tools = {t.name: t for t in anyio.run(go)}
    assert {"session_search", "session_read"} <= set(tools)
    assert set(tools["session_search"].input_schema["properties"]) == {
        "query",
        "limit",
        "project",
        "since",
        "agent",
        "include_echoes",
    }
    assert tools["session_search"].input_schema["required"] == ["query"]
    assert set(tools["session_read"].input_schema["properties"]) == {"session_id", "around_msg_id", "before", "after"}
    assert "last time" in (tools["session_search"].description or "")


def test_session_search_returns_hits_framed_as_evidence(archive: Archive) -> None:
    archive.import_paths([DATA / "pi", CODEX_DATA])
    result = _call(archive, "session_search", {"query": "synthetic files alpha"})
    text = _text(result)
    assert not result.is_error
    assert text.startswith(EVIDENCE_HEADER)
    assert "session=11111111-1111-4111-8111-111111111111" in text and "msg_id=" in text


def test_session_search_caps_the_limit_at_twenty_and_the_output_at_6k(archive: Archive) -> None:
    archive.import_paths([DATA / "pi"])
    text = _text(_call(archive, "session_search", {"query": "the", "limit": 500}))
    assert len(text) <= 6_000
    assert text.count("msg_id=") <= 20


def test_session_read_shows_the_window_around_a_message(archive: Archive) -> None:
    archive.import_paths([CODEX_DATA])
    hit = archive.search("apply_patch gamma")[0]
    text = _text(
        _call(
            archive,
            "session_read",
            {"session_id": hit.session_id[:8], "around_msg_id": hit.msg_id, "before": 1, "after": 1},
        )
    )
    assert text.startswith(EVIDENCE_HEADER)
    assert f"[{hit.msg_id}] assistant: → apply_patch(" in text
    assert text.count("\n[") == 3 and len(text) <= 8_000


def test_a_bad_session_id_is_a_tool_error_not_a_crash(archive: Archive) -> None:
    result = _call(archive, "session_read", {"session_id": "zzzzzzzzzzzz"})
    assert result.is_error and "no session matches" in _text(result)


def test_memory_tools_get_their_schema_and_the_workspace_from_the_server(
    archive: Archive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []

    def memory_probe(_archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"hits": [], "query": params.get("query")}

    spec = {
        "description": "Search memories.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}},
    }
    tool = memory_tool(archive, "memory_probe", memory_probe, spec)
    assert tool.parameters == spec["parameters"] and tool.description == "Search memories."
    server = build_server(archive)
    server.add_tool(tool.fn, name=tool.name, description=tool.description)

    async def go() -> Any:
        async with Client(server) as client:
            return await client.call_tool("memory_probe", {"query": "tabs", "cwd": "/elsewhere"})

    monkeypatch.chdir(tmp_path)
    result = anyio.run(go)
    assert _text(result) == '{"hits":[],"query":"tabs"}'
    assert seen == [{"query": "tabs", "cwd": str(tmp_path)}]


def test_memory_tools_are_served_with_the_extensions_schemas(archive: Archive) -> None:
    from pi_memory.frontends.tools import memory as tools_module

    async def go() -> set[str]:
        async with Client(build_server(archive)) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert set(tools_module.MEMORY_TOOLS) <= anyio.run(go)


def test_pi_memory_mcp_serves_session_search_over_stdio(db_path: Path) -> None:
    with Archive.open(db_path) as archive:
        archive.import_paths([CODEX_DATA])
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pi_memory", "mcp"],
        env={"PI_MEMORY_DB": str(db_path), "PYTHONPATH": os.environ["PYTHONPATH"]},
    )

    async def go() -> Any:
        async with Client(params, read_timeout_seconds=30) as client:
            return await client.call_tool("session_search", {"query": "legacy session"})

    text = _text(anyio.run(go))
    assert text.startswith(EVIDENCE_HEADER)
    assert "session=44444444-4444-4444-8444-444444444444" in text


def test_an_unknown_agent_is_a_clear_tool_error(archive: Archive) -> None:
    result = _call(archive, "session_search", {"query": "x", "agent": "gpt"})
    assert result.is_error and "unknown agent 'gpt'" in _text(result)
