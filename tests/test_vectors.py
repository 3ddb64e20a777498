"""Semantic recall's pure parts: int8 and sign-bit forms of a vector, the scan, the fusion, the wording."""

from __future__ import annotations

import numpy as np
import pytest

from pi_memory.vectors import fuse
from pi_memory.vectors.codes import (
    bit_columns,
    dequantize,
    hamming,
    hamming_columns,
    int8_scores,
    nearest_by_bits,
    quantize,
    sign_bits,
    smallest,
)
from pi_memory.vectors.hybrid import _masked_rows
from pi_memory.vectors.state import SemanticState


def unit_vectors(n: int, dim: int = 384, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # e5's vectors all lean one way: a shared direction plus each one's own
    v = rng.normal(size=(n, dim)) * 0.3 + rng.normal(size=dim)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_int8_vectors_keep_the_cosine_within_a_thousandth():
    v = unit_vectors(200)
    codes, scales = quantize(v)
    assert codes.dtype == np.int8 and codes.shape == v.shape
    back = dequantize(codes, scales)
    assert np.abs((back * v).sum(axis=1) - 1).max() < 1e-3
    assert np.abs(int8_scores(v[0], codes, scales) - v @ v[0]).max() < 2e-3


def test_a_zero_vector_quantizes_without_dividing_by_zero():
    codes, scales = quantize(np.zeros((1, 8), dtype=np.float32))
    assert not codes.any() and np.isfinite(scales).all()


def test_hamming_counts_the_differing_bits_whatever_the_layout():
    bits = np.packbits(np.random.default_rng(1).integers(0, 2, size=(50, 384)).astype(bool), axis=1)
    q = bits[3]
    expected = np.unpackbits(bits ^ q, axis=1).sum(axis=1)
    assert (hamming(q, bits) == expected).all()
    assert (hamming(q, bits[::2]) == expected[::2]).all()  # a strided view (a masked subset)
    assert hamming(q, bits[:0]).shape == (0,)


def test_the_scan_layout_counts_the_same_bits_as_the_rows():
    bits = np.packbits(np.random.default_rng(2).integers(0, 2, size=(70, 384)).astype(bool), axis=1)
    columns = bit_columns(bits)
    assert columns.shape == (6, 70)
    assert (hamming_columns(bits[5], columns) == hamming(bits[5], bits)).all()
    assert (hamming_columns(bits[5], columns[:, ::3]) == hamming(bits[5], bits[::3])).all()  # a masked subset


def test_the_smallest_distances_are_chosen_by_counting_lowest_row_first_among_equals():
    distances = np.array([5, 1, 3, 1, 0, 3, 3, 9], dtype=np.uint16)
    assert sorted(smallest(distances, 4).tolist()) == [1, 2, 3, 4]  # 0, 1, 1, then the first 3
    assert sorted(smallest(distances, 3).tolist()) == [1, 3, 4]
    assert sorted(smallest(distances, 20).tolist()) == list(range(8))
    big = np.random.default_rng(3).integers(0, 385, size=10_000).astype(np.uint16)
    chosen = smallest(big, 100)
    assert len(chosen) == len(set(chosen.tolist())) == 100
    assert sorted(big[chosen].tolist()) == sorted(big.tolist())[:100]


def test_sign_bits_of_centred_vectors_find_the_exact_nearest_among_the_best_by_bits():
    # topics: 100 clusters of 50 units around one shared direction, as texts on one subject are
    rng = np.random.default_rng(5)
    centres = unit_vectors(100, seed=11)
    v = np.repeat(centres, 50, axis=0) + rng.normal(size=(5_000, 384)).astype(np.float32) * 0.03
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    mean = v.mean(axis=0)
    bits = sign_bits(v, mean)
    assert bits.shape == (5_000, 48)
    query = centres[42] + rng.normal(size=384).astype(np.float32) * 0.03
    query /= np.linalg.norm(query)
    exact = set(np.argsort(-(v @ query))[:10])
    coarse = set(nearest_by_bits(sign_bits(query, mean)[0], bits, 100))
    assert exact <= coarse
    # without the mean, the shared direction sets most bits alike and the scan sees less
    plain = set(nearest_by_bits(sign_bits(query, np.zeros(384, np.float32))[0], sign_bits(v, np.zeros(384)), 100))
    assert len(exact & plain) <= len(exact & coarse)


def test_fewer_rows_than_asked_are_all_returned():
    bits = sign_bits(unit_vectors(5), np.zeros(384, dtype=np.float32))
    assert sorted(nearest_by_bits(bits[0], bits, 100)) == [0, 1, 2, 3, 4]


def test_the_mask_keeps_rows_by_session_role_and_time():
    arrays = {
        "sess": np.array([1, 2, 1, 3], dtype=np.int32),
        "role": np.array([1, 2, 2, 1], dtype=np.int8),
        "ts": np.array([10, 20, 30, 40], dtype=np.int64),
    }
    assert _masked_rows(arrays, None, None, None, None) is None
    assert list(_masked_rows(arrays, np.array([1]), None, None, None)) == [0, 2]
    assert list(_masked_rows(arrays, np.array([1, 3]), {1}, None, None)) == [0, 3]
    assert list(_masked_rows(arrays, None, None, 20, 40)) == [1, 2]
    assert list(_masked_rows(arrays, np.array([9]), None, None, None)) == []


def test_a_fragment_one_message_holds_keeps_its_lead_when_fused():
    # lexically the target is far ahead; another message is nearer in meaning
    lexical = {"target": 12.0, "other": 5.0, "third": 4.0}
    vector = {"other": 0.86, "third": 0.80, "target": 0.79}
    assert fuse.mix(lexical, vector, 0.6)[0][0] == "target"
    # reciprocal rank fusion moves it down: what made `mix` the default
    assert fuse.rrf([list(lexical), sorted(vector, key=lambda k: -vector[k])])[0][0] == "other"


def test_flat_lexical_scores_are_reordered_by_meaning():
    lexical = {"a": 3.0, "b": 2.9, "c": 2.8}
    vector = {"c": 0.9, "a": 0.7, "b": 0.72, "d": 0.88}
    order = [k for k, _ in fuse.mix(lexical, vector, 0.6)]
    assert order[0] == "c" and "d" in order


def test_the_vector_side_counts_nothing_past_its_scale_and_sessions_have_a_narrower_one():
    vector = {"best": 0.90, "near": 0.85, "far": 0.75}
    assert fuse.scaled_vector(vector) == pytest.approx({"best": 1.0, "near": 0.75, "far": 0.25})
    assert fuse.scaled_vector(vector, spread=0.10) == pytest.approx({"best": 1.0, "near": 0.5, "far": 0.0})
    assert fuse.SESSION_VECTOR_SPREAD < fuse.VECTOR_SPREAD
    # a keyword lead of 10 to 6 holds against a vector lead of 0.05 on the message scale, not on the sessions'
    lexical, meaning = {"kw": 10.0, "mv": 6.0}, {"kw": 0.85, "mv": 0.90}
    assert fuse.mix(lexical, meaning)[0][0] == "kw"
    assert fuse.mix(lexical, meaning, spread=fuse.SESSION_VECTOR_SPREAD)[0][0] == "mv"


def test_fusion_handles_an_empty_side():
    assert [k for k, _ in fuse.mix({"a": 1.0, "b": 0.5}, {})] == ["a", "b"]
    assert [k for k, _ in fuse.mix({}, {"x": 0.8, "y": 0.9})] == ["y", "x"]
    assert fuse.mix({}, {}) == []


def test_rrf_sums_reciprocal_ranks():
    fused = dict(fuse.rrf([["a", "b"], ["b", "c"]], k=60))
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["a"] == pytest.approx(1 / 61)


@pytest.mark.parametrize(
    ("state", "words"),
    [
        (SemanticState(installed=False), "pip install 'pi-memory[semantic]'"),
        (SemanticState(installed=True, model="m", units=10), "nothing embedded yet"),
        (SemanticState(installed=True, model="m", units=10, embedded=4), "on, 4 of 10 units embedded"),
        (SemanticState(installed=True, model="m", units=10, embedded=10), "all 10 units embedded"),
        (SemanticState(installed=True, team=True), "team archive"),
    ],
)
def test_status_says_in_one_line_whether_semantic_recall_is_on_and_what_to_do(state: SemanticState, words: str):
    assert words in state.line and "\n" not in state.line
    assert state.on == (state.embedded > 0 and not state.team)


def test_sessions_are_fused_one_level_up_so_many_loosely_similar_messages_do_not_win():
    from types import SimpleNamespace

    from pi_memory.search.messages import Hit
    from pi_memory.vectors.hybrid import HybridSearcher

    def hit(msg_id: int, session: str) -> Hit:
        return Hit(msg_id, session, msg_id, "user", msg_id, "p", 0.0)

    searcher = HybridSearcher(SimpleNamespace(store=None), SimpleNamespace(), "hybrid")  # type: ignore[arg-type]
    # session a: one message holding the question's rare words; b: five chatty ones, close in meaning
    searcher._sides = ({1: 9.0, 2: 1.0}, {1: 0.80, 3: 0.84, 4: 0.84, 5: 0.84, 6: 0.84, 7: 0.84})
    groups = {"a": [hit(1, "a")], "b": [hit(k, "b") for k in (2, 3, 4, 5, 6, 7)]}
    scores = searcher.session_scores(groups)
    assert scores["a"] > scores["b"]


def test_semantic_sessions_rank_by_how_far_their_messages_stand_above_the_background():
    from pi_memory.search.messages import Hit
    from pi_memory.vectors.hybrid import session_meaning

    def hit(msg_id: int, session: str) -> Hit:
        return Hit(msg_id, session, msg_id, "user", msg_id, "p", 0.0)

    background = {k: 0.80 for k in range(100, 114)}
    # a: the one message close to the question; b: six loosely similar turns of a long session
    nearest = {1: 0.90, **{k: 0.86 for k in range(2, 8)}, **background}
    groups = {"a": [hit(1, "a")], "b": [hit(k, "b") for k in range(2, 8)]}
    scores = session_meaning(groups, nearest)
    assert scores["a"] > scores["b"]
    # ... while a session's second message near the question still counts for it
    nearest = {1: 0.89, 2: 0.88, 3: 0.88, **background}
    scores = session_meaning({"a": [hit(1, "a")], "c": [hit(2, "c"), hit(3, "c")]}, nearest)
    assert scores["c"] > scores["a"]
    # on the cosine scale: one message alone scores its cosine; none among the nearest, no score
    assert scores["a"] == pytest.approx(0.89)
    assert session_meaning({"a": [hit(1, "a")], "d": [hit(99, "d")]}, {1: 0.9}) == {"a": pytest.approx(0.9)}
    assert session_meaning({"a": [hit(1, "a")]}, {}) == {}
