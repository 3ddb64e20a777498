"""The web viewer's pure helpers: parameters, highlighting, plots, access rules (no server)."""

from __future__ import annotations

import pytest

from pi_memory.errors import BadInput
from pi_memory.frontends.web import security, views


def marked(text: str, query: str) -> list[str]:
    return [piece for piece, hit in views.highlight(text, query) if hit]


def test_highlight_marks_every_occurrence_of_every_query_word_case_insensitively() -> None:
    assert marked("README says: read the readme", "readme") == ["README", "readme"]
    assert marked("the cat sat on the category", "cat") == ["cat"]  # not inside a longer word


def test_highlight_marks_chinese_phrases_and_traditional_forms() -> None:
    assert marked("修复响应式的问题，响应式", "响应式") == ["响应式", "响应式"]
    assert marked("修復響應式問題", "响应式") == ["響應式"]


def test_highlight_keeps_every_character_of_the_text() -> None:
    text = "SSE 断流 after 30s <b>"
    assert "".join(piece for piece, _hit in views.highlight(text, "sse 断流")) == text


def test_strip_hit_marks_removes_only_the_snippet_markers() -> None:
    assert views.strip_hit_marks("…a ⟦hit⟧ b ⟦hit⟧ 【c】") == "…a hit b hit 【c】"
    assert views.strip_hit_marks("no marks") == "no marks"


def test_search_parameters_round_trip_through_the_url() -> None:
    p = views.parse_search({"q": " 缓存 index ", "track": "runs", "since": "2026-01-01", "limit": "50"})
    assert (p.q, p.track, p.since, p.limit) == ("缓存 index", "runs", "2026-01-01", 50)
    assert views.parse_search(dict(pair.split("=") for pair in p.to_query().split("&"))).track == "runs"
    assert views.SearchParams(q="x").to_query() == "q=x"


@pytest.mark.parametrize("bad", [{"track": "x"}, {"agent": "gpt"}, {"kind": "x"}, {"limit": "-1"}, {"limit": "1e3"}])
def test_bad_search_parameters_are_refused(bad: dict[str, str]) -> None:
    with pytest.raises(BadInput):
        views.parse_search(bad)


def test_day_plot_scales_bars_to_the_busiest_day() -> None:
    plot = views.day_plot([(0, 0), (86_400_000, 5), (2 * 86_400_000, 10)], width=300, height=100)
    assert [b.height for b in plot.bars] == [0, 50, 100] and plot.peak == 10
    assert [b.x for b in plot.bars] == [0, 100, 200]


def test_group_plot_of_nothing_is_empty() -> None:
    assert views.group_plot([]).bars == []


def test_only_loopback_addresses_may_go_without_a_token() -> None:
    assert security.check_bind("127.0.0.1", None) is None and security.check_bind("::1", None) is None
    assert "needs --token" in (security.check_bind("0.0.0.0", None) or "")
    assert security.check_bind("0.0.0.0", "long-enough-token") is None
    assert "too short" in (security.check_bind("127.0.0.1", "abc") or "")


def test_allowed_hosts_are_loopback_names_with_and_without_the_port() -> None:
    hosts = security.allowed_hosts("127.0.0.1", 8765)
    assert hosts is not None and {"127.0.0.1:8765", "localhost:8765", "localhost"} <= hosts
    assert security.allowed_hosts("0.0.0.0", 8765) is None
    assert not security.host_ok("evil.example:8765", hosts) and security.host_ok("LOCALHOST:8765", hosts)


def test_tool_messages_fold_under_one_line() -> None:
    assert views.is_tool_message("assistant", {"tools": ["bash"]}) and not views.is_tool_message("assistant", {})
    assert views.fold_title("tool_error", {"tool": "bash", "output_chars": 12}, "") == "✗ bash (12 chars)"
    assert views.fold_title("bash", {}, "$ ls\nout") == "$ ls"


def test_first_page_keeps_a_short_message_whole_and_cuts_a_long_one_at_the_byte_limit() -> None:
    assert views.first_page("短消息", 12) == ("短消息", None)
    text, next_offset = views.first_page("响" * 10, 12)  # 3 bytes per character
    assert (text, next_offset) == ("响" * 4, 4)


def test_the_ledger_chart_puts_before_and_after_on_one_scale_and_an_empty_side_at_zero() -> None:
    row = {"before": {"rate": 75.0, "hits": 3, "runs": 4}, "after": {"rate": 37.5, "hits": 3, "runs": 8}}
    before, after = views.ledger_plot(row, width=300)
    assert (before.label, before.width, after.width) == ("before", 300, 150)
    assert (after.hits, after.runs) == (3, 8) and after.y > before.y
    empty = views.ledger_plot({"before": {"rate": None, "hits": 0, "runs": 0}, "after": row["after"]}, width=300)
    assert (empty[0].rate, empty[0].width, empty[1].width) == (None, 0, 300)


def test_review_parameters_default_the_ledger_workspace_to_the_project() -> None:
    p = views.parse_review({"project": " /home/dev/shop ", "min_count": "4"}, 3)
    assert (p.workspace, p.min_count, p.agent) == ("/home/dev/shop", 4, "")
    assert views.parse_review({}, 3).workspace is None and views.parse_review({}, 3).min_count == 3
    with pytest.raises(BadInput, match="unknown agent"):
        views.parse_review({"agent": "gpt"})
