"""In-session folding, the pure part: which entries fold, the texts, the edits, levels, accounting."""

from __future__ import annotations

import json

from fold_helpers import Session, appended, body
from pi_memory.compact.fold.apply import folded_messages
from pi_memory.compact.fold.plan import FoldSettings, plan_block
from pi_memory.compact.fold.records import Item, parse_records
from pi_memory.compact.fold.render import args_text, stub_text
from pi_memory.compact.fold.service import fold_now
from pi_memory.compact.fold.status import fold_status
from pi_memory.compact.fold.view import view_from_entries, view_from_messages

TOOLS = [("read", {"path": "src/a.ts"}, 9000), ("bash", {"command": "npm test"}, 4000)]


def session_of(runs: int, **cfg: int) -> Session:
    s = Session(cfg=FoldSettings(**cfg)) if cfg else Session()
    for i in range(1, runs + 1):
        s.run(i, TOOLS)
    return s


def roles_and_texts(messages: list[dict]) -> list[str]:
    return [m["role"] + ":" + json.dumps(m["content"])[:60] for m in messages]


def test_stub_text_names_the_tool_args_size_and_address() -> None:
    item = Item(entry="abcd1234", role="toolResult", address="r12/m4", tool="read", args="src/a.ts", chars=12345)
    assert stub_text(item) == "[read src/a.ts → 12,345 chars, archived as r12/m4; session_read to see it]"


def test_args_are_clipped_to_one_line() -> None:
    assert args_text({"command": "echo a\n" * 50}, 20).endswith("…")
    assert len(args_text({"command": "echo a\n" * 50}, 20)) == 20
    assert args_text({"x": 1}, 80) == '{"x": 1}'


def test_nothing_folds_before_the_oldest_output_is_old_enough() -> None:
    s = session_of(3)
    assert s.folds == []
    assert all(appended(a, b) for a, b in zip(s.payloads, s.payloads[1:], strict=False))


def test_auto_fold_stubs_every_old_output_at_one_run_start_and_never_the_current_run() -> None:
    s = session_of(3)
    s.user("run 4: next")
    last = s.request()
    (rec,) = s.folds
    assert rec["kind"] == "stubs" and rec["trigger"] == "age" and len(rec["stubs"]) == 6
    stubs = [m for m in last if m["role"] == "toolResult"]
    assert all(m["content"][0]["text"].startswith("[") for m in stubs)
    assert [m for m in last if m["role"] == "user"] == [m for m in s.messages if m["role"] == "user"]


def test_between_folds_every_request_only_appends_to_the_previous_one() -> None:
    s = session_of(20)
    breaks = [i for i in range(1, len(s.payloads)) if not appended(s.payloads[i - 1], s.payloads[i])]
    assert 0 < len(breaks) <= len(s.folds)


def test_a_budget_triggers_a_fold_before_the_age_does() -> None:
    s = Session(cfg=FoldSettings(after_runs=50, budget_tokens=5000))
    for i in range(1, 4):
        s.run(i, TOOLS)
    assert [f["trigger"] for f in s.folds] == ["budget"]


def test_errors_small_outputs_and_unpersisted_messages_never_fold() -> None:
    s = Session()
    s.user("run 1")
    (cid,) = s.call([("bash", {"command": "false"})], 1, 0)
    s.result(cid, "bash", body("err", 5000), error=True)
    (cid,) = s.call([("ls", {"path": "."})], 1, 1)
    s.result(cid, "ls", "a b c")
    s.answer("done")
    for i in range(2, 6):
        s.user(f"run {i}")
        s.request()
    assert s.folds == []


def test_the_fold_tool_folds_since_the_fold_line_up_to_the_last_whole_pair() -> None:
    s = session_of(2)
    s.user("run 3")
    (a,) = s.call([("read", {"path": "x.ts"})], 3, 0)
    s.result(a, "read", body("x", 3000))
    s.call([("fold", {"summary": "x"})], 3, 1)  # the fold call itself: no result yet
    out = s.fold_tool("the files hold the config")
    (rec,) = parse_records(out["records"])
    assert rec.kind == "block" and rec.level == 1
    assert rec.first == s.entries[0]["id"]  # the first user message
    assert "the files hold the config" in rec.text and "x.ts" in rec.text
    folded = s.request()
    assert folded[0]["role"] == "user" and folded[0]["content"][0]["text"].startswith("[pi-memory fold f1")
    assert folded[1]["role"] == "assistant" and folded[1]["content"][0]["name"] == "fold"


def test_the_fold_tool_keeps_the_newest_pairs_when_asked() -> None:
    s = session_of(2)
    out = s.fold_tool("older ones", keep_last=1)
    (rec,) = parse_records(out["records"])
    assert rec.last != s.entries[-2]["id"]
    assert "nothing to fold" in s.fold_tool("again", keep_last=5)["text"]


def test_a_span_never_starts_with_a_result_or_splits_a_parallel_call() -> None:
    s = Session()
    s.user("run 1")
    ids = s.call([("read", {"path": "a"}), ("read", {"path": "b"})], 1, 0)
    s.result(ids[0], "read", body("a", 3000))
    view = view_from_entries(s.entries)
    assert isinstance(plan_block(view, [], FoldSettings(), {}, "x", 1), str)  # b has no result yet
    s.result(ids[1], "read", body("b", 3000))
    rec = plan_block(view_from_entries(s.entries), [], FoldSettings(), {}, "x", 1)
    assert not isinstance(rec, str) and rec.last == s.entries[-1]["id"]


def test_fold_blocks_past_the_budget_merge_one_level_up_and_the_context_stays_sound() -> None:
    s = session_of(40, merge_tokens=500)
    merges = [f for f in s.folds if f["kind"] == "merge"]
    assert merges and merges[0]["level"] == 2
    last = s.payloads[-1]
    assert last[0]["content"][0]["text"].startswith("[pi-memory fold")
    calls = {b["id"] for m in last if m["role"] == "assistant" for b in m["content"] if b.get("type") == "toolCall"}
    results = {m["toolCallId"] for m in last if m["role"] == "toolResult"}
    assert calls == results


def test_four_level_two_blocks_merge_into_level_three() -> None:
    s = session_of(50, merge_tokens=150)
    assert max(f["level"] for f in s.folds) >= 3


def test_the_same_messages_and_records_give_the_same_bytes() -> None:
    s = session_of(12)
    view = view_from_messages(s.messages[:-1], s.slim())  # the last request came before the final answer
    records = parse_records(s.folds)
    assert json.dumps(folded_messages(view, records)) == json.dumps(s.payloads[-1])


def test_folds_whose_span_was_compacted_away_do_not_apply() -> None:
    s = session_of(8)
    cut = len(s.messages) - 6
    summary = {"role": "compactionSummary", "summary": "s", "timestamp": 1}
    kept = [summary, *s.messages[cut:]]
    view = view_from_messages(kept, s.slim())
    out = folded_messages(view, parse_records(s.folds))
    assert out[0] == summary and len(out) == len(kept)


def test_status_counts_stubs_levels_and_tokens_saved() -> None:
    s = session_of(40, merge_tokens=500)
    st = fold_status(parse_records(s.folds))
    assert st.records == len(s.folds) and st.saved_tokens > 10000
    assert max(st.blocks) >= 2 and st.last.startswith(f"f{len(s.folds)}")


def test_folding_shrinks_a_long_session_several_times() -> None:
    on, off = session_of(30), Session(fold=False)
    for i in range(1, 31):
        off.run(i, TOOLS)
    assert len(json.dumps(on.payloads[-1])) * 4 < len(json.dumps(off.payloads[-1]))


def test_bad_records_are_skipped() -> None:
    assert parse_records([{"kind": "nope"}, 3, {"id": "f1", "kind": "stubs", "stubs": "bad"}]) == []


def test_the_fold_command_stubs_every_old_output_now_including_the_last_run_when_idle() -> None:
    s = session_of(2)
    out = fold_now(s.entries, s.folds, s.cfg, s.lookup, s.tick())
    (rec,) = out["records"]
    assert rec["kind"] == "stubs" and rec["trigger"] == "command" and len(rec["stubs"]) == 4
    assert "Folded: f1" in out["text"]
    s.persist(out["records"])
    assert fold_now(s.entries, s.folds, s.cfg, s.lookup, s.tick())["text"].startswith("nothing to fold")


def test_folding_off_answers_the_tool_and_leaves_the_context() -> None:
    s = Session(cfg=FoldSettings(enabled=False))
    for i in range(1, 6):
        s.run(i, TOOLS)
    assert s.folds == [] and "off" in fold_now(s.entries, [], s.cfg, s.lookup, 1, summary="x")["text"]


# --- ids are not unique: providers reuse tool call ids (seen with pi 1.6.0) ----------------


def _current_run_results(payload: list[dict]) -> list[dict]:
    last_user = max(i for i, m in enumerate(payload) if m["role"] == "user")
    return [m for m in payload[last_user:] if m["role"] == "toolResult"]


def test_a_reused_tool_call_id_never_gets_an_older_calls_stub() -> None:
    s = Session(reuse_ids=True)
    for i in range(1, 7):
        s.run(i, TOOLS)
        s.user(f"run {i + 1}")
        s.request()  # the run start: old outputs are stubbed
        (cid,) = s.call([("read", {"path": "src/a.ts"})], i + 1, 0)
        fresh = body(f"fresh {i}", 9000)
        s.result(cid, "read", fresh)
        payload = s.request()  # the fresh result, under the same id as the stubbed ones
        (result,) = _current_run_results(payload)
        assert result["content"] == [{"type": "text", "text": fresh}]
        s.answer(f"done {i + 1}")
    assert any(r["kind"] == "stubs" for r in s.folds)  # old outputs did fold all the while


def test_two_open_calls_of_one_id_are_never_folded_or_split() -> None:
    s = Session()
    s.user("run 1")
    s.request()
    s.add(
        {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "dup", "name": "read", "arguments": {"path": "a"}},
                {"type": "toolCall", "id": "dup", "name": "read", "arguments": {"path": "b"}},
            ],
            "stopReason": "toolUse",
            "timestamp": s.tick(),
        }
    )
    s.result("dup", "read", body("a", 9000))
    s.result("dup", "read", body("b", 9000))
    s.answer("done")
    for i in range(2, 6):
        s.run(i, TOOLS)
    s.user("run 6")
    payload = s.request()
    sizes = [len(json.dumps(m["content"])) for m in payload if m["role"] == "toolResult"][:2]
    assert min(sizes) > 9000  # which result answers which call is unknowable: neither is stubbed
    view = view_from_entries(s.entries)
    assert plan_block(view, parse_records(s.folds), s.cfg, {}, "x", s.tick()).startswith("nothing to fold")


def test_a_stub_that_would_land_in_the_run_in_progress_does_not_apply() -> None:
    s = session_of(1)
    s.user("run 2")
    s.request()
    (cid,) = s.call([("read", {"path": "src/a.ts"})], 2, 0)
    s.result(cid, "read", body("fresh", 9000))
    entry = s.entries[-1]["id"]
    stray = {"id": "f9", "kind": "stubs", "level": 0, "ts": 1, "stubs": [{"entry": entry, "text": "[stub]"}]}
    view = view_from_messages(s.messages, s.slim())
    from pi_memory.compact.fold.apply import apply_records

    assert apply_records(view, parse_records([stray])) == []


def context_tokens_of(messages: list[dict], family: str = "openai") -> int:
    from pi_memory.compact.fold.view import message_tokens

    return sum(message_tokens(m, family) for m in messages)


def test_the_records_token_counts_add_up_to_what_folding_took_out_of_the_request() -> None:
    on, off = session_of(30, merge_tokens=500), Session(fold=False)
    for i in range(1, 31):
        off.run(i, TOOLS)
    records = parse_records(on.folds)
    assert {r.kind for r in records} >= {"stubs", "merge"} and all(
        r.before_tokens > r.after_tokens > 0 for r in records
    )
    saved = sum(r.saved_tokens for r in records)
    assert saved == context_tokens_of(off.payloads[-1]) - context_tokens_of(on.payloads[-1])


def test_a_fold_of_chinese_output_counts_its_tokens_for_the_models_tokenizer_not_chars_over_4() -> None:
    from pi_memory.compact.fold.plan import plan_auto
    from pi_memory.core.tokens import estimate_tokens

    chinese = "缓存索引按分片建倒排路由表，命中率从百分之六十提到九十。" * 60
    s = Session()
    for i in range(1, 5):
        s.user(f"run {i}: 看一下日志")
        (cid,) = s.call([("bash", {"command": f"cat log-{i}.txt"})], i, 0)
        s.result(cid, "bash", chinese)
        s.add(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "好"}],
                "stopReason": "stop",
                "model": "claude-sonnet-4-5",
                "provider": "anthropic",
                "timestamp": s.tick(),
            }
        )
    s.user("run 5: 继续")
    view = view_from_messages(s.messages, s.slim())
    assert view.family == "anthropic"
    rec = plan_auto(view, [], FoldSettings(), {}, s.tick())
    assert rec is not None and len(rec.stubs) == 4
    one = estimate_tokens(chinese, "anthropic")
    assert rec.before_tokens >= 4 * one and rec.before_tokens > 2 * rec.before_chars // 4
    assert rec.saved_tokens == rec.before_tokens - rec.after_tokens > 3 * one


def test_a_record_made_before_records_kept_tokens_counts_chars_over_four() -> None:
    (old,) = parse_records([{"id": "f1", "kind": "stubs", "before_chars": 4000, "after_chars": 400}])
    assert old.saved_tokens == 900


def test_a_checkpoint_records_the_folded_context_tokens_before_and_after_it() -> None:
    from pi_memory.compact.fold.plan import text_tokens
    from pi_memory.compact.plan import compact_plan

    s = session_of(12)
    kept = [e["id"] for e in s.entries if e["type"] == "message" and e["message"]["role"] == "user"][-2]
    plan = compact_plan(s.entries, {"firstKeptEntryId": kept, "tokensBefore": 1})
    details, summary = plan["compaction"]["details"], plan["compaction"]["summary"]
    records = parse_records(s.folds)
    before = context_tokens_of(folded_messages(view_from_entries(s.entries), records))
    at = next(i for i, e in enumerate(s.entries) if e["id"] == kept)
    after = context_tokens_of(folded_messages(view_from_entries(s.entries[at:]), records))
    assert details["contextTokensBefore"] == before
    assert details["contextTokensAfter"] == after + text_tokens(summary, "openai")
    assert before > details["contextTokensAfter"]
