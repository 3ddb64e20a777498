from pi_memory.core.render import INDEXED_TEXT_CAP, message_hash, render_message


def test_user_text_keeps_image_placeholders():
    msg = {
        "role": "user",
        "content": [{"type": "text", "text": "看图"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
    }
    r = render_message(msg, 1)
    assert r is not None and r.role == "user" and r.text == "看图\n[image]" and r.indexed


def test_assistant_drops_thinking_and_shows_tool_calls_with_clipped_args():
    msg = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "secret plan"},
            {"type": "text", "text": "Working."},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/a.ts"}},
            {"type": "toolCall", "id": "c2", "name": "write", "arguments": {"path": "b", "content": "x" * 1000}},
        ],
        "stopReason": "toolUse",
        "model": "m1",
    }
    r = render_message(msg, 1)
    assert r is not None
    assert "secret plan" not in r.text
    lines = r.text.split("\n")
    assert lines[0] == "Working."
    assert lines[1] == '→ read({"path":"src/a.ts"})'
    assert lines[2].startswith('→ write({"path":"b"') and lines[2].endswith("…)")
    assert len(lines[2]) < 320
    assert r.meta["tools"] == ["read", "write"] and r.meta["model"] == "m1"


def test_successful_tool_result_is_stored_but_not_indexed():
    msg = {
        "role": "toolResult",
        "toolName": "bash",
        "toolCallId": "c1",
        "content": [{"type": "text", "text": "ok\n" * 500}],
        "isError": False,
    }
    r = render_message(msg, 1)
    assert r is not None and r.role == "tool_result" and not r.indexed
    assert r.meta["output_chars"] == 1500


def test_failed_tool_result_keeps_its_first_500_chars():
    msg = {"role": "toolResult", "toolName": "bash", "content": [{"type": "text", "text": "E" * 900}], "isError": True}
    r = render_message(msg, 1)
    assert r is not None and r.role == "tool_error" and r.indexed
    assert r.text.startswith("✗ bash: EEE") and r.text.count("E") == 500


def test_bash_execution_shows_command_exit_code_and_output():
    msg = {"role": "bashExecution", "command": "cat x", "output": "no such file", "exitCode": 1}
    r = render_message(msg, 1)
    assert r is not None and r.role == "bash" and r.text == "$ cat x  [exit 1]\nno such file"


def test_error_assistant_turn_says_so():
    r = render_message({"role": "assistant", "content": [], "stopReason": "error", "errorMessage": "529 overloaded"}, 1)
    assert r is not None and "✗ error: 529 overloaded" in r.text


def test_system_role_is_not_archived_as_a_message():
    assert render_message({"role": "system", "sections": {}}, 1) is None


def test_unknown_role_is_kept_as_other():
    r = render_message({"role": "reviewer", "content": "LGTM"}, 1)
    assert r is not None and r.role == "other" and r.text == "LGTM"


def test_indexed_text_is_capped_at_twenty_thousand_chars():
    r = render_message({"role": "user", "content": "字" * 30000}, 1)
    assert r is not None and len(r.text) < INDEXED_TEXT_CAP + 100 and r.meta["truncated"] == 30000


def test_hash_depends_on_role_time_and_text_only():
    assert message_hash("user", 1, "a") == message_hash("user", 1, "a")
    assert (
        len(
            {
                message_hash("user", 1, "a"),
                message_hash("user", 2, "a"),
                message_hash("assistant", 1, "a"),
                message_hash("user", 1, "b"),
            }
        )
        == 4
    )
