"""The archive's core behaviour, run against both backends: SQLite and PostgreSQL.

The PostgreSQL variant runs when PI_MEMORY_TEST_PG names a server (CI starts one with
scripts/ci-postgres.sh) and is skipped with that reason otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.archive.present import format_read, format_search, format_stats
from pi_memory.core.format import READ_CAP, SEARCH_CAP
from pi_memory.core.ids import MAX_QUERY_CHARS
from pi_memory.errors import BadInput, NotFound
from test_capture import RPC_COMPACTION, SDK_TREE, lines
from test_search import write_session, write_small_sessions

QUERIES = [
    "锁",
    "缓存",
    "之前那个缓存索引的方案是怎么定的",
    "Vue 响应式 实现",
    "the whale and the sea",
    "OPENAI_API_KEY",
    "api key",
    "寶玉",
    "宝玉",
    "session_before_compact",
]


@pytest.fixture(params=["sqlite", "postgres"])
def any_archive(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Archive]:
    target = str(db_path) if request.param == "sqlite" else request.getfixturevalue("pg_url")
    with Archive.open(target) as archive:
        yield archive


@pytest.fixture
def small(any_archive: Archive, tmp_path: Path) -> Archive:
    write_small_sessions(tmp_path)
    any_archive.import_paths([tmp_path])
    return any_archive


@pytest.fixture
def imported(any_archive: Archive) -> Archive:
    any_archive.import_paths([PI_DATA])
    return any_archive


def texts(archive: Archive, query: str, **kw: object) -> list[str]:
    return [h.text for h in archive.search(query, **kw)]  # type: ignore[arg-type]


# --- import --------------------------------------------------------------------------


def test_import_is_idempotent_on_both_backends(any_archive: Archive):
    first = any_archive.import_paths([PI_DATA])
    again = any_archive.import_paths([PI_DATA])
    forced = any_archive.import_paths([PI_DATA], force=True)
    assert (first.added, first.skipped) == (160, 0)
    assert again.added == 0 and again.unchanged == 12
    assert (forced.added, forced.skipped) == (0, 160)
    assert any_archive.stats().messages == 160


def test_stats_count_messages_sessions_projects_and_roles(imported: Archive):
    st = imported.stats()
    assert (st.sessions, st.messages, st.projects, st.indexed) == (12, 160, 8, 124)
    assert st.roles["user"] == 31 and st.db_bytes > 0 and st.oldest <= st.newest


def test_bad_files_are_reported_and_good_lines_kept(any_archive: Archive):
    report = any_archive.import_paths([PI_DATA.parent / "bad"])
    assert report.errors and report.added > 0


def test_a_nul_byte_in_a_message_is_archived_and_found(any_archive: Archive, tmp_path: Path):
    write_session(tmp_path / "nul.jsonl", "nulnulnu-0001", "/w/nul", ["before\x00after zebra", "ok"])
    assert any_archive.import_paths([tmp_path / "nul.jsonl"]).added == 2
    assert any_archive.import_paths([tmp_path / "nul.jsonl"], force=True).added == 0
    assert texts(any_archive, "zebra") and any_archive.read("nulnulnu-0001").messages[0].text.startswith("before")


# --- search --------------------------------------------------------------------------


def test_search_finds_one_char_chinese_query(small: Archive):
    found = texts(small, "锁")
    assert len(found) == 2 and any("读写锁" in t for t in found)


def test_search_finds_two_char_chinese_query(small: Archive):
    assert "缓存" in texts(small, "缓存")[0]


def test_search_finds_a_long_chinese_question_by_its_rare_words(small: Archive):
    assert "方案" in texts(small, "之前那个缓存索引的方案是怎么定的")[0]


def test_search_finds_mixed_chinese_and_english(small: Archive):
    assert "响应式" in texts(small, "Vue 响应式 实现")[0]


def test_search_finds_an_english_phrase(small: Archive):
    assert "whale" in texts(small, "the whale and the sea")[0]


def test_search_finds_identifiers_and_their_parts(small: Archive):
    assert "OPENAI_API_KEY" in texts(small, "OPENAI_API_KEY")[0]
    assert "session_before_compact" in texts(small, "session_before_compact")[0]
    assert "OPENAI_API_KEY" in texts(small, "api key")[0]


def test_traditional_query_finds_simplified_and_back(small: Archive):
    simplified, traditional = set(texts(small, "宝玉")), set(texts(small, "寶玉"))
    assert simplified == traditional
    assert any("寶玉" in t for t in simplified) and any("宝玉" in t for t in simplified)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "AND",
        "NEAR(缓存 索引)",
        "chars:缓存",
        "grams:*",
        "*",
        "缓存*",
        "\x00",
        "缓\x00存",
        "{chars grams}:x",
        "(",
        "'; DROP TABLE msg; --",
        "%",
        "_",
        "\\",
        "ARRAY['x']",
        "$1",
        "%s",
        "",
        "   ",
    ],
)
def test_any_query_string_is_data(small: Archive, query: str):
    assert isinstance(small.search(query), list)
    assert small.stats().messages == 12


def test_unknown_words_find_nothing(small: Archive):
    assert small.search("zzyzx qwxv") == []


def test_filters_project_since_session_roles_and_limit(small: Archive):
    hits = small.search("OPENAI_API_KEY 缓存", project="search-svc")
    assert hits and all(h.project == "search-svc" for h in hits)
    assert small.search("缓存", project="/home/u/vue-shop") == []
    assert small.search("宝玉", since="2026-06-01") == [] and len(small.search("宝玉", since="2026-05-01")) == 2
    assert {h.session_id for h in small.search("the", session="cccccccc")} == {"cccccccc-3333"}
    assert {h.role for h in small.search("OPENAI_API_KEY", roles=["user"])} == {"user"}
    assert len(small.search("the OR 的 a", limit=1)) == 1


def test_hits_carry_the_contract_fields(small: Archive):
    hit = small.search("缓存")[0].to_dict()
    assert set(hit) == {"msg_id", "session_id", "seq", "role", "ts", "project", "score", "snippet"}
    assert "⟦" in hit["snippet"]


def test_search_in_real_sessions(imported: Archive):
    assert "proxy_buffering" in imported.search("proxy_buffering 断流")[0].text
    assert "𠮷" in imported.search("𠮷")[0].text
    assert imported.search("k2599") == []  # successful tool output is stored, not indexed
    assert imported.search("购物车角标不更新")[0].project == "vue-shop"
    hits = imported.search("响应式", limit=50)
    assert len({h.msg_id for h in hits}) == len(hits)


def test_both_backends_rank_the_same_hits_in_the_same_order(request: pytest.FixtureRequest, tmp_path: Path):
    pg = request.getfixturevalue("pg_url")
    with Archive.open(tmp_path / "local.db") as lite, Archive.open(pg) as team:
        lite.import_paths([PI_DATA])
        team.import_paths([PI_DATA])
        for query in QUERIES + ["proxy_buffering 断流", "购物车角标不更新", "响应式", "the", "compaction summary"]:
            a = [(h.session_id, h.seq, round(h.score, 6), h.snippet) for h in lite.search(query, limit=20)]
            b = [(h.session_id, h.seq, round(h.score, 6), h.snippet) for h in team.search(query, limit=20)]
            assert a == b, query


def test_both_backends_rank_the_same_runs_by_their_summaries(request: pytest.FixtureRequest, tmp_path: Path):
    pg = request.getfixturevalue("pg_url")
    with Archive.open(tmp_path / "local.db") as lite, Archive.open(pg) as team:
        lite.import_paths([PI_DATA])
        team.import_paths([PI_DATA])
        for query in QUERIES + ["proxy_buffering 断流", "购物车角标不更新", "响应式", "the", "compaction summary"]:
            a = [
                (h.run.session_id, h.run.start_ts, h.score, h.run.summary)
                for h in lite.search(query, 20, scope="summary")
            ]
            b = [
                (h.run.session_id, h.run.start_ts, h.score, h.run.summary)
                for h in team.search(query, 20, scope="summary")
            ]
            assert a == b, query


def test_both_backends_number_the_messages_of_an_import_in_the_same_order(
    request: pytest.FixtureRequest, tmp_path: Path
):
    """Message ids follow the files' order on both (the sessions' own ids sort the other way here):
    the mean length BM25 divides by is sampled by id, and ties go to the newer id."""
    pg = request.getfixturevalue("pg_url")
    write_session(tmp_path / "a.jsonl", "ffffffff-0001", "/home/u/one", ["first file, first message", "and a reply"])
    write_session(tmp_path / "b.jsonl", "00000000-0002", "/home/u/two", ["second file, first message", "a reply"])
    with Archive.open(tmp_path / "local.db") as lite, Archive.open(pg) as team:
        lite.import_paths([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
        team.import_paths([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
        order = [
            [(str(s), int(q)) for s, q in archive.store.rows("SELECT session_id, seq FROM msg ORDER BY id")]
            for archive in (lite, team)
        ]
    assert (
        order[0] == order[1] == [("ffffffff-0001", 1), ("ffffffff-0001", 2), ("00000000-0002", 1), ("00000000-0002", 2)]
    )


def test_both_backends_keep_the_same_lengths_for_ranking(request: pytest.FixtureRequest, tmp_path: Path):
    """The token counts BM25 divides by: SQLite's FTS5 docsize, PostgreSQL's `ntokens` written beside the row."""
    pg = request.getfixturevalue("pg_url")
    with Archive.open(tmp_path / "local.db") as lite, Archive.open(pg) as team:
        lite.import_paths([PI_DATA])
        team.import_paths([PI_DATA])
        ids = {
            name: [int(r[0]) for r in archive.store.rows(f"SELECT id FROM {table} ORDER BY session_id, {order}")]
            for name, archive in (("lite", lite), ("team", team))
            for table, order in (("msg", "seq"),)
        }
        assert len(ids["lite"]) == len(ids["team"]) == 160
        lite_counts = lite.store.msg_token_counts(ids["lite"])
        team_counts = team.store.msg_token_counts(ids["team"])
        assert [lite_counts.get(i) for i in ids["lite"]] == [team_counts.get(i) for i in ids["team"]]
        assert sum(1 for i in ids["team"] if i in team_counts) == 124  # every indexed message
        runs = {
            name: a.store.rows("SELECT id FROM run ORDER BY session_id, start_ts")
            for name, a in (("l", lite), ("t", team))
        }
        lite_runs = lite.store.run_token_counts([int(r[0]) for r in runs["l"]])
        team_runs = team.store.run_token_counts([int(r[0]) for r in runs["t"]])
        assert [lite_runs.get(int(r[0])) for r in runs["l"]] == [team_runs.get(int(r[0])) for r in runs["t"]]
        assert sorted(lite.store.run_token_sample(500)) == sorted(team.store.run_token_sample(500))


# --- read ----------------------------------------------------------------------------


def first_session(archive: Archive, project: str) -> str:
    hits = [h for h in archive.search(project.split("-")[0], limit=100) if h.project == project]
    return sorted({h.session_id for h in hits})[0]


def test_read_defaults_to_the_last_messages_and_centers_on_a_message(imported: Archive):
    sid = first_session(imported, "vue-shop")
    window = imported.read(sid)
    assert len(window.messages) == 5 and window.before_more and not window.after_more
    order = [(m.ts, m.seq) for m in window.messages]
    assert order == sorted(order)
    full = imported.read(sid, around=window.messages[0].msg_id, before=50, after=50)
    ids = [m.msg_id for m in full.messages]
    middle = imported.read(sid, around=ids[10])
    assert [m.msg_id for m in middle.messages] == ids[6:17]
    assert json.dumps(middle.to_dict(), ensure_ascii=False)


def test_read_accepts_a_prefix_and_rejects_short_ambiguous_or_foreign(imported: Archive):
    sid = first_session(imported, "vue-shop")
    assert imported.read(sid[:13]).session.id == sid
    with pytest.raises(BadInput, match="too short"):
        imported.read(sid[:5])
    with pytest.raises(BadInput, match="ambiguous"):
        imported.read("01a2364c")
    with pytest.raises(NotFound):
        imported.read("ffffffff-none")
    other = imported.search("proxy_buffering")[0].msg_id
    with pytest.raises(NotFound):
        imported.read(sid, around=other)


def test_a_huge_unbroken_token_is_archived_and_does_not_break_search(any_archive: Archive, tmp_path: Path):
    blob = "A" * 5000
    write_session(tmp_path / "blob.jsonl", "blobblob-0001", "/w/blob", [f"key {blob} pasted", "ok"])
    assert any_archive.import_paths([tmp_path / "blob.jsonl"]).added == 2
    assert any_archive.search("pasted")[0].session_id == "blobblob-0001"
    assert isinstance(any_archive.search(blob[:MAX_QUERY_CHARS]), list)  # as long as a query may be
    with pytest.raises(BadInput, match=f"the query is 5000 characters long: at most {MAX_QUERY_CHARS}"):
        any_archive.search(blob)


# --- output ----------------------------------------------------------------------------


def test_read_output_clips_long_messages_and_caps_the_total(any_archive: Archive, tmp_path: Path):
    write_session(tmp_path / "long.jsonl", "longlong-0001", "/w/long", [f"{i} " + "长文本" * 2000 for i in range(12)])
    any_archive.import_paths([tmp_path / "long.jsonl"])
    last = any_archive.read("longlong-0001", before=50, after=0)
    window = any_archive.read("longlong-0001", around=last.messages[0].msg_id, before=0, after=50)
    assert len(window.messages) == 12 and not window.before_more and not window.after_more
    text = format_read(window)
    assert len(text) <= READ_CAP
    assert "[clipped, 4502 more chars]" in text and text.endswith("(output capped; read a narrower window)")
    assert text.startswith("# ") and "longlong-0001" in text


def test_search_output_is_grouped_by_session_and_capped(imported: Archive):
    hits = imported.search("the", limit=100)
    text = format_search(hits, "the")
    assert len(text) <= SEARCH_CAP
    headers = [line for line in text.splitlines() if line.startswith("[")]
    assert 1 <= len(headers) <= 5
    assert "12 in 8 projects" in format_stats(imported.stats())


# --- live capture (the pi extension's bridge) ------------------------------------------


def branch(archive: Archive, session_id: str) -> list[tuple[str, str, str | None]]:
    """A session's messages in order (role, text, entry id), read through the API."""
    last = archive.read(session_id, before=0, after=0).messages[0].msg_id
    window = archive.read(session_id, around=last, before=50, after=0)
    return [(m.role, m.text, m.entry_id) for m in window.messages]


def test_live_capture_then_backfill_then_import_archives_each_message_once(any_archive: Archive, tmp_path: Path):
    header, *entries = lines(RPC_COMPACTION)
    sid = header["id"]
    any_archive.ensure_session(sid, header["cwd"], started_at=header["timestamp"])
    live = [e["message"] for e in entries if e["type"] == "message"]
    ids = [any_archive.capture_message(sid, m) for m in live]
    assert all(isinstance(i, int) for i in ids) and [any_archive.capture_message(sid, m) for m in live] == [None] * len(
        live
    )
    first, second = any_archive.backfill(sid, entries), any_archive.backfill(sid, entries)
    assert (first.reconciled, first.added, second.reconciled, second.added) == (len(live), 1, 0, 0)
    assert any_archive.import_paths([RPC_COMPACTION]).added == 0
    with Archive.open(tmp_path / "reference.db") as ref:
        ref.import_paths([RPC_COMPACTION])
        assert branch(any_archive, sid) == branch(ref, sid)


def test_captured_messages_are_searchable_and_sessions_renamed(any_archive: Archive):
    message = {"role": "user", "content": "SSE 断流 proxy_buffering", "timestamp": 1_796_000_000_000}
    msg_id = any_archive.capture_message("s-orphan", message)  # nobody registered the session
    assert any_archive.search("断流")[0].msg_id == msg_id
    assert any_archive.session_info("s-orphan").messages == 1
    any_archive.set_session_name("s-orphan", "修复 SSE 断流")
    assert any_archive.session_info("s-orphan").name == "修复 SSE 断流"
    any_archive.set_session_name("s-orphan", "  ")
    assert any_archive.session_info("s-orphan").name is None


def test_capture_entry_archives_a_compaction_summary_once(any_archive: Archive):
    compaction = next(e for e in lines(SDK_TREE) if e["type"] == "compaction")
    any_archive.ensure_session("s-compact", "/p")
    first, again = (
        any_archive.capture_entry("s-compact", compaction),
        any_archive.capture_entry("s-compact", compaction),
    )
    assert isinstance(first, int) and again is None
    assert branch(any_archive, "s-compact") == [("summary", compaction["summary"], compaction["id"])]
