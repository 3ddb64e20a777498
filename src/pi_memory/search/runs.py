"""The summary track of two-track search, and the run-aware filters of the content track.

Design idea (spec 004 §3): scanning is cheap when it reads tables of contents,
not pages. `scope="summary"` searches only the run summaries (their own
contentless FTS5 index, `run_fts`, cut by the same tokenizer as messages) and
returns one line per run; `scope="content"` is the message search. Both are
bounded the same way: candidates are the runs of the rarest query tokens (a
postings budget) and the newest runs holding any other token (`_candidates`),
scored exactly by `scoring.score_documents` (the message track's scoring: BM25
over every query token, phrases, the typed spelling first) over the summary
text, recency breaking ties.

The content track gains filters by kind (`tool_call` = an assistant message
that called a tool) and by file path (messages and runs that read or changed
it, from `run_file`); they are SQL fragments over `msg m`, used by `search.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core import ranking, scoring
from ..core.summary import fields_search_text
from ..core.text import QueryToken, normalize, normalize_lower, query_tokens, typed_forms, typed_runs
from ..errors import BadInput
from ..runs.table import RUN_COLUMNS, RunInfo, run_filters, run_from_row
from ..storage.store import NO_FILTER, Store
from .common import DfCache, rarest_within

RARE_RUN_POSTINGS = 2_000  # runs of the rarest query tokens read in full per query
# Of those, the ones holding the most weight are scored, and the newest holding the other tokens:
# as many as the message track scores (`messages.RARE_CANDIDATES`, `RECENT_CANDIDATES`). At 200 and
# 200 the summary track read and scored ~300 runs a query: p95 27 ms at 30k messages
# (bench/results/pg_scale.json), against the message track's ~5.
RARE_RUN_CANDIDATES = 30
RECENT_RUN_CANDIDATES = 15
RECENT_ANCHORS = 3  # the recent track's anchors, as the message track's (spec 000 §7.1)
DF_EXACT_CAP = 5_000  # run counts are exact up to here, estimated above (`Store.run_summary_df`)
AVG_LEN_SAMPLE = 500  # newest runs whose mean summary length stands for the archive's
MAX_LIMIT = 100
# One vocabulary of message kinds for `search --kind` and `recall --kind` (and the recall tool).
KINDS = ("user", "assistant", "tool_call", "tool_result", "tool_error", "bash", "custom", "summary")
_KIND_SQL = {
    "user": "m.role = 'user'",
    "assistant": "m.role = 'assistant'",
    "tool_call": "(m.role = 'assistant' AND {has_tools})",
    "tool_result": "m.role IN ('tool_result', 'tool_error')",  # every tool output, failed ones included
    "tool_error": "m.role = 'tool_error'",
    "bash": "m.role = 'bash'",
    "custom": "m.role = 'custom'",
    "summary": "m.role = 'summary'",
}


@dataclass
class RunHit:
    run: RunInfo
    score: float

    def to_dict(self) -> dict[str, Any]:
        r = self.run
        return {
            "run": r.address,
            "session_id": r.session_id,
            "start_ts": r.start_ts,
            "project": r.project,
            "status": r.status,
            "summary": r.summary,
            "score": round(self.score, 4),
        }


# --- filters shared with the content track -------------------------------------------


def check_kinds(kinds: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise BadInput(f"unknown kind {unknown[0]!r}: use one of {', '.join(KINDS)}")
    return kinds


def kind_sql(kinds: tuple[str, ...], store: Store) -> str:
    """An SQL condition over `msg m`: the message is of one of these kinds."""
    has_tools = store.sql_json_has("m.meta", "tools")
    return "(" + " OR ".join(_KIND_SQL[k].format(has_tools=has_tools) for k in check_kinds(kinds)) + ")"


def path_match_sql(column: str) -> str:
    """`column` names the given path: equal, a suffix at a `/`, or the given path ends with it."""
    return f"({column} = ? OR {column} LIKE ? ESCAPE '\\' OR ? LIKE '%/' || {column})"


def path_params(path: str) -> list[Any]:
    escaped = path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return [path, "%/" + escaped, path]


def path_sql_for_messages(path: str) -> tuple[str, list[Any]]:
    """Messages that touched a path: the tool calls naming it and their results."""
    sql = f"""m.id IN (SELECT f.msg_id FROM run_file f WHERE {path_match_sql("f.path")})"""
    return sql, path_params(path)


# --- the summary track ----------------------------------------------------------------


@dataclass(frozen=True)
class RunFilters:
    """What a summary-track search keeps (the defaults: every run but those that only asked the
    archive). `extra` is one more condition over `run r` (a team archive's who-wrote-it filter, a
    time bound, the asking run left out); `echoes` keeps the runs that only asked the archive
    (`core.echo`)."""

    project: str | None = None
    since_ms: int | None = None
    session_id: str | None = None
    path: str | None = None
    kinds: tuple[str, ...] = ()
    extra: tuple[str, list[Any]] = ("TRUE", [])
    agent: str | None = None
    echoes: bool = False


def summary_filter_sql(store: Store, f: RunFilters) -> tuple[str, list[Any]]:
    """The summary track's filters as one condition over `run r JOIN session s` (the vector side of a
    hybrid summary search applies the same)."""
    clauses, params = run_filters(f.project, f.since_ms, f.session_id)
    if f.agent:
        clauses.append("s.agent = ?")
        params.append(f.agent)
    if f.path:
        clauses.append(f"r.id IN (SELECT f.run_id FROM run_file f WHERE {path_match_sql('f.path')})")
        params += path_params(f.path)
    if f.kinds:  # runs holding a message of one of these kinds (e.g. runs with a tool error)
        clauses.append(
            f"r.id IN (SELECT rm.run_id FROM run_msg rm JOIN msg m ON m.id = rm.msg_id WHERE {kind_sql(f.kinds, store)})"
        )
    if f.extra[0] != NO_FILTER[0]:  # else the stores' unfiltered plans (no join per candidate)
        clauses.append(f.extra[0])
        params += f.extra[1]
    return " AND ".join(clauses), params


class RunSearcher:
    """The summary track over one archive: `search` ranks runs by their summaries. Like the message
    searcher it keeps, per process, the run counts of the tokens it met and the mean summary length,
    both read again when the runs grew by 2%."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.df_cache = DfCache()
        self._average: tuple[int, float] | None = None  # (df cache generation, mean length in tokens)

    def search(self, query: str, limit: int = 10, filters: RunFilters | None = None) -> list[RunHit]:
        """Runs whose navigation summary matches the query, best first, among those `filters` keep."""
        filters = filters or RunFilters()
        tokens = query_tokens(query)
        if not tokens:
            return []
        store = self.store
        with store.read():
            n_runs = store.counters().get("run_docs", 0)
            self.df_cache.check(n_runs)
            df = {t.text: self._df(t) for t in tokens}
            present = sorted((t for t in tokens if df[t.text] > 0), key=lambda t: (df[t.text], t.text))
            if not present:
                return []
            where, params = summary_filter_sql(store, filters)
            weights = ranking.token_weights(present, df, n_runs, normalize(query))
            # the filters apply while candidates are chosen: a session's old runs are not crowded out
            candidates = _candidates(store, present, df, weights, (where, params), filters.echoes)
            sql = f"""SELECT {RUN_COLUMNS} FROM run r JOIN session s ON s.id = r.session_id
                      WHERE {store.sql_in_list("r.id")} AND {where}"""
            runs = [run_from_row(r) for r in store.rows(sql, [store.list_param(candidates)] + params)]
            lengths = store.run_token_counts([r.id for r in runs])
            average = self._average_length()
        hits = _score(query, runs, present, weights, lengths, average)
        return hits[: max(1, min(int(limit), MAX_LIMIT))]

    def _df(self, token: QueryToken) -> int:
        cached = self.df_cache.get(token.text)
        if cached is None:
            cached = self.store.run_summary_df(token, DF_EXACT_CAP)
            self.df_cache.put(token.text, cached)
        return cached

    def _average_length(self) -> float:
        """The mean summary length (tokens) BM25 normalizes by, cached with the df cache."""
        if self._average is None or self._average[0] != self.df_cache.generation:
            self._average = (self.df_cache.generation, self._sampled_length())
        return self._average[1]

    def _sampled_length(self) -> float:
        """The mean of `AVG_LEN_SAMPLE` summaries' lengths spread over the runs (`run_token_sample`)."""
        sample = self.store.run_token_sample(AVG_LEN_SAMPLE)
        return sum(sample) / len(sample) if sample else 0.0


def _candidates(
    store: Store,
    present: list[QueryToken],
    df: dict[str, int],
    weights: dict[str, float],
    where: tuple[str, list[Any]],
    echoes: bool = False,
) -> list[int]:
    """The runs worth scoring, read in bounded steps whatever the number of runs, as messages are.

    The rare track reads every run holding the rarest tokens (up to `RARE_RUN_POSTINGS` postings in
    all), sums their weights inside the index and keeps the `RARE_RUN_CANDIDATES` holding the most,
    so an old run is found by the one unusual word it has; the recent track adds the newest
    `RECENT_RUN_CANDIDATES` runs holding all of up to three of the other tokens (any of them, when
    none holds them all and the rare track found nothing).
    """
    rare = rarest_within(present, df, RARE_RUN_POSTINGS)
    chosen = store.run_summary_rare([(t, weights[t.text]) for t in rare], RARE_RUN_CANDIDATES, where, echoes)
    common = present[len(rare) :][:RECENT_ANCHORS]
    if common:
        recent = store.run_summary_recent(common, RECENT_RUN_CANDIDATES, where, echoes, all_of=True)
        if not recent and not chosen:
            recent = store.run_summary_recent(common, RECENT_RUN_CANDIDATES, where, echoes)
        chosen += [r for r in recent if r not in chosen]
    return chosen


def _score(
    query: str,
    runs: list[RunInfo],
    present: list[QueryToken],
    weights: dict[str, float],
    lengths: dict[int, int],
    average: float,
) -> list[RunHit]:
    """`scoring.score_documents` (BM25 over every query token, the typed spelling first, phrases)
    over each run's summary text, all at once; newer runs win ties."""
    texts = [fields_search_text(run.fields) for run in runs]
    counted = [float(lengths.get(run.id) or ranking.doc_tokens(text)) for run, text in zip(runs, texts, strict=True)]
    prepared = scoring.prepare(present, weights, normalize(query), typed_forms(query), typed_runs(query))
    results = scoring.score_documents([normalize_lower(t) for t in texts], counted, average or 1.0, prepared)
    scored = [RunHit(run, r.score) for run, r in zip(runs, results, strict=True) if r.score > 0]
    scored.sort(key=lambda h: (h.score, h.run.start_ts, h.run.id), reverse=True)
    return scored
