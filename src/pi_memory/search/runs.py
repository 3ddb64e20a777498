"""The summary track of two-track search, and the run-aware filters of the content track.

Design idea (spec 004 §3): scanning is cheap when it reads tables of contents,
not pages. `scope="summary"` searches only the run summaries (their own
contentless FTS5 index, `run_fts`, cut by the same tokenizer as messages) and
returns one line per run; `scope="content"` is the message search. Both are
bounded the same way: candidates are the runs of the rarest query tokens (a
postings budget) and the newest runs holding any other token (`_candidates`),
scored exactly by `ranking.score_text` (BM25 plus a phrase bonus) over the
summary text, recency breaking ties.

The content track gains filters by kind (`tool_call` = an assistant message
that called a tool) and by file path (messages and runs that read or changed
it, from `run_file`); they are SQL fragments over `msg m`, used by `search.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core import ranking
from ..core.summary import fields_search_text
from ..core.text import QueryToken, normalize, query_tokens
from ..errors import BadInput
from ..runs.table import RUN_COLUMNS, RunInfo, run_filters, run_from_row
from ..storage.store import Store

RARE_RUN_POSTINGS = 2_000  # runs of the rarest query tokens read in full per query
RARE_RUN_CANDIDATES = 200  # of those, the ones holding the most weight are scored
RECENT_RUN_CANDIDATES = 200  # newest runs holding any other query token, scored too
DF_CAP = 20_000  # document frequencies are counted exactly up to here
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


def _filters(
    store: Store,
    project: str | None,
    since_ms: int | None,
    session_id: str | None,
    path: str | None,
    kinds: tuple[str, ...] = (),
    agent: str | None = None,
) -> tuple[str, list[Any]]:
    clauses, params = run_filters(project, since_ms, session_id)
    if agent:
        clauses.append("s.agent = ?")
        params.append(agent)
    if path:
        clauses.append(f"r.id IN (SELECT f.run_id FROM run_file f WHERE {path_match_sql('f.path')})")
        params += path_params(path)
    if kinds:  # runs holding a message of one of these kinds (e.g. runs with a tool error)
        clauses.append(
            f"r.id IN (SELECT rm.run_id FROM run_msg rm JOIN msg m ON m.id = rm.msg_id WHERE {kind_sql(kinds, store)})"
        )
    return " AND ".join(clauses), params


def search_summaries(
    store: Store,
    query: str,
    limit: int = 10,
    project: str | None = None,
    since_ms: int | None = None,
    session_id: str | None = None,
    path: str | None = None,
    kinds: tuple[str, ...] = (),
    extra: tuple[str, list[Any]] = ("TRUE", []),
    agent: str | None = None,
    echoes: bool = False,
) -> list[RunHit]:
    """Runs whose navigation summary matches the query, best first.

    `extra` is one more condition over `run r` (a team archive's who-wrote-it filter). Runs that only
    asked the archive (`core.echo`) are left out unless `echoes`.
    """
    tokens = query_tokens(query)
    if not tokens:
        return []
    with store.read():
        counters = store.counters()
        df = {t.text: store.run_summary_df(t, DF_CAP) for t in tokens}
        present = [t for t in tokens if df[t.text] > 0]
        if not present:
            return []
        where, params = _filters(store, project, since_ms, session_id, path, kinds, agent)
        where, params = f"{where} AND {extra[0]}", [*params, *extra[1]]
        # the filters apply while candidates are chosen: a session's old runs are not crowded out
        candidates = _candidates(store, present, df, counters.get("run_docs", 0), (where, params), echoes)
        sql = f"""SELECT {RUN_COLUMNS} FROM run r JOIN session s ON s.id = r.session_id
                  WHERE {store.sql_in_list("r.id")} AND {where}"""
        rows = store.rows(sql, [store.list_param(candidates)] + params)
    hits = _score(query, [run_from_row(r) for r in rows], tokens, present, df, counters)
    return hits[: max(1, min(int(limit), MAX_LIMIT))]


def _candidates(
    store: Store,
    present: list[QueryToken],
    df: dict[str, int],
    n_runs: int,
    where: tuple[str, list[Any]],
    echoes: bool = False,
) -> list[int]:
    """The runs worth scoring, read in bounded steps whatever the number of runs.

    The rare track reads every run holding the rarest tokens (up to `RARE_RUN_POSTINGS` in all)
    and keeps the `RARE_RUN_CANDIDATES` holding the most weight of them, so an old run is found by
    the one unusual word it has; the recent track adds the newest `RECENT_RUN_CANDIDATES` runs
    holding any other token. Scoring each candidate exactly costs tens of µs in Python: this keeps
    it to a few hundred runs per query.
    """
    ordered = sorted(present, key=lambda t: df[t.text])
    rare: list[QueryToken] = []
    budget = RARE_RUN_POSTINGS
    for t in ordered:
        if df[t.text] > budget:
            break
        rare.append(t)
        budget -= df[t.text]
    weight: dict[int, float] = {}
    for t in rare:
        w = ranking.token_weight(t, df[t.text], n_runs)
        for run_id in store.run_summary_postings(t, df[t.text], where, echoes):
            weight[run_id] = weight.get(run_id, 0.0) + w
    chosen = sorted(weight, key=lambda i: (weight[i], i), reverse=True)[:RARE_RUN_CANDIDATES]
    common = ordered[len(rare) :]
    if common:
        chosen += store.run_summary_recent(common, RECENT_RUN_CANDIDATES, where, echoes)
    return sorted(set(chosen), reverse=True)


def _score(
    query: str,
    runs: list[RunInfo],
    tokens: list[QueryToken],
    present: list[QueryToken],
    df: dict[str, int],
    counters: dict[str, int],
) -> list[RunHit]:
    """BM25 plus phrase bonus over each run's summary text; newer runs win ties."""
    n_docs = counters.get("run_docs", 0)
    weights = {t.text: ranking.token_weight(t, df[t.text], n_docs) for t in tokens}
    avg = counters.get("run_chars", 0) / n_docs if n_docs else 1.0
    phrases = ranking.query_phrases(normalize(query), weights)
    scored = []
    for run in runs:
        score = ranking.score_text(normalize(fields_search_text(run.fields)), present, weights, phrases, avg)
        if score > 0:
            scored.append(RunHit(run, score))
    scored.sort(key=lambda h: (h.score, h.run.start_ts, h.run.id), reverse=True)
    return scored
