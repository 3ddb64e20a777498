"""`session_blame` and the live observations through the real front ends: the bridge's JSON lines (what
pi's extension sends) and the MCP server (the SDK's in-memory client)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from pi_memory import Archive
from pi_memory.core.format import EVIDENCE_HEADER
from pi_memory.frontends.mcp_server import build_server
from provenance_world import World, pi_session, scenario
from test_bridge import run


def sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def test_the_bridge_keeps_the_file_before_an_edit_only_when_something_else_changed_it(archive_target: str) -> None:
    seen = {"session_id": "s-1", "path": "/w/a.py"}
    answers = run(
        archive_target,
        {"id": 1, "method": "session_start", "params": {"session_id": "s-1", "cwd": "/w"}},
        # first sight of the file: kept (the lines there before are nobody's)
        {
            "id": 2,
            "method": "edit_observed",
            "params": {
                **seen,
                "call_id": "c1",
                "before_hash": sha("a\n"),
                "after_hash": sha("a\nb\n"),
                "before_text": "a\n",
                "observed_at": 1000,
                "git_commit": "abc",
            },
        },  # fmt: skip
        # just as the last edit left it: not kept
        {
            "id": 3,
            "method": "edit_observed",
            "params": {
                **seen,
                "call_id": "c2",
                "before_hash": sha("a\nb\n"),
                "after_hash": sha("a\nb\nc\n"),
                "before_text": "a\nb\n",
                "observed_at": 2000,
            },
        },  # fmt: skip
        # changed by hand in between: kept
        {
            "id": 4,
            "method": "edit_observed",
            "params": {
                **seen,
                "call_id": "c3",
                "before_hash": sha("hand\na\nb\nc\n"),
                "after_hash": sha("x\n"),
                "before_text": "hand\na\nb\nc\n",
                "observed_at": 3000,
            },
        },  # fmt: skip
        {"id": 5, "method": "edit_observed", "params": {"session_id": "s-1", "call_id": "c4"}},
    )
    assert [a.get("result", {}).get("snapshot") for a in answers[1:4]] == [True, False, True]
    assert answers[4]["error"]["code"] == "bad_params" and "path" in answers[4]["error"]["message"]
    with Archive.open(archive_target) as archive:
        assert archive.store.rows("SELECT call_id, git_commit FROM edit_observed ORDER BY observed_at")[0] == (
            "c1",
            "abc",
        )


def test_session_blame_over_the_bridge_answers_relative_to_the_sessions_folder(
    archive_target: str, tmp_path: Path
) -> None:
    world = World(tmp_path / "repo")
    scenario(world)
    with Archive.open(archive_target) as archive:
        archive.import_paths([pi_session(world, tmp_path)])
    (answer,) = run(
        archive_target,
        {"id": 1, "method": "session_blame", "params": {"path": "app/config.py:2", "cwd": str(world.root)}},
    )
    text = answer["result"]["text"]
    assert text.startswith(EVIDENCE_HEADER) and "Write the config loader" in text
    (history,) = run(
        archive_target,
        {
            "id": 1,
            "method": "session_blame",
            "params": {"path": "app/config.py", "history": True, "cwd": str(world.root)},
        },
    )
    assert "4 runs changed it" in history["result"]["text"]


def _mcp(archive: Archive, name: str, arguments: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(build_server(archive)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            return tools, await client.call_tool(name, arguments)

    return anyio.run(go)


def test_mcp_clients_get_session_blame_and_the_resume_line(archive: Archive, tmp_path: Path, monkeypatch: Any) -> None:
    world = World(tmp_path / "repo")
    scenario(world)
    session = pi_session(world, tmp_path)
    archive.import_paths([session])
    monkeypatch.chdir(world.root)  # an MCP server's workspace is the folder the agent started it in
    tools, result = _mcp(archive, "session_blame", {"path": "app/defaults.py:1-3"})
    text = "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")
    assert "session_blame" in tools and not result.is_error
    assert text.startswith(EVIDENCE_HEADER) and "Rewrite the defaults module" in text
    sid = archive.sessions()[0].id
    _tools, read = _mcp(archive, "session_read", {"session_id": sid})
    assert read.content[0].text.rstrip().endswith(f"resume: cd {world.root} && pi --session {session}")
