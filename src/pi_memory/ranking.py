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

from .text import QueryToken, is_cjk, surface_forms, tokenize

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


IDF_PLUS_ONE = 0  # 1: Lucene's log(1 + x), never zero; 0: Robertson's log(x) floored, as FTS5
IDF_FLOOR = 1e-6


def idf(df: int, n_docs: int) -> float:
    """BM25's idf, never negative: a token in most documents says almost nothing."""
    n = max(n_docs, df, 1)
    ratio = (n - df + 0.5) / (df + 0.5)
    return math.log(1.0 + ratio) if IDF_PLUS_ONE else max(IDF_FLOOR, math.log(ratio))


def token_weight(token: QueryToken, df: int, n_docs: int) -> float:
    kind_weight = CHAR_WEIGHT if token.kind == "char" else PART_WEIGHT if token.kind == "part" else 1.0
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


@lru_cache(maxsize=4096)
def _word_pattern(word: str) -> re.Pattern[str]:
    # `_` splits identifiers into indexed parts, so `api` counts in `openai_api_key`
    return re.compile(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])")


def term_frequency(norm_text: str, token: QueryToken) -> int:
    """Occurrences of a token in normalized text, counted the way the tokenizer cuts.

    An identifier part (`effect` of `watchEffect`) was cut at a case change that
    lower-casing erased, so it is counted as a plain substring.
    """
    if token.kind in ("char", "gram", "part"):
        return norm_text.count(token.text)
    if token.text not in norm_text:  # the common case, and a cheap test before the regex
        return 0
    return len(_word_pattern(token.text).findall(norm_text))


_WORD_RUN = re.compile(r"[a-z0-9_]{2,}")


def doc_length(norm_text: str) -> float:
    """Length in tokens, as the index counts it: one per CJK character, one per word.

    A CJK character is 3 UTF-8 bytes and an ASCII one 1, so the byte length
    counts them without a loop in Python.
    """
    n_wide = (len(norm_text.encode("utf-8")) - len(norm_text)) / 2
    return n_wide + len(_WORD_RUN.findall(norm_text))


def doc_tokens(text: str) -> int:
    """A message's length for BM25: its tokens in the index's `grams` channel (CJK pairs and words).

    SQLite reads the same number from FTS5's docsize table instead of counting.
    The `chars` channel also counts identifier parts, which made code-heavy pages
    look longer than they read (bench/quality.py, Vue headings: R@1 0.387 with
    it, 0.407 with this).
    """
    return len(tokenize(text).grams)


def bm25(tfs: Iterable[tuple[int, float]], doc_len: float, avg_len: float) -> float:
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
            if a not in norm_text or b not in norm_text:
                continue
            pair = rf"(?<![a-z0-9_]){re.escape(a)}\W{{1,3}}{re.escape(b)}(?![a-z0-9_])"
            found = re.search(pair, norm_text) is not None
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
    in_tokens: bool = False,
) -> float:
    """The full score of one document for one query: BM25 + phrase bonus, scaled by weighted coverage.

    `avg_len` is the mean length of the collection's documents: in characters
    (`len` of the normalized text), or with `in_tokens` in `doc_length` units,
    which ranks mixed code/prose/CJK collections better (bench/quality.py).
    """
    tfs = [(term_frequency(norm_text, t), weights.get(t.text, 0.0)) for t in tokens]
    length = doc_length(norm_text) if in_tokens else len(norm_text)
    base = bm25(tfs, length, avg_len) + phrase_bonus(norm_text, phrases)
    total = sum(w for _, w in tfs)
    if COVERAGE_FLOOR >= 1.0 or total <= 0:
        return base
    covered = sum(w for tf, w in tfs if tf > 0) / total
    return base * (COVERAGE_FLOOR + (1.0 - COVERAGE_FLOOR) * covered)


# --- scoring many candidates fast -------------------------------------------------------
#
# `score_text` above folds each document and runs a regex per word: fine for a
# handful of memories, too slow for ~100 long candidates per query (the folding
# alone costs ~50 us per KB of traditional text). `prepare` turns the query into
# `Term`s once: each CJK token with every spelling that folds to it
# (`text.surface_forms`), so a candidate is only lower-cased and searched with
# C-speed `str.count`; its length in tokens comes from the index (FTS5 keeps it),
# not from the text.

# A CJK token found only in another script than the one typed (`燦` for `灿`)
# still counts, at this share: the form the user typed comes first, all else equal.
FOLDED_ONLY_WEIGHT = 0.5
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


@dataclass(frozen=True)
class Term:
    """One query token as scoring needs it: its weight and the spellings to count."""

    text: str
    kind: str
    weight: float
    forms: tuple[str, ...]  # the folded form first, then its other spellings
    exact: frozenset[str]  # the spellings the user typed
    # a word, a part, a CJK pair or a character typed alone (`锁`): a match means
    # something; a character cut out of a longer word (`缓` of `缓存`) alone does not
    meaningful: bool
    plain_forms: tuple[str, ...] = ()  # the forms without another script's characters


@dataclass(frozen=True)
class Phrase3:
    """A CJK trigram of the query: its two bigrams and its spellings."""

    first: str
    second: str
    forms: tuple[str, ...]
    weight: float


@dataclass(frozen=True)
class PreparedQuery:
    terms: tuple[Term, ...]  # characters before the pairs that hold them
    phrases: tuple[Phrase3, ...]
    word_pairs: tuple[tuple[str, str, float], ...]  # adjacent query words, weight
    total_weight: float
    # any character that only another script's spelling holds: a text without one
    # (most texts) is searched for the plain forms alone
    other_script: re.Pattern[str] | None = None


_KIND_ORDER = {"char": 0, "gram": 1, "word": 2, "part": 3}


def prepare(
    tokens: list[QueryToken], weights: dict[str, float], norm_query: str, typed: dict[str, set[str]]
) -> PreparedQuery:
    """The query's terms, phrases and word pairs, with every spelling to look for (pure)."""
    alone = {run for run in _CJK_RUNS.findall(norm_query) if len(run) == 1}
    spelled = []
    for t in sorted(tokens, key=lambda t: _KIND_ORDER.get(t.kind, 9)):
        forms = surface_forms(t.text) if t.kind in ("char", "gram") else (t.text,)
        exact = typed.get(t.text) or {t.text}
        forms += tuple(sorted(f for f in exact if f not in forms))  # typed spellings opencc folds differently
        spelled.append((t, forms, exact))
    plain = {ch for t, _, _ in spelled for ch in t.text}
    other = {ch for _, forms, _ in spelled for f in forms for ch in f} - plain
    terms = tuple(
        Term(
            t.text,
            t.kind,
            weights.get(t.text, 0.0),
            forms,
            frozenset(exact),
            meaningful=t.kind != "char" or t.text in alone,
            plain_forms=tuple(f for f in forms if not other.intersection(f)),
        )
        for t, forms, exact in spelled
    )
    phrases, pairs = [], []
    for p in query_phrases(norm_query, weights):
        if p.is_word_pair:
            a, b = p.text.split(" ")
            pairs.append((a, b, p.weight))
        else:
            phrases.append(Phrase3(p.text[:2], p.text[1:], surface_forms(p.text), p.weight))
    pattern = re.compile("[" + re.escape("".join(sorted(other))) + "]") if other else None
    return PreparedQuery(terms, tuple(phrases), tuple(pairs), sum(t.weight for t in terms), pattern)


def count_word(text: str, word: str) -> int:
    """Occurrences of a word not inside a longer run of letters and digits (`_` is a boundary)."""
    if word not in text:
        return 0
    found, end = 0, len(word)
    pos = text.find(word)
    while pos >= 0:
        if _bounded(text, pos, pos + end):
            found += 1
        pos = text.find(word, pos + 1)
    return found


def _bounded(text: str, start: int, end: int) -> bool:
    return (start == 0 or text[start - 1] not in _ALNUM) and (end >= len(text) or text[end] not in _ALNUM)


def term_count(text: str, term: Term, all_forms: bool = True) -> tuple[int, bool]:
    """(occurrences in any spelling, whether a typed spelling is among them) in lower-cased text.

    `all_forms=False`: the text holds no character of another script, so only
    the plain forms can occur.
    """
    if term.kind == "word":
        n = count_word(text, term.text)
        return n, n > 0
    forms = term.forms if all_forms else term.plain_forms
    if len(forms) == 1:
        n = text.count(forms[0])
        return n, n > 0 and forms[0] in term.exact
    total, exact = 0, False
    for form in forms:
        n = text.count(form)
        if n:
            total += n
            exact = exact or form in term.exact
    return total, exact


@dataclass(frozen=True)
class DocScore:
    score: float
    meaningful: bool  # matched a meaningful term, not only characters cut out of longer words


def score_document(text: str, doc_len: float, avg_len: float, q: PreparedQuery) -> DocScore:
    """BM25 over the terms + phrase bonus, scaled by weighted coverage, for lower-cased text (pure).

    The same formula as `score_text`, with a typed-spelling preference: a CJK
    term found only through folding counts FOLDED_ONLY_WEIGHT of its weight.
    A pair is not searched for when one of its characters is absent.
    """
    norm = K1 * (1.0 - B + B * doc_len / max(avg_len, 1.0))
    all_forms = q.other_script is not None and q.other_script.search(text) is not None
    base, covered, meaningful = 0.0, 0.0, False
    tfs: dict[str, int] = {}
    for term in q.terms:
        if term.kind == "gram" and (tfs.get(term.text[0]) == 0 or tfs.get(term.text[1]) == 0):
            tfs[term.text] = 0
            continue
        tf, exact = term_count(text, term, all_forms)
        tfs[term.text] = tf
        if tf <= 0 or term.weight <= 0:
            continue
        weight = term.weight if exact else term.weight * FOLDED_ONLY_WEIGHT
        base += weight * tf * (K1 + 1.0) / (tf + norm)
        covered += term.weight
        meaningful = meaningful or term.meaningful
    if covered <= 0:
        return DocScore(0.0, False)
    base += PHRASE_WEIGHT * _phrase_total(text, q, tfs)
    if COVERAGE_FLOOR < 1.0 and q.total_weight > 0:
        base *= COVERAGE_FLOOR + (1.0 - COVERAGE_FLOOR) * covered / q.total_weight
    return DocScore(base, meaningful)


def _phrase_total(text: str, q: PreparedQuery, tfs: dict[str, int]) -> float:
    total = 0.0
    for p in q.phrases:
        if tfs.get(p.first) and tfs.get(p.second) and any(f in text for f in p.forms):
            total += p.weight
    for a, b, weight in q.word_pairs:
        if tfs.get(a) and tfs.get(b) and words_adjacent(text, a, b):
            total += weight
    return total


def words_adjacent(text: str, a: str, b: str) -> bool:
    """`a` then 1-3 non-word characters then `b`, both whole words (`reactive system`, `v-model`)."""
    pos = text.find(a)
    while pos >= 0:
        gap = pos + len(a)
        if pos == 0 or not _is_word_char(text[pos - 1]):
            for k in range(1, 4):
                sep = text[gap : gap + k]
                if len(sep) < k or _is_word_char(sep[-1]):
                    break
                if text.startswith(b, gap + k) and (
                    gap + k + len(b) >= len(text) or not _is_word_char(text[gap + k + len(b)])
                ):
                    return True
        pos = text.find(a, pos + 1)
    return False


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


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
