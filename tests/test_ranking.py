"""Pure ranking functions: idf, token weights, bm25, session score (the re-rank itself: test_scoring.py)."""

from __future__ import annotations

import itertools
import math

import pytest

from pi_memory.core import ranking
from pi_memory.core.ranking import candidate_weight
from pi_memory.core.text import QueryToken, query_tokens


def test_idf_is_higher_for_rarer_tokens() -> None:
    assert ranking.idf(1, 1000) > ranking.idf(10, 1000) > ranking.idf(400, 1000)


def test_idf_of_a_token_in_most_documents_is_floored_not_negative() -> None:
    assert ranking.idf(900, 1000) == ranking.IDF_FLOOR
    assert ranking.idf(5000, 1000) == ranking.IDF_FLOOR  # an overestimated df never goes negative


def test_idf_matches_robertson_formula() -> None:
    assert math.isclose(ranking.idf(10, 1000), math.log((1000 - 10 + 0.5) / (10 + 0.5)))


def test_char_tokens_weigh_less_than_bigrams_with_the_same_df() -> None:
    char, gram = QueryToken("锁", "char"), QueryToken("缓存", "gram")
    assert ranking.token_weight(char, 10, 1000) < ranking.token_weight(gram, 10, 1000)


def test_bm25_saturates_term_frequency() -> None:
    one = ranking.bm25([(1, 1.0)], 100, 100)
    two = ranking.bm25([(2, 1.0)], 100, 100)
    ten = ranking.bm25([(10, 1.0)], 100, 100)
    assert one < two < ten < 1.0 + ranking.K1
    assert two - one > (ten - two) / 8  # each further occurrence adds less


def test_bm25_prefers_the_shorter_document_at_equal_tf() -> None:
    assert ranking.bm25([(1, 1.0)], 50, 100) > ranking.bm25([(1, 1.0)], 400, 100)


def test_bm25_ignores_absent_tokens() -> None:
    assert ranking.bm25([(0, 5.0)], 100, 100) == 0.0


def test_bigrams_straddling_a_function_character_weigh_less() -> None:
    tokens = query_tokens("炮身的容量")
    df = {"炮身": 10, "身的": 10, "的容": 10, "容量": 10, "的": 900, "炮": 50, "身": 50, "容": 50, "量": 50}
    weights = ranking.token_weights(tokens, df, 1000)
    assert weights["身的"] == weights["容量"] * ranking.BOUNDARY_GRAM_WEIGHT
    assert weights["炮身"] == weights["容量"]


def test_session_score_is_the_best_hit_plus_a_diminishing_share_of_the_rest() -> None:
    assert ranking.session_score([]) == 0.0
    assert ranking.session_score([5.0]) == 5.0
    assert ranking.session_score([5.0, 4.0]) == 5.0 + ranking.SESSION_MORE_HITS * 4.0
    many_weak = ranking.session_score([3.0] * 20)
    assert many_weak < 3.0 + ranking.SESSION_MORE_HITS * 6.0  # 20 weak hits do not add up without bound
    assert ranking.session_score([6.0]) > ranking.session_score([4.0, 1.0])


def test_identifiers_weigh_more_than_prose_words_with_the_same_df() -> None:
    tokens = query_tokens("proxy_buffering timeout")
    df = {t.text: 10 for t in tokens}
    weights = ranking.token_weights(tokens, df, 1000)
    assert weights["proxy_buffering"] == weights["timeout"] * ranking.IDENTIFIER_WEIGHT


def test_other_forms_keep_most_of_a_word_s_weight_when_they_are_about_as_rare() -> None:
    assert 0.8 < ranking.form_share(50, 150, 20_000) < 1.0  # move / moving, moved


def test_other_forms_keep_little_of_a_word_s_weight_when_they_are_common() -> None:
    assert ranking.form_share(5, 4_000, 20_000) < 0.3  # timely / time, times


def test_a_word_s_form_share_is_never_above_one() -> None:
    assert ranking.form_share(10, 10, 1_000) == 1.0


def test_a_spread_sample_runs_from_the_first_id_to_near_the_last_evenly() -> None:
    assert ranking.spread_ids(1, 1_000, 4) == [1, 251, 501, 751]
    assert ranking.spread_ids(10, 12, 500) == [10, 11, 12]  # fewer ids than asked: each once
    assert ranking.spread_ids(0, 0, 500) == [0]


def test_a_candidates_score_is_the_same_whatever_order_its_terms_are_summed_in():
    """The database sums a rare-track candidate's term weights in its plan's order; as floats the
    same six terms give three different sums, and which of many equal candidates made the cut
    differed between SQLite and PostgreSQL."""
    weights = [1.8266768581210848, 1.8266768581210848, 0.4804521444023555] + [0.5813501740373986] * 3
    as_floats = {sum(order, 0.0) for order in itertools.permutations(weights)}
    as_candidates = {sum(candidate_weight(w) for w in order) for order in itertools.permutations(weights)}
    assert len(as_floats) > 1
    assert len(as_candidates) == 1
    # fine enough to keep every real difference: weights a billionth apart still order
    assert candidate_weight(0.5813501740373986) > candidate_weight(0.5813501730373986)


def test_rows_expected_to_hold_an_identifier_and_its_parts_are_the_identifiers_rows():
    tokens = query_tokens("murranqui_senmiqui_525")  # the identifier and its three parts
    df = {"murranqui_senmiqui_525": 4545, "murranqui": 4600, "senmiqui": 4818, "525": 4652}
    # every row holding the identifier holds its parts: not 200,000 * (1.5%)^4, nearly none
    assert ranking.expected_matches(tokens, df, 300_000, 200_000, all_of=True) == pytest.approx(3030)
    # any of them: the parts count as themselves
    words = query_tokens("dexdex kasenka")
    either = ranking.expected_matches(words, {"dexdex": 100, "kasenka": 100}, 1000, 1000, all_of=False)
    assert either == pytest.approx(1000 * (1 - 0.9 * 0.9))
    assert ranking.expected_matches(words, {}, 0, 1000, all_of=True) == 0.0
