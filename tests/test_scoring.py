"""The exact re-rank of candidates (pure): counts in every spelling, exact forms first, BM25 as written."""

from __future__ import annotations

import math

import pytest

from pi_memory.core import ranking, scoring
from pi_memory.core.text import normalize, query_tokens, surface_forms, typed_forms, typed_runs


def prepared(query: str, weight: float = 2.0) -> scoring.PreparedQuery:
    tokens = query_tokens(query)
    return scoring.prepare(tokens, {t.text: weight for t in tokens}, normalize(query), typed_forms(query))


def tf_of(texts: list[str], query: str) -> dict[str, list[int]]:
    q = prepared(query)
    tf, _ = scoring.term_frequencies([t.lower() for t in texts], q)
    return {t.text: [int(x) for x in tf[:, j]] for j, t in enumerate(q.terms)}


def test_surface_forms_hold_the_traditional_spellings_of_a_simplified_token() -> None:
    assert surface_forms("宝玉")[0] == "宝玉"
    assert "寶玉" in surface_forms("宝玉")
    assert surface_forms("cache") == ("cache",)


def test_typed_forms_map_each_folded_token_to_what_the_user_typed() -> None:
    assert typed_forms("寶玉")["宝玉"] == {"寶玉"}
    assert typed_forms("宝玉")["宝"] == {"宝"}


def test_cjk_counts_match_str_count_in_every_text_and_never_join_two_texts() -> None:
    texts = ["缓存索引的缓存", "存缓存", "缓", "没有关系的文本", "缓存"]
    counts = tf_of(texts, "缓存")
    assert counts["缓存"] == [t.count("缓存") for t in texts]
    assert counts["缓"] == [t.count("缓") for t in texts]
    # `缓` ends the third text and `存` would start... the fourth: no pair across the joint
    assert tf_of(["甲缓", "存乙"], "缓存")["缓存"] == [0, 0]


def test_a_traditional_text_is_counted_for_a_simplified_query_and_back() -> None:
    assert tf_of(["寶玉聽了，寶玉笑了"], "宝玉")["宝玉"] == [2]
    assert tf_of(["宝玉听了"], "寶玉")["宝玉"] == [1]


def test_words_count_at_word_boundaries_only() -> None:
    text = normalize("The cache, caches and a CACHE_KEY; cache.")
    assert scoring.count_word(text, "cache") == 3  # not `caches`; `_` is a boundary
    assert scoring.count_word(text, "cache_key") == 1
    assert tf_of(["call watchEffect() here"], "effect")["effect"] == [0]  # a word, not a part


def test_identifier_parts_count_inside_identifiers() -> None:
    counts = tf_of(["set openai_api_key now"], "OPENAI_API_KEY")
    assert counts["api"] == [1]


def test_words_adjacent_allows_one_to_three_separators() -> None:
    assert scoring.words_adjacent("the reactive system works", "reactive", "system")
    assert scoring.words_adjacent("v-model", "v", "model")
    assert not scoring.words_adjacent("reactive and system", "reactive", "system")
    assert not scoring.words_adjacent("proactive system", "active", "system")


def test_an_exact_spelling_ranks_above_a_folded_only_match_and_both_are_found() -> None:
    q = prepared("灿")
    exact, folded = scoring.score_documents(["灿烂", "燦爛燦爛燦爛"], [2.0, 6.0], 4.0, q)
    assert folded.score > 0
    assert exact.score > folded.score


def test_the_typed_traditional_spelling_is_the_exact_one() -> None:
    q = prepared("燦")
    simplified, traditional = scoring.score_documents(["灿烂", "燦爛"], [2.0, 2.0], 2.0, q)
    assert traditional.score > simplified.score > 0


def test_characters_cut_out_of_a_query_word_are_not_a_meaningful_match() -> None:
    q = prepared("缓存索引")
    [noise, hit] = scoring.score_documents(["缓冲不存在", "缓存索引"], [5.0, 4.0], 4.0, q)
    assert noise.score > 0 and not noise.meaningful
    assert hit.meaningful
    [alone] = scoring.score_documents(["有锁"], [2.0], 2.0, prepared("锁"))
    assert alone.meaningful  # a character typed alone is a word


def test_the_score_is_bm25_times_coverage_when_no_phrase_applies() -> None:
    q = prepared("cache index", weight=1.5)
    [doc] = scoring.score_documents(["cache cache nothing"], [3.0], 6.0, q)
    expected = ranking.bm25([(2, 1.5)], 3.0, 6.0) * (ranking.COVERAGE_FLOOR + (1 - ranking.COVERAGE_FLOOR) * 0.5)
    assert math.isclose(doc.score, expected)


def test_a_text_without_any_query_token_scores_zero() -> None:
    [doc] = scoring.score_documents(["nothing here"], [2.0], 2.0, prepared("缓存"))
    assert doc == scoring.DocScore(0.0, False)


@pytest.mark.parametrize("query", ["", "   ", "\x00"])
def test_an_empty_query_scores_nothing(query: str) -> None:
    assert scoring.score_documents(["text"], [1.0], 1.0, prepared(query)) == [scoring.DocScore(0.0, False)]


def test_a_text_holding_the_query_as_typed_beats_one_with_its_tokens_scattered() -> None:
    q = prepared("炮身容量")
    verbatim, scattered = scoring.score_documents(["炮身容量", "炮身炮身 容量容量 炮身 容量"], [3.0, 12.0], 6.0, q)
    assert verbatim.score > scattered.score


def prepared_as_typed(query: str, weights: dict[str, float]) -> scoring.PreparedQuery:
    """The query as `search.messages` prepares it: with its runs as typed."""
    tokens = query_tokens(query)
    return scoring.prepare(tokens, weights, normalize(query), typed_forms(query), typed_runs(query))


# bench/quality.py's `modelValue 的原` (script-ident+zh): the weights the archive gave its tokens
IDENT_ZH_WEIGHTS = {"modelvalue": 10.7, "的原": 5.2, "的": 0.1, "原": 0.8, "model": 2.1, "value": 1.6}
BOTH_RUNS = (
    "在动态创建的原生元素上使用 v-model 不起作用：模板编译器会把它扩展为 modelvalue prop 和 update:modelvalue 事件。"
)
IDENT_ONLY = (
    "props: ['modelvalue'], emits: ['update:modelvalue'], modelvalue = ref(modelvalue); "
    "watch(modelvalue); emit(modelvalue); modelvalue; modelvalue"
)


def test_a_long_text_holding_both_runs_beats_a_short_one_repeating_only_the_identifier() -> None:
    q = prepared_as_typed("modelValue 的原", IDENT_ZH_WEIGHTS)
    both, ident_only = scoring.score_documents([BOTH_RUNS, IDENT_ONLY], [401.0, 80.0], 214.0, q)
    assert both.score > ident_only.score > 0


def test_without_the_missed_runs_factor_the_short_text_would_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scoring, "MISSED_RUNS_FACTOR", 1.0)
    q = prepared_as_typed("modelValue 的原", IDENT_ZH_WEIGHTS)
    both, ident_only = scoring.score_documents([BOTH_RUNS, IDENT_ONLY], [401.0, 80.0], 214.0, q)
    assert ident_only.score > both.score  # the case above is the rule's, not BM25's


def test_a_text_is_marked_down_only_when_it_misses_half_the_runs_or_more() -> None:
    query = "生命周期钩子 (lifecycle hooks)"
    q = prepared_as_typed(query, {t.text: 2.0 for t in query_tokens(query)})
    texts = ["lifecycle 与 hooks", "生命周期 lifecycle", "lifecycle only", "钩子 hooks"]
    tf, _ = scoring.term_frequencies(texts, q)
    factors = scoring.missed_runs_factors(tf > 0, q).tolist()
    assert factors == [1.0, 1.0, scoring.MISSED_RUNS_FACTOR, 1.0]  # missing one run of three is not half


def test_a_question_in_words_marks_down_no_text_for_the_words_it_lacks() -> None:
    # `When did Kate learn to cook?`: the answer (`Kate's Italian cooking class`) lacks `when`,
    # `did`, `learn` and `to`, as nearly every text does; a question is not a list of keywords
    query = "When did Kate learn to cook?"
    q = prepared_as_typed(query, {t.text: 2.0 for t in query_tokens(query)})
    assert len(q.runs) > scoring.MISSED_RUNS_MAX
    tf, _ = scoring.term_frequencies(["kate's italian cooking class", "when did you learn to swim"], q)
    assert scoring.missed_runs_factors(tf > 0, q).tolist() == [1.0, 1.0]


def test_a_run_no_term_stands_for_counts_for_no_text() -> None:
    query = "modelValue 的原"
    tokens = [t for t in query_tokens(query) if t.text != "modelvalue"]  # as if no message held it
    q = scoring.prepare(tokens, {t.text: 2.0 for t in tokens}, normalize(query), typed_forms(query), typed_runs(query))
    assert len(q.run_traces) == 1
    tf, _ = scoring.term_frequencies(["的原", "model value"], q)
    assert scoring.missed_runs_factors(tf > 0, q).tolist() == [1.0, 1.0]


def test_the_trigram_bonus_counts_a_trigram_in_any_spelling_and_never_across_two_texts() -> None:
    texts = ["缓存索引的方案", "緩存索引", "缓存 索引", "甲缓存", "索乙"]
    q = prepared("缓存索")
    counts = scoring.cjk_counts(texts, q.alphabet)
    tf, _ = scoring.term_frequencies(texts, q, counts)
    totals = scoring.trigram_totals(counts, tf > 0, q).tolist()
    expected = [sum(p.weight for p in q.phrases if any(f in text for f in p.forms)) for text in texts]
    assert totals == expected
    assert totals[0] > 0 and totals[1] > 0  # as typed, and in the traditional spelling
    assert totals[2:] == [0.0, 0.0, 0.0]  # a space between, and `缓存` ending one text with `索` starting the next


def test_scoring_reads_texts_holding_lone_surrogates() -> None:
    [doc] = scoring.score_documents(["缓存\ud800索引"], [3.0], 3.0, prepared("缓存"))
    assert doc.score > 0


def test_words_adjacent_skips_an_occurrence_inside_a_longer_word_and_finds_the_next() -> None:
    assert scoring.words_adjacent("bathe system, the system", "the", "system")
    assert not scoring.words_adjacent("bathe system", "the", "system")
    assert not scoring.words_adjacent("the systems", "the", "system")
    assert scoring.words_adjacent("the_x the--system", "the", "system")


def test_the_cli_loads_numpy_only_when_it_scores_and_a_server_loads_it_at_its_start(tmp_path) -> None:
    """NumPy is ~45 ms of every process start; only a search scores (`scoring.preload`)."""
    import subprocess
    import sys

    code = """
import sys
from pi_memory.archive import Archive
import pi_memory.frontends.cli
with Archive.open(sys.argv[1]) as archive:
    archive.stats()
    print("numpy" in sys.modules)
    archive.preload_search()
    print("numpy" in sys.modules)
"""
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "a.db")], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "True"]


def test_every_cjk_term_of_a_mixed_query_counts_each_spelling_and_marks_the_typed_one() -> None:
    query = "缓存索引的實現 cache 和宝玉聽了"
    texts = ["寶玉聽了缓存", "宝玉听了cache的实现", "索引實現實現", "无关的文本", "缓存索引"]
    q = prepared(query)
    tf, exact = scoring.term_frequencies(texts, q)
    cjk = [(j, t) for j, t in enumerate(q.terms) if t.kind in ("char", "gram")]
    assert len(cjk) > 10
    for j, term in cjk:
        assert [int(x) for x in tf[:, j]] == [sum(text.count(f) for f in term.forms) for text in texts], term.text
        assert list(exact[:, j]) == [any(f in text for f in term.forms if f in term.exact) for text in texts]
