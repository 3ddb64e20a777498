"""The exact re-rank of a query's candidates: BM25 over every query token, all candidates at once (pure).

Design idea: the index finds ~40 candidates cheaply; what costs is reading
them, because real candidates are long (assistant replies, tool errors,
summaries: ~3,000 chars on average among candidates) and a long Chinese
question has 60 tokens. Searching each text once per token in Python costs
~0.2 ms per candidate, and folding traditional text first another ~50 us per KB.
So the texts are never folded and never searched token by token:

- `prepare` turns the query into `Term`s once: each CJK token with every
  spelling that folds to it (`text.surface_forms`: `发现`, `發現`, `髮現`),
  the spellings the user typed marked as exact;
- `score_documents` maps every character of all candidates (joined, as
  UTF-32 code points in a NumPy array) to its index in the query's alphabet,
  and counts every character and every adjacent pair of all candidates in
  two `bincount`s: the CJK term frequencies of every candidate at C speed,
  whatever the number of terms. Words are counted with `str.find`.
- BM25 (`ranking.bm25`'s formula, in NumPy: `ranking.K1`, `ranking.B`, lengths in tokens from the
  index), the phrase bonus (`ranking.PHRASE_WEIGHT` per adjacent pair) and the
  coverage factor (`ranking.COVERAGE_FLOOR`), plus one rule: a CJK term found only in another script
  than the one typed (`燦` for `灿`) counts FOLDED_ONLY_WEIGHT of its weight,
  so the form the user typed comes first, all else equal.
- The query's runs as typed (`text.typed_runs`: whole words, CJK stretches)
  add two rules: a text holding every run exactly gains EXACT_RUNS_BONUS, and
  a text with no trace of half the runs or more (for `modelValue 的原`, one
  without the pair `的原` in any spelling) keeps MISSED_RUNS_FACTOR of its score
  (a query of a few keywords, not a question in words).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from . import ranking
from .ranking import query_phrases
from .stems import other_forms, stem_root
from .text import WORD_CHARS, QueryToken, is_cjk, normalize, surface_forms, typed_forms, typed_runs

if TYPE_CHECKING:
    import numpy as np

# A CJK token found only in another script than the one typed still counts, at this share.
FOLDED_ONLY_WEIGHT = 0.5
# An English word found only in another form than the one typed (`moving` for `moved`, the same
# Snowball stem: `stems`) counts at this share of the word's form share (`ranking.form_share`: the
# idf of all its forms over the word's), and only once however often (as a CJK token found only in
# another script): the form typed first. Fitted on the fit half of bench/quality.py's sets (R@1,
# 100 each: frag-2en-words / conv-realtalk-a turn / long-replies-a turn): 0.95 -> 0.970/0.290/0.310,
# 0.8 -> 0.990/0.280/0.290, 0.7 -> 0.990/0.280/0.290 (bm25 0.990/0.260/0.240, stemmed bm25
# 0.760/0.270/0.300).
STEM_ONLY_WEIGHT = 0.9
# A text holding every run of the query exactly as typed (`燦爛`, `watchEffect 响应式`) gains this
# many times the query's weight: what the user typed, verbatim, beats the same tokens scattered
# or spelled in the other script (bench/quality.py, the fragment sets).
EXACT_RUNS_BONUS = 0.25  # 0.3 put Vue headings under bm25 (MRR 0.525 < 0.526); 0.2 lost fragments
# A text with no trace of half the query's runs or more (for `modelValue 的原`: neither the word
# nor the pair) keeps this share of its score: a short code block repeating the identifier must
# not beat the text holding both (bench/quality.py, script-ident+zh). Half, not any one run: a
# Vue doc section rarely repeats its heading (`生命周期钩子 (lifecycle hooks)`) and often
# lacks one of its runs, but seldom half of them. Vue R@1/MRR 0.408/0.527 -> 0.409/0.528;
# 0.9 leaves `triggerRef 是一` second, 0.5 gains less on Vue.
MISSED_RUNS_FACTOR = 0.8
# ... for a query of at most this many runs: a few keywords, each chosen. A question in words
# (`when did Ann move to Lisbon`) has function words most texts lack, and the rule then marks down
# the answer as often as the noise (bench/quality.py, fit half, R@1: conversations turn/session
# 0.277/0.539 -> 0.283/0.551, long replies 0.245/0.487 -> 0.265/0.516, fragments unchanged; 2 runs
# lost mix-zh-old session 0.886 -> 0.884, no limit lost it too)
MISSED_RUNS_MAX = 3
_CJK_RUNS = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


@dataclass(frozen=True)
class Term:
    """One query token as scoring needs it: its weight and the spellings to count."""

    text: str
    kind: str  # char, gram, word, part (as `QueryToken`)
    weight: float
    forms: tuple[str, ...]  # the folded form first, then its other spellings
    exact: frozenset[str]  # the spellings the user typed
    # a word, a part, a CJK pair or a character typed alone (`锁`): a match means
    # something; a character cut out of a longer word (`缓` of `缓存`) alone does not
    meaningful: bool
    # an English word's start its other forms share (`stems.stem_root`): they count too
    root: str | None = None
    # the share of the weight its other forms carry (`ranking.form_share`), STEM_ONLY_WEIGHT at most
    form_share: float = 1.0


@dataclass(frozen=True)
class Phrase3:
    """A CJK trigram of the query (two overlapping pairs), by its spellings."""

    forms: tuple[str, ...]
    weight: float
    pairs: tuple[int, int]  # the indexes in `terms` of its two pairs: both present, or no trigram


@dataclass(frozen=True)
class PreparedQuery:
    terms: tuple[Term, ...]
    phrases: tuple[Phrase3, ...]
    word_pairs: tuple[tuple[int, int, float], ...]  # indexes of two adjacent query words in `terms`, weight
    alphabet: dict[str, int]  # every character of a CJK spelling -> 1..n (0: any other character)
    runs: tuple[str, ...] = ()  # the query's words and CJK stretches as typed (`text.typed_runs`)
    # per run, the index in `terms` of the word counted the same way (its presence is already
    # known from the term frequencies), or -1: a CJK stretch, looked for as typed
    run_terms: tuple[int, ...] = ()
    # per run that some term stands for, the indexes in `terms` whose presence is a trace of it:
    # the word itself, or any pair (in any spelling) of a CJK stretch, or its character alone
    run_traces: tuple[tuple[int, ...], ...] = ()

    @property
    def total_weight(self) -> float:
        return sum(t.weight for t in self.terms)


@dataclass(frozen=True)
class DocScore:
    score: float
    meaningful: bool  # matched a meaningful term, not only characters cut out of longer words
    verbatim: bool = False  # held every run of the query exactly as typed (`text.typed_runs`)


def prepare(
    tokens: list[QueryToken],
    weights: dict[str, float],
    norm_query: str,
    typed: dict[str, set[str]],
    runs: tuple[str, ...] = (),
    form_shares: dict[str, float] | None = None,
) -> PreparedQuery:
    """The query's terms, phrases and word pairs, with every spelling to look for (`form_shares`:
    per English word, the share of its weight its other forms carry; all of it where not given)."""
    alone = {run for run in _CJK_RUNS.findall(norm_query) if len(run) == 1}
    terms = []
    for t in tokens:
        cjk = t.kind in ("char", "gram")
        forms = surface_forms(t.text) if cjk else (t.text,)
        exact = typed.get(t.text) or {t.text}
        other = [f for f in exact if f not in forms and len(f) == len(t.text)]  # most often none
        if other:
            forms += tuple(sorted(other))
        meaningful = t.kind != "char" or t.text in alone
        root = stem_root(t.text) if t.kind == "word" else None
        share = (form_shares or {}).get(t.text, 1.0)
        terms.append(Term(t.text, t.kind, weights.get(t.text, 0.0), forms, frozenset(exact), meaningful, root, share))
    position = {t.text: i for i, t in enumerate(terms)}
    phrases, pairs = [], []
    for p in query_phrases(norm_query, weights):
        if p.is_word_pair:
            a, b = p.text.split(" ")
            if a in position and b in position:
                pairs.append((position[a], position[b], p.weight))
        elif p.text[:2] in position and p.text[1:] in position:
            phrases.append(Phrase3(surface_forms(p.text), p.weight, (position[p.text[:2]], position[p.text[1:]])))
    # every character of every spelling counted: the terms' and the trigrams' (whose spellings,
    # capped separately, may hold a variant no capped pair spelling has)
    spellings = [f for t in terms if t.kind in ("char", "gram") for f in t.forms] + [
        f for p in phrases for f in p.forms
    ]
    alphabet = {ch: i + 1 for i, ch in enumerate(sorted({ch for f in spellings for ch in f}))}
    words = {t.text: i for i, t in enumerate(terms) if t.kind == "word"}
    run_terms = tuple(words.get(run, -1) if run.isascii() else -1 for run in runs)
    # only a query of at most MISSED_RUNS_MAX runs uses them (`missed_runs_factors`); a long one's
    # would cost runs x terms (a 240-character question: ~1.5 ms of its ~10)
    traced = runs if len(runs) <= MISSED_RUNS_MAX else ()
    traces = tuple(t for t in (run_trace(run, terms) for run in traced) if t)
    return PreparedQuery(tuple(terms), tuple(phrases), tuple(pairs), alphabet, runs, run_terms, traces)


def prepare_query(
    query: str, tokens: list[QueryToken], df: dict[str, int], weights: dict[str, float], form_shares: dict[str, float]
) -> tuple[list[QueryToken], PreparedQuery]:
    """The query's tokens the collection holds (as typed, or only in another form) and the query
    prepared over them: what message search and memory search both score with."""
    matched = [t for t in tokens if df.get(t.text, 0) > 0 or form_shares.get(t.text, 0.0) > 0]
    return matched, prepare(matched, weights, normalize(query), typed_forms(query), typed_runs(query), form_shares)


def run_trace(run: str, terms: list[Term]) -> tuple[int, ...]:
    """The terms whose presence shows a trace of one typed run (empty: no term stands for it)."""
    if not is_cjk(run[0]):
        return tuple(i for i, t in enumerate(terms) if t.kind == "word" and t.text == run)
    if len(run) == 1:
        return tuple(i for i, t in enumerate(terms) if t.kind == "char" and run in t.forms)
    pairs = {run[k : k + 2] for k in range(len(run) - 1)}
    return tuple(i for i, t in enumerate(terms) if t.kind == "gram" and not pairs.isdisjoint(t.forms))


def preload() -> None:
    """Load NumPy now: a long-lived front end (the bridge, the MCP server, the viewer) does it at
    its start, so its first search does not (the functions here import it where they need it,
    and a command that never scores, `import` or `status`, starts ~45 ms sooner without it)."""
    import numpy  # noqa: F401


def score_documents(texts: list[str], lengths: list[float], avg_len: float, q: PreparedQuery) -> list[DocScore]:
    """The score of each lower-cased text (one per candidate, its length in tokens beside it)."""
    import numpy as np  # here, not at the top: see `preload`

    if not texts or not q.terms:
        return [DocScore(0.0, False) for _ in texts]
    counts = cjk_counts(texts, q.alphabet) if q.alphabet else None
    tf, exact = term_frequencies(texts, q, counts)
    # held only in another spelling or form: counted once, however often (`STEM_ONLY_WEIGHT`)
    tf = np.where(exact, tf, np.minimum(tf, 1.0))
    weights = np.array([t.weight for t in q.terms])
    shares = np.where(exact, 1.0, _other_form_shares(q))  # per text and term: 1 as typed, else its share
    effective = weights * shares
    norm = ranking.K1 * (1.0 - ranking.B + ranking.B * np.asarray(lengths, dtype=float) / max(avg_len, 1.0))
    base = (effective * tf * (ranking.K1 + 1.0) / (tf + norm[:, None])).sum(axis=1)
    present = tf > 0
    covered = (present * shares) @ weights  # a term held only in another form covers its share of it
    meaningful = np.asarray(present[:, [i for i, t in enumerate(q.terms) if t.meaningful]].any(axis=1))
    total = float(weights.sum())
    factors = missed_runs_factors(present, q).tolist()
    trigrams = trigram_totals(counts, present, q).tolist()
    out = []
    # plain lists: element access on NumPy rows costs ~10x a list's, and this loop is per candidate
    for text, doc_base, doc_covered, doc_meaningful, doc_present, factor, doc_trigrams in zip(
        texts, base.tolist(), covered.tolist(), meaningful.tolist(), present.tolist(), factors, trigrams, strict=True
    ):
        if doc_covered <= 0:
            out.append(DocScore(0.0, False))
            continue
        score = doc_base + ranking.PHRASE_WEIGHT * (doc_trigrams + _word_pairs_total(text, q, doc_present))
        verbatim = bool(q.runs) and _holds_every_run(text, q, doc_present)
        if verbatim:
            score += EXACT_RUNS_BONUS * total
        score *= factor
        if ranking.COVERAGE_FLOOR < 1.0 and total > 0:
            score *= ranking.COVERAGE_FLOOR + (1.0 - ranking.COVERAGE_FLOOR) * doc_covered / total
        out.append(DocScore(score, doc_meaningful, verbatim))
    return out


def missed_runs_factors(present: np.ndarray, q: PreparedQuery) -> np.ndarray:
    """Per text, MISSED_RUNS_FACTOR where no trace is left of half the query's runs or more, else 1
    (a query of at most MISSED_RUNS_MAX runs; 1 for every text of a longer one).

    By count, not by weight: weighted, `modelValue 的原` let a short text repeating `modelValue`
    (the heavier run) outrank the message holding both again; it gained one question of the fit
    half's long-replies histories (R@1 0.23 -> 0.24) and lost that case."""
    import numpy as np

    if len(q.run_traces) < 2 or len(q.runs) > MISSED_RUNS_MAX:
        return np.ones(len(present))
    missed = sum((~present[:, list(trace)].any(axis=1)).astype(int) for trace in q.run_traces)
    return np.where(2 * np.asarray(missed) >= len(q.run_traces), MISSED_RUNS_FACTOR, 1.0)


def _other_form_shares(q: PreparedQuery) -> np.ndarray:
    """Per term, the share of its weight a text holding it only in another form than the one typed
    keeps: another script (CJK), another form of the English word; 1 where there is no other form."""
    import numpy as np

    return np.array(
        [
            FOLDED_ONLY_WEIGHT if t.kind in ("char", "gram") else STEM_ONLY_WEIGHT * t.form_share if t.root else 1.0
            for t in q.terms
        ]
    )


def term_frequencies(
    texts: list[str], q: PreparedQuery, counts: CjkCounts | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(tf, exact): per text and term, occurrences in any spelling, and whether a typed spelling is among them."""
    import numpy as np

    n = len(texts)
    tf = np.zeros((n, len(q.terms)))
    exact = np.zeros((n, len(q.terms)), dtype=bool)
    if q.alphabet:
        if counts is None:
            counts = cjk_counts(texts, q.alphabet)
        _cjk_term_frequencies(counts, q, tf, exact)
    for j, term in enumerate(q.terms):
        if term.kind in ("word", "part"):
            count = count_word if term.kind == "word" else str.count
            tf[:, j] = [count(text, term.text) for text in texts]
            exact[:, j] = tf[:, j] > 0  # the spelling typed
            if term.root:  # only where the form typed is not: the one typed counts as bm25 counts it
                missing = [i for i in range(n) if not exact[i, j]]
                tf[missing, j] = [other_forms(texts[i], term.text, term.root) for i in missing]
    return tf, exact


def _cjk_term_frequencies(counts: CjkCounts, q: PreparedQuery, tf: np.ndarray, exact: np.ndarray) -> None:
    """`term_frequencies` of the CJK terms: every spelling's column gathered at once, then summed
    per term (one NumPy step per kind, not one per spelling: a long Chinese question has ~600)."""
    import numpy as np

    size = len(q.alphabet) + 1
    starts: list[int] = []
    term_ids: list[int] = []
    typed: list[bool] = []  # per spelling, in term order: whether it is a typed one
    char_at: list[int] = []
    char_cols: list[int] = []
    pair_at: list[int] = []
    pair_cols: list[int] = []
    for j, term in enumerate(q.terms):
        if term.kind not in ("char", "gram") or not term.forms:
            continue
        starts.append(len(typed))
        term_ids.append(j)
        for form in term.forms:
            codes = [q.alphabet[ch] for ch in form]
            if len(codes) == 1:
                char_at.append(len(typed))
                char_cols.append(codes[0])
            else:
                pair_at.append(len(typed))
                pair_cols.append(codes[0] * size + codes[1])
            typed.append(form in term.exact)
    if not term_ids:
        return
    found = np.zeros((tf.shape[0], len(typed)))
    found[:, char_at] = counts.chars[:, char_cols]
    found[:, pair_at] = counts.pairs[:, pair_cols]
    tf[:, term_ids] = np.add.reduceat(found, starts, axis=1)
    exact[:, term_ids] = np.logical_or.reduceat((found > 0) & np.array(typed), starts, axis=1)


@dataclass(frozen=True)
class CjkCounts:
    """What one pass over all candidates' characters finds, per text (row)."""

    chars: np.ndarray  # count of each alphabet character: column = its index
    pairs: np.ndarray  # count of each adjacent pair: column = first * size + second
    # every adjacent triple of alphabet characters: text * size**3 + (a * size + b) * size + c, sorted
    triples: np.ndarray


def cjk_counts(texts: list[str], alphabet: dict[str, int]) -> CjkCounts:
    """Every text's alphabet characters, adjacent pairs and triples, counted at C speed.

    size = len(alphabet) + 1; index 0 is any other character, so no pair or
    triple spans one, nor the NUL joint between two texts.
    """
    import numpy as np

    size, n = len(alphabet) + 1, len(texts)
    codes = np.frombuffer("\x00".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    top = max(ord(ch) for ch in alphabet) + 1
    lookup = np.zeros(top + 1, dtype=np.int32)  # lookup[top]: every code above the alphabet's
    for ch, i in alphabet.items():
        lookup[ord(ch)] = i
    index = np.take(lookup, codes, mode="clip")
    # from here on only the positions of alphabet characters (a few percent of the text)
    where = np.flatnonzero(index > 0)  # on booleans: ~3x faster than on the integers
    idx = index[where].astype(np.int64)
    # each text's own characters and the NUL joint after it belong to that text
    doc = np.searchsorted(np.cumsum([len(t) + 1 for t in texts]), where, side="right")
    chars = np.bincount(doc * size + idx, minlength=n * size).reshape(n, size)
    adjacent = where[1:] == where[:-1] + 1
    head = doc[:-1] * size + idx[:-1]
    pairs = np.bincount((head * size + idx[1:])[adjacent], minlength=n * size * size).reshape(n, size * size)
    three = adjacent[:-1] & adjacent[1:]
    triples = ((head[:-1] * size + idx[1:-1]) * size + idx[2:])[three]
    return CjkCounts(chars, pairs, np.sort(triples))  # `np.unique` would import numpy.ma (~60 ms) in a fresh process


def trigram_totals(counts: CjkCounts | None, present: np.ndarray, q: PreparedQuery) -> np.ndarray:
    """Per text, the summed weight of the query's CJK trigrams it holds in any spelling (both of a
    trigram's pairs present too): every spelling of every trigram looked up at once."""
    import numpy as np

    n = present.shape[0]
    if counts is None or not q.phrases or counts.triples.size == 0:
        return np.zeros(n)
    size = len(q.alphabet) + 1
    codes: list[int] = []  # every spelling's code
    first_form: list[int] = []  # where each trigram's spellings begin among them
    for p in q.phrases:
        first_form.append(len(codes))
        codes += [(q.alphabet[f[0]] * size + q.alphabet[f[1]]) * size + q.alphabet[f[2]] for f in p.forms]
    wanted = np.arange(n, dtype=np.int64)[:, None] * size**3 + np.array(codes, dtype=np.int64)[None, :]
    at = np.minimum(np.searchsorted(counts.triples, wanted), counts.triples.size - 1)
    found = np.logical_or.reduceat(counts.triples[at] == wanted, first_form, axis=1)
    pairs = np.array([p.pairs for p in q.phrases])
    held = found & present[:, pairs[:, 0]] & present[:, pairs[:, 1]]
    totals: np.ndarray = held @ np.array([p.weight for p in q.phrases])
    return totals


def count_word(text: str, word: str) -> int:
    """Occurrences of a word not inside a longer run of letters and digits (`_` is a boundary).

    `text.whole_word_at`'s test written out in the loop: a common word (`the`, `is`) occurs hundreds
    of times in a query's candidates, and a call per occurrence cost ~15% of the counting (the
    candidates of bench/search_bench.py's 75 English paragraph questions at 300k: 117 -> 101 ms)."""
    pos = text.find(word)
    if pos < 0:
        return 0
    found, size, last, alnum, find = 0, len(word), len(text), WORD_CHARS, text.find
    while pos >= 0:
        end = pos + size
        if (pos == 0 or text[pos - 1] not in alnum) and (end >= last or text[end] not in alnum):
            found += 1
        pos = find(word, pos + 1)
    return found


def _holds_every_run(text: str, q: PreparedQuery, present: list[bool]) -> bool:
    """Every run as typed: a word as a whole word (known from its term), a CJK stretch anywhere."""
    for run, term in zip(q.runs, q.run_terms or (-1,) * len(q.runs), strict=True):
        if term >= 0:
            if not present[term]:
                return False
        elif not (count_word(text, run) > 0 if run.isascii() else run in text):
            return False
    return True


def _word_pairs_total(text: str, q: PreparedQuery, present: list[bool]) -> float:
    total = 0.0
    for a, b, weight in q.word_pairs:
        if present[a] and present[b] and words_adjacent(text, q.terms[a].text, q.terms[b].text):
            total += weight
    return total


def words_adjacent(text: str, a: str, b: str) -> bool:
    """`a`, then 1-3 characters that are not word characters, then `b`; both whole words.

    The regex starts with the literal `a`, so the engine skips to each occurrence at C speed;
    only a match inside a longer word (`the` of `bathe`) sends the search on from the next one.
    """
    pattern = _adjacent_pattern(a, b)
    found = pattern.search(text)
    while found is not None:
        start = found.start()
        if start == 0 or not _is_word_char(text[start - 1]):
            return True
        found = pattern.search(text, start + 1)
    return False


@lru_cache(maxsize=1024)
def _adjacent_pattern(a: str, b: str) -> re.Pattern[str]:
    return re.compile(re.escape(a) + r"\W{1,3}" + re.escape(b) + r"(?!\w)")


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"
