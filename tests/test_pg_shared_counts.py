"""The team archive's shared document frequencies and mean lengths (m016): a token counted by one
searcher is not counted again by the next process while the archive is within 2% of its size, and
no client can store a number of its own. On a real PostgreSQL server (PI_MEMORY_TEST_PG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import PI_DATA
from pg_support import connect
from pi_memory import Archive
from pi_memory.core.text import QueryToken
from pi_memory.search.messages import AVG_LEN_SAMPLE, Searcher
from pi_memory.search.runs import AVG_LEN_SAMPLE as RUN_AVG_LEN_SAMPLE
from pi_memory.storage.pg import roles_sql
from pi_memory.storage.pg.store import PgStore
from test_search import write_session

WORD = QueryToken("lisbon", "word")


def texts(n: int, start: int = 0) -> list[str]:
    """`n` messages, every third one naming Lisbon."""
    return [
        f"note {start + i}: {'moving to Lisbon soon' if (start + i) % 3 == 0 else 'nothing about travel'}"
        for i in range(n)
    ]


def archive_with(url: str, folder: Path, n: int) -> None:
    with Archive.open(url) as archive:
        archive.import_paths([write_session(folder / "a.jsonl", "aaaaaaaa-0001", "/home/dev/app", texts(n))])


def pg(archive: Any) -> PgStore:
    store: PgStore = archive.store
    return store


def kept(url: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(how, lexeme) -> (value, archive size when made), as the server keeps them."""
    with connect(url) as conn:
        rows = conn.execute("SELECT how, lexeme, value, at_docs FROM token_df WHERE tab = 'msg'").fetchall()
    return {(how, lexeme): (int(df), int(at)) for how, lexeme, df, at in rows}


def test_a_count_made_by_one_searcher_is_kept_by_the_server_with_the_archive_size(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 90)
    with Archive.open(pg_url) as archive:
        assert pg(archive).capped_counts("msg", [WORD], 5000) == [30]
        docs = pg(archive).counters()["indexed_docs"]
    assert kept(pg_url)[("count:5000", "'lisbon'")] == (30, docs)


def test_a_fresh_process_takes_the_kept_count_while_the_archive_is_within_two_percent(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 90)
    with Archive.open(pg_url) as archive:
        pg(archive).capped_counts("msg", [WORD], 5000)
    with connect(pg_url) as conn:  # mark the kept count: only the cache can answer 7
        conn.execute("UPDATE token_df SET value = 7 WHERE lexeme = '''lisbon''' AND how = 'count:5000'")
    with Archive.open(pg_url) as archive:
        assert pg(archive).capped_counts("msg", [WORD], 5000) == [7]
        assert pg(archive).capped_counts("msg", [WORD], 100) == [30]  # another cap: its own count


def test_the_kept_count_is_made_again_once_the_archive_grew_past_two_percent(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 90)
    with Archive.open(pg_url) as archive:
        pg(archive).capped_counts("msg", [WORD], 5000)
    with Archive.open(pg_url) as archive:
        archive.import_paths([write_session(tmp_path / "b.jsonl", "bbbbbbbb-0001", "/home/dev/app", texts(9, 90))])
        assert pg(archive).capped_counts("msg", [WORD], 5000) == [33]
        docs = pg(archive).counters()["indexed_docs"]
    assert kept(pg_url)[("count:5000", "'lisbon'")] == (33, docs)


def test_a_frequent_token_estimate_is_shared_too_and_equals_the_one_made_in_place(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 90)
    note = QueryToken("note", "word")
    with Archive.open(pg_url) as archive:
        store = pg(archive)
        docs = store.counters()["indexed_docs"]
        first = store.estimate_dfs_from_window("msg", [note, WORD], 40, 5)
        top = store.max_msg_id()
        in_window = max(1, int(docs * (top - max(0, top - 40)) / max(top, 1)))
        in_place = [
            max(5, min(docs, int(docs * c / in_window))) for c in (40, sum(1 for t in texts(90)[-40:] if "Lisbon" in t))
        ]
        assert first == in_place
    with connect(pg_url) as conn:
        conn.execute("UPDATE token_df SET value = 11 WHERE lexeme = '''note''' AND how = 'window:40:5'")
    with Archive.open(pg_url) as archive:
        assert pg(archive).estimate_dfs_from_window("msg", [note, WORD], 40, 5) == [11, first[1]]


def test_searching_gives_the_same_hits_from_kept_counts_as_from_fresh_ones(pg_url: str):
    with Archive.open(pg_url) as archive:
        archive.import_paths([PI_DATA])
        first = [(h.msg_id, round(h.score, 9)) for h in archive.search("proxy_buffering 断流 nginx")]
    assert kept(pg_url)
    with Archive.open(pg_url) as archive:
        again = [(h.msg_id, round(h.score, 9)) for h in archive.search("proxy_buffering 断流 nginx")]
    assert first == again and first


def test_a_reader_fills_the_shared_counts_but_cannot_read_them_or_write_a_number_of_its_own(
    pg_url: str, make_role, tmp_path: Path
):
    archive_with(pg_url, tmp_path, 90)
    with connect(pg_url) as conn:
        conn.execute(roles_sql().encode())
    reader = make_role("pi_memory_reader")
    with Archive.open(reader) as archive:
        assert pg(archive).capped_counts("msg", [WORD], 5000) == [30]
    assert ("count:5000", "'lisbon'") in kept(pg_url)
    with connect(reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("UPDATE token_df SET value = 1")
    with connect(reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT lexeme FROM token_df")  # what colleagues searched for
    with connect(reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT pi_memory_keep('msg', 'count:5000', '''lisbon''', 1, 90)")


def test_a_read_only_transaction_counts_without_keeping(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 90)
    with connect(pg_url) as conn:
        conn.execute("SET default_transaction_read_only = on")
        counts = conn.execute("SELECT pi_memory_capped_counts('msg', ARRAY['''lisbon'''], 5000, 0.02)").fetchone()
    assert counts is not None and counts[0] == [30]
    assert kept(pg_url) == {}


def test_only_the_token_tables_can_be_counted(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 3)
    with connect(pg_url) as conn, pytest.raises(psycopg.errors.RaiseException, match="no token index on session"):
        conn.execute("SELECT pi_memory_capped_counts('session', ARRAY['''x'''], 5, 0.02)")


def test_a_fresh_process_finds_every_count_kept_without_reading_statistics(pg_url: str, monkeypatch):
    with Archive.open(pg_url) as archive:
        archive.import_paths([PI_DATA])
        first = [(h.msg_id, round(h.score, 9)) for h in archive.search("proxy_buffering 断流 nginx")]
        runs = [(h.run.address, round(h.score, 9)) for h in archive.search_runs("nginx 断流")]
    assert first and runs

    def no_statistics(*_: object) -> dict[str, float]:
        raise AssertionError("read ANALYZE's statistics although every count was kept")

    monkeypatch.setattr(PgStore, "analyzed_token_shares", no_statistics)
    with Archive.open(pg_url) as archive:
        assert [(h.msg_id, round(h.score, 9)) for h in archive.search("proxy_buffering 断流 nginx")] == first
        assert [(h.run.address, round(h.score, 9)) for h in archive.search_runs("nginx 断流")] == runs


def test_the_mean_length_is_the_searchers_sample_and_is_kept(pg_url: str, tmp_path: Path):
    with Archive.open(pg_url) as archive:
        archive.import_paths([PI_DATA])
        store = pg(archive)
        with store.searching():
            sampled = Searcher._sampled_length(archive.searcher)  # the sample as on SQLite, in this process
            runs = store.run_token_sample(RUN_AVG_LEN_SAMPLE)
        assert store.mean_length("msg", AVG_LEN_SAMPLE) == sampled
        assert store.mean_length("run", RUN_AVG_LEN_SAMPLE) == (sum(runs) / len(runs) if runs else 0.0)
    with connect(pg_url) as conn:
        conn.execute("UPDATE token_df SET value = 3.5 WHERE how = 'mean:500' AND tab = 'msg'")
    with Archive.open(pg_url) as archive:
        assert pg(archive).mean_length("msg", AVG_LEN_SAMPLE) == 3.5


def test_a_message_without_its_kept_length_makes_the_searcher_count_the_text(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 90)
    with connect(pg_url) as conn:
        conn.execute("UPDATE msg SET ntokens = NULL WHERE id = (SELECT min(id) FROM msg)")
    with Archive.open(pg_url) as archive:
        assert pg(archive).mean_length("msg", AVG_LEN_SAMPLE) is None
        assert archive.search("Lisbon")[0].text.endswith("moving to Lisbon soon")
    assert ("mean:500", "") not in kept(pg_url)


def test_a_fresh_process_asks_for_a_chinese_questions_kept_counts_in_one_round_trip(pg_url: str, monkeypatch):
    """Each character typed where its script folds (`断`, `题`: `t:断`) is a token of the plan too; they
    are asked for with the others, not one round trip each (a Chinese question has one for nearly
    every character)."""
    query = "nginx 断流 问题"
    with Archive.open(pg_url) as archive:
        archive.import_paths([PI_DATA])
        first = [(h.msg_id, round(h.score, 9)) for h in archive.search(query)]
    assert first
    asked: list[list[str]] = []
    real = PgStore.kept_dfs

    def counted(self: PgStore, table: str, tokens: list[QueryToken], *rest: Any) -> list[int | None]:
        asked.append([t.text for t in tokens])
        return real(self, table, tokens, *rest)

    monkeypatch.setattr(PgStore, "kept_dfs", counted)
    with Archive.open(pg_url) as archive:
        assert [(h.msg_id, round(h.score, 9)) for h in archive.search(query)] == first
    assert len(asked) == 1 and {"断", "题"} <= set(asked[0])
