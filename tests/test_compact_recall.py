"""Reading entries by pi entry id: what a checkpoint's `[id]` pointers resolve to."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.errors import BadInput
from pi_memory.frontends.cli.main import cli

SSE = "01a2364c-47af-74be-8d7c-46780d07ec0e"
LONG = "01a2364c-a7f6-75cb-ba8a-42838165f27d"


def test_checkpoint_ids_resolve_to_messages_in_session_order(imported: Archive) -> None:
    read = imported.read_entries(SSE, ["a35c822d", "12a82452", "nothere1"])
    assert [v.entry_id for v in read.entries] == ["12a82452", "a35c822d"]
    assert read.entries[0].role == "user" and "SSE stream" in read.entries[0].text
    assert read.missing == ["nothere1"] and read.omitted == []


def test_a_non_message_entry_is_readable_raw(imported: Archive) -> None:
    read = imported.read_entries(SSE[:12], ["[78092ca6]"], raw=True)
    view = read.entries[0]
    assert view.type == "custom" and view.text is None
    assert json.loads(view.raw)["data"]["note"] == "extension state / 扩展状态"


def test_long_raw_entries_come_in_segments(imported: Archive) -> None:
    first = imported.read_entries(LONG, ["c66606fd"], raw=True, limit=4000).entries[0]
    assert first.raw_chars > 27000 and len(first.raw) == 4000 and first.next_offset == 4000
    pieces = [first.raw]
    offset = first.next_offset
    while offset is not None:
        view = imported.read_entries(LONG, ["c66606fd"], raw=True, offset=offset, limit=8000).entries[0]
        pieces.append(view.raw)
        offset = view.next_offset
    assert json.loads("".join(pieces))["id"] == "c66606fd"


def test_the_answer_stays_within_the_read_budget(imported: Archive) -> None:
    read = imported.read_entries(LONG, ["80b093f0", "c66606fd"], raw=True, limit=6000)
    assert [v.entry_id for v in read.entries] == ["80b093f0"] and read.omitted == ["c66606fd"]


def test_bad_id_lists_are_one_line_errors(imported: Archive) -> None:
    with pytest.raises(BadInput):
        imported.read_entries(SSE, [])
    with pytest.raises(BadInput):
        imported.read_entries(SSE, [f"{i:08x}" for i in range(51)])


def test_entries_cli_prints_text_and_json(archive_target: str) -> None:
    with Archive.open(archive_target) as archive:
        archive.import_paths([PI_DATA])
    text = CliRunner().invoke(cli, ["--db", archive_target, "entries", SSE, "12a82452", "zzzz0000"])
    assert (
        text.exit_code == 0
        and "[12a82452] message user" in text.output
        and "not found in this session: zzzz0000" in text.output
    )
    out = CliRunner().invoke(cli, ["--db", archive_target, "entries", SSE, "78092ca6", "--raw", "--json"])
    data = json.loads(out.stdout)
    assert data["entries"][0]["type"] == "custom" and "not instructions" in data["note"]
