"""Forget: deleted for real, unfindable by any search, not revived by a re-import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.errors import NotFound

CACHE = "01a2364c-6ad9-7626-8e7a-d5d6590121f3"  # pi 0.73.1 cache-index-zh-continue
CACHE_FILE = "pi-0.73.1-cache-index-zh-continue.jsonl"
LONG = "01a2364c-a7f6-75cb-ba8a-42838165f27d"


def findable(archive: Archive, query: str) -> bool:
    """Some hit of either search track holds the query text itself (not just one of its characters)."""
    content = [h.text for h in archive.search(query, limit=100)]  # type: ignore[union-attr]
    summary = [json.dumps(h.run.fields, ensure_ascii=False) for h in archive.search(query, limit=100, scope="summary")]  # type: ignore[union-attr]
    return any(query.lower() in text.lower() for text in content + summary)


def hits_in(archive: Archive, query: str, session: str) -> int:
    content = [h for h in archive.search(query, limit=100) if h.session_id == session]  # type: ignore[union-attr]
    runs = [h for h in archive.search(query, limit=100, scope="summary") if h.run.session_id == session]  # type: ignore[union-attr]
    return len(content) + len(runs)


def only(archive: Archive, tmp_path: Path, name: str) -> Path:
    """A copy of one fixture in its own folder, imported."""
    folder = tmp_path / "src"
    folder.mkdir(exist_ok=True)
    target = folder / name
    target.write_bytes((PI_DATA / name).read_bytes())
    archive.import_paths([target])
    return target


def test_forgetting_a_session_removes_every_trace(archive: Archive, tmp_path: Path) -> None:
    only(archive, tmp_path, CACHE_FILE)
    only(archive, tmp_path, "pi-0.73.1-long-output-en.jsonl")
    assert findable(archive, "缓存索引优化方案")
    counters_before = archive.store.counters()
    plan = archive.forget(CACHE[:12])
    assert plan.kind == "session" and len(plan.msg_ids) == 10
    for query in ("缓存索引优化方案", "P99 延迟", "缓存"):
        assert not findable(archive, query), query
    for query in ("OPENAI_API_KEY", "sk-proj-FAKE-fixture-not-a-real-key", "shard", "REDIS_URL"):
        assert hits_in(archive, query, CACHE) == 0, query
    for table in ("msg", "entry", "run"):
        assert archive.store.scalar(f"SELECT count(*) FROM {table} WHERE session_id=?", (CACHE,)) == 0
    assert archive.store.scalar("SELECT count(*) FROM session WHERE id=?", (CACHE,)) == 0
    counters = archive.store.counters()
    indexed = archive.store.scalar("SELECT count(*), sum(nchars) FROM msg WHERE indexed=TRUE")
    assert (
        counters["indexed_docs"] == archive.store.rows("SELECT count(*) FROM msg WHERE indexed=TRUE")[0][0] == indexed
    )
    assert counters["indexed_docs"] < counters_before["indexed_docs"]
    assert counters["indexed_chars"] == archive.store.rows("SELECT sum(nchars) FROM msg WHERE indexed=TRUE")[0][0]
    assert counters["run_docs"] == archive.store.scalar("SELECT count(*) FROM run")
    assert findable(archive, "cache misses")  # the other session is untouched


def test_a_forgotten_session_is_not_revived_by_a_reimport(archive: Archive, tmp_path: Path) -> None:
    source = only(archive, tmp_path, CACHE_FILE)
    archive.forget(CACHE)
    report = archive.import_paths([source], force=True)
    assert report.added == 0 and report.forgotten == 10
    assert not findable(archive, "缓存索引优化方案")
    back = archive.import_paths([source], force=True, include_forgotten=True)
    assert back.added == 10
    assert findable(archive, "缓存索引优化方案")


def test_a_copy_of_a_forgotten_session_under_another_id_stays_forgotten(archive: Archive, tmp_path: Path) -> None:
    only(archive, tmp_path, CACHE_FILE)
    archive.forget(CACHE)
    lines = (PI_DATA / CACHE_FILE).read_text(encoding="utf-8").splitlines(keepends=True)
    fork = tmp_path / "fork.jsonl"
    fork.write_text(
        lines[0].replace(CACHE, "0f0f0f0f-0000-7000-8000-000000000000") + "".join(lines[1:]), encoding="utf-8"
    )
    report = archive.import_paths([fork])
    assert report.added == 0 and report.forgotten == 10
    assert not findable(archive, "缓存索引优化方案")


def test_forgetting_a_run_leaves_the_rest_of_the_session(archive: Archive, tmp_path: Path) -> None:
    source = only(archive, tmp_path, CACHE_FILE)
    first, second = reversed(archive.runs(session=CACHE))
    assert archive.search("预期收益", limit=100) and archive.search("预期收益", scope="summary")
    archive.forget(second.address)
    assert not findable(archive, "预期收益")  # only the second run said it
    with pytest.raises(NotFound):
        archive.read_address(second.address)
    assert [r.id for r in archive.runs(session=CACHE)] == [first.id]
    assert archive.search("INDEX_SHARDS", limit=10)  # the first run is still there
    archive.import_paths([source], force=True)
    assert not findable(archive, "预期收益")
    assert [r.id for r in archive.runs(session=CACHE)] == [first.id]
    assert archive.import_paths([source], include_forgotten=True).added == second.messages
    assert findable(archive, "预期收益")


def test_forgetting_one_message_rebuilds_its_run_summary(archive: Archive, tmp_path: Path) -> None:
    source = only(archive, tmp_path, CACHE_FILE)
    first = archive.runs(session=CACHE)[-1]
    window = archive.read_address(first.address)
    final = window.messages[-1]  # type: ignore[union-attr]
    assert "LRU" in final.text
    assert "INDEX_SHARDS" in archive.run(first.id).summary
    assert findable(archive, "maxsize")
    archive.forget(str(final.msg_id))
    assert not findable(archive, "maxsize")
    assert archive.run(first.id).messages == first.messages - 1
    assert "INDEX_SHARDS" not in archive.run(first.id).summary
    archive.import_paths([source], force=True)
    assert not findable(archive, "maxsize")
    assert archive.run(first.id).messages == first.messages - 1


def test_forget_names_unknown_targets_clearly(imported: Archive) -> None:
    with pytest.raises(NotFound):
        imported.forget("r999999")
    with pytest.raises(NotFound):
        imported.forget("999999")
    with pytest.raises(NotFound):
        imported.forget("ffffffff-0000")


def usage_of(archive: Archive, session: str) -> tuple[int, int, int]:
    """(request rows, requests in the sums, output tokens in the sums) of one session."""
    rows = archive.store.scalar("SELECT count(*) FROM usage WHERE session_id=?", (session,))
    sums = archive.store.rows("SELECT sum(requests), sum(output) FROM usage_sum WHERE session_id=?", (session,))[0]
    return int(rows), int(sums[0] or 0), int(sums[1] or 0)


def test_forgetting_a_session_removes_its_model_requests_and_ledger_events(archive: Archive, tmp_path: Path) -> None:
    only(archive, tmp_path, CACHE_FILE)
    only(archive, tmp_path, "pi-0.73.1-long-output-en.jsonl")
    archive.record_context_event(CACHE, "memory", "a memory the bridge appended to the system prompt")
    other = usage_of(archive, LONG)
    assert usage_of(archive, CACHE)[0] == 5 and other[0] > 0
    archive.forget(CACHE)
    assert usage_of(archive, CACHE) == (0, 0, 0)
    assert archive.store.scalar("SELECT count(*) FROM context_ledger WHERE session_id=?", (CACHE,)) == 0
    assert usage_of(archive, LONG) == other
    assert archive.usage("model").total.requests == other[0]


def test_forgetting_an_assistant_message_takes_its_request_out_of_usage_for_good(
    archive: Archive, tmp_path: Path
) -> None:
    source = only(archive, tmp_path, CACHE_FILE)
    requests, _, output = usage_of(archive, CACHE)
    msg_id, hash_ = archive.store.rows(
        "SELECT id, hash FROM msg WHERE session_id=? AND role='assistant' ORDER BY ts, seq LIMIT 1", (CACHE,)
    )[0]
    (its_output,) = archive.store.rows("SELECT output FROM usage WHERE key=?", (f"pi:{hash_}",))[0]
    archive.forget(str(msg_id))
    after = (requests - 1, requests - 1, output - its_output)
    assert usage_of(archive, CACHE) == after
    assert archive.usage("daily").total.output == output - its_output
    archive.import_paths([source], force=True)  # the file still records it: not billed again
    assert usage_of(archive, CACHE) == after
    archive.import_paths([source], force=True, include_forgotten=True)
    assert usage_of(archive, CACHE) == (requests, requests, output)
