"""The team archive's word counts kept up to a mark (m018): counted once by an idle front end, then
brought up to date from the messages added since, exact at every step (a count equals a recount of
the rows), and counted again from nothing after a forget. On a real PostgreSQL server
(PI_MEMORY_TEST_PG)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import PI_DATA
from pg_support import connect
from pi_memory import Archive
from pi_memory.core.text import QueryToken
from pi_memory.storage.pg import roles_sql
from pi_memory.storage.pg.store import PgStore
from test_pg_shared_counts import archive_with, texts
from test_search import write_session

LISBON = "'lisbon'"


def store(archive: Any) -> PgStore:
    pg: PgStore = archive.store
    return pg


def counts(url: str, lexemes: list[str], walk: int = 10_000, count: bool = False) -> list[int | None]:
    """The server's counts of `msg` rows holding each lexeme (a tsquery text), capped at 5,000 + 1."""
    with connect(url) as conn:
        row = conn.execute("SELECT pi_memory_msg_counts(%s::text[], 5000, %s, %s)", (lexemes, count, walk)).fetchone()
    assert row is not None
    return list(row[0])


def recount(url: str, lexemes: list[str]) -> list[int]:
    with connect(url) as conn:
        sql = "SELECT count(*) FROM (SELECT FROM msg WHERE tokens @@ %s::tsquery LIMIT 5001) c"
        return [int(conn.execute(sql, (q,)).fetchone()[0]) for q in lexemes]  # type: ignore[index]


def every_lexeme(url: str) -> list[str]:
    """Every word of the archive's messages, as a tsquery text (`sql.tsquery`)."""
    with connect(url) as conn:
        rows = conn.execute("SELECT DISTINCT unnest(tsvector_to_array(tokens)) FROM msg").fetchall()
    return ["'" + r[0].replace("\\", "\\\\").replace("'", "''") + "'" for r in rows if r[0] != "§echo"]


def msg_mark(url: str) -> int:
    """The newest message id the idle count has counted up to."""
    with connect(url) as conn:
        row = conn.execute("SELECT at_id FROM token_df WHERE tab = 'msg' AND how = 'mark:5000'").fetchone()
    assert row is not None
    return int(row[0])


def kept_run_counts(url: str) -> dict[str, int]:
    with connect(url) as conn:
        rows = conn.execute("SELECT lexeme, value FROM token_df WHERE tab = 'run' AND how = 'count:5000'").fetchall()
    return {lexeme: int(value) for lexeme, value in rows}


def mark_lisbon(url: str, value: int) -> None:
    """Put a number only the kept count can give back (the rows hold another)."""
    with connect(url) as conn:
        conn.execute("UPDATE token_df SET value = %s WHERE lexeme = %s AND how = 'count:5000'", (value, LISBON))


def add_notes(url: str, folder: Path, n: int, start: int) -> None:
    with Archive.open(url) as archive:
        path = write_session(folder / f"s{start}.jsonl", f"cccccccc-{start:04d}", "/home/dev/app", texts(n, start))
        archive.import_paths([path])


def wait_for(url: str, who: str) -> None:
    """Until a connection matching `who` waits on a lock (asked on a connection of its own: within a
    transaction, `pg_stat_activity` answers the same every time)."""
    sql = f"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND {who}"
    deadline = time.monotonic() + 60
    with connect(url) as look:
        while look.execute(sql).fetchone() != (1,):
            assert time.monotonic() < deadline, f"nothing like {who} waited for a lock"
            time.sleep(0.05)


def test_after_the_word_count_every_word_of_the_archive_has_its_exact_count_kept(pg_url: str):
    with Archive.open(pg_url) as archive:
        archive.import_paths([PI_DATA])
        assert store(archive).count_words(min_rows=0) > 100
    words = every_lexeme(pg_url)
    assert counts(pg_url, words) == recount(pg_url, words)  # none left to count (`p_count` off)


def test_a_kept_count_is_brought_up_to_date_from_the_messages_added_since(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 90)
    with Archive.open(pg_url) as archive:
        store(archive).count_words(min_rows=0)
    mark_lisbon(pg_url, 7)
    add_notes(pg_url, tmp_path, 9, 90)  # three of them name Lisbon
    assert counts(pg_url, [LISBON]) == [10]  # the kept 7 and the 3 added, not a recount (33)
    assert counts(pg_url, [LISBON]) == [10]  # and kept so: the rows after it are not read again


def test_a_count_far_behind_is_brought_up_by_its_postings_after_the_mark(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 90)
    with Archive.open(pg_url) as archive:
        store(archive).count_words(min_rows=0)
    mark_lisbon(pg_url, 7)
    add_notes(pg_url, tmp_path, 9, 90)
    assert counts(pg_url, [LISBON, "'travel'"], walk=0) == [10, 60 + 6]  # no walk: each by its postings


def test_a_word_first_written_after_the_count_is_counted_from_the_mark(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 30)
    with Archive.open(pg_url) as archive:
        store(archive).count_words(min_rows=0)
        path = write_session(
            tmp_path / "z.jsonl", "dddddddd-0001", "/home/dev/app", ["zanzibar trip", "zanzibar again"]
        )
        archive.import_paths([path])
    assert counts(pg_url, ["'zanzibar'", "'nowhere'"]) == [2, 0]  # known without a full count


def test_forgetting_a_session_makes_the_kept_counts_count_again_and_stay_exact(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 90)
    add_notes(pg_url, tmp_path, 9, 90)
    with Archive.open(pg_url) as archive:
        store(archive).count_words(min_rows=0)
        assert counts(pg_url, [LISBON]) == [33]
        archive.forget("cccccccc-0090")
        assert counts(pg_url, [LISBON]) == [None]  # another generation: nothing kept is used
        assert store(archive).capped_counts("msg", [QueryToken("lisbon", "word")], 5000) == [30]
        assert store(archive).count_words() > 0  # counted again from nothing, however few were added
    words = every_lexeme(pg_url)
    assert counts(pg_url, words) == recount(pg_url, words)


def test_only_a_change_of_a_messages_words_moves_the_generation(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 9)
    with connect(pg_url) as conn:

        def generation() -> int:
            return int(conn.execute("SELECT token_generation FROM counter").fetchone()[0])  # type: ignore[index]

        before = generation()
        conn.execute("DELETE FROM msg WHERE id < 0")  # no message deleted
        conn.execute("UPDATE msg SET tokens = tokens || array_to_tsvector(ARRAY['§echo']) WHERE id = 1")
        conn.execute("UPDATE msg SET tokens = ts_delete(tokens, '§echo') WHERE id = 1")  # the echo mark only
        assert generation() == before
        conn.execute("UPDATE msg SET tokens = tokens || array_to_tsvector(ARRAY['zanzibar']) WHERE id = 1")
        assert generation() == before + 1
        conn.execute("DELETE FROM msg WHERE id = 2")
        assert generation() == before + 2


def test_searches_find_the_same_hits_with_every_word_counted_at_idle(pg_url: str, tmp_path: Path):
    queries = ["proxy_buffering 断流 nginx", "nginx", "Lisbon travel", "部署 问题"]
    with Archive.open(pg_url) as archive:
        archive.import_paths([PI_DATA])
        before = [[(h.msg_id, round(h.score, 9)) for h in archive.search(q)] for q in queries]
    with connect(pg_url) as conn:
        conn.execute("TRUNCATE token_df")  # what the searches kept: only the idle count's remain
    with Archive.open(pg_url) as archive:
        store(archive).count_words(min_rows=0)
    with Archive.open(pg_url) as archive:
        assert [[(h.msg_id, round(h.score, 9)) for h in archive.search(q)] for q in queries] == before


def test_the_count_waits_for_enough_new_messages_and_never_runs_twice_at_once(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 30)
    with Archive.open(pg_url) as archive, connect(pg_url) as other:
        assert store(archive).count_words(min_rows=5) > 0  # the first: every message
        first = msg_mark(pg_url)
        add_notes(pg_url, tmp_path, 3, 30)
        store(archive).count_words(min_rows=5)
        assert msg_mark(pg_url) == first  # 3 new: not yet
        add_notes(pg_url, tmp_path, 3, 33)
        with other.transaction():
            other.execute("SELECT pg_advisory_xact_lock(hashtext('pi_memory.count_words'), hashtext(current_schema()))")
            assert store(archive).count_words(min_rows=5) == -1  # another is counting
        assert store(archive).count_words(min_rows=5) > 0
        assert msg_mark(pg_url) == first + 6
    words = every_lexeme(pg_url)
    assert counts(pg_url, words) == recount(pg_url, words)


def test_the_idle_count_keeps_the_run_counts_a_searcher_would_make_and_makes_them_again_as_runs_grow(
    pg_url: str, tmp_path: Path
):
    archive_with(pg_url, tmp_path, 90)  # 45 runs
    with Archive.open(pg_url) as archive:
        store(archive).count_words(min_rows=0)
        kept = kept_run_counts(pg_url)
        assert kept["'note'"] == 45 and min(kept.values()) >= 20  # only the words of 20 runs or more
        with connect(pg_url) as conn:
            rare = conn.execute(
                "SELECT l FROM run, unnest(tsvector_to_array(tokens)) l GROUP BY l HAVING count(*) < 20"
            )
            assert {f"'{r[0]}'" for r in rare} - set(kept) and not {f"'{r[0]}'" for r in rare} & set(kept)
        for word, value in kept.items():
            assert store(archive).capped_counts("run", [QueryToken(word.strip("'"), "word")], 5000) == [value]
        with connect(pg_url) as conn:  # only the kept count can answer 7 ...
            conn.execute("UPDATE token_df SET value = 7 WHERE tab = 'run' AND lexeme = %s", ("'note'",))
        assert store(archive).capped_counts("run", [QueryToken("note", "word")], 5000) == [7]
        add_notes(pg_url, tmp_path, 10, 90)  # ... until the runs grew past 2%: counted again
        assert store(archive).count_words(min_rows=0) > 0
        assert kept_run_counts(pg_url)["'note'"] == 50


def test_a_reader_can_count_at_idle_but_not_keep_a_number_of_its_own(pg_url: str, make_role, tmp_path: Path):
    archive_with(pg_url, tmp_path, 30)
    with connect(pg_url) as conn:
        conn.execute(roles_sql().encode())
    reader = make_role("pi_memory_reader")
    with Archive.open(reader) as archive:
        assert store(archive).count_words(min_rows=0) > 0
    with connect(reader) as conn:
        with pytest.raises(Exception, match="permission denied"):
            conn.execute("SELECT pi_memory_keep_count('''lisbon''', 5000, 1, 1, 999999, 0)")
    assert counts(pg_url, [LISBON]) == [10]


def test_a_writer_holds_the_counter_lock_before_its_messages_get_ids(pg_url: str, tmp_path: Path):
    """Ids in commit order: a message id given while another writer holds the counter row would let a
    count made up to a newer id miss it (it commits later, below the mark)."""
    archive_with(pg_url, tmp_path, 3)
    path = write_session(tmp_path / "w.jsonl", "eeeeeeee-0001", "/home/dev/app", ["written while blocked"])
    with connect(pg_url) as holder:
        last_id = holder.execute("SELECT max(id) FROM msg").fetchone()
        holder.execute("BEGIN")
        holder.execute("SELECT FROM counter FOR UPDATE")
        done = threading.Event()

        def write() -> None:
            with Archive.open(pg_url) as archive:
                archive.import_paths([path])
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        wait_for(pg_url, "query LIKE 'SELECT FROM counter%'")  # the writer is stopped on the counter row
        with connect(pg_url) as look:
            assert look.execute("SELECT last_value FROM msg_id_seq").fetchone() == last_id  # no id given yet
        holder.execute("COMMIT")
        writer.join(60)
    assert done.is_set()


def test_the_idle_count_runs_on_a_connection_of_its_own_and_closing_cancels_it(pg_url: str, tmp_path: Path):
    archive_with(pg_url, tmp_path, 30)
    with Archive.open(pg_url) as archive:
        archive.checkpoint()  # what a bridge or `watch` does when idle
        store(archive).idle_count.join(60)
        assert store(archive).idle_count.words and store(archive).idle_count.error is None
        counter = store(archive).idle_count
        assert not counter.poke(now=counter.started_at + counter.RECHECK_S - 1)  # not again within RECHECK_S
        assert counter.poke(now=counter.started_at + counter.RECHECK_S)  # then again (nothing new to count)
        counter.join(60)
        assert counter.words == 0 and counter.error is None
    with connect(pg_url) as conn:
        conn.execute("TRUNCATE token_df")
    with connect(pg_url) as blocker:
        blocker.execute("BEGIN")
        blocker.execute("LOCK TABLE token_df IN EXCLUSIVE MODE")  # the count stops at its first write
        archive = Archive.open(pg_url)
        archive.checkpoint()
        wait_for(pg_url, "application_name = 'pi-memory count'")
        counter = store(archive).idle_count
        archive.close()  # cancels it: the archive closes without waiting for the server
        assert counter.error and "cancel" in counter.error
        blocker.execute("COMMIT")
    with connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM token_df").fetchone() == (0,)


def test_the_idle_counts_estimates_past_the_cap_are_the_ones_a_searcher_makes(pg_url: str, tmp_path: Path):
    """With a cap of 5 and a window of 40 ids, the words past the cap get the window estimates
    `pi_memory_window_dfs` makes, for messages and for runs."""
    archive_with(pg_url, tmp_path, 90)
    with connect(pg_url) as conn:
        assert conn.execute("SELECT pi_memory_count_words(5, 40, 6, 0.02, 0)").fetchone()[0] > 0  # type: ignore[index]
        for tab in ("msg", "run"):
            rows = conn.execute(
                "SELECT lexeme, value FROM token_df WHERE tab = %s AND how = 'window:40:6' ORDER BY lexeme", (tab,)
            ).fetchall()
            assert rows and {r[0] for r in rows} >= {"'note'", LISBON}
            conn.execute("DELETE FROM token_df WHERE tab = %s AND how = 'window:40:6'", (tab,))
            made = conn.execute(
                "SELECT pi_memory_window_dfs(%s, %s::text[], 40, 6, 0.02)", (tab, [r[0] for r in rows])
            ).fetchone()
            assert made is not None and list(made[0]) == [int(r[1]) for r in rows]
