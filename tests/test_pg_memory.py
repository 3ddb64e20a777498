"""The memory log on PostgreSQL: append-only tables, one hash chain per workspace under concurrent writers.

The table guarantees are tested here on their own; the tests through `Memories` need the memory
log (`pi_memory.memory`, from the `memory` branch) and are skipped until it is merged.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pg_support import connect
from pi_memory import Archive


@pytest.fixture
def pg_archive(pg_url: str):  # type: ignore[no-untyped-def]
    with Archive.open(pg_url) as archive:
        yield archive


def test_memory_tables_refuse_update_delete_and_truncate_even_for_the_owner(pg_archive: Archive, pg_url: str):
    import psycopg

    with connect(pg_url) as conn:
        chain = conn.execute(
            "INSERT INTO memory_chain(workspace, created_at) VALUES ('/w', 1) RETURNING id"
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO memory_event(chain, seq, prev_hash, hash, event) VALUES (%s, 1, 'p', 'h', '{}')", (chain,)
        )
        for sql in [
            "UPDATE memory_event SET event = '{\"x\":1}'",
            "DELETE FROM memory_event",
            "TRUNCATE memory_event",
            "UPDATE memory_chain SET workspace = '/other'",
            "DELETE FROM memory_chain",
            "TRUNCATE memory_chain CASCADE",
        ]:
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(sql)
        assert conn.execute("SELECT count(*), min(written_by) FROM memory_event").fetchone() == (1, "pi_owner")


def test_two_writers_cannot_both_write_seq_n_of_a_chain(pg_archive: Archive, pg_url: str):
    import psycopg

    with connect(pg_url) as conn:
        chain = conn.execute(
            "INSERT INTO memory_chain(workspace, created_at) VALUES ('/w', 1) RETURNING id"
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO memory_event(chain, seq, prev_hash, hash, event) VALUES (%s, 1, 'p', 'a', '{}')", (chain,)
        )
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "INSERT INTO memory_event(chain, seq, prev_hash, hash, event) VALUES (%s, 1, 'p', 'b', '{}')", (chain,)
            )


def test_remember_and_list_on_the_team_archive(pg_archive: Archive, tmp_path: Path):
    memories = pg_archive.memories  # type: ignore[attr-defined]
    memories.remember(str(tmp_path), "用 pnpm，不用 npm")
    memories.remember(str(tmp_path), "tests run with pytest -q")
    listing = memories.list(str(tmp_path))
    assert sorted(f.record.body for f in listing.found) == sorted(["用 pnpm，不用 npm", "tests run with pytest -q"])
    _workspace, _state, report = memories.state(str(tmp_path))
    assert report.ok and report.trusted == 2


APPENDER = """
import sys
from pi_memory import Archive
url, workspace, who = sys.argv[1:4]
with Archive.open(url) as archive:
    for k in range(10):
        archive.memories.remember(workspace, f"rule {k} from writer {who}")
"""


def test_concurrent_writers_keep_every_workspace_chain_intact(pg_archive: Archive, pg_url: str, tmp_path: Path):
    spaces = [tmp_path / "ws-a", tmp_path / "ws-b"]
    for space in spaces:
        space.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, pg_url, str(spaces[i % 2]), str(i)]) for i in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    memories = pg_archive.memories  # type: ignore[attr-defined]
    for space in spaces:
        _workspace, state, report = memories.state(str(space))
        assert report.ok and report.trusted == 20 and len(state.records) == 20
    with connect(pg_url) as conn:
        assert conn.execute("SELECT count(DISTINCT workspace), count(*) FROM memory_chain").fetchone() == (2, 2)
