import json
from pathlib import Path

import pytest

from pi_memory import Archive
from pi_memory.archive.present import format_search
from pi_memory.core.format import SEARCH_CAP
from pi_memory.storage.store import decode_text, decompress


def write_session(path: Path, sid: str, cwd: str, texts: list[str], start_ms: int = 1_790_000_000_000) -> Path:
    """A minimal real-shaped pi v3 session: user/assistant turns with the given texts."""
    lines = [{"type": "session", "version": 3, "id": sid, "timestamp": "2026-09-21T00:00:00.000Z", "cwd": cwd}]
    parent = None
    for i, text in enumerate(texts):
        eid = f"{abs(hash((sid, i))) % 16**8:08x}"
        role = "user" if i % 2 == 0 else "assistant"
        content = [{"type": "text", "text": text}]
        msg = {"role": role, "content": content, "timestamp": start_ms + i * 1000}
        if role == "assistant":
            msg["stopReason"] = "stop"
        lines.append(
            {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-09-21T00:00:00.000Z", "message": msg}
        )
        parent = eid
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    return path


def write_small_sessions(folder: Path) -> None:
    """Three small sessions (Chinese, mixed, English and traditional Chinese) the search tests rank."""
    write_session(
        folder / "a.jsonl",
        "aaaaaaaa-1111",
        "/home/u/search-svc",
        [
            "上次讨论过的缓存索引优化方案是什么？",
            "缓存索引优化方案：按 shard 建倒排路由表，LRU 提到 4096。",
            "锁的问题呢？",
            "用一把读写锁就够了。",
        ],
    )
    write_session(
        folder / "b.jsonl",
        "bbbbbbbb-2222",
        "/home/u/vue-shop",
        [
            "Vue 响应式是怎么实现的？",
            "Vue 3 的响应式基于 Proxy：reactive() 返回代理对象，读取时 track，写入时 trigger。",
            "Set OPENAI_API_KEY in the .env file and call session_before_compact",
            "Done: OPENAI_API_KEY is read from .env; the hook session_before_compact is registered.",
        ],
        start_ms=1_795_000_000_000,
    )
    write_session(
        folder / "c.jsonl",
        "cccccccc-3333",
        "/home/u/novels",
        [
            "Tell me about the whale and the sea.",
            "Call me Ishmael. The whale swam in the open sea for days.",
            "寶玉聽了，便走進來。",
            "宝玉是红楼梦的主人公。",
        ],
        start_ms=1_780_000_000_000,
    )


@pytest.fixture
def small(archive: Archive, tmp_path: Path) -> Archive:
    write_small_sessions(tmp_path)
    archive.import_paths([tmp_path])
    return archive


def top_text(archive: Archive, query: str, **kw: object) -> str:
    hits = archive.search(query, **kw)  # type: ignore[arg-type]
    assert hits, f"no hit for {query!r}"
    return hits[0].text


def test_search_finds_one_char_chinese_query(small: Archive):
    texts = [h.text for h in small.search("锁")]
    assert len(texts) == 2 and any("读写锁" in t for t in texts)


def test_search_finds_two_char_chinese_query(small: Archive):
    assert "缓存" in top_text(small, "缓存")


def top_hit(archive: Archive, query: str) -> tuple[str, str]:
    hits = archive.search(query)
    assert hits, f"no hit for {query!r}"
    return hits[0].session_id, hits[0].text


def test_search_finds_a_long_chinese_question_by_its_rare_words(small: Archive):
    session, text = top_hit(small, "之前那个缓存索引的方案是怎么定的")
    assert session == "aaaaaaaa-1111" and "缓存索引优化方案" in text


def test_search_finds_mixed_chinese_and_english(small: Archive):
    session, text = top_hit(small, "Vue 响应式 实现")
    assert session == "bbbbbbbb-2222" and "响应式" in text


def test_search_finds_an_english_phrase(small: Archive):
    session, text = top_hit(small, "the whale and the sea")
    assert session == "cccccccc-3333" and "whale" in text and "sea" in text


def test_search_finds_identifiers(small: Archive):
    assert "OPENAI_API_KEY" in top_text(small, "OPENAI_API_KEY")
    assert "session_before_compact" in top_text(small, "session_before_compact")


def test_search_finds_identifier_parts(small: Archive):
    assert "OPENAI_API_KEY" in top_text(small, "api key")


def test_traditional_query_finds_simplified_and_back(small: Archive):
    simplified = {h.text for h in small.search("宝玉")}
    traditional = {h.text for h in small.search("寶玉")}
    assert simplified == traditional
    assert any("寶玉" in t for t in simplified) and any("宝玉" in t for t in simplified)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "AND",
        "OR",
        "NOT",
        "NEAR(缓存 索引)",
        "chars:缓存",
        "grams:*",
        "*",
        "^",
        "缓存*",
        "^缓存",
        "\x00",
        "缓\x00存",
        "{chars grams}:x",
        "(",
        ")",
        "'; DROP TABLE msg; --",
        "",
        "   ",
    ],
)
def test_any_query_string_is_data(small: Archive, query: str):
    hits = small.search(query)
    assert isinstance(hits, list)
    assert small.stats().messages == 12


def test_nul_byte_in_a_query_is_a_separator(small: Archive):
    assert small.search("缓\x00存")[0].msg_id is not None


def test_unknown_words_find_nothing(small: Archive):
    assert small.search("zzyzx qwxv") == []


def test_project_filter_keeps_only_that_project(small: Archive):
    hits = small.search("OPENAI_API_KEY 缓存", project="search-svc")
    assert hits and all(h.project == "search-svc" for h in hits)
    assert small.search("缓存", project="/home/u/vue-shop") == []


def test_since_filter_drops_older_messages(small: Archive):
    assert small.search("宝玉", since="2027-01-01") == []
    assert small.search("宝玉", since="2026-06-01") == []  # the novel session is from 2026-05-28
    assert len(small.search("宝玉", since="2026-05-01")) == 2


def test_session_filter_accepts_a_prefix(small: Archive):
    hits = small.search("the", session="cccccccc")
    assert hits and {h.session_id for h in hits} == {"cccccccc-3333"}


def test_limit_is_respected(small: Archive):
    assert len(small.search("the OR 的 a", limit=1)) == 1


def test_hits_carry_the_contract_fields(small: Archive):
    hit = small.search("缓存")[0].to_dict()
    assert set(hit) == {"msg_id", "session_id", "seq", "role", "ts", "project", "score", "snippet"}
    assert "⟦" in hit["snippet"]


def test_search_output_is_grouped_by_session_and_capped(imported: Archive):
    hits = imported.search("the", limit=100)
    text = format_search(hits, "the")
    assert len(text) <= SEARCH_CAP
    headers = [line for line in text.splitlines() if line.startswith("[")]
    assert 1 <= len(headers) <= 5


def test_search_in_real_sessions_finds_the_sse_fix(imported: Archive):
    hits = imported.search("proxy_buffering 断流")
    assert hits and "proxy_buffering" in hits[0].text


def test_search_finds_text_in_cjk_extension_b(imported: Archive):
    hits = imported.search("𠮷")
    assert hits and "𠮷" in hits[0].text


def test_search_does_not_index_successful_tool_output(imported: Archive):
    # 'k2599' appears only in a successful bash output of the long-output session
    assert imported.search("k2599") == []
    kept = [
        decompress(raw, decode_text(text))
        for raw, text in imported.store.rows("SELECT e.raw, m.text FROM entry e JOIN msg m ON m.id = e.msg_id")
    ]
    assert sum(b"k2599" in line for line in kept) == 1  # stored verbatim all the same, once


def test_fixture_sessions_are_found_from_their_first_question(imported: Archive):
    hits = imported.search("购物车角标不更新")
    assert hits and hits[0].project == "vue-shop"


def test_real_archive_search_has_no_duplicate_messages(imported: Archive):
    hits = imported.search("响应式", limit=50)
    assert len({h.msg_id for h in hits}) == len(hits)


def test_the_recent_track_adds_only_a_few_messages_once_the_rare_track_is_full(
    archive: Archive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from pi_memory.core import ranking
    from pi_memory.core.text import normalize
    from pi_memory.search import messages as search
    from pi_memory.search import pg as pg_search

    # `zebra` (8 messages) is rare, `common` (38) is not
    monkeypatch.setattr(search, "RARE_POSTINGS_BUDGET", 10)
    monkeypatch.setattr(pg_search, "PG_RARE_POSTINGS_BUDGET", 10)
    monkeypatch.setattr(search, "RECENT_CANDIDATES", 5)
    monkeypatch.setattr(search, "RECENT_BEHIND_FULL_RARE", 2)
    texts = [f"zebra common note {i}" for i in range(8)] + [f"common filler {i}" for i in range(30)]
    archive.import_paths([write_session(tmp_path / "s.jsonl", "dddddddd-4444", "/home/u/zoo", texts)])
    searcher = archive.searcher

    def candidates(rare_limit: int) -> list[int]:
        searcher.rare_candidates = rare_limit
        plan = searcher.plan("zebra common")
        weights = ranking.token_weights(plan.tokens, plan.df, plan.n_docs, normalize("zebra common"))
        return searcher.candidates(plan, weights, search.Filters())

    assert len(candidates(20)) == 8 + 5  # the rare track holds every `zebra`: the recent track as usual
    assert len(candidates(4)) == 4 + 2  # the rare track is full: two of the newest `common` only
    assert [h.text for h in archive.search("zebra common", limit=3)][0].startswith("zebra common")
