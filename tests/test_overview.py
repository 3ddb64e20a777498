"""The library side of the web viewer: overview figures, message addresses, reads from the start, `until`."""

from __future__ import annotations

from typing import Any

from conftest import PI_DATA
from pi_memory.archive.overview import DAY_MS, day_series, top_groups


def test_day_series_has_every_day_of_the_window_with_zeros_where_nothing_happened() -> None:
    assert day_series({10: 3, 12: 1}, 10, 4) == [(10 * DAY_MS, 3), (11 * DAY_MS, 0), (12 * DAY_MS, 1), (13 * DAY_MS, 0)]


def test_top_groups_keeps_the_largest_and_sums_the_rest_as_other() -> None:
    rows = [("a", 1), ("b", 5), ("", 2), ("c", 3)]
    assert top_groups(rows, keep=2) == [("b", 5), ("c", 3), ("other", 3)]
    assert top_groups([("", 4)]) == [("?", 4)]


def test_overview_counts_the_messages_of_runs_per_day_project_and_agent(imported: Any) -> None:
    ov = imported.overview(days=366)
    in_runs = sum(r.messages for r in imported.runs(limit=1000))
    assert sum(n for _day, n in ov.per_day) == in_runs
    assert sum(n for _p, n in ov.per_project) == in_runs
    assert ov.per_agent == [("pi", in_runs)]
    assert len(ov.per_day) == 366 and ov.per_day[-1][0] <= ov.window_end < ov.per_day[-1][0] + DAY_MS
    assert ov.stats.messages >= in_runs and len(ov.last_imports) == 8
    assert all(str(PI_DATA) in i["path"] for i in ov.last_imports)


def test_overview_of_an_empty_archive_is_all_zeros(archive: Any) -> None:
    ov = archive.overview(days=7)
    assert [n for _d, n in ov.per_day] == [0] * 7 and ov.per_project == [] and ov.last_imports == []


def test_run_addresses_name_each_message_by_its_run_and_position(imported: Any) -> None:
    run = imported.runs(limit=1)[0]
    window = imported.read_address(run.address)
    addresses = imported.run_addresses(m.msg_id for m in window.messages)
    assert addresses == {m.msg_id: m.address for m in window.messages}
    assert imported.run_addresses([]) == {} and imported.run_addresses([987654321]) == {}


def test_read_from_start_opens_a_session_at_its_first_message(imported: Any) -> None:
    session = imported.sessions(limit=1)[0].id
    first = imported.read(session, before=0, after=1, from_start=True)
    assert first.messages[0].seq == min(m.seq for m in imported.read(session, before=50, after=0).messages)
    assert first.before_more is False


def test_until_limits_messages_and_run_summaries_from_above(imported: Any) -> None:
    hits = imported.search("README")
    newest = max(h.ts for h in hits)
    assert imported.search("README", until=newest + 1)
    assert all(h.ts < newest for h in imported.search("README", until=newest))
    assert imported.search("README", until="2000-01-01") == []
    assert imported.search("README", scope="summary", until="2000-01-01") == []
    assert imported.search("README", scope="summary", until="2999-01-01")
