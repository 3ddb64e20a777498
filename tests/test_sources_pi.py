from pathlib import Path

import pytest

from conftest import BAD_DATA, PI_DATA
from pi_memory.core.sources.pi import active_branch, parse_iso_ms, parse_lines, project_of, read_session_file

PI_FILES = sorted(PI_DATA.glob("*.jsonl")) + sorted((PI_DATA / "agent-dir").rglob("*.jsonl"))


@pytest.mark.parametrize("path", PI_FILES, ids=lambda p: p.name)
def test_every_real_pi_file_parses_without_skipping_a_line(path: Path):
    parsed = read_session_file(path)
    assert parsed.header is not None and parsed.header.version == 3
    assert parsed.skipped == []
    assert parsed.messages
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    assert len(parsed.entries) == len(lines) - 1
    # every entry keeps its line verbatim
    assert [e.raw for e in parsed.entries] == lines[1:]


def test_header_fields_are_read():
    parsed = read_session_file(PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl")
    h = parsed.header
    assert h is not None and h.cwd == "/home/dev/vue-shop" and h.started_at > 1_700_000_000_000
    assert parsed.name == "Vue 购物车 reactive() 响应式修复"


def test_both_pi_versions_render_the_same_conversation():
    old = read_session_file(PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl")
    new = read_session_file(PI_DATA / "pi-1.6.0-vue-reactive-zh.jsonl")

    def users(parsed):  # type: ignore[no-untyped-def]
        return [m.rendered.text for m in parsed.messages if m.rendered.role == "user"]

    def roles(parsed):  # type: ignore[no-untyped-def]
        return [m.rendered.role for m in parsed.messages]

    assert users(old) == users(new) and len(users(old)) == 3
    assert roles(old) == roles(new)


def test_compaction_and_branch_summaries_become_summary_messages():
    parsed = read_session_file(PI_DATA / "pi-0.73.1-sdk-faux-tree.jsonl")
    kinds = [(e.type, e.rendered.role) for e in parsed.messages if e.rendered and e.rendered.role == "summary"]  # type: ignore[union-attr]
    assert ("compaction", "summary") in kinds and ("branch_summary", "summary") in kinds


def test_a_tree_with_two_leaves_keeps_both_branches_and_finds_the_active_one():
    parsed = read_session_file(PI_DATA / "pi-0.73.1-sdk-faux-tree.jsonl")
    ids = {e.entry_id for e in parsed.entries}
    parents = [e.parent_id for e in parsed.entries if e.parent_id]
    leaves = ids - set(parents)
    assert len(leaves) == 2
    branch = active_branch(parsed.entries)
    assert branch[-1] is parsed.entries[-1] and branch[0].parent_id is None
    assert len(branch) < len(parsed.entries)


def test_v1_legacy_file_gets_a_linear_chain_and_string_content():
    parsed = read_session_file(BAD_DATA / "pi-v1-legacy.jsonl")
    assert parsed.header is not None and parsed.header.version == 1
    assert all(e.entry_id is None for e in parsed.entries)
    assert parsed.entries[1].parent_id is None  # no ids to link in v1: order is the file order
    texts = [e.rendered.text for e in parsed.messages]  # type: ignore[union-attr]
    assert texts[0] == "旧格式会话：请列出 src 目录"
    assert "The user listed src/ (app.py, utils.py)." in texts


@pytest.mark.parametrize(
    "name,bad_lines",
    [
        ("pi-non-json-line-in-middle.jsonl", [7]),
        ("pi-truncated-mid-line.jsonl", [13]),
        ("pi-invalid-utf8.jsonl", [4]),  # reported, and kept (below)
        ("pi-bom-crlf.jsonl", []),
        ("pi-unknown-entry-type-and-role.jsonl", []),
        ("pi-long-line-2mb.jsonl", []),
        ("pi-header-only.jsonl", []),
    ],
)
def test_bad_files_report_their_bad_lines(name: str, bad_lines: list[int]):
    parsed = read_session_file(BAD_DATA / name)
    assert parsed.header is not None
    assert [s.line_no for s in parsed.skipped] == bad_lines


def test_a_line_of_invalid_utf8_is_kept_with_replacement_characters_and_reported():
    parsed = read_session_file(BAD_DATA / "pi-invalid-utf8.jsonl")
    first_user = next(e for e in parsed.messages if e.rendered and e.rendered.role == "user")
    assert "\ufffd" in first_user.rendered.text  # type: ignore[union-attr]
    line_4 = (BAD_DATA / "pi-invalid-utf8.jsonl").read_bytes().splitlines()[3]
    assert first_user.line_no == 4 and first_user.raw == line_4  # the line as it is, bad bytes and all
    (note,) = parsed.skipped
    assert note.line_no == 4 and note.error.startswith("invalid UTF-8 at byte ") and "kept" in note.error


def test_unknown_entry_types_and_blocks_are_kept_raw():
    parsed = read_session_file(BAD_DATA / "pi-unknown-entry-type-and-role.jsonl")
    assert any(e.type == "future_checkpoint" and e.rendered is None for e in parsed.entries)
    assert any(e.rendered and e.rendered.role == "other" for e in parsed.entries)
    assert any(e.rendered and "[audio]" in e.rendered.text for e in parsed.entries)


def test_random_bytes_and_empty_files_have_no_header():
    assert read_session_file(BAD_DATA / "binary-random.jsonl").header is None
    empty = read_session_file(BAD_DATA / "empty.jsonl")
    assert empty.header is None and empty.skipped == []


def test_a_file_whose_first_line_is_not_a_header_is_rejected():
    parsed = parse_lines([b'{"type":"message","id":"a"}', b'{"type":"session","id":"x"}'])
    assert parsed.header is None and parsed.skipped[0].error.startswith("first line is not")


def test_times_parse_from_iso_and_epoch():
    assert parse_iso_ms("2026-12-02T09:47:30.092Z") == 1796204850092
    assert parse_iso_ms(1796204850092) == 1796204850092
    assert parse_iso_ms("garbage") == 0 and parse_iso_ms(None) == 0


def test_project_is_the_last_path_component():
    assert project_of("/home/dev/vue-shop/") == "vue-shop"
    assert project_of("e:\\Workspace\\app") == "app"
    assert project_of("") == ""
