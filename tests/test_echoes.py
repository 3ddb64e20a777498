"""Recall never answers with its own echoes: the archive's own tool calls, their results and the runs
that only asked the archive stay archived but out of ranking, and the run a model asks from is never
a hit (`core.echo`, `storage.echoes`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pi_memory import Archive
from pi_memory.core.echo import (
    ECHO_TOKEN,
    is_archive_tool,
    is_echo_message,
    run_echoes,
    session_echoes,
    with_echo_token,
)
from pi_memory.core.text import tokenize
from pi_memory.storage.pg.schema import MIGRATIONS as PG_MIGRATIONS

SESSION = "01b00000-0000-7000-8000-00000000e001"
FACT = "Remember this: the deploy codename is BLUEFIN and the staging port is 8443."
RECALL = "What was the deploy codename we agreed on?"
SEARCH_CALL = {"type": "toolCall", "id": "c1", "name": "session_search", "arguments": {"query": "deploy codename"}}
SEARCH_ANSWER = "1 hit: user: Remember this: the deploy codename is BLUEFIN"
ANSWER = "The deploy codename is BLUEFIN."


# --- pure ----------------------------------------------------------------------------------


def test_an_archive_tool_is_known_by_its_name_and_as_an_mcp_tool_of_any_server():
    assert is_archive_tool("session_search") and is_archive_tool("memory_update")
    assert is_archive_tool("mcp__pi-memory__session_read") and is_archive_tool("mcp__my_mem__session_search")
    assert not is_archive_tool("read") and not is_archive_tool("mcp__files__read") and not is_archive_tool("search")


def test_a_call_to_the_archive_and_its_result_are_echoes_other_calls_are_not():
    assert is_echo_message("assistant", {"tools": ["session_search"]})
    assert is_echo_message("assistant", {"tools": ["read", "session_search"]})  # it asked the archive
    assert not is_echo_message("assistant", {"tools": ["read"]})
    assert is_echo_message("tool_result", {"tool": "session_search"})
    assert is_echo_message("tool_error", {"tool": "mcp__pi-memory__session_read"})
    assert not is_echo_message("tool_result", {"tool": "bash"})
    # several results on one line (Claude Code): an echo only if all of them are the archive's
    assert not is_echo_message("tool_result", {"tool": "session_search", "tools": ["session_search", "read"]})
    assert not is_echo_message("user", {}) and not is_echo_message("assistant", {})


def test_a_run_that_only_asked_the_archive_is_an_echo_in_full():
    run = [("user", {}), ("assistant", {"tools": ["session_search"]}), ("tool_result", {"tool": "session_search"})]
    assert run_echoes([*run, ("assistant", {})]) == [True, True, True, True]


def test_a_run_that_also_did_other_work_keeps_its_prompt_and_replies_as_evidence():
    run = [
        ("user", {}),
        ("assistant", {"tools": ["session_search"]}),
        ("tool_result", {"tool": "session_search"}),
        ("assistant", {"tools": ["edit"]}),
        ("tool_result", {"tool": "edit"}),
        ("assistant", {}),
    ]
    assert run_echoes(run) == [False, True, True, False, False, False]


def test_a_session_is_judged_run_by_run_from_each_user_message():
    messages = [
        ("user", {}),
        ("assistant", {}),
        ("user", {}),
        ("assistant", {"tools": ["memory_search"]}),
        ("tool_result", {"tool": "memory_search"}),
        ("assistant", {}),
        ("bash", {}),  # a user's `!` command after the reply: not part of the question
        ("user", {}),
        ("assistant", {}),
    ]
    assert session_echoes(messages) == [False, False, True, True, True, True, False, False, False]


def test_the_echo_token_is_never_a_token_of_any_text():
    assert ECHO_TOKEN not in tokenize(f"{ECHO_TOKEN} §echo echo §§echo").chars
    assert with_echo_token("a b", True) == f"a b {ECHO_TOKEN}" and with_echo_token("a b", False) == "a b"
    assert with_echo_token(b"a", True) == b"a " + ECHO_TOKEN.encode()


# --- sessions that recall ------------------------------------------------------------------


def _message(role: str, content: Any, ts: int, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, "timestamp": ts, **extra}


def _user(text: str, ts: int) -> dict[str, Any]:
    return _message("user", [{"type": "text", "text": text}], ts)


def _assistant(parts: list[dict[str, Any]], ts: int) -> dict[str, Any]:
    stop = "toolUse" if any(p["type"] == "toolCall" for p in parts) else "stop"
    return _message("assistant", parts, ts, model="faux-1", provider="faux", stopReason=stop)


def _result(call: dict[str, Any], text: str, ts: int) -> dict[str, Any]:
    return _message("toolResult", [{"type": "text", "text": text}], ts, toolCallId=call["id"], toolName=call["name"])


def recalling_session(start: int = 1_790_000_000_000) -> list[dict[str, Any]]:
    """Turn 1 says something; turns 2 and 3 ask the archive for it (turn 3 is under way: no reply yet)."""
    call3 = dict(SEARCH_CALL, id="c3")
    return [
        _user(FACT, start),
        _assistant([{"type": "text", "text": "Noted."}], start + 1_000),
        _user(RECALL, start + 60_000),
        _assistant([{"type": "text", "text": "Let me look."}, SEARCH_CALL], start + 61_000),
        _result(SEARCH_CALL, SEARCH_ANSWER, start + 62_000),
        _assistant([{"type": "text", "text": ANSWER}], start + 63_000),
        _user("Recall the deploy codename again, please.", start + 120_000),
        _assistant([{"type": "text", "text": "Searching."}, call3], start + 121_000),
    ]


def write_session(path: Path, messages: list[dict[str, Any]], session_id: str = SESSION) -> Path:
    header = {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-09-21T10:00:00.000Z", "cwd": "/w"}
    lines = [header]
    parent = None
    for k, m in enumerate(messages):
        entry_id = f"{k + 1:08x}"
        stamp = m["timestamp"]
        iso = f"2026-09-21T10:{(stamp // 60_000) % 60:02d}:{(stamp // 1000) % 60:02d}.000Z"
        lines.append({"type": "message", "id": entry_id, "parentId": parent, "timestamp": iso, "message": m})
        parent = entry_id
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def echo_flags(archive: Archive, session_id: str = SESSION) -> list[tuple[str, bool]]:
    rows = archive.store.rows("SELECT role, echo FROM msg WHERE session_id = ? ORDER BY ts, seq", (session_id,))
    return [(str(role), bool(echo)) for role, echo in rows]


EXPECTED = [
    ("user", False),
    ("assistant", False),
    ("user", True),
    ("assistant", True),
    ("tool_result", True),
    ("assistant", True),
    ("user", True),
    ("assistant", True),
]


def test_an_import_marks_the_calls_the_answers_and_the_runs_that_only_asked(archive: Archive, tmp_path: Path):
    archive.import_paths([write_session(tmp_path / "s.jsonl", recalling_session())])
    assert echo_flags(archive) == EXPECTED


def test_live_capture_marks_the_same_as_an_import_as_the_runs_grow(archive: Archive):
    archive.ensure_session(SESSION, "/w")
    for message in recalling_session():
        archive.capture_message(SESSION, message)
    assert echo_flags(archive) == EXPECTED


def test_a_run_that_goes_on_to_other_work_is_evidence_again(archive: Archive):
    archive.ensure_session(SESSION, "/w")
    messages = recalling_session()[:5]
    for message in messages:
        archive.capture_message(SESSION, message)
    assert echo_flags(archive)[2] == ("user", True)
    edit = {"type": "toolCall", "id": "e1", "name": "edit", "arguments": {"path": "deploy.yml"}}
    later = messages[-1]["timestamp"]
    archive.capture_message(SESSION, _assistant([{"type": "text", "text": "Now I edit deploy.yml."}, edit], later + 1))
    archive.capture_message(
        SESSION, _assistant([{"type": "text", "text": "Renamed BLUEFIN in deploy.yml."}], later + 2)
    )
    flags = echo_flags(archive)
    assert flags[2] == ("user", False)  # the prompt asked for work: evidence
    assert flags[3] == ("assistant", True) and flags[4] == ("tool_result", True)  # the recall itself stays out
    assert archive.search("BLUEFIN deploy.yml", limit=1)[0].role == "assistant"


def _texts(hits: list[Any]) -> list[str]:
    return [h.text for h in hits]


def test_a_search_finds_the_original_message_first_not_its_echoes(archive: Archive, tmp_path: Path):
    archive.import_paths([write_session(tmp_path / "s.jsonl", recalling_session())])
    hits = archive.search("deploy codename", limit=10)
    assert _texts(hits)[0] == FACT
    assert not {RECALL, ANSWER} & set(_texts(hits))
    assert all("session_search" not in t for t in _texts(hits))
    # asked for, the echoes are there
    assert {RECALL, ANSWER} <= set(_texts(archive.search("deploy codename", limit=10, include_echoes=True)))


def test_the_run_a_model_asks_from_is_never_a_hit(archive: Archive, tmp_path: Path):
    messages = recalling_session()
    messages[-2:] = [_user("What is the staging port? recall it", messages[-2]["timestamp"])]
    archive.import_paths([write_session(tmp_path / "s.jsonl", messages)])
    assert _texts(archive.search("staging port", limit=3))[0] == "What is the staging port? recall it"
    asked = archive.search("staging port", limit=3, asking_session=SESSION)
    assert _texts(asked)[0] == FACT and "What is the staging port? recall it" not in _texts(asked)
    # an unknown session (a new one, not archived yet) asks as anyone does
    assert archive.search("staging port", limit=3, asking_session="01b0ffff-0000-7000-8000-000000000000")


def test_session_ranking_and_the_summary_track_leave_echoes_out_too(archive: Archive, tmp_path: Path):
    other = "01b00000-0000-7000-8000-00000000e002"
    only_recall = [
        _user("Recall: the deploy codename?", 1_790_000_500_000),
        _assistant([{"type": "text", "text": "Looking."}, SEARCH_CALL], 1_790_000_501_000),
        _result(SEARCH_CALL, SEARCH_ANSWER, 1_790_000_502_000),
        _assistant([{"type": "text", "text": ANSWER}], 1_790_000_503_000),
    ]
    archive.import_paths(
        [
            write_session(tmp_path / "a.jsonl", recalling_session()[:2]),
            write_session(tmp_path / "b.jsonl", only_recall, other),
        ]
    )
    assert [s.session_id for s in archive.search_sessions("deploy codename")] == [SESSION]
    assert other in [s.session_id for s in archive.search_sessions("deploy codename", include_echoes=True)]
    runs = archive.search("deploy codename", scope="summary")
    assert runs and all(h.run.session_id == SESSION for h in runs)
    echoed = archive.search("deploy codename", scope="summary", include_echoes=True)
    assert other in {h.run.session_id for h in echoed}


def test_the_upgrade_step_marks_the_echoes_an_older_archive_holds(archive: Archive, archive_target: str, tmp_path):
    archive.import_paths([write_session(tmp_path / "s.jsonl", recalling_session())])
    store = archive.store
    with store.write():  # as an older pi-memory left it: no flags, no echo token in the index
        if archive_target.startswith("postgresql"):
            store.conn.execute(f"UPDATE msg SET echo = 0, tokens = ts_delete(tokens, '{ECHO_TOKEN}')")
        else:
            marked = store.rows("SELECT id, indexed, text FROM msg WHERE echo")
            store._rewrite_echo_entries([(i, False, ix, t) for i, ix, t in marked])  # noqa: SLF001
    assert RECALL in _texts(archive.search("deploy codename", limit=10))
    if archive_target.startswith("postgresql"):  # m007_echo_marks, as `migrate` runs it
        with store.write():
            store.conn.execute(dict(PG_MIGRATIONS)["m007_echo_marks"].encode())
    else:  # m011_echo_marks's data step
        store.mark_archived_echoes()
    assert echo_flags(archive) == EXPECTED
    assert RECALL not in _texts(archive.search("deploy codename", limit=10))
    assert _texts(archive.search("deploy codename", limit=1)) == [FACT]


def test_through_the_bridge_a_model_recalling_again_gets_the_original_message_first(archive_target: str):
    """What the pi extension sends: captures as pi's message_end gives them (indexed at the bridge's idle
    moments), then turn 3's `session_search` from inside its run."""
    from test_bridge import run

    captures = [
        {"id": k, "method": "capture", "params": {"session_id": SESSION, "message": m}}
        for k, m in enumerate(recalling_session(), start=2)
    ]
    search = {"query": "deploy codename", "limit": 5, "asking_session": SESSION}
    out = run(
        archive_target,
        {"id": 1, "method": "session_start", "params": {"session_id": SESSION, "cwd": "/w"}},
        *captures,
        {"id": 90, "method": "search", "params": search},
        {"id": 91, "method": "search", "params": {**search, "include_echoes": True}},
        {"id": 92, "method": "search", "params": {**search, "include_echoes": "yes"}},
    )
    first, echoed, bad = out[-3]["result"], out[-2]["result"], out[-1]
    assert first["hits"][0]["snippet"].replace("⟦", "").replace("⟧", "") == FACT
    assert len(first["hits"]) == 1  # turns 2 and 3 are echoes; turn 3 is also the run asking
    assert len(echoed["hits"]) > 1
    assert bad["error"]["code"] == "bad_params"
