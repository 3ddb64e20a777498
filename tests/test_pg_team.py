"""The team archive on PostgreSQL: identity, roles, isolation filters, forgetting, concurrent writers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import PI_DATA, python_cli
from pg_support import as_role, connect
from pi_memory import Archive
from pi_memory.core.text import query_tokens
from pi_memory.errors import ArchiveError, NotFound
from pi_memory.frontends.cli.main import cli
from pi_memory.storage.pg import redact, roles_sql
from pi_memory.storage.pg.store import PermissionDenied
from test_search import write_session


def apply_roles(url: str) -> None:
    with Archive.open(url):  # creates the tables
        pass
    with connect(url) as conn:
        conn.execute(roles_sql().encode())


def one_session(folder: Path, sid: str, texts: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_session(folder / f"{sid}.jsonl", sid, f"/home/u/{sid[:4]}", texts)


def test_pg_roles_prints_idempotent_grants():
    result = CliRunner().invoke(cli, ["pg-roles"])
    assert result.exit_code == 0
    assert (
        "CREATE ROLE pi_memory_reader" in result.stdout
        and "GRANT UPDATE ON counter TO pi_memory_writer" in result.stdout
    )


def test_redact_hides_passwords_in_urls_and_conninfo():
    assert redact("postgresql://alice:s3cr%40t@db:5432/x") == "postgresql://alice:***@db:5432/x"
    assert redact("host=db password='a b' user=x") == "host=db password=*** user=x"
    assert redact("failed for hunter2", "hunter2") == "failed for ***"


def test_rows_record_the_writing_role_author_and_host(pg_url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PI_MEMORY_USER", "alice@laptop")
    with Archive.open(pg_url) as archive:
        archive.import_paths([PI_DATA])
        assert archive.whoami()["author"] == "alice@laptop"
    with connect(pg_url) as conn:
        rows = conn.execute("SELECT DISTINCT written_by, author, host FROM msg").fetchall()
        sessions = conn.execute("SELECT DISTINCT written_by, author, host FROM session").fetchall()
        derived = [
            conn.execute(f"SELECT DISTINCT written_by, author, host FROM {table}").fetchall()
            for table in ("entry", "run", "run_msg", "run_file")
        ]
    assert rows == sessions == [("pi_owner", "alice@laptop", socket.gethostname())]
    assert derived == [rows] * 4  # filled in by the identity trigger from the connection


def test_a_client_cannot_claim_another_role(pg_url: str):
    with Archive.open(pg_url) as archive:
        archive.import_paths([PI_DATA])
    with connect(pg_url) as conn:
        conn.execute(
            "INSERT INTO session(id, started_at, last_at, written_by) VALUES ('forged-session', 0, 0, 'someone_else')"
        )
        assert conn.execute("SELECT written_by FROM session WHERE id='forged-session'").fetchone() == ("pi_owner",)


def test_read_only_role_can_search_but_not_import_or_forget(pg_url: str, make_role, tmp_path: Path):
    apply_roles(pg_url)
    with Archive.open(pg_url) as owner:
        owner.import_paths([PI_DATA])
    reader = make_role("pi_memory_reader")
    with Archive.open(reader) as archive:
        assert archive.search("proxy_buffering 断流")[0].project == "chat-gateway"
        assert archive.stats().messages == 160
        sid = archive.search("proxy_buffering")[0].session_id
        with pytest.raises(PermissionDenied, match="permission denied"):
            archive.import_paths([one_session(tmp_path / "new", "newnewne-0001", ["fresh words"])])
        with pytest.raises(PermissionDenied):
            archive.forget(sid)
        assert archive.stats().messages == 160


def test_read_only_import_from_the_cli_is_one_line_without_the_password(pg_url: str, make_role, tmp_path: Path):
    apply_roles(pg_url)
    reader = make_role("pi_memory_reader")
    password = reader.split(":")[2].split("@")[0]
    result = subprocess.run(
        python_cli() + ["--db", reader, "import", str(PI_DATA)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: permission denied"), result.stderr
    assert password not in result.stderr and "Traceback" not in result.stderr


def test_a_wrong_password_is_a_clear_error_that_does_not_show_it(pg_url: str):
    bad = as_role(pg_url, "pi_owner", "wrong-secret-4711")
    with pytest.raises(ArchiveError) as err:
        Archive.open(bad)
    assert "cannot connect" in str(err.value) and "wrong-secret-4711" not in str(err.value)


def test_writers_forget_only_their_own_sessions_and_admins_any(pg_url: str, make_role, tmp_path: Path):
    apply_roles(pg_url)
    alice, bob, lead = make_role("pi_memory_writer"), make_role("pi_memory_writer"), make_role("pi_memory_admin")
    with Archive.open(alice) as a:
        a.import_paths([one_session(tmp_path / "a", "aaaaaaaa-0001", ["alice 的缓存方案", "按 shard 路由"])])
    with Archive.open(bob) as b:
        b.import_paths([one_session(tmp_path / "b", "bbbbbbbb-0001", ["bob 的缓存问题", "加一把锁"])])
        with pytest.raises(PermissionDenied, match="only that role or a member of pi_memory_admin"):
            b.forget("aaaaaaaa-0001")
        assert b.stats().messages == 4
    with Archive.open(alice) as a:
        assert len(a.forget("aaaaaaaa-0001").msg_ids) == 2
        assert [h.session_id for h in a.search("缓存")] == ["bbbbbbbb-0001"]
    with Archive.open(lead) as admin:
        assert len(admin.forget("bbbbbbbb-0001").msg_ids) == 2
        st = admin.stats()
        assert (st.messages, st.sessions, st.indexed) == (0, 0, 0)
        with pytest.raises(NotFound):
            admin.forget("bbbbbbbb-0001")


def test_search_can_be_limited_to_mine_a_team_or_authors(pg_url: str, make_role, tmp_path: Path):
    apply_roles(pg_url)
    team = "pi_t_team_" + Path(tmp_path).name[-6:].replace("-", "_")
    with connect(pg_url) as conn:
        conn.execute(f"CREATE ROLE {team} NOLOGIN")
    try:
        alice = make_role("pi_memory_writer", team)
        bob = make_role("pi_memory_writer")
        with Archive.open(alice) as a:
            a.import_paths(
                [one_session(tmp_path / "a", "aaaaaaaa-0002", ["SSE 断流 alice 修好了", "proxy_buffering off"])]
            )
        with Archive.open(bob) as b:
            b.import_paths([one_session(tmp_path / "b", "bbbbbbbb-0002", ["SSE 断流 bob 也遇到", "重试三次"])])
            assert {h.session_id for h in b.search("断流")} == {"aaaaaaaa-0002", "bbbbbbbb-0002"}
            assert {h.session_id for h in b.search("断流", mine=True)} == {"bbbbbbbb-0002"}
            assert {h.session_id for h in b.search("断流", team=team)} == {"aaaaaaaa-0002"}
            alice_role = alice.split("//")[1].split(":")[0]  # the author defaults to the role
            assert {h.session_id for h in b.search("断流", authors=[alice_role])} == {"aaaaaaaa-0002"}
            assert b.search("断流", team="pi_no_such_team") == []
            # the same filters on run summaries, with the other filters
            runs = {h.run.session_id for h in b.search("断流", scope="summary", mine=True)}  # type: ignore[union-attr]
            assert runs == {"bbbbbbbb-0002"}
            by_team = b.search("断流", scope="summary", team=team, project="aaaa", kinds=["user"])
            assert {h.run.session_id for h in by_team} == {"aaaaaaaa-0002"}  # type: ignore[union-attr]
            assert b.search("断流", scope="summary", team=team, agent="claude") == []
        runner = CliRunner()
        mine = runner.invoke(cli, ["--db", bob, "search", "断流", "--mine", "--json"])
        theirs = runner.invoke(cli, ["--db", bob, "search", "断流", "--team", team, "--json"])
        assert mine.exit_code == 0 and theirs.exit_code == 0, mine.output + theirs.output
        assert {h["session_id"] for h in json.loads(mine.stdout)["hits"]} == {"bbbbbbbb-0002"}
        assert {h["session_id"] for h in json.loads(theirs.stdout)["hits"]} == {"aaaaaaaa-0002"}
        runs = runner.invoke(cli, ["--db", bob, "search", "断流", "--scope", "summary", "--mine", "--json"])
        assert runs.exit_code == 0, runs.output
        assert [h["session_id"] for h in json.loads(runs.stdout)["hits"]] == ["bbbbbbbb-0002"]
    finally:
        with connect(pg_url) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {team}")


WRITER = """
import sys
from pi_memory import Archive
with Archive.open(sys.argv[1]) as archive:
    for _ in range(2):
        archive.import_paths(sys.argv[2:], force=True)
"""


def test_concurrent_writers_from_several_processes_lose_nothing_and_duplicate_nothing(pg_url: str, tmp_path: Path):
    with Archive.open(pg_url):
        pass
    own = [
        one_session(
            tmp_path / f"w{i}", f"{i}{i}{i}{i}{i}{i}{i}{i}-own", [f"writer {i} message {k} 并发" for k in range(30)]
        )
        for i in range(4)
    ]
    shared = one_session(tmp_path / "shared", "shshshsh-0001", [f"shared message {k} 共享" for k in range(40)])
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, pg_url, str(own[i]), str(shared), str(PI_DATA)])
        for i in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    with connect(pg_url) as conn:
        total = conn.execute("SELECT count(*) FROM msg").fetchone()[0]
        dup_seq = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM msg GROUP BY session_id, seq HAVING count(*) > 1) d"
        )
        indexed = conn.execute("SELECT count(*) FROM msg WHERE indexed").fetchone()[0]
        counted = conn.execute("SELECT indexed_docs FROM counter").fetchone()[0]
        assert dup_seq.fetchone()[0] == 0
    assert total == 160 + 4 * 30 + 40
    assert counted == indexed
    with Archive.open(pg_url) as archive:
        assert len(archive.search("并发", limit=100)) == 100
        window = archive.read("shshshsh-0001", before=50, after=0)
        assert [m.text for m in window.messages] == [f"shared message {k} 共享" for k in range(40)]


def test_a_team_archive_has_no_file_path_and_says_so(pg_url: str):
    with Archive.open(pg_url) as archive, pytest.raises(ArchiveError, match="PostgreSQL archive, not a file"):
        _ = archive.path


def test_stats_from_the_cli_show_the_url_without_its_password(pg_url: str):
    from urllib.parse import urlsplit

    password = urlsplit(pg_url).password
    result = CliRunner().invoke(cli, ["--db", pg_url, "stats", "--json"])
    assert result.exit_code == 0, result.output
    assert password and password not in result.stdout and ":***@" in result.stdout


def test_who_wrote_it_filters_on_a_local_archive_are_a_clear_error(db_path: Path):
    result = CliRunner().invoke(cli, ["--db", str(db_path), "search", "x", "--mine"])
    assert result.exit_code == 2 and "filter a team archive" in result.output


def test_run_counts_of_common_summary_tokens_are_estimated_past_the_cap(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import pi_memory.storage.pg.store as pg_store

    for k in range(20):
        one_session(tmp_path / "s", f"run{k:05d}-0001", [f"部署 step {k}", f"done {k}"])
    monkeypatch.setattr(pg_store, "RUN_DF_WINDOW", 5)
    monkeypatch.setattr(pg_store, "RUN_WINDOW", 5)
    with Archive.open(pg_url) as archive:
        archive.import_paths([tmp_path / "s"])
        assert archive.store.run_summary_df(query_tokens("部署")[0], 20_000) == 20  # counted: under the cap
        assert archive.store.run_summary_df(query_tokens("step")[0], 3) == 20  # past it: the window's density, scaled
        newest = archive.store.run_summary_recent(query_tokens("部署"), 50)  # only the newest run ids
        assert len(newest) == 5
        assert archive.store.run_summary_recent(query_tokens("部署"), 1) == newest[:1]  # walked back along the ids


def test_check_on_a_team_archive_recounts_the_counters_and_names_a_drifted_one(pg_url: str):
    with Archive.open(pg_url) as archive:
        archive.import_paths([PI_DATA])
        assert archive.check() == []
    assert CliRunner().invoke(cli, ["--db", pg_url, "check"]).output.strip() == "ok"
    with connect(pg_url) as conn:
        conn.execute("UPDATE counter SET run_docs = run_docs + 3")
    with Archive.open(pg_url) as archive:
        (problem,) = archive.check()
    assert problem.startswith("counter run_docs is ") and "the rows say" in problem
    result = CliRunner().invoke(cli, ["--db", pg_url, "check"])
    assert result.exit_code == 1 and "team archive check failed: counter run_docs" in result.output


def test_a_writer_imports_model_requests_and_forgetting_the_session_takes_them_out(
    pg_url: str, make_role, tmp_path: Path
):
    apply_roles(pg_url)
    alice = make_role("pi_memory_writer")
    source = tmp_path / "pi-0.73.1-cache-index-zh-continue.jsonl"
    source.write_bytes((PI_DATA / source.name).read_bytes())
    with Archive.open(alice) as a:
        a.import_paths([source])
        assert a.usage("model").total.requests == 5
        a.record_context_event("01a2364c-6ad9-7626-8e7a-d5d6590121f3", "memory", "an injected memory")
        a.forget("01a2364c-6ad9-7626-8e7a-d5d6590121f3")
        assert a.usage("model").total.requests == 0
        for table in ("usage", "usage_sum", "context_ledger"):
            assert a.store.scalar(f"SELECT count(*) FROM {table}") == 0, table
