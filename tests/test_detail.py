"""Addressed reads: r<N>, r<N>/m<K>, lossless paging, attachments stripped, raw mode, the evidence header."""

from __future__ import annotations

import json

import pytest

from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.archive.runview import format_detail, format_run_window
from pi_memory.core.format import EVIDENCE_HEADER
from pi_memory.errors import BadInput, NotFound
from pi_memory.runs.detail import PAGE_BYTES, MessageDetail, RunWindow, page, parse_address, strip_attachments

LONG = "01a2364c-a7f6-75cb-ba8a-42838165f27d"  # pi 0.73.1 long-output-en: a 23 KB read result
VUE_16 = "01a2364c-7a3b-70ab-a89e-530d71f83655"  # pi 1.6.0 vue-reactive-zh: a user message with an image
TREE = "01a2364c-b6c1-77bd-b91e-b9a686c54145"  # pi 0.73.1 sdk-faux-tree: thinking blocks


def run_holding(archive: Archive, session: str, text: str) -> str:
    for run in archive.runs(session=session, limit=1000):
        window = archive.read_address(run.address)
        assert isinstance(window, RunWindow)
        for m in window.messages:
            if text in m.text:
                return m.address
    raise AssertionError(f"no message with {text!r}")


def all_pages(archive: Archive, address: str, raw: bool = False) -> list[MessageDetail]:
    pages: list[MessageDetail] = []
    offset: int | None = 0
    while offset is not None:
        detail = archive.read_address(address, offset=offset, raw=raw)
        assert isinstance(detail, MessageDetail)
        pages.append(detail)
        offset = detail.next_offset
    return pages


def source_line(file: str, needle: str) -> dict[str, object]:
    for line in (PI_DATA / file).read_text(encoding="utf-8").splitlines():
        if needle in line:
            return dict(json.loads(line))
    raise AssertionError(needle)


def test_a_23kb_tool_output_comes_in_12kb_pages_that_concatenate_to_the_original(imported: Archive) -> None:
    address = run_holding(imported, LONG, "✓ read: 2026-11-30T12:01:00Z")
    pages = all_pages(imported, address)
    assert len(pages) == 2
    assert all(len(p.text.encode()) <= PAGE_BYTES for p in pages)
    whole = "".join(p.text for p in pages)
    assert len(whole) == pages[0].total_chars
    original = source_line("pi-0.73.1-long-output-en.jsonl", '"toolCallId":"call_0_1_1"')["message"]
    output = original["content"][0]["text"]  # type: ignore[index]
    assert len(output) > 20_000
    assert output in whole  # every byte of the tool output, nothing lost at the page seam


def test_raw_mode_pages_the_verbatim_source_line(imported: Archive) -> None:
    address = run_holding(imported, LONG, "✓ read: 2026-11-30T12:01:00Z")
    pages = all_pages(imported, address, raw=True)
    original = (PI_DATA / "pi-0.73.1-long-output-en.jsonl").read_text(encoding="utf-8").splitlines()
    line = next(x for x in original if '"toolCallId":"call_0_1_1"' in x and '"toolResult"' in x)
    assert "".join(p.text for p in pages) == line
    assert len(pages) >= 2


def test_a_message_read_shows_full_tool_call_arguments(imported: Archive) -> None:
    address = run_holding(imported, VUE_16, '→ write({"path":"docs/响应式说明.md"')
    detail = imported.read_address(address)
    assert isinstance(detail, MessageDetail)
    original = source_line("pi-1.6.0-vue-reactive-zh.jsonl", '"id":"call_2_0_0","name":"write"')["message"]
    content = next(b for b in original["content"] if b.get("type") == "toolCall")  # type: ignore[attr-defined]
    assert content["arguments"]["content"] in detail.text  # the rendered text clips at 300 chars; this does not
    assert detail.next_offset is None


def test_images_are_replaced_by_a_placeholder_with_their_size(imported: Archive) -> None:
    first = imported.runs(session=VUE_16, limit=1000)[-1]
    detail = imported.read_address(first.address + "/m1")
    assert isinstance(detail, MessageDetail)
    image = next(
        b
        for b in source_line("pi-1.6.0-vue-reactive-zh.jsonl", '"type":"image"')["message"]["content"]  # type: ignore[index]
        if b["type"] == "image"
    )
    assert image["data"] not in detail.text
    assert f"[image image/png: {len(image['data'])} chars of base64" in detail.text
    assert "购物车角标的数量不更新" in detail.text
    raw = imported.read_address(first.address + "/m1", raw=True)
    assert image["data"] in raw.text  # type: ignore[union-attr]


def test_thinking_is_hidden_unless_asked_for(imported: Archive) -> None:
    address = run_holding(imported, TREE, "Let me check.")
    hidden = imported.read_address(address)
    shown = imported.read_address(address, thinking=True)
    assert "I should list the file." not in hidden.text  # type: ignore[union-attr]
    assert "[thinking: 23 chars hidden" in hidden.text  # type: ignore[union-attr]
    assert "I should list the file." in shown.text  # type: ignore[union-attr]


def test_a_run_read_lists_messages_by_address_within_the_cap(imported: Archive) -> None:
    run = imported.runs(session=LONG, limit=10)[-1]
    window = imported.read_address(run.address)
    assert isinstance(window, RunWindow)
    text = format_run_window(window)
    assert len(text) <= 8_000
    assert f"[{run.address}/m1] user: Why are requests slow?" in text
    assert f"[{run.address}/m5] tool_result: ✓ read:" in text


def test_a_run_read_with_an_offset_starts_later_and_says_where_to_continue(imported: Archive) -> None:
    run = imported.runs(session=LONG, limit=10)[-1]
    window = imported.read_address(run.address, offset=4)
    assert isinstance(window, RunWindow)
    assert [m.address for m in window.messages] == [f"{run.address}/m5", f"{run.address}/m6"]
    tiny = format_run_window(imported.read_address(run.address), cap=900)  # type: ignore[arg-type]
    assert "more messages: read " + run.address + " with offset" in tiny


def test_results_for_a_model_start_with_the_evidence_header(imported: Archive) -> None:
    run = imported.runs(session=LONG, limit=10)[-1]
    window = imported.read_address(run.address)
    detail = imported.read_address(run.address + "/m5")
    assert format_run_window(window, evidence=True).startswith(EVIDENCE_HEADER)  # type: ignore[arg-type]
    assert format_detail(detail, evidence=True).startswith(EVIDENCE_HEADER)  # type: ignore[arg-type]
    assert list(window.to_dict())[0] == "evidence"
    assert detail.to_dict()["evidence"] == EVIDENCE_HEADER


def test_bad_addresses_get_a_clear_error(imported: Archive) -> None:
    with pytest.raises(BadInput):
        parse_address("run12")
    with pytest.raises(BadInput):
        parse_address("r12/m0")
    with pytest.raises(NotFound):
        imported.read_address("r999999")
    run = imported.runs(limit=1)[0]
    with pytest.raises(NotFound, match="has no message m99"):
        imported.read_address(run.address + "/m99")
    with pytest.raises(BadInput):
        imported.read_address(run.address + "/m1", offset=10**9)


def test_pages_never_split_a_character_and_always_progress() -> None:
    text = "𠮷" * 5000 + "end"  # 4 bytes each
    chunks, offset = [], 0
    while True:
        chunk, nxt = page(text, offset, limit=1001)
        chunks.append(chunk)
        if nxt is None:
            break
        offset = nxt
    assert "".join(chunks) == text
    assert all(len(c.encode()) <= 1001 for c in chunks)


def test_strip_attachments_replaces_large_encoded_fields_only() -> None:
    value = {"content": [{"type": "text", "text": "x" * 5000}, {"type": "file", "data": "QUJD" * 1000}]}
    stripped = strip_attachments(value)
    assert stripped["content"][0]["text"] == "x" * 5000
    assert stripped["content"][1]["data"].startswith("[attachment: 4000 chars of base64")
