"""The exact re-rank of candidates (pure): counts in every spelling, exact forms first, BM25 as written."""

from __future__ import annotations

import math

import pytest

from pi_memory.core import ranking, scoring
from pi_memory.core.text import normalize, query_tokens, surface_forms, typed_forms


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
