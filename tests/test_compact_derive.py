"""Rule-derived memory candidates: literal facts and the user's own marked sentences, never assistant text or secrets."""

from __future__ import annotations

from pathlib import Path

from compact_helpers import Branch
from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.compact.derive import (
    classify,
    derive_memories,
    has_persistence_marker,
    looks_like_credential,
    write_derived,
)
from pi_memory.core.sources.pi import read_session_file
from test_compact_plan import busy_session


def test_marked_user_sentences_are_classified() -> None:
    b = Branch()
    b.user("以后都用 pnpm 而不是 npm。这个函数有 bug，帮我看看")
    b.user("Never push to main directly. Please fix the login page.")
    b.user("本项目默认使用 tabs 缩进")
    b.user("From now on we will switch to ruff instead of flake8.")
    b.user("我偏好简短的回答")
    found = [
        (m.kind, m.text, m.entry_ids) for m in derive_memories(b.entries) if m.kind not in ("file", "command", "test")
    ]
    assert found == [
        ("decision", "以后都用 pnpm 而不是 npm。", ["e001"]),
        ("constraint", "Never push to main directly.", ["e002"]),
        ("preference", "本项目默认使用 tabs 缩进", ["e003"]),
        ("decision", "From now on we will switch to ruff instead of flake8.", ["e004"]),
        ("preference", "我偏好简短的回答", ["e005"]),
    ]


def test_assistant_text_never_becomes_a_memory() -> None:
    b = Branch()
    b.user("fix it")
    b.assistant("I will always use tabs from now on in this project.")
    assert [m for m in derive_memories(b.entries) if m.kind in ("preference", "constraint", "decision")] == []


def test_sentences_that_look_like_credentials_are_skipped() -> None:
    b = Branch()
    b.user("Always use OPENAI_API_KEY=sk-proj-abcdefghijklmnop for tests.")
    b.user("本项目的数据库密码始终是 hunter2")
    b.user("always use the token ghp_abcdefghijklmnopqrstuvwxyz123456")
    assert derive_memories(b.entries) == []
    assert looks_like_credential("password: x") and not looks_like_credential("always run pytest -q")


def test_long_or_unmarked_sentences_are_not_taken() -> None:
    b = Branch()
    b.user("please refactor the module and run tests")
    b.user("always " + "x" * 300)
    assert derive_memories(b.entries) == []
    assert has_persistence_marker("总是先跑测试") and not has_persistence_marker("alwaysx on")
    assert classify("不要改生产库") == "constraint"


def test_files_commands_and_tests_carry_their_entry_ids() -> None:
    b = busy_session(2)
    found = {(m.kind, m.text): m.entry_ids for m in derive_memories(b.entries)}
    assert found[("file", "changed src/module_0.py")] == ["e004", "e005"]
    assert found[("command", "`pytest tests/test_0.py` exited 1")] == ["e006", "e007"]
    assert found[("test", "tests: 10 passed, 1 failed")] == ["e007"]
    assert ("file", "changed src/module_1.py") in found


def test_a_failed_edit_is_not_a_changed_file() -> None:
    b = Branch()
    b.user("edit it")
    b.assistant("", [("c1", "edit", {"path": "a.md", "edits": []})])
    b.result("c1", "Could not find the exact text", name="edit", error=True)
    assert [m.kind for m in derive_memories(b.entries)] == []


def test_real_fixture_derives_facts_and_skips_the_leaked_key() -> None:
    parsed = read_session_file(PI_DATA / "pi-0.73.1-cache-index-zh-continue.jsonl")
    found = derive_memories([e.data for e in parsed.entries])
    assert all("sk-proj" not in m.text for m in found)
    assert all(m.entry_ids for m in found)


def test_write_derived_stores_session_scoped_rule_proposals(archive: Archive, tmp_path: Path) -> None:
    from pi_memory import memory  # the project's own module: an import error fails, never skips

    b = busy_session(1)
    b.user("以后都用 pnpm。")
    records = derive_memories(b.entries)
    written = write_derived(archive, "sess-0001-aaaa", str(tmp_path), records)
    assert written == len(records)
    assert write_derived(archive, "sess-0001-aaaa", str(tmp_path), records) == 0  # the same text is not written twice
    _ws, state, _report = memory.Memories(archive.store).state(str(tmp_path))
    mine = list(state.records.values())
    assert {r.author for r in mine} == {"rule"} and {r.scope for r in mine} == {"session"}
    assert {r.status for r in mine} == {"provisional"}


def test_a_commit_writes_derived_memories_once_and_status_counts_them(archive: Archive, tmp_path: Path) -> None:
    from test_compact_window import SID, commit

    b = busy_session(2)
    b.user("本项目始终用 pnpm。")
    entry = commit(b, b.user("next"))
    done = archive.compact_committed(SID, entry, b.entries, cwd=str(tmp_path))
    again = archive.compact_committed(SID, entry, b.entries, cwd=str(tmp_path))
    assert done.derived > 0 and done.window.derived_count == done.derived
    assert again.derived == 0 and not again.written
    memory = archive.compact_status(tmp_path).to_dict()["memory"]
    assert memory["records"] == done.derived and memory["by_author"] == {"rule": done.derived}
    assert memory["by_status"] == {"provisional": done.derived}
