"""Edits read off transcripts: each agent's call shapes, pairing with results, paths, patches."""

from __future__ import annotations

import json
from pathlib import Path

from pi_memory.core.sources.readers import read_session_file
from pi_memory.provenance.extract import (
    DELETE,
    EDIT,
    MOVE,
    WRITE,
    Call,
    MessageLines,
    changes,
    pair_edits,
    parse_patch,
    plan_file,
    resolve_path,
    tool_calls,
    tool_outcomes,
)

DATA = Path(__file__).parent / "data"


def test_pi_edit_calls_in_every_shape_pi_accepts_give_the_same_changes() -> None:
    one = {"oldText": "a\n", "newText": "b\n"}
    shapes = [
        {"path": "x.py", "edits": [one]},  # pi 0.73 and 1.x
        {"path": "x.py", "edits": json.dumps([one])},  # a model that sends the list as a string
        {"path": "x.py", "edits": one},  # one edit, not in a list (pi 1.x takes it)
        {"path": "x.py", **one},  # the single-edit shape of older pi
    ]
    for args in shapes:
        assert changes(Call("c1", "edit", args)) == [changes(Call("c1", "edit", shapes[0]))[0]], args
    assert changes(Call("c1", "write", {"path": "x.py", "content": "hi\n"}))[0].kind == WRITE


def test_claude_code_edit_multiedit_and_write_become_changes() -> None:
    edit = changes(
        Call("t", "Edit", {"file_path": "/r/a.ts", "old_string": "x", "new_string": "y", "replace_all": True})
    )
    assert [(c.kind, c.path, c.old, c.new, c.replace_all) for c in edit] == [(EDIT, "/r/a.ts", "x", "y", True)]
    multi = changes(
        Call(
            "t",
            "MultiEdit",
            {
                "file_path": "/r/a.ts",
                "edits": [{"old_string": "1", "new_string": "2"}, {"old_string": "3", "new_string": "4"}],
            },
        )
    )
    assert [(c.old, c.new) for c in multi] == [("1", "2"), ("3", "4")]
    assert changes(Call("t", "Write", {"file_path": "/r/b.ts", "content": "z"}))[0].new == "z"


def test_a_codex_patch_adds_updates_moves_and_deletes_files() -> None:
    patch = "\n".join(
        [
            "*** Begin Patch",
            "*** Add File: docs/new.md",
            "+# New",
            "+text",
            "*** Update File: src/app.py",
            "*** Move to: src/main.py",
            "@@ def main():",
            " def main():",
            "-    return 1",
            "+    return 2",
            "@@",
            "-x = 1",
            "+x = 2",
            "*** Delete File: old.txt",
            "*** End Patch",
        ]
    )
    got = parse_patch(patch)
    assert [(c.kind, c.path) for c in got] == [
        (WRITE, "docs/new.md"),
        (MOVE, "src/main.py"),
        (EDIT, "src/main.py"),
        (EDIT, "src/main.py"),
        (DELETE, "old.txt"),
    ]
    assert got[0].new == "# New\ntext\n" and got[1].from_path == "src/app.py"
    assert (got[2].old, got[2].new, got[2].lines) == (
        "def main():\n    return 1\n",
        "def main():\n    return 2\n",
        True,
    )


def test_a_shell_call_that_runs_apply_patch_is_an_edit_call() -> None:
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"
    as_list = Call("c", "shell", {"command": ["apply_patch", patch]})
    as_heredoc = Call("c", "exec_command", {"cmd": f"apply_patch <<'EOF'\n{patch}\nEOF"})
    assert changes(as_list) == changes(as_heredoc) == [parse_patch(patch)[0]]
    assert changes(Call("c", "shell", {"command": ["ls", "-la"]})) == []


def test_paths_are_resolved_against_the_session_folder_as_pi_resolves_them() -> None:
    assert resolve_path("src/a.py", "/home/dev/proj") == "/home/dev/proj/src/a.py"
    assert resolve_path("@src/../b.py", "/home/dev/proj") == "/home/dev/proj/b.py"
    assert resolve_path("/etc/hosts", "/home/dev/proj") == "/etc/hosts"
    assert resolve_path("file:///tmp/x", "/home") == "/tmp/x"


def _pi_lines(*messages: dict) -> list[MessageLines]:
    return [MessageLines(k, 1000 + k, [{"type": "message", "message": m}]) for k, m in enumerate(messages)]


def test_only_an_edit_whose_result_succeeded_is_an_edit() -> None:
    call = {"role": "assistant", "content": [
        {"type": "toolCall", "id": "ok", "name": "edit", "arguments": {"path": "a.py", "edits": [{"oldText": "1", "newText": "2"}]}},
        {"type": "toolCall", "id": "bad", "name": "write", "arguments": {"path": "b.py", "content": "x"}},
        {"type": "toolCall", "id": "later", "name": "write", "arguments": {"path": "c.py", "content": "y"}},
    ]}  # fmt: skip
    ok = {
        "role": "toolResult",
        "toolCallId": "ok",
        "toolName": "edit",
        "isError": False,
        "details": {"firstChangedLine": 7},
    }
    bad = {"role": "toolResult", "toolCallId": "bad", "toolName": "write", "isError": True}
    records = pair_edits(_pi_lines(call, ok, bad), "/w")
    assert [(r.call_id, r.path, r.call_key, r.result_key, r.line, r.ts) for r in records] == [
        ("ok", "/w/a.py", 0, 1, 7, 1001)
    ]


def test_pi_1x_result_patch_gives_the_first_changed_line() -> None:
    result = {
        "role": "toolResult",
        "toolCallId": "c",
        "isError": False,
        "details": {"patch": "--- a\n+++ a\n@@ -4,8 +5,10 @@\n"},
    }
    assert tool_outcomes({"type": "message", "message": result})[0].line == 5


def test_claude_results_carry_the_file_before_and_the_first_changed_line() -> None:
    line = {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "updated"}]},
        "toolUseResult": {"originalFile": "old\n", "structuredPatch": [{"newStart": 12}]},
    }
    (outcome,) = tool_outcomes(line)
    assert (outcome.call_id, outcome.ok, outcome.before, outcome.line) == ("t1", True, "old\n", 12)
    refused = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t2", "content": "<tool_use_error>String not found</tool_use_error>"}]}}  # fmt: skip
    assert not tool_outcomes(refused)[0].ok


def test_codex_calls_and_outputs_pair_by_call_id() -> None:
    call = {"type": "response_item", "payload": {"type": "custom_tool_call", "name": "apply_patch", "call_id": "p1",
            "input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"}}  # fmt: skip
    out = {"type": "response_item", "payload": {"type": "custom_tool_call_output", "call_id": "p1", "output": "Done!"}}
    assert [c.tool for c in tool_calls(call)] == ["apply_patch"]
    records = pair_edits([MessageLines(0, 1, [call]), MessageLines(1, 2, [out])], "/w")
    assert [(r.path, r.kind, r.new_lines) for r in records] == [("/w/a.txt", WRITE, 1)]
    failed = {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "p1",
              "output": json.dumps({"output": "error: no match", "metadata": {"exit_code": 1}})}}  # fmt: skip
    assert pair_edits([MessageLines(0, 1, [call]), MessageLines(1, 2, [failed])], "/w") == []


def test_the_real_pi_fixtures_of_both_lines_give_their_edits_and_writes() -> None:
    for name in ("pi-0.73.1-sse-stream-mixed.jsonl", "pi-1.6.0-sse-stream-mixed.jsonl"):
        parsed = read_session_file(DATA / "pi" / name)
        assert parsed.header is not None
        rows = plan_file(
            ((e.rendered.hash, e.rendered.role, e.rendered.meta, e.rendered.text, e.ts, e.data) for e in parsed.messages if e.rendered),
            parsed.header.cwd,
        )  # fmt: skip
        got = sorted((row[6], row[4], row[5], row[13]) for row in rows)  # path, tool, kind, first line
        assert got == [
            ("/home/dev/chat-gateway/deploy/nginx.conf", "edit", "edit", 3),
            ("/home/dev/chat-gateway/server/stream.js", "edit", "edit", 8),
        ], name
