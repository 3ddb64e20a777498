"""How well one message answers a query: BM25 over the two channels plus a phrase bonus (pure).

Design idea: the candidates come from the index (see `search`); this module
only scores a handful of them exactly, from their text. It is BM25 (the
ranking people expect from a search box) computed over the same tokens the
index holds: CJK bigrams, CJK characters (weighted low: one character says
little) and words. A small bonus rewards query tokens that appear next to each
other in the text, which is what tells `缓存索引` apart from a page that merely
has `缓存` at the top and `索引` at the bottom. Recency is only a tie-breaker,
applied by the caller.

Every weight is a named constant: the quality benchmark (`bench/quality.py`)
is how they were chosen, and how any change to them must be justified.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from .text import QueryToken, is_cjk

K1 = 1.2  # term-frequency saturation, the usual BM25 value
B = 0.75  # length normalization, the usual BM25 value
# A CJK bigram carries a word's worth of meaning; a single character much less.
KIND_WEIGHT = {"gram": 1.0, "word": 1.0, "char": 0.3, "part": 0.4}
# Bonus per adjacent pair of query tokens found adjacent in the text, times their idf.
PHRASE_WEIGHT = 0.35


def idf(df: int, n_docs: int) -> float:
    """BM25's idf, never negative (the +1 inside the log, as in Lucene and FTS5's floor)."""
    n = max(n_docs, df, 1)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def token_weight(token: QueryToken, df: int, n_docs: int) -> float:
    return KIND_WEIGHT.get(token.kind, 1.0) * idf(df, n_docs)


@lru_cache(maxsize=4096)
def _part_pattern(word: str) -> re.Pattern[str]:
    # identifier parts sit inside identifiers: `api` in `openai_api_key`
    return re.compile(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])")


def term_frequency(norm_text: str, token: QueryToken) -> int:
    """Occurrences of a token in normalized text, counted the way the tokenizer cuts."""
    if token.kind in ("char", "gram"):
        return norm_text.count(token.text)
    # a word also counts inside identifiers (`api` in `openai_api_key`), as the index has it there
    return len(_part_pattern(token.text).findall(norm_text))


def bm25(tfs: Iterable[tuple[int, float]], doc_len: int, avg_len: float) -> float:
    """Sum over (tf, weight) pairs of weight * saturated, length-normalized tf."""
    norm = K1 * (1.0 - B + B * doc_len / max(avg_len, 1.0))
    return sum(w * tf * (K1 + 1.0) / (tf + norm) for tf, w in tfs if tf > 0)


@dataclass(frozen=True)
class Phrase:
    """Two query tokens that are adjacent in the query, as one string to look for."""

    text: str
    weight: float
    is_word_pair: bool


def query_phrases(norm_query: str, weights: dict[str, float]) -> list[Phrase]:
    """Adjacent pairs: CJK trigrams (two overlapping bigrams) and consecutive words."""
    phrases: list[Phrase] = []
    for run in re.findall(r"\w+", norm_query):
        cjk = "".join(ch if is_cjk(ch) else " " for ch in run).split()
        for seg in cjk:
            for i in range(len(seg) - 2):
                a, b = seg[i : i + 2], seg[i + 1 : i + 3]
                phrases.append(Phrase(seg[i : i + 3], min(weights.get(a, 0.0), weights.get(b, 0.0)), False))
    words = [w for w in re.findall(r"[a-z0-9_]{2,}", norm_query)]
    for a, b in zip(words, words[1:], strict=False):
        phrases.append(Phrase(f"{a} {b}", min(weights.get(a, 0.0), weights.get(b, 0.0)), True))
    return [p for p in phrases if p.weight > 0]


def phrase_bonus(norm_text: str, phrases: list[Phrase]) -> float:
    total = 0.0
    for p in phrases:
        if p.is_word_pair:
            a, b = p.text.split(" ")
            pattern = rf"(?<![a-z0-9_]){re.escape(a)}\W{{1,3}}{re.escape(b)}(?![a-z0-9_])"
            found = re.search(pattern, norm_text) is not None
        else:
            found = p.text in norm_text
        if found:
            total += p.weight
    return PHRASE_WEIGHT * total


def score_text(
    norm_text: str,
    tokens: list[QueryToken],
    weights: dict[str, float],
    phrases: list[Phrase],
    avg_len: float,
) -> float:
    """The full score of one document for one query."""
    tfs = [(term_frequency(norm_text, t), weights.get(t.text, 0.0)) for t in tokens]
    return bm25(tfs, len(norm_text), avg_len) + phrase_bonus(norm_text, phrases)
