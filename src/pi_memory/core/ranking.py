"""The weights of a query's tokens and the BM25 formula the re-rank scores with (pure).

Design idea: the candidates come from the index (see `search`) and are scored
exactly by `scoring.score_documents`; this module holds what that score is made
of. It is BM25 (the ranking people expect from a search box) over the same
tokens the index holds: CJK bigrams, CJK characters (weighted low: one
character says little) and words, each weighted by its idf (`token_weights`).
Query tokens adjacent in the query (`query_phrases`) earn a small bonus where
they are adjacent in the text too, which is what tells `缓存索引` apart from a
page that merely has `缓存` at the top and `索引` at the bottom; a document's
score is scaled by the share of the query's weight it holds (`COVERAGE_FLOOR`).
A session scores its best message and a share of the rest (`session_score`).
Recency is only a tie-breaker, applied by the caller.

Every weight is a named constant: the quality benchmark (`bench/quality.py`)
is how they were chosen, and how any change to them must be justified.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .text import QueryToken, implied_tokens, is_cjk, tokenize

K1 = 1.2  # term-frequency saturation, the usual BM25 value
B = 0.75  # length normalization, the usual BM25 value
# A CJK bigram carries a word's worth of meaning; a single character much less.
CHAR_WEIGHT = 0.5
PART_WEIGHT = 0.4
# Bonus per adjacent pair of query tokens found adjacent in the text, times their idf.
PHRASE_WEIGHT = 0.15
# Score multiplier for a document holding none of the query's weight; 1.0 turns coverage off.
# A document holding the query's rare words together beats one repeating one of them.
COVERAGE_FLOOR = 0.7


# A document frequency, once counted, is used until the archive's size moves by more than this
# share (a process's cache, `search.common.DfCache`; the team archive's shared counts, m016).
DF_STALE_GROWTH = 0.02
# A message token's document frequency is counted exactly up to here; above, it is its density among
# the newest `DF_WINDOW` ids scaled to the archive (both backends, `search.messages.Searcher`)
DF_EXACT_CAP = 5_000
DF_WINDOW = 10_000

IDF_PLUS_ONE = 0  # 1: Lucene's log(1 + x), never zero; 0: Robertson's log(x) floored, as FTS5
IDF_FLOOR = 1e-6


def spread_ids(low: int, high: int, n: int) -> list[int]:
    """Up to `n` ids spread evenly from `low` to `high`: the documents whose mean length stands for a
    collection's (not its newest: they may be all of one kind, a night of classics imported last)."""
    step = max(1.0, (high - low + 1) / max(n, 1))
    return sorted({min(high, low + int(k * step)) for k in range(n)})


def idf(df: int, n_docs: int) -> float:
    """BM25's idf, never negative: a token in most documents says almost nothing."""
    n = max(n_docs, df, 1)
    ratio = (n - df + 0.5) / (df + 0.5)
    return math.log(1.0 + ratio) if IDF_PLUS_ONE else max(IDF_FLOOR, math.log(ratio))


def form_share(word_df: int, forms_df: int, n_docs: int) -> float:
    """The share of an English word's weight its other forms carry: the idf of the word with all
    its forms (as a stemmed index would count them) over the idf of the word as typed. `moving`
    for `move` keeps most of it; `time` for `timely` (Snowball stems both `time`) almost none."""
    word = idf(word_df, n_docs)
    return min(1.0, idf(forms_df, n_docs) / word) if word > 0 else 0.0


def form_shares(df: dict[str, int], forms_df: dict[str, list[int]], n_docs: int) -> dict[str, float]:
    """`form_share` of each English word of a query that has another form in the collection
    (`forms_df`: word -> the document frequencies of its other forms)."""
    return {
        word: form_share(df[word], df[word] + sum(counts), n_docs) for word, counts in forms_df.items() if any(counts)
    }


# A rare-track candidate's score is the sum of its terms' weights, summed by the database in
# whatever order its plan reads the postings: as floats, two candidates holding the same terms could
# differ in the last bit (`5.296506208719323` and `...322`), and which of hundreds of equal candidates
# make the cut then differed between backends and plans. As integers the sums are exact in any
# order, so equal candidates are equal and the newer one goes first on both.
CANDIDATE_WEIGHT_SCALE = 10**9


def candidate_weight(weight: float) -> int:
    """A term's weight for the candidate tracks' sums in SQL (exact integer sums)."""
    return round(weight * CANDIDATE_WEIGHT_SCALE)


def expected_matches(tokens: list[QueryToken], df: dict[str, int], n_docs: int, rows: int, all_of: bool) -> float:
    """Of `rows` rows, how many are expected to hold every (`all_of`) or any of the tokens, each in
    its share `df / n_docs` of rows, independently but for the ones another token implies
    (`text.implied_tokens`: all of `api_key api key` is `api_key`). The team archive's recent
    tracks choose between walking the newest rows and reading the index by it."""
    n = max(n_docs, 1)
    implied = implied_tokens(tokens) if all_of else set()
    share = 1.0
    for t in tokens:
        if t.text not in implied:
            x = min(1.0, df.get(t.text, 0) / n)
            share *= x if all_of else 1.0 - x
    return rows * (share if all_of else 1.0 - share)


def token_weight(token: QueryToken, df: int, n_docs: int) -> float:
    kind_weight = CHAR_WEIGHT if token.kind in ("char", "surface") else PART_WEIGHT if token.kind == "part" else 1.0
    return kind_weight * idf(df, n_docs)


# A bigram holding a function character found in most documents (的, 是, 了, the
# ratio below) usually straddles a word boundary (`身的` in `炮身的容量`): it is
# not a word of the query, so it counts for less.
FUNCTION_CHAR_RATIO = 0.2
_CJK_RUNS = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
BOUNDARY_GRAM_WEIGHT = 0.5
# An identifier (`proxy_buffering`, `watchEffect`) is the most specific thing a
# user types: it counts more than a word of prose with the same df.
IDENTIFIER_WEIGHT = 1.5


def token_weights(tokens: list[QueryToken], df: dict[str, int], n_docs: int, norm_query: str = "") -> dict[str, float]:
    """Every query token's weight: idf times its kind's weight, boundary-straddling bigrams discounted.

    A two-character run the user typed alone (`缓存 索引`) is a word, never discounted.
    """
    common_chars = {
        t.text for t in tokens if t.kind == "char" and df.get(t.text, 0) > FUNCTION_CHAR_RATIO * max(n_docs, 1)
    }
    typed_words = {run for run in _CJK_RUNS.findall(norm_query) if len(run) == 2}
    parts = [t.text for t in tokens if t.kind == "part"]
    weights = {}
    for t in tokens:
        w = token_weight(t, df.get(t.text, 0), n_docs)
        if t.kind == "word" and ("_" in t.text or any(p in t.text for p in parts)):
            w *= IDENTIFIER_WEIGHT
        straddles = t.kind == "gram" and (t.text[0] in common_chars or t.text[1] in common_chars)
        if straddles and t.text not in typed_words:
            w *= BOUNDARY_GRAM_WEIGHT
        weights[t.text] = w
    return weights


def doc_tokens(text: str) -> int:
    """A message's length for BM25: its tokens in the index's `grams` channel (CJK pairs and words).

    SQLite reads the same number from FTS5's docsize table instead of counting.
    The `chars` channel also counts identifier parts, which made code-heavy pages
    look longer than they read (bench/quality.py, Vue headings: R@1 0.387 with
    it, 0.407 with this).
    """
    return len(tokenize(text).grams)


def bm25(tfs: Iterable[tuple[int, float]], doc_len: float, avg_len: float) -> float:
    """Sum over (tf, weight) pairs of weight * saturated, length-normalized tf: the formula for one
    document, as a reader checks it. `scoring.score_documents` computes the same for every candidate
    and term at once in NumPy, and its tests hold it to this."""
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


# --- sessions ---------------------------------------------------------------------------

# A session's score is its best message's, plus this share of each further hit's
# score (with diminishing returns): a session that talked about the topic at
# length beats one that mentioned it once, but one strong hit still counts most.
SESSION_MORE_HITS = 0.3


def session_score(message_scores: Iterable[float]) -> float:
    """Best message score + SESSION_MORE_HITS * the rest, each further hit worth half the one before."""
    ordered = sorted(message_scores, reverse=True)
    if not ordered:
        return 0.0
    extra = sum(s * 0.5**i for i, s in enumerate(ordered[1:]))
    return ordered[0] + SESSION_MORE_HITS * extra
