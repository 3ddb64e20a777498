"""The quality bench's pure parts: cutting the public sets, the histories built from them, the
stemmed baseline's tokens, session grouping and the metrics (bench/qsets.py, bench/qsets_build.py,
bench/quality.py). Small hand-made rows in the sets' shapes; no source data is read."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import qsets  # noqa: E402
import qsets_build  # noqa: E402

TALK = {
    "id": "Chat_1_A_B",
    "speakers": ["Ann", "bo"],
    "sessions": [
        {
            "date": "2024-01-01T10:00:00",
            "turns": [
                {"id": "D1:1", "speaker": "Ann", "text": "I moved to Lisbon last week", "ts": "2024-01-01T10:00:00"},
                {"id": "D1:2", "speaker": "Bo", "text": "How is Lisbon?", "ts": "2024-01-01T10:00:00"},
            ],
        },
        {
            "date": "2024-01-03T09:00:00",
            "turns": [{"id": "D2:1", "speaker": "bo", "text": "Did you find a flat?", "ts": "2024-01-03T09:00:00"}],
        },
    ],
    "qa": [
        {"q": "When did Ann move to Lisbon?", "evidence": ["D1:1"], "category": 2},
        {"q": "What about images?", "evidence": ["D9:9"], "category": 1},
    ],
}


def test_boolq_lines_are_split_into_question_and_passage() -> None:
    line = json.dumps({"query": "Passage: Tea is a drink.\nQuestion: is tea a drink?", "choices": ["no", "yes"]})
    assert list(qsets_build.boolq([line])) == [{"q": "is tea a drink?", "passage": "Tea is a drink."}]


def test_pubmedqa_lines_lose_the_answer_choices() -> None:
    line = json.dumps({"context": "Context: Cells die.\nQuestion: Do cells die?\nA. yes\nB. no\nAnswer: "})
    assert list(qsets_build.pubmedqa([line])) == [{"q": "Do cells die?", "passage": "Cells die."}]


def test_memdaily_times_are_read_with_their_weekday() -> None:
    assert qsets_build.cn_time("2024年04月01日 周一 08:39") == "2024-04-01T08:39:00"


def test_a_realtalk_conversation_keeps_sessions_roles_and_strictly_increasing_times() -> None:
    conv = qsets.realtalk_conversation(TALK, "p", qsets.Keys())
    assert [len(s.turns) for s in conv.sessions] == [2, 1]
    assert [t.role for s in conv.sessions for t in s.turns] == ["user", "assistant", "assistant"]
    first, second = conv.sessions[0].turns
    assert second.ts == first.ts + 1  # the same second, kept in order
    assert conv.session_of["D2:1"] == conv.sessions[1].key


def test_each_question_is_asked_at_turn_and_session_level_and_one_without_evidence_is_dropped() -> None:
    conv = qsets.realtalk_conversation(TALK, "p", qsets.Keys())
    queries = qsets.conversation_queries("conv", "p", conv, qsets.realtalk_questions(TALK))
    assert [(q.set, q.level) for q in queries] == [("conv-turn", "message"), ("conv-session", "session")]
    assert queries[0].targets == {conv.turn_key["D1:1"]}
    assert queries[1].targets == {conv.sessions[0].key}
    assert all(q.project == "p" for q in queries)


def test_memdaily_messages_become_one_session_per_day() -> None:
    row = {
        "messages": [
            {"mid": 0, "text": "我的上司名叫赵雅琳。", "ts": "2024-04-01T08:04:00"},
            {"mid": 1, "text": "我表妹是老师。", "ts": "2024-04-01T19:00:00"},
            {"mid": 2, "text": "我同事过生日。", "ts": "2024-04-02T07:00:00"},
        ],
        "q": "我的上司叫什么？",
        "targets": [0],
    }
    conv = qsets.memdaily_conversation(row, "m", qsets.Keys())
    assert [len(s.turns) for s in conv.sessions] == [2, 1]
    (turn, session) = qsets.conversation_queries("zh", "m", conv, qsets.memdaily_questions(row))
    assert turn.targets == {conv.turn_key["0"]} and session.targets == {conv.sessions[0].key}


def test_a_later_history_is_shifted_by_whole_days_past_an_earlier_one() -> None:
    day = qsets.DAY_MS
    shift = qsets.day_shift(from_ms=10 * day + 5, after_ms=12 * day + 100, days=1)
    assert shift % day == 0 and 10 * day + 5 + shift > 12 * day + 100


def test_long_replies_are_assistant_messages_of_realistic_length_after_every_fourth_turn() -> None:
    row = json.loads(json.dumps(TALK))
    row["sessions"][0]["turns"] = [
        {"id": f"D1:{i}", "speaker": "Ann", "text": f"turn {i}", "ts": "2024-01-01T10:00:00"} for i in range(8)
    ]
    conv = qsets.realtalk_conversation(row, "p", qsets.Keys())
    qsets.with_long_replies(conv, "word " * 5000, random.Random(1), qsets.Keys(5_000_000))
    turns = conv.sessions[0].turns
    assert [t.role for t in turns].count("assistant") == 2
    assert turns[4].role == "assistant" and 40 <= len(turns[4].text) <= qsets.ASSISTANT_MAX
    assert all(b.ts > a.ts for a, b in zip(turns, turns[1:], strict=False))


@pytest.mark.parametrize("typed_simplified", [True, False])
def test_the_typed_script_form_is_in_exactly_one_message_and_the_other_in_many(typed_simplified: bool) -> None:
    pairs = {"說": "说", "體": "体", "國": "国"}
    pool = [f"他{i}說國事" for i in range(12)] + ["體"] * 12
    case = qsets.exact_form_cases(pool, pairs, typed_simplified, n=3, rng=random.Random(3), min_others=5)
    assert case.queries
    other_of = {s: t for t, s in pairs.items()} if typed_simplified else pairs
    for typed, i in case.queries:
        assert [j for j, text in enumerate(case.texts) if typed in text] == [i]
        assert sum(other_of[typed] in text for text in case.texts) >= 5


def test_the_stemmed_channels_keep_cjk_as_typed_and_stem_english_words() -> None:
    stem = qsets.snowball()
    chars, grams = qsets.stem_channels("Who partnered with Internet2 說話", stem)
    assert "partner" in chars and "internet2" in chars and "說" in chars
    assert grams == ["說話"]
    assert qsets.stemmed_query("partnerships 说", stem) == 'chars:"说" OR chars:"partnership"'


def test_baseline_hits_are_grouped_into_sessions_as_the_project_groups_them() -> None:
    hits = [(1, 5.0), (2, 4.0), (3, 4.5), (4, 1.0)]
    session_of = {1: "a", 2: "b", 3: "b", 4: "b"}
    ts_of = {1: 10, 2: 20, 3: 30, 4: 40}
    total = lambda scores: sum(scores)  # noqa: E731 - a score that lets more hits win
    assert qsets.group_sessions(hits, session_of, ts_of, total, 10) == ["b", "a"]
    assert qsets.group_sessions(hits, session_of, ts_of, max, 10) == ["a", "b"]


def test_a_session_file_names_its_project_and_carries_the_turn_keys_as_entry_ids(tmp_path: Path) -> None:
    conv = qsets.realtalk_conversation(TALK, "talk-1", qsets.Keys())
    assert qsets.write_sessions(conv.sessions, tmp_path) == 2
    lines = [json.loads(x) for x in next((tmp_path / "q" / "talk-1").glob("*.jsonl")).read_text().splitlines()]
    header, *entries = lines
    assert header["cwd"] == "/home/dev/talk-1" and header["id"] in {qsets.session_id(s.key) for s in conv.sessions}
    assert {e["id"] for e in entries} <= {qsets.entry_id(k) for k in conv.turn_key.values()}


def test_every_set_is_in_one_half_of_the_split_and_a_history_follows_its_source() -> None:
    import quality

    assert quality.split_of("conv-realtalk-a-turn") == quality.split_of("long-replies-a-session") == "fit"
    assert quality.split_of("conv-realtalk-b-session") == quality.split_of("mix-en-old-turn") == "report"
    assert quality.split_of("mix-zh-old-turn") == quality.split_of("conv-memdaily-a-turn") == "fit"
    assert not set(quality.SPLIT_FIT) & set(quality.SPLIT_REPORT)
    with pytest.raises(ValueError):
        quality.split_of("no-such-set")


def test_a_hit_is_any_target_and_the_metrics_count_ranks_from_zero() -> None:
    import quality

    assert quality.first_rank([7, 3, 9], frozenset({9, 3})) == 1
    assert quality.first_rank([7], frozenset({1})) is None
    m = quality.metrics([0, 1, None, 12])
    assert m["R@1"] == 0.25 and m["R@5"] == 0.5 and m["MRR@10"] == pytest.approx((1 + 0.5) / 4)


def test_each_question_s_rank_per_system_is_written_as_one_json_line(tmp_path: Path) -> None:
    import quality

    queries = [qsets.Query("conv-a-turn", "When did Ann move?", frozenset({1})), qsets.Query("frag", "x", frozenset())]
    out = tmp_path / "ranks.jsonl"
    quality.write_ranks(out, queries, {"project": [0, None], "stem": [2, 1]})
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines == [
        {"set": "conv-a-turn", "q": "When did Ann move?", "ranks": {"project": 0, "stem": 2}},
        {"set": "frag", "q": "x", "ranks": {"project": None, "stem": 1}},
    ]
    quality.write_ranks(None, queries, {})  # no file asked for: nothing written, no error


def test_misses_list_the_questions_a_baseline_put_higher_first(capsys: pytest.CaptureFixture[str]) -> None:
    import quality

    queries = [qsets.Query("s", f"q{i}", frozenset()) for i in range(3)]
    quality.print_misses(queries, [3, 0, None], [5, 1, 0], "stem", 2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "  miss [s] 'q2': project rank None, stem rank 0"  # the baseline did better: first
    assert lines[1] == "  miss [s] 'q0': project rank 3, stem rank 5" and len(lines) == 2  # q1 was no miss


def test_memdaily_questions_the_generator_failed_on_are_left_out(tmp_path: Path) -> None:
    traj = {
        "tid": 0,
        "message_list": [{"mid": 0, "message": "我表妹是老师。", "time": "2024年04月01日 周一 08:53", "place": "x"}],
        "question_list": [
            {"qid": 0, "question": "[ERRORQ]", "target_step_id": [0], "time": "2024年04月01日 周一 09:00"},
            {"qid": 1, "question": "我表妹做什么工作？", "target_step_id": [0], "time": "2024年04月01日 周一 09:00"},
        ],
    }
    (tmp_path / "01_simple_roles.json").write_text(json.dumps([traj], ensure_ascii=False), encoding="utf-8")
    rows = list(qsets_build.memdaily([tmp_path / "01_simple_roles.json"]))
    assert [r["q"] for r in rows] == ["我表妹做什么工作？"] and rows[0]["targets"] == [0]


def test_a_session_fusion_replayed_from_recorded_sides_is_the_searcher_s_own() -> None:
    """`bench/session_fusion.py` ranks through `fuse.mix`: at the constants in use a question's order
    is the fused order; the oracle takes whichever side puts the target first."""
    import session_fusion

    from pi_memory.vectors import fuse

    row = {
        "set": "conv-x-a-session",
        "half": "fit",
        "targets": [2],
        # keywords lean to session 1 by a little, meaning to session 2 by a lot
        "keywords": {"1": 10.0, "2": 9.0, "3": 0.0},
        "meaning": {"1": 0.80, "2": 0.90, "3": 0.85},
    }
    in_use = session_fusion.fused(fuse.LEXICAL_WEIGHT, fuse.SESSION_VECTOR_SPREAD)(row)
    assert in_use == [k for k, _ in fuse.mix({"1": 10.0, "2": 9.0}, row["meaning"], spread=fuse.SESSION_VECTOR_SPREAD)]
    assert in_use[0] == "2" and session_fusion.by_keywords(row) == ["1", "2"]
    assert session_fusion.fused(0.95, 0.2)(row)[0] == "1"  # nearly all keywords: their first
    assert session_fusion.either(row)[0] == "2"
    rows = [row, {**row, "set": "conv-x-b-session", "half": "report"}]
    per_set = session_fusion.firsts(rows, session_fusion.by_keywords)
    assert per_set == {"conv-x-a-session": (0, 1), "conv-x-b-session": (0, 1)}
    fused_sets = session_fusion.firsts(rows, session_fusion.either)
    assert session_fusion.halves(fused_sets, {r["set"]: r["half"] for r in rows}) == {"fit": 1, "report": 1}
    assert session_fusion.worst_against(per_set, fused_sets, ["conv-x-b-session"]) == "conv-x-b-session -1"
    assert session_fusion.worst_against(fused_sets, per_set, ["conv-x-b-session"]) == ""
