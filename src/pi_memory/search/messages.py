"""Finding messages: document frequencies, bounded candidate retrieval, exact re-rank.

Design idea: the cost of a query must not grow with the archive. Two things
grow with it: how many documents hold a common token, and what it costs to
score them all (FTS5's `ORDER BY bm25` does exactly that: 1.6 s p95 at 1M
messages in `bench/scale.py`). So every step below is bounded by a constant:

1. Document frequencies come from a capped count (exact up to `DF_EXACT_CAP`,
   estimated from the newest `DF_WINDOW` rowids above it) and are cached per
   process, invalidated when the archive grows by more than 2% (spec 000 §7.4).
2. Candidates, two tracks:
   - `rare`: the rarest query tokens whose postings together fit
     `RARE_POSTINGS_BUDGET` are read in full and summed by idf weight inside
     SQLite; the best `RARE_CANDIDATES` go on. Exact recall for any document
     holding a rare token, however old it is.
   - `recent`: the other (common) tokens add the newest `RECENT_CANDIDATES`
     documents holding all of up to 3 of them, within the newest
     `RECENT_WINDOW` rowids (the spec's early-terminating `ORDER BY rowid
     DESC`), with the spec's OR retry when nothing else was found; only
     `RECENT_BEHIND_FULL_RARE` of them when the rare track is full already.
   A character typed in a script that folds to another (`構`, whose `构` may
   be in every message) is also looked up as typed, in `msg_typed`, and
   joins the rare track from there.
3. The ~35-45 candidates are scored exactly by `scoring.score_documents` (BM25
   over all query tokens, lengths in tokens from FTS5's docsize, a small
   bonus for query tokens adjacent in the text, the typed spelling before
   a folded one), all at once and without folding them; recency only
   breaks ties. Candidates that hold only characters cut out of the query's
   words are dropped when others hold a word.

The constants were chosen with `bench/quality.py` (ranking at least as good
as FTS5 bm25 over all query tokens) and `bench/scale.py` (p95 and max latency
flat from 30k to 1M messages); see the README for the figures.

Session-level results (`rank_sessions`) group the best message hits by
session and score each session with `ranking.session_score`.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from ..core import ranking, scoring
from ..core.echo import fts_without_echoes as without_echoes
from ..core.ranking import DF_EXACT_CAP, DF_WINDOW, candidate_weight
from ..core.stems import variants
from ..core.text import (
    QueryToken,
    fts_and,
    fts_or,
    normalize,
    normalize_lower,
    other_script_chars,
    query_phrases_for_snippet,
    query_tokens,
    surface_tokens,
    typed_forms,
)
from ..core.text import snippet as text_snippet
from ..storage.store import Store, decode_text
from . import runs as runsearch
from .common import DfCache, rarest_within

RARE_POSTINGS_BUDGET = 3_000  # postings read in full per query (rare track)
# best rare-track candidates kept for exact scoring (40 before: the same quality, bench/quality.py)
RARE_CANDIDATES = 30
# A short query's rare tokens typed in their folded spelling are read once more, as typed
# (`QueryPlan.exact`): the messages holding no other spelling rank first in the rare track's cut.
# Only a short one's (a word or two, `车`, `發現`): each such part costs a subquery over the typed-
# script index, and a long Chinese question typed in simplified script has one for nearly every
# token (search_bench, 300k: its rare track took 9.8 ms a question with them, 3.3 without; R@1 the
# same on every set of bench/quality.py with none at all, 150 each, zh-exact and script-* included).
EXACT_PARTS_TOKENS = 4
# A filtered scope (a project, a session) of at most this many indexed messages is scored whole,
# as bm25 scores every message it holds: there the query's common words are the ones that tell its
# messages apart, and the tracks, built to bound an archive-wide search, can miss its one answer
# (bench/quality.py, MemDaily histories, fit half: the target in the top 10 for 0.925 of questions
# by the tracks, bm25 1.000).
SCOPE_SCORED_WHOLE = 200
RECENT_WINDOW = 200_000  # the recent track looks only at the newest rowids
RECENT_CANDIDATES = 15  # newest documents holding all common anchors
# ... when the rare track found a full set already: a question's common words (`的`, `是`, `what`)
# then bring long texts that almost never win (3 of 3,000 top-10 places among bench/search_bench.py's
# questions) and cost a third of the reading and scoring. bench/quality.py: 5 leaves every set as it
# was with 15; 0 cost the CMRC questions 0.976 -> 0.975 R@1
RECENT_BEHIND_FULL_RARE = 5
RECENT_ANCHORS = 3  # spec 000 §7.1: three anchors
MAX_LIMIT = 100
AVG_LEN_SAMPLE = 500  # documents, spread over the archive, whose mean length stands for its
# candidates' texts kept decoded and lower-cased by a searcher (~5 MB at most): a long-lived one (bridge,
# MCP, web) meets the same newest documents again for every query holding a common word, and decoding
# a packed text (`decode_text`, ~10-20 us) and lower-casing it (~10 us) would be paid each time
TEXT_CACHE = 500
SCORE_DIGITS = 9  # a score's decimals that order hits; below that, ties go to recency


@dataclass
class Hit:
    msg_id: int
    session_id: str
    seq: int
    role: str
    ts: int
    project: str
    score: float
    cut: str | None = field(default=None, compare=False)  # the snippet, once made (`snippet`)
    cwd: str = ""
    session_name: str | None = None
    text: str = field(default="", repr=False)
    # what the snippet is cut around: it is made when first read, since a search that scores 100 hits
    # to fuse them with vectors or group them into sessions shows ~10 (106k units: snippets were 40%
    # of a 100-hit search's time)
    needles: list[list[str]] | None = field(default=None, repr=False, compare=False)

    @property
    def snippet(self) -> str:
        if self.cut is None:
            self.cut = text_snippet(self.text, self.needles or [])
        return self.cut

    def to_dict(self) -> dict[str, Any]:
        return {
            "msg_id": self.msg_id,
            "session_id": self.session_id,
            "seq": self.seq,
            "role": self.role,
            "ts": self.ts,
            "project": self.project,
            "score": round(self.score, 4),
            "snippet": self.snippet,
        }


@dataclass
class Filters:
    project: str | None = None
    since_ms: int | None = None
    session_id: str | None = None
    roles: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()  # user, assistant, tool_call, tool_error, summary (see runsearch)
    path: str | None = None  # messages that read or changed this file
    agent: str | None = None  # pi, claude, codex
    sessions: tuple[str, ...] = ()  # any of these sessions (a fork and the sessions it copies from)
    entry_ids: tuple[str, ...] = ()  # only messages with these pi entry ids (a branch, with `sessions`)
    until_ms: int | None = None  # messages before this time (unix ms), for a bounded period
    # the archive's own output (`core.echo`) is left out unless asked for
    include_echoes: bool = False
    # a session asking from inside a run (a model's tool call): that run (its prompt, the model's calls
    # and their results) is never a hit
    current_session: str | None = None
    exclude_ids: tuple[int, ...] = ()  # the messages of that run, found by `Searcher.search`

    @property
    def active(self) -> bool:
        return bool(
            self.project
            or self.since_ms
            or self.until_ms
            or self.session_id
            or self.roles
            or self.kinds
            or self.path
            or self.sessions
            or self.entry_ids
            or self.agent
        )


@dataclass
class QueryPlan:
    """What a query was turned into; kept for tests, benchmarks and `--explain`."""

    tokens: list[QueryToken]
    df: dict[str, int]
    rare: list[QueryToken]
    common: list[QueryToken]
    n_docs: int
    # characters typed in a script that folds to another (`構` for `构`): candidates only (the rare
    # track, when few messages hold them as typed); their folded forms are in `tokens`, and scored
    surface: list[QueryToken] = field(default_factory=list)
    # a CJK token typed in its folded spelling (`发`) that has others (`發`, `髮`) -> the characters of
    # those others, as the typed-script index keeps them: the messages holding the token but none of
    # them hold it as typed, and are candidates first (`Searcher._rare_candidates`)
    exact: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # those of them that are characters held as typed by few messages written in the other script
    # (`text.typed_targets`): read from the typed-script index whatever their df (rare track)
    exact_typed: tuple[str, ...] = ()
    # another form of a rare English word (`buying` for `buy`, `stems.variants`) the index holds ->
    # that word: read with it in the rare track (scoring counts such forms, `stems.other_forms`)
    variants: dict[str, str] = field(default_factory=dict)
    # an English word of the query -> the share of its weight its other forms carry in scoring and
    # in the rare track (`ranking.form_share`: by the documents holding the word in any form)
    form_shares: dict[str, float] = field(default_factory=dict)


def word_variants(
    rare: list[QueryToken], forms: dict[str, dict[str, int]], df: dict[str, int], budget: int
) -> dict[str, str]:
    """`QueryPlan.variants`: the other forms of the rare English words the index holds (`forms`: per
    word, each form's document frequency), rarest first, while their postings fit what the rare
    track has left of its `budget`."""
    budget -= sum(df[t.text] for t in rare)
    found = sorted((count, form, t.text) for t in rare for form, count in forms.get(t.text, {}).items() if count)
    out: dict[str, str] = {}
    for count, form, word in found:
        if count > budget:
            break
        out[form], budget = word, budget - count
    return out


def typed_first(plan: QueryPlan) -> bool:
    """Whether the texts holding the query exactly as typed rank before all others: a short query
    (at most EXACT_PARTS_TOKENS tokens) with a character written in one script of two (`归` or
    `歸`). The user chose that spelling; a short title holding the other one (`魂歸离恨天`) must not
    come first by its length alone (bench/quality.py, zh-exact both ways: 17 of 1,000 second)."""
    return len(plan.tokens) <= EXACT_PARTS_TOKENS and bool(plan.exact or plan.surface)


def typed_as_folded(query: str, tokens: list[QueryToken]) -> dict[str, tuple[str, ...]]:
    """`QueryPlan.exact`: the CJK tokens the query typed in their folded spelling that have others."""
    typed = typed_forms(query)
    out = {}
    for t in tokens:
        if t.kind in ("char", "gram") and t.text in typed.get(t.text, ()):
            others = other_script_chars(t.text)
            if others:
                out[t.text] = others
    return out


@dataclass(frozen=True)
class RareTerm:
    """One term of the rare track: the messages holding `token` (and, with `unless_typed`, none of
    those characters as typed) are candidates worth `weight` (`ranking.candidate_weight`) each."""

    token: QueryToken
    weight: int
    unless_typed: tuple[str, ...] = ()


def rare_terms(plan: QueryPlan, weights: dict[str, float]) -> list[RareTerm]:
    """The rare track's terms, as both backends read them: each rare token; a short query's token
    once more for the messages holding it in no other spelling (as typed first); a character typed
    as a text in the other script holds it; another form of a rare word at its share of the weight."""
    as_typed = [t.text for t in plan.rare if t.text in plan.exact] if len(plan.tokens) <= EXACT_PARTS_TOKENS else []
    terms: list[RareTerm] = []
    for t in plan.rare:
        terms.append(RareTerm(t, candidate_weight(weights[t.text])))
        if t.text in as_typed:
            terms.append(RareTerm(t, candidate_weight(weights[t.text]), plan.exact[t.text]))
    for text in plan.exact_typed:
        terms.append(RareTerm(QueryToken(text, "surface"), candidate_weight(weights[text])))
    for form, word in plan.variants.items():
        weight = weights[word] * scoring.STEM_ONLY_WEIGHT * plan.form_shares.get(word, 1.0)
        terms.append(RareTerm(QueryToken(form, "word"), candidate_weight(weight)))
    return terms


def fts_index(token: QueryToken, include_echoes: bool = True) -> tuple[str, str]:
    """The FTS5 table that holds a token and the expression that finds it there (echoes left out
    unless included)."""
    table = "msg_typed" if token.kind == "surface" else "msg_fts"
    return table, token.fts() if include_echoes else without_echoes(token.fts())


def not_among(column: str, ids: tuple[int, ...], store: Store) -> tuple[str, list[Any]]:
    """A condition that `column` is none of `ids` (the asking run's messages), with its parameters."""
    if not ids:
        return "TRUE", []
    return f"NOT ({store.sql_in_list(column)})", [store.list_param(ids)]


def without_surface(tokens: list[QueryToken]) -> list[QueryToken]:
    """Common tokens anchor the recent track; a typed spelling there would hide the folded matches."""
    return [t for t in tokens if t.kind != "surface"]


class Searcher:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.df_cache = DfCache()
        self._avg: tuple[int, float] | None = None
        # (msg id, content hash) -> (text, lower-cased text): the hash, since a forgotten message's id
        # can be taken again by a new one
        self._texts: OrderedDict[tuple[int, str], tuple[str, str]] = OrderedDict()
        # project -> its session ids, while the archive has as many sessions (`_project_sessions`)
        self._projects: tuple[int, dict[str, list[str]]] = (-1, {})

    # --- document frequencies --------------------------------------------------------

    def document_frequency(self, token: QueryToken, n_docs: int) -> int:
        table, expr = fts_index(token)
        key = f"{table}:{expr}"
        cached = self.df_cache.get(key)
        if cached is not None:
            return cached
        count = int(
            self.store.scalar(
                f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)",
                (expr, DF_EXACT_CAP + 1),
            )
        )
        if count > DF_EXACT_CAP:
            count = self._estimate_df(table, expr, n_docs)
        self.df_cache.put(key, count)
        return count

    def _estimate_df(self, table: str, expr: str, n_docs: int) -> int:
        """Density of a very common token among the newest rowids, scaled to the archive."""
        max_id = self.store.max_msg_id()
        low = max(0, max_id - DF_WINDOW)
        in_window = int(
            self.store.scalar(f"SELECT count(*) FROM {table} WHERE {table} MATCH ? AND rowid > ?", (expr, low))
        )
        docs_in_window = max(1, int(n_docs * (max_id - low) / max(max_id, 1)))
        return max(DF_EXACT_CAP + 1, min(n_docs, int(n_docs * in_window / docs_in_window)))

    def plan(self, query: str) -> QueryPlan:
        counters = self.store.counters()
        n_docs = counters.get("indexed_docs", 0)
        self.df_cache.check(n_docs)
        tokens = query_tokens(query)
        surface = surface_tokens(query, tokens)
        df = {t.text: self.document_frequency(t, n_docs) for t in tokens + surface}
        forms = {
            t.text: {f: self.document_frequency(QueryToken(f, "word"), n_docs) for f in variants(t.text)}
            for t in tokens
            if t.kind == "word"
        }
        # a word the archive holds only in other forms (`dietitians`: `dietitian`) is found by them
        found = [t for t in tokens + surface if df[t.text] > 0 or any(forms.get(t.text, {}).values())]
        present = sorted(found, key=lambda t: (df[t.text], t.text))
        rare = rarest_within(present, df, RARE_POSTINGS_BUDGET)
        exact = typed_as_folded(query, tokens)
        typed_in_others = [QueryToken(ch, "surface") for ch in exact if len(ch) == 1]
        typed_df = {t.text: self.document_frequency(t, n_docs) for t in typed_in_others}
        held = sorted((t for t in typed_in_others if typed_df[t.text] > 0), key=lambda t: (typed_df[t.text], t.text))
        # the rare track's budget covers these postings too: a long question typed in one script has
        # such a character for nearly every token (search_bench, 300k, 240-character questions: ~30k
        # postings, 10 of their 13 ms in the rare track), a short one (`這`) a single rare one
        left = RARE_POSTINGS_BUDGET - sum(df[t.text] for t in rare)
        exact_typed = tuple(t.text for t in rarest_within(held, typed_df, left))
        plan = QueryPlan(tokens, df, rare, present[len(rare) :], n_docs, surface, exact, exact_typed)
        plan.variants = word_variants(rare, forms, df, RARE_POSTINGS_BUDGET)
        plan.form_shares = ranking.form_shares(df, {w: list(c.values()) for w, c in forms.items()}, n_docs)
        return plan

    # --- candidates ------------------------------------------------------------------

    def _rare_candidates(self, plan: QueryPlan, weights: dict[str, float], filters: Filters) -> list[int]:
        if not plan.rare and not plan.exact_typed:
            return []
        parts, params = [], []
        for term in rare_terms(plan, weights):
            table, expr = fts_index(term.token, filters.include_echoes)
            part = f"SELECT rowid AS id, ? AS w FROM {table} WHERE {table} MATCH ?"
            params += [term.weight, expr]
            if term.unless_typed:
                part += " AND rowid NOT IN (SELECT rowid FROM msg_typed WHERE msg_typed MATCH ?)"
                params.append(fts_or([QueryToken(ch, "surface") for ch in term.unless_typed]))
            parts.append(part)
        union = " UNION ALL ".join(parts)
        where, fparams = self.where(filters)
        outside, oparams = not_among("id", filters.exclude_ids, self.store)
        if filters.active:
            sql = f"""SELECT c.id FROM (SELECT id, sum(w) AS s FROM ({union}) WHERE {outside} GROUP BY id) c
                      JOIN msg m ON m.id = c.id JOIN session s ON s.id = m.session_id WHERE {where}
                      ORDER BY c.s DESC, c.id DESC LIMIT ?"""
        else:  # grouped and ordered in one step: ~7% less than through a subquery
            sql = f"SELECT id FROM ({union}) WHERE {outside} GROUP BY id ORDER BY sum(w) DESC, id DESC LIMIT ?"
        args = params + oparams + fparams + [self.rare_candidates]
        return [int(r[0]) for r in self.store.conn.execute(sql, args)]

    def _recent_candidates(
        self, anchors: list[QueryToken], filters: Filters, limit: int, use_or: bool = False
    ) -> list[int]:
        if not anchors:
            return []
        low = max(0, self.store.max_msg_id() - RECENT_WINDOW)
        table = fts_index(anchors[0])[0]  # anchors are all typed spellings (`msg_typed`) or none
        expr = fts_or(anchors) if use_or else fts_and(anchors)
        if not filters.include_echoes:
            expr = without_echoes(expr)
        where, fparams = self.where(filters)
        outside, oparams = not_among("f.rowid", filters.exclude_ids, self.store)
        sql = f"SELECT f.rowid FROM {table} f"
        if filters.active:
            sql += " JOIN msg m ON m.id = f.rowid JOIN session s ON s.id = m.session_id"
        sql += f" WHERE {table} MATCH ? AND f.rowid > ? AND {outside}"
        if filters.active:
            sql += f" AND {where}"
        sql += " ORDER BY f.rowid DESC LIMIT ?"
        return [int(r[0]) for r in self.store.conn.execute(sql, [expr, low] + oparams + fparams + [limit])]

    def _small_scope(self, filters: Filters) -> list[int] | None:
        """Every indexed message of a filtered scope of at most `SCOPE_SCORED_WHOLE`, else None: one
        probe of the scope's sessions' messages (by the index on their session), stopped past that."""
        if not (filters.project or filters.session_id or filters.sessions):
            return None
        where, params = self.where(filters)
        outside, oparams = not_among("m.id", filters.exclude_ids, self.store)
        echoes = "" if filters.include_echoes else " AND m.echo = 0"
        sessions, sparams = "TRUE", []
        if filters.project:
            sessions, sparams = (
                self.store.sql_in_list("m.session_id"),
                [self.store.list_param(self._project_sessions(filters.project))],
            )
        sql = (
            f"SELECT m.id FROM msg m JOIN session s ON s.id = m.session_id "
            f"WHERE {sessions} AND m.indexed{echoes} AND {where} AND {outside} LIMIT ?"
        )
        ids = [int(r[0]) for r in self.store.rows(sql, (*sparams, *params, *oparams, SCOPE_SCORED_WHOLE + 1))]
        return ids if len(ids) <= SCOPE_SCORED_WHOLE else None

    def _project_sessions(self, project: str) -> list[str]:
        """The sessions of a project (`filter_sql`'s match: its name, its folder or the folder's last
        part), kept while the archive has as many sessions: the match reads every session's folder."""
        count = int(self.store.scalar("SELECT count(*) FROM session") or 0)
        if self._projects[0] != count:
            self._projects = (count, {})
        found = self._projects[1].get(project)
        if found is None:
            where, params = filter_sql(Filters(project=project), self.store)
            found = [str(r[0]) for r in self.store.rows(f"SELECT s.id FROM session s WHERE {where}", params)]
            if len(self._projects[1]) > 256:
                self._projects[1].clear()
            self._projects[1][project] = found
        return found

    def candidates(self, plan: QueryPlan, weights: dict[str, float], filters: Filters) -> list[int]:
        scope = self._small_scope(filters)
        if scope is not None:
            return scope
        found = self._rare_candidates(plan, weights, filters)
        common = without_surface(plan.common)
        if common:
            anchors = common[:RECENT_ANCHORS]
            limit = RECENT_BEHIND_FULL_RARE if len(found) >= self.rare_candidates else RECENT_CANDIDATES
            recent = self._recent_candidates(anchors, filters, limit)
            if not recent and not found:  # spec §7.1 ③': no message holds the anchors together
                # An OR of all the common words, filtered by project, filled the track better inside
                # a project (MemDaily fit half: target in the top 10 for 0.93 of questions, 0.88
                # without) but walks every posting newer than the project, joined to its session:
                # the histories' p50 went from 12 to 40 ms, growing with the archive. Not kept.
                recent = self._recent_candidates(anchors, filters, limit, use_or=True)
            seen = set(found)
            found += [r for r in recent if r not in seen]
        typed = [t for t in plan.common if t.kind == "surface"][:RECENT_ANCHORS]
        if typed:
            # Characters typed in the script that folds to the other (`這`), too common in the whole
            # archive for the rare track: in a scope written in the other script (`这`) the one message
            # holding them as typed is the answer, and neither track would read it (bench/quality.py,
            # zh-exact-traditional: 13 of 500 not in the top 10). The newest holding them as typed.
            seen = set(found)
            found += [r for r in self._recent_candidates(typed, filters, RECENT_CANDIDATES) if r not in seen]
        return found

    # --- search ----------------------------------------------------------------------

    # candidates kept from the rare track: enough for the hits asked for (at most MAX_LIMIT)
    rare_candidates = RARE_CANDIDATES

    def search(self, query: str, limit: int = 10, filters: Filters | None = None) -> list[Hit]:
        filters = filters or Filters()
        limit = max(1, min(int(limit), MAX_LIMIT))
        self.rare_candidates = max(RARE_CANDIDATES, limit)
        with self.store.read():
            plan = self.plan(query)
            if not plan.rare and not plan.common:
                return []
            if filters.current_session:
                filters = replace(filters, exclude_ids=self.current_run_ids(filters.current_session))
            weights = ranking.token_weights(plan.tokens + plan.surface, plan.df, plan.n_docs, normalize(query))
            ids = self.candidates(plan, weights, filters)
            rows = self._fetch(ids, filters)
        matched, prepared = scoring.prepare_query(query, plan.tokens, plan.df, weights, plan.form_shares)
        scored = self._score(rows, prepared)
        first = typed_first(plan)
        scored.sort(key=lambda sr: (first and sr[1]["verbatim"], sr[0], sr[1]["ts"], sr[1]["id"]), reverse=True)
        by_weight = [t.text for t in sorted(matched, key=lambda t: -weights.get(t.text, 0.0))]
        needles = [query_phrases_for_snippet(query), by_weight]
        return [_hit(row, score, needles) for score, row in scored[:limit]]

    def _score(self, rows: list[dict[str, Any]], prepared: scoring.PreparedQuery) -> list[tuple[float, dict[str, Any]]]:
        """Each candidate's `scoring.score_documents`; when some match a meaningful term (a word, a
        CJK pair, a character typed alone), those that only hold characters cut out of the query's
        words (`缓` and `存` apart, for `缓存`) are noise and are dropped."""
        lengths = self._token_lengths([int(r["id"]) for r in rows], {int(r["id"]): r["text"] for r in rows})
        avg = self._avg_len()
        texts = [row["lower"] for row in rows]
        results = scoring.score_documents(texts, [lengths[int(r["id"])] for r in rows], avg, prepared)
        scored = [(result, row) for result, row in zip(results, rows, strict=True) if result.score > 0]
        if any(r.meaningful for r, _ in scored):
            scored = [(r, row) for r, row in scored if r.meaningful]
        # rounded: the same text can score a last-bit different (BLAS sums rows by their alignment in
        # memory), and that must not order two equal hits differently from one search to the next
        return [(round(r.score, SCORE_DIGITS), {**row, "verbatim": r.verbatim}) for r, row in scored]

    def current_run_ids(self, session_id: str) -> tuple[int, ...]:
        """The messages of the session's run under way: from its newest user message on."""
        return current_run_ids(self.store, session_id)

    def where(self, filters: Filters) -> tuple[str, list[Any]]:
        """The filters as a condition over `msg m JOIN session s` (a team archive adds who wrote it)."""
        return filter_sql(filters, self.store)

    def _avg_len(self) -> float:
        """Mean `ranking.doc_tokens` of the archive's indexed messages, from `AVG_LEN_SAMPLE` of them
        spread evenly over its ids; cached with the df cache.

        Spread, not the newest: an archive's newest messages may be all of one kind (a night of
        Chinese classics imported last, mean 414 tokens, where the chats asked about held ~30), and
        BM25 normalizes by the collection's mean, as FTS5's bm25 does (bench/quality.py, histories
        with long assistant replies: R@1 0.17 under bm25's 0.24 with the newest 500)."""
        if self._avg is None or self._avg[0] != self.df_cache.generation:
            self._avg = (self.df_cache.generation, self._sampled_length())
        return self._avg[1]

    def _sampled_length(self) -> float:
        """The mean `ranking.doc_tokens` of the `_spread_sample` (1.0 for an empty archive)."""
        lengths = self._token_lengths(self._spread_sample(), {})
        return sum(lengths.values()) / len(lengths) if lengths else 1.0

    def _spread_sample(self) -> list[int]:
        """Up to `AVG_LEN_SAMPLE` indexed message ids, evenly spread from the first to the last."""
        low = int(self.store.scalar("SELECT coalesce(min(id), 0) FROM msg") or 0)
        high = self.store.max_msg_id()
        wanted = ranking.spread_ids(low, high, AVG_LEN_SAMPLE)
        sql = f"SELECT id FROM msg WHERE {self.store.sql_in_list('id')} AND indexed"
        ids = [int(r[0]) for r in self.store.rows(sql, (self.store.list_param(wanted),))]
        if len(ids) < AVG_LEN_SAMPLE // 4:  # ids far apart (many forgotten): the newest, as before
            sql = "SELECT id FROM msg WHERE indexed ORDER BY id DESC LIMIT ?"
            ids = [int(r[0]) for r in self.store.rows(sql, (AVG_LEN_SAMPLE,))]
        return ids

    def _token_lengths(self, ids: list[int], texts: dict[int, str]) -> dict[int, int]:
        """msg id -> `ranking.doc_tokens`: kept by the index where the backend has it, else counted."""
        known = self.store.msg_token_counts(ids)
        missing = [i for i in ids if i not in known and i not in texts]
        if missing:
            sql = f"SELECT id, text FROM msg WHERE {self.store.sql_in_list('id')}"
            texts = {
                **texts,
                **{int(i): decode_text(t) for i, t in self.store.rows(sql, (self.store.list_param(missing),))},
            }
        return {i: known[i] if i in known else ranking.doc_tokens(texts.get(i, "")) for i in ids}

    def session_rows(self, ids: list[str]) -> dict[str, tuple[int, int, str | None]]:
        """session id -> (started_at, last_at, first user message)."""
        if not ids:
            return {}
        sql = f"SELECT id, started_at, last_at, first_user FROM session WHERE {self.store.sql_in_list('id')}"
        return {str(r[0]): (int(r[1]), int(r[2]), r[3]) for r in self.store.rows(sql, (self.store.list_param(ids),))}

    def _fetch(self, ids: list[int], filters: Filters) -> list[dict[str, Any]]:
        if not ids:
            return []
        where, fparams = self.where(filters)
        sql = f"""SELECT m.id, m.session_id, m.seq, m.ts, m.role, m.text, s.project, s.cwd, s.name, m.hash
                  FROM msg m JOIN session s ON s.id = m.session_id
                  WHERE {self.store.sql_in_list("m.id")} AND {where}"""
        keys = ("id", "session_id", "seq", "ts", "role", "text", "project", "cwd", "name")
        out = []
        for r in self.store.rows(sql, [self.store.list_param(ids), *fparams]):
            text, lower = self._text(int(r[0]), str(r[9]), r[5])
            out.append({**dict(zip(keys, (*r[:5], text, *r[6:9]), strict=True)), "lower": lower})
        return out

    def _text(self, msg_id: int, content_hash: str, stored: str | bytes | None) -> tuple[str, str]:
        """A candidate's text and its `normalize_lower` form, from the cache or decoded now."""
        key = (msg_id, content_hash)
        cached = self._texts.get(key)
        if cached is not None:
            self._texts.move_to_end(key)
            return cached
        text = decode_text(stored)
        cached = self._texts[key] = (text, normalize_lower(text))
        if len(self._texts) > TEXT_CACHE:
            self._texts.popitem(last=False)
        return cached


@dataclass
class SessionHit:
    """One session that talked about the query, headed by its first user message."""

    session_id: str
    project: str
    cwd: str
    name: str | None
    headline: str
    started_at: int
    last_at: int
    score: float
    hits: int  # matching messages among the candidates
    best: Hit

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "project": self.project,
            "cwd": self.cwd,
            "name": self.name,
            "headline": self.headline,
            "started_at": self.started_at,
            "last_at": self.last_at,
            "score": round(self.score, 4),
            "hits": self.hits,
            "best": self.best.to_dict(),
        }


SESSION_MESSAGE_HITS = MAX_LIMIT  # messages ranked before grouping them into sessions
HEADLINE_CHARS = 120


def rank_sessions(searcher: Searcher, query: str, limit: int = 10, filters: Filters | None = None) -> list[SessionHit]:
    """Sessions ranked by `ranking.session_score` over their best-ranked messages."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    hits = searcher.search(query, limit=SESSION_MESSAGE_HITS, filters=filters)
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        groups.setdefault(hit.session_id, []).append(hit)
    # a searcher that fuses two sides scores sessions itself (`vectors.hybrid.HybridSearcher`)
    scorer = getattr(searcher, "session_scores", None)
    scores = scorer(groups) if scorer else {sid: ranking.session_score(h.score for h in g) for sid, g in groups.items()}
    ranked = sorted(groups.values(), key=lambda g: (scores[g[0].session_id], g[0].ts), reverse=True)[:limit]
    info = searcher.session_rows([g[0].session_id for g in ranked])
    out = []
    for group in ranked:
        sid = group[0].session_id
        started, last, first_user = info.get(sid, (group[0].ts, group[0].ts, None))
        headline = " ".join((first_user or group[0].session_name or "").split())
        out.append(
            SessionHit(
                session_id=sid,
                project=group[0].project,
                cwd=group[0].cwd,
                name=group[0].session_name,
                headline=headline[:HEADLINE_CHARS] + ("…" if len(headline) > HEADLINE_CHARS else ""),
                started_at=started,
                last_at=last,
                score=scores[sid],
                hits=len(group),
                best=group[0],
            )
        )
    return out


def current_run_ids(store: Store, session_id: str) -> tuple[int, ...]:
    """The messages of a session's run under way (its newest user message and everything after it):
    a model searching from inside a run never finds the prompt it answers, its own calls or their
    results. Read inside the caller's transaction."""
    opening = store.rows(
        "SELECT ts, seq FROM msg WHERE session_id = ? AND role = 'user' ORDER BY ts DESC, seq DESC LIMIT 1",
        (session_id,),
    )
    if not opening:
        return ()
    ts, seq = int(opening[0][0]), int(opening[0][1])
    rows = store.rows(
        "SELECT id FROM msg WHERE session_id = ? AND (ts > ? OR (ts = ? AND seq >= ?))", (session_id, ts, ts, seq)
    )
    return tuple(sorted(int(r[0]) for r in rows))


def filter_sql(f: Filters, store: Store) -> tuple[str, list[Any]]:
    """A WHERE condition over `msg m` and `session s` for the filters, with its parameters (both backends)."""
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    if f.project:
        clauses.append("(s.project = ? OR s.cwd = ? OR s.cwd LIKE ? ESCAPE '\\')")
        escaped = f.project.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params += [f.project, f.project, "%/" + escaped]
    scalars = (("m.ts >= ?", f.since_ms), ("m.ts < ?", f.until_ms), ("m.session_id = ?", f.session_id))
    for condition, value in (*scalars, ("s.agent = ?", f.agent)):
        if value:
            clauses.append(condition)
            params.append(value)
    for column, values in (("m.role", f.roles), ("m.session_id", f.sessions), ("m.entry_id", f.entry_ids)):
        if values:
            clauses.append(store.sql_in_list(column))
            params.append(store.list_param(values))
    if f.kinds:
        clauses.append(runsearch.kind_sql(f.kinds, store))
    if f.path:
        sql, path_params = runsearch.path_sql_for_messages(f.path)
        clauses.append(sql)
        params += path_params
    return " AND ".join(clauses), params


def _hit(row: dict[str, Any], score: float, needles: list[list[str]]) -> Hit:
    return Hit(
        msg_id=row["id"],
        session_id=row["session_id"],
        seq=row["seq"],
        role=row["role"],
        ts=row["ts"],
        project=row["project"],
        score=score,
        cwd=row["cwd"],
        session_name=row["name"],
        text=row["text"],
        needles=needles,
    )


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, (time.perf_counter() - start) * 1000
