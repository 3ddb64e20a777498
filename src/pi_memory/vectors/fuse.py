"""Fusing the lexical and the vector ranking of the same candidates (pure).

Design idea: the two sides fail differently. The lexical side is sure when a query's rare words
or exact fragment are in a text (an identifier, a name, four Chinese characters: one message
holds them, it is the answer); the vector side finds a text that says the same thing in other
words, where the lexical scores are flat. So the fused score keeps the lexical side's margin
instead of only its ranks: each side's scores are scaled to [0, 1] over the candidates (lexical:
score / best score; vector: 1 at the best cosine, 0 at `VECTOR_SPREAD` below it and under), and
mixed `LEXICAL_WEIGHT : 1 - LEXICAL_WEIGHT`. The vector side's scale is fixed, not stretched
between its best and worst candidate: e5's cosines of a related and an unrelated text differ by a
few hundredths, and stretching three candidates 0.07 apart over the whole [0, 1] outweighed a
lexical lead of 2.4 to 1. A fragment found by one message keeps its lead (the others
score far below it lexically), a question whose words are everywhere is reordered by meaning.

Reciprocal rank fusion (`rrf`, k = 60) is kept beside it as the measured alternative: it gives a
lexical rank 2 with a vector rank 1 more than a lexical rank 1 alone, which moved exact fragments
down (bench/quality.py, docs/semantic.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

LEXICAL_WEIGHT = 0.45  # chosen on the fit half of bench/quality.py's sets (docs/semantic.md)
# cosine points below the best candidate where the vector side counts nothing: e5-small's cosines of
# unrelated texts sit ~0.75, of a paraphrase ~0.85-0.9 (docs/semantic.md)
VECTOR_SPREAD = 0.20
# the same for sessions (`hybrid.session_meaning`'s scores, on the cosine scale): a session's meaning
# score stands further above the rest than a message's cosine, so a narrower scale. Chosen with
# bench/session_fusion.py on the fit half (0.10 of 0.05-0.5, at the keyword weight in use: 2,252 ->
# 2,266 of 2,663 questions first; the report half 2,019 -> 2,047 of 2,485; docs/semantic.md)
SESSION_VECTOR_SPREAD = 0.10
RRF_K = 60  # the usual constant (Cormack et al. 2009), as in the pilot


def scaled_lexical(scores: Mapping[K, float]) -> dict[K, float]:
    """Each score over the best one (scores are positive; the best is 1)."""
    best = max(scores.values(), default=0.0)
    return {key: s / best for key, s in scores.items()} if best > 0 else {key: 0.0 for key in scores}


def scaled_vector(scores: Mapping[K, float], spread: float | None = None) -> dict[K, float]:
    """Cosines moved to [0, 1]: the best candidate 1, `spread` (`VECTOR_SPREAD`) below it or lower 0."""
    if not scores:
        return {}
    spread = VECTOR_SPREAD if spread is None else spread
    best = max(scores.values())
    return {key: max(0.0, 1.0 - (best - s) / spread) for key, s in scores.items()}


def mix(
    lexical: Mapping[K, float],
    vector: Mapping[K, float],
    lexical_weight: float | None = None,
    spread: float | None = None,
) -> list[tuple[K, float]]:
    """Candidates of either side, best first, by the weighted sum of their scaled scores (a side
    that did not find a candidate counts 0 for it); ties keep the lexical side's order."""
    if lexical_weight is None:
        lexical_weight = LEXICAL_WEIGHT
    lex, vec = scaled_lexical(lexical), scaled_vector(vector, spread)
    order = {key: i for i, key in enumerate([*lexical, *[k for k in vector if k not in lexical]])}
    fused = {key: lexical_weight * lex.get(key, 0.0) + (1.0 - lexical_weight) * vec.get(key, 0.0) for key in order}
    return sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def mix_unjudged_kept(lexical: Mapping[K, float], vector: Mapping[K, float]) -> list[tuple[K, float]]:
    """`mix`, but a lexical candidate the vector side cannot judge (no vector: a tool result, a run
    not embedded yet) keeps its lexical share on both sides instead of 0 on the vector one; best first."""
    fused = dict(mix(lexical, vector))
    best = max(lexical.values(), default=0.0)
    for key, score in lexical.items():
        if key not in vector and best > 0:
            fused[key] = score / best
    return sorted(fused.items(), key=lambda kv: -kv[1])


def rrf(
    rankings: Sequence[Sequence[K]], k: int = RRF_K, weights: Sequence[float] | None = None
) -> list[tuple[K, float]]:
    """Reciprocal rank fusion: the sum over rankings of weight / (k + rank), rank from 1."""
    weights = weights or [1.0] * len(rankings)
    fused: dict[K, float] = {}
    first_seen: dict[K, int] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
            first_seen.setdefault(key, len(first_seen))
    return sorted(fused.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))
