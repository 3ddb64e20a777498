"""`push`: a local SQLite archive copied to the team archive, idempotently, resuming after an interruption."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import BAD_DATA, PI_DATA
from pg_support import connect
from pi_memory import Archive
from pi_memory.frontends.cli.main import cli
from pi_memory.storage.pg.store import PgStore


@pytest.fixture
def local(tmp_path: Path) -> Path:
    path = tmp_path / "local.db"
    with Archive.open(path) as archive:
        archive.import_paths([PI_DATA, BAD_DATA])
    return path


def team_rows(url: str) -> dict[str, int]:
    with connect(url) as conn:
        return {
            "msg": conn.execute("SELECT count(*) FROM msg").fetchone()[0],
            "entry": conn.execute("SELECT count(*) FROM entry").fetchone()[0],
            "session": conn.execute("SELECT count(*) FROM session").fetchone()[0],
            "dup_seq": conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM msg GROUP BY session_id, seq HAVING count(*) > 1) d"
            ).fetchone()[0],
        }


def local_rows(path: Path) -> dict[str, int]:
    with Archive.open(path) as archive:
        return {
            "msg": archive.store.scalar("SELECT count(*) FROM msg"),
            "entry": archive.store.scalar("SELECT count(*) FROM entry"),
            "session": archive.store.scalar("SELECT count(*) FROM session"),
            "dup_seq": 0,
        }


def test_push_copies_everything_and_a_second_push_adds_nothing(local: Path, pg_url: str):
    with Archive.open(local) as lite, Archive.open(pg_url) as team:
        first = team.push_from(lite)
        again = team.push_from(lite)
        assert first.added == lite.stats().messages and first.unchanged == 0
        assert again.added == 0 and again.unchanged == again.sessions == first.sessions
        for query in ["proxy_buffering 断流", "购物车角标不更新", "响应式", "the"]:
            assert [(h.session_id, h.seq, h.snippet) for h in lite.search(query)] == [
                (h.session_id, h.seq, h.snippet) for h in team.search(query)
            ]
    assert team_rows(pg_url) == local_rows(local)


def test_an_interrupted_push_resumes_without_duplicates(local: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("pi_memory.storage.writes.BATCH", 20)  # several transactions for the fixture's 200 messages
    real = PgStore._write_txn
    calls = {"n": 0}

    def dies_on_the_fourth(self: PgStore, *args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt  # the laptop lid closes mid-push
        return real(self, *args)

    with Archive.open(local) as lite, Archive.open(pg_url) as team:
        monkeypatch.setattr(PgStore, "_write_txn", dies_on_the_fourth)
        with pytest.raises(KeyboardInterrupt):
            team.push_from(lite)
        partial = team_rows(pg_url)["msg"]
        assert 0 < partial < lite.stats().messages
        monkeypatch.setattr(PgStore, "_write_txn", real)
        resumed = team.push_from(lite)
        assert resumed.added == lite.stats().messages - partial
        assert resumed.unchanged >= 1  # sessions completed before the cut are not read again
        assert team.push_from(lite).added == 0
        assert team.stats().indexed == lite.stats().indexed
    assert team_rows(pg_url) == local_rows(local)


def test_push_adds_only_what_is_new_after_a_local_import(local: Path, pg_url: str, tmp_path: Path):
    from test_search import write_session

    with Archive.open(local) as lite, Archive.open(pg_url) as team:
        team.push_from(lite)
        write_session(tmp_path / "more.jsonl", "moremore-0001", "/w/more", ["新的一条 fresh", "answer"])
        lite.import_paths([tmp_path / "more.jsonl"])
        report = team.push_from(lite)
        assert report.added == 2 and report.unchanged == report.sessions - 1
        assert team.search("fresh")[0].session_id == "moremore-0001"


def test_push_from_the_cli_twice(local: Path, pg_url: str):
    runner = CliRunner()
    first = runner.invoke(cli, ["push", "--from", str(local), "--to", pg_url, "--json"])
    second = runner.invoke(cli, ["push", "--from", str(local), "--to", pg_url, "--json"])
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert json.loads(first.stdout)["added"] > 0 and json.loads(second.stdout)["added"] == 0
    # the words it brought counted on the server for search (m018); nothing to count the second time
    assert json.loads(first.stdout)["words_counted"] > 0 and json.loads(second.stdout)["words_counted"] == 0


def test_push_rejects_a_missing_source_or_a_file_target(tmp_path: Path, pg_url: str):
    runner = CliRunner()
    missing = runner.invoke(cli, ["push", "--from", str(tmp_path / "none.db"), "--to", pg_url])
    assert missing.exit_code == 1 and "no local archive" in missing.output
    to_file = runner.invoke(cli, ["push", "--to", str(tmp_path / "x.db")])
    assert to_file.exit_code == 1 and "postgresql://" in to_file.output
