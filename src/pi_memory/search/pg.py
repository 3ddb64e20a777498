"""Candidate retrieval on PostgreSQL: the same bounded plan as `search.py`, over a GIN index.

Design idea: only the three SQL steps of `Searcher` change; planning (which
tokens are rare, which common), the exact re-rank (`scoring.score_documents`),
recency tie-breaks and snippets are inherited unchanged, so both backends
return the same hits in the same order.

- Document frequency: as SQLite makes it (`Searcher.document_frequency`), exact
  up to `DF_EXACT_CAP`, above it the density among the newest `DF_WINDOW` ids,
  cached per process the same way. The tokens of a query not cached yet are
  counted in one statement (`PgStore.capped_counts`) and those past the cap
  estimated in another (`PgStore.estimate_dfs_from_window`): each would be a
  round trip. ANALYZE's statistics (`pg_stats.most_common_elems`) only say
  which tokens are far past the cap and need no exact count (a count visits a
  heap page per posting).
- Rare track: the full postings of the rarest tokens within SQLite's budget,
  summed by idf weight in SQL, best `RARE_CANDIDATES` kept; echoes left out by
  the row's flag, so each token is one positive GIN term (no recheck).
- Recent track: the newest ids holding all common anchors, within the newest
  `PG_RECENT_WINDOW` ids (`ORDER BY id DESC LIMIT k`). When the anchors are
  expected in many rows of the window, the newest rows are walked backwards
  along the primary key and stop after k matches; when they are expected in
  few, the GIN index finds them. The same ids either way.

The budgets are SQLite's: both backends pick the same candidates and return
the same hits with the same scores (bench/pg_scale.py compares them). A search
runs in one transaction whose settings, counters and newest ids are read in
one round trip (`PgStore.searching`); statements are prepared at first use.
`PgRunSearcher` runs the summary track (`search.runs.RunSearcher`) the same way.
See docs/team-archive.md for the measurements and the plans.

Search filters add who wrote a message: `mine` (the connected role), `team`
(members of a PostgreSQL group role) and `authors` (display names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..core import ranking
from ..core.ranking import DF_EXACT_CAP, DF_WINDOW
from ..core.stems import variants
from ..core.text import QueryToken, query_tokens, surface_tokens
from ..storage.pg.sql import indexable, lexeme, tsquery, weighted_matches
from ..storage.pg.store import SURELY_PAST_CAP
from .messages import (
    AVG_LEN_SAMPLE,
    RARE_POSTINGS_BUDGET,
    RECENT_CANDIDATES,
    RECENT_WINDOW,
    Filters,
    Hit,
    QueryPlan,
    Searcher,
    not_among,
    rare_terms,
    typed_as_folded,
)
from .messages import filter_sql as shared_filter_sql
from .runs import AVG_LEN_SAMPLE as RUN_AVG_LEN_SAMPLE
from .runs import DF_EXACT_CAP as RUN_DF_EXACT_CAP
from .runs import RunFilters, RunHit, RunSearcher

if TYPE_CHECKING:
    from ..storage.pg.store import PgStore
    from ..storage.store import Store


PG_DF_EXACT_CAP = DF_EXACT_CAP  # count postings exactly up to here, estimate above (as SQLite)
PG_DF_WINDOW = DF_WINDOW  # newest ids used to estimate the df of a very common token (as SQLite)
# the rare track's budget and the recent track's window are SQLite's (`messages`): the same plan,
# the same candidates, the same hits
PG_RARE_POSTINGS_BUDGET = RARE_POSTINGS_BUDGET
PG_RECENT_WINDOW = RECENT_WINDOW
WALK_FROM_EXPECTED = 4 * RECENT_CANDIDATES  # expected matches in the window above which walking wins
# (a search's settings, the counters and the newest ids: `PgStore.searching`, one round trip)


@dataclass
class TeamFilters(Filters):
    mine: bool = False
    team: str | None = None
    authors: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return super().active or self.mine or bool(self.team) or bool(self.authors)


def filter_sql(f: Filters, store: PgStore) -> tuple[str, list[Any]]:
    """The shared filters (`search.filter_sql`), plus who wrote the message."""
    where, params = shared_filter_sql(f, cast("Store", store))
    clauses = [where]
    if isinstance(f, TeamFilters):
        _team_clauses(f, clauses, params)
    return " AND ".join(clauses), params


def _team_clauses(f: TeamFilters, clauses: list[str], params: list[Any], alias: str = "m") -> None:
    """Who wrote the rows of `alias` (msg m, or run r for the summary track)."""
    if f.mine:
        clauses.append(f"{alias}.written_by = current_user")
    if f.team:
        clauses.append(
            f"""{alias}.written_by IN (SELECT member.rolname FROM pg_roles member, pg_roles grp
                                WHERE grp.rolname = %s AND pg_has_role(member.oid, grp.oid, 'MEMBER'))"""
        )
        params.append(f.team)
    if f.authors:
        clauses.append(f"{alias}.author = ANY(%s)")
        params.append(list(f.authors))


def echo_sql(filters: Filters, alias: str = "") -> str:
    """Echoes (`core.echo`) left out by the row's flag, unless they are asked for: an indexed row holds
    the echo lexeme exactly when its `echo` is set, and a condition on a column keeps the tsquery one
    positive term, which the GIN index answers without reading the row's tokens again (a `!` in the
    tsquery makes every match a recheck: the row's tsvector read and decompressed)."""
    return "TRUE" if filters.include_echoes else f"{alias}echo = 0"


def writer_filter(f: TeamFilters, alias: str) -> tuple[str, list[Any]]:
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    _team_clauses(f, clauses, params, alias)
    return " AND ".join(clauses), params


class PgSearcher(Searcher):
    """`Searcher` with its SQL steps answered by PostgreSQL."""

    def __init__(self, store: PgStore) -> None:
        # the inherited code calls only read(), counters() and max_msg_id(), which PgStore provides
        super().__init__(cast("Store", store))
        self.pg = store
        self._df: dict[str, int] = {}
        self._n_docs = 0
        self._shares: dict[str, float] | None = None
        self._shares_at = -2

    def search(self, query: str, limit: int = 10, filters: Filters | None = None) -> list[Hit]:
        with self.pg.searching():
            return super().search(query, limit=limit, filters=filters)

    def where(self, filters: Filters) -> tuple[str, list[Any]]:
        return filter_sql(filters, self.pg)

    def plan(self, query: str) -> QueryPlan:
        """The SQLite plan (same budgets), its document frequencies counted in one statement first
        (SQLite counts each in-process; here each would be a round trip), kept for the recent track."""
        n_docs = self.pg.counters().get("indexed_docs", 0)
        self.df_cache.check(n_docs)
        tokens = query_tokens(query)
        forms = [QueryToken(form, "word") for t in tokens if t.kind == "word" for form in variants(t.text)]
        # and each character as typed where the query's script folds (`t:个`), which the plan asks
        # for one at a time: a Chinese question has one for nearly every character (each a round trip)
        typed = [QueryToken(ch, "surface") for ch in typed_as_folded(query, tokens) if len(ch) == 1]
        self._frequencies(tokens + surface_tokens(query) + forms + typed, n_docs)  # other forms: `form_shares`
        plan = super().plan(query)
        self._df, self._n_docs = plan.df, plan.n_docs
        return plan

    def common_shares(self, n_docs: int) -> dict[str, float]:
        """token -> share of documents, for the tokens ANALYZE found most common (reloaded as the df cache is)."""
        if self._shares is None or self._shares_at != self.df_cache._at_docs:
            self._shares = self.pg.analyzed_token_shares("msg")
            self._shares_at = self.df_cache._at_docs
        return self._shares

    def document_frequency(self, token: QueryToken, n_docs: int) -> int:
        cached = self.df_cache.get(lexeme(token))  # `t:構` (as typed) apart from `构`
        if cached is not None:
            return cached
        return self._frequencies([token], n_docs)[lexeme(token)]

    def _frequencies(self, tokens: list[QueryToken], n_docs: int) -> dict[str, int]:
        """The document frequencies of tokens not cached yet, as SQLite makes them (`Searcher.
        document_frequency`): exact up to `DF_EXACT_CAP`, above it the density among the newest
        `DF_WINDOW` ids. What other searchers left with the server comes first, in one round trip
        (m016: a fresh process counts only what nobody asked about); the exact counts of the rest go
        in one statement, and a token ANALYZE's statistics put far past the cap is not counted
        (thousands of heap pages), only estimated."""
        todo = {lexeme(t): t for t in tokens if self.df_cache.get(lexeme(t)) is None}
        out = {key: 0 for key, t in todo.items() if not indexable(t.text)}  # longer than any lexeme
        usable = [t for key, t in todo.items() if key not in out]
        kept = self.pg.kept_dfs("msg", usable, PG_DF_EXACT_CAP, PG_DF_WINDOW, PG_DF_EXACT_CAP + 1)
        out.update({lexeme(t): n for t, n in zip(usable, kept, strict=True) if n is not None})
        usable = [t for t in usable if lexeme(t) not in out]  # what no searcher left with the server
        shares = self.common_shares(n_docs) if usable else {}
        to_count = [t for t in usable if shares.get(lexeme(t), 0.0) * n_docs <= SURELY_PAST_CAP * PG_DF_EXACT_CAP]
        counts = self.pg.capped_counts("msg", to_count, PG_DF_EXACT_CAP)
        out.update({lexeme(t): n for t, n in zip(to_count, counts, strict=True)})
        past = [t for t in usable if out.get(lexeme(t), PG_DF_EXACT_CAP + 1) > PG_DF_EXACT_CAP]
        estimates = self.pg.estimate_dfs_from_window("msg", past, PG_DF_WINDOW, floor=PG_DF_EXACT_CAP + 1)
        out.update({lexeme(t): n for t, n in zip(past, estimates, strict=True)})
        for key, value in out.items():
            self.df_cache.put(key, value)
        return out

    def _sampled_length(self) -> float:
        """The mean length as `Searcher._sampled_length` samples it, from the server, which keeps it for
        every searcher (m016); sampled here as on SQLite when a sampled message is older than its length."""
        mean = self.pg.mean_length("msg", AVG_LEN_SAMPLE)
        return super()._sampled_length() if mean is None else mean

    def _rare_candidates(self, plan: QueryPlan, weights: dict[str, float], filters: Filters) -> list[int]:
        if not plan.rare and not plan.exact_typed:
            return []
        terms = rare_terms(plan, weights)
        queries = []
        for term in terms:  # as typed: none of the other spellings as typed (`t:` lexemes)
            query = tsquery([term.token])
            if term.unless_typed:
                query += f" & !({tsquery([QueryToken(ch, 'surface') for ch in term.unless_typed], '|')})"
            queries.append(query)
        outside, oparams = not_among("id", filters.exclude_ids, cast("Store", self.pg))
        matches = weighted_matches("msg", f"{echo_sql(filters)} AND {outside}")
        params: list[Any] = [queries, [term.weight for term in terms], *oparams]
        sql = f"SELECT c.id FROM ({matches}) c"
        if filters.active:
            where, fparams = self.where(filters)
            sql += f" JOIN msg m ON m.id = c.id JOIN session s ON s.id = m.session_id WHERE {where}"
            params += fparams
        sql += " ORDER BY c.s DESC, c.id DESC LIMIT %s"
        return [int(r[0]) for r in self.pg.rows(sql, params + [self.rare_candidates])]

    def _recent_candidates(
        self, anchors: list[QueryToken], filters: Filters, limit: int, use_or: bool = False
    ) -> list[int]:
        if not anchors:
            return []
        low = max(0, self.pg.max_msg_id() - PG_RECENT_WINDOW)
        query = tsquery(anchors, "|" if use_or else "&")
        # `IS TRUE` hides the match from the GIN index, so the plan is the backward walk along the key
        walk = self._expected_in_window(anchors, use_or) >= WALK_FROM_EXPECTED
        match = "(m.tokens @@ %s::tsquery) IS TRUE" if walk else "m.tokens @@ %s::tsquery"
        where, fparams = self.where(filters)
        outside, oparams = not_among("m.id", filters.exclude_ids, cast("Store", self.pg))
        sql = "SELECT m.id FROM msg m"
        if filters.active:
            sql += " JOIN session s ON s.id = m.session_id"
        sql += f" WHERE {match} AND {echo_sql(filters, 'm.')} AND m.id > %s AND {outside} AND {where}"
        sql += " ORDER BY m.id DESC LIMIT %s"
        return [int(r[0]) for r in self.pg.rows(sql, [query, low] + oparams + fparams + [limit])]

    def _expected_in_window(self, anchors: list[QueryToken], use_or: bool) -> float:
        """Rows of the window expected to hold the anchors (`ranking.expected_matches`)."""
        return ranking.expected_matches(anchors, self._df, self._n_docs, PG_RECENT_WINDOW, all_of=not use_or)


class PgRunSearcher(RunSearcher):
    """The summary track (`RunSearcher`) with PostgreSQL's way of running it: one transaction whose
    settings, counters and newest ids are read in one round trip, and the run counts of a query's
    tokens counted in one statement before the inherited code asks for them one at a time."""

    def __init__(self, store: PgStore) -> None:
        super().__init__(cast("Store", store))
        self.pg = store

    def search(self, query: str, limit: int = 10, filters: RunFilters | None = None) -> list[RunHit]:
        with self.pg.searching():
            self.df_cache.check(self.pg.counters().get("run_docs", 0))
            todo = [t for t in query_tokens(query) if self.df_cache.get(t.text) is None]
            for text, count in self.pg.run_summary_dfs(todo, RUN_DF_EXACT_CAP).items():
                self.df_cache.put(text, count)
            return super().search(query, limit, filters)

    def _sampled_length(self) -> float:
        """The mean summary length as `RunSearcher._sampled_length` samples it, from the server, which
        keeps it for every searcher (m016)."""
        mean = self.pg.mean_length("run", RUN_AVG_LEN_SAMPLE)
        return super()._sampled_length() if mean is None else mean
