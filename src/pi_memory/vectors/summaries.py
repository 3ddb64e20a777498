"""The summary track with vectors: run summaries' lexical scores fused with their cosines.

Design idea: the same fusion as the message search (`fuse.mix`, the same weights and depths), over
the summary track's own candidates: the lexical `RunSearcher`'s hits (every filter and echo rule
applied by it) and the run summaries nearest the question among those the same filters allow. An
archive holds a run per user message, a few thousand where it holds tens of thousands of messages,
so the vector side is an exact scan: every run summary's int8 vector, read from the archive once
and kept in memory until they change (`RunVectors`; 3,000 runs are ~1.2 MB and one matrix-vector
product), scored against the query, and the best of those the filters allow kept (the filters are
one query over `run`, the same condition as the lexical side's). No index, no approximation:
nothing to rebuild and nothing to go stale. (Its time is not measured yet: bench/ has no archive
with embedded summaries.)

`mode`: `hybrid` (fused), `semantic` (the vector side alone); `lexical` never reaches here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.echo import ECHO_TOKEN
from ..runs.table import RUN_COLUMNS, run_from_row
from ..search.runs import MAX_LIMIT, RunFilters, RunHit, RunSearcher, summary_filter_sql
from ..storage.pg.vectors import PgVectors
from ..storage.store import Store
from . import fuse
from .codes import int8_scores
from .hybrid import FUSE_DEPTH, LEXICAL_DEPTH, VectorSearch
from .keyed import KIND_RUN
from .model import DIM


class RunVectors:
    """Every run summary vector of one model, held in memory until the archive's change."""

    def __init__(self, store: Store, model: str) -> None:
        self.store = store
        self.model = model
        self._stamp: tuple[Any, ...] | None = None
        self._refs = np.zeros(0, dtype=np.int64)
        self._codes = np.zeros((0, DIM), dtype=np.int8)
        self._scales = np.zeros(0, dtype=np.float32)

    def nearest(
        self, query_vector: np.ndarray, allowed: Allowed, k: int, also: list[int]
    ) -> tuple[dict[int, float], dict[int, float]]:
        """The `k` allowed runs nearest the query (run id -> cosine, best first), and the cosines of
        the runs `also` names (the lexical hits) that have a vector."""
        self._load()
        scores = int8_scores(query_vector, self._codes, self._scales)
        rows = np.arange(len(self._refs)) if allowed.every else np.flatnonzero(allowed.mask(self._refs))
        if len(rows) > k:
            rows = rows[np.argpartition(-scores[rows], k - 1)[:k]]
        rows = rows[np.argsort(-scores[rows], kind="stable")]
        nearest = {int(self._refs[i]): float(scores[i]) for i in rows}
        return nearest, self._cosines_of(scores, also)

    def _cosines_of(self, scores: np.ndarray, runs: list[int]) -> dict[int, float]:
        """The cosines of these runs (those that have a vector), found in the sorted refs: no map
        of every run built per search (tens of thousands of runs in a large archive)."""
        if not runs or not len(self._refs):
            return {}
        asked = np.asarray(runs, dtype=np.int64)
        at = np.minimum(np.searchsorted(self._refs, asked), len(self._refs) - 1)
        held = self._refs[at] == asked
        return {int(r): float(scores[i]) for r, i, ok in zip(asked, at, held, strict=True) if ok}

    def _load(self) -> None:
        """(Re)read the vectors when their count or newest row changed (a rewrite gets a new row id;
        any model's rows counted: read from the `(kind, ref)` index alone, no vector touched)."""
        stamp = tuple(self.store.rows("SELECT count(*), coalesce(max(id), 0) FROM vec WHERE kind = ?", (KIND_RUN,))[0])
        if stamp == self._stamp:
            return
        sql = "SELECT ref, vec, scale FROM vec WHERE kind = ? AND model = ? ORDER BY ref"  # sorted: `_cosines_of`
        rows = self.store.rows(sql, (KIND_RUN, self.model))
        self._refs = np.array([int(r[0]) for r in rows], dtype=np.int64)
        self._codes = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.int8).reshape(len(rows), DIM)
        self._scales = np.array([r[2] for r in rows], dtype=np.float32)
        self._stamp = stamp


@dataclass
class Allowed:
    """The runs a search may return: those listed (`only`), or all but those listed (`but`)."""

    only: set[int] | None = None
    but: set[int] = field(default_factory=set)

    @property
    def every(self) -> bool:
        return self.only is None and not self.but

    def mask(self, refs: np.ndarray) -> np.ndarray:
        if self.only is not None:
            return np.isin(refs, np.fromiter(self.only, dtype=np.int64, count=len(self.only)))
        return ~np.isin(refs, np.fromiter(self.but, dtype=np.int64, count=len(self.but)))


def allowed_runs(store: Store, where: tuple[str, list[Any]], echoes: bool) -> Allowed:
    """The runs the summary track's filters allow: the same condition, and the same echo rule (a run
    that only asked the archive carries `ECHO_TOKEN` in the summary index) as its lexical side.
    Unfiltered, only the echoes are read (a short posting list), not every run's id."""
    echo_sql, echo_params = "SELECT rowid FROM run_fts WHERE run_fts MATCH ?", [f'"{ECHO_TOKEN}"']
    if isinstance(store, PgVectors):  # a team archive: the summary's tokens are the run's tsvector
        echo_sql, echo_params = "SELECT id FROM run WHERE tokens @@ ?::tsquery", [f"'{ECHO_TOKEN}'"]
    if where[0].strip() == "TRUE" and not where[1]:
        return Allowed(but=set() if echoes else {int(r[0]) for r in store.rows(echo_sql, echo_params)})
    sql = f"SELECT r.id FROM run r JOIN session s ON s.id = r.session_id WHERE {where[0]}"
    params = list(where[1])
    if not echoes:
        sql += f" AND r.id NOT IN ({echo_sql})"
        params += echo_params
    return Allowed(only={int(r[0]) for r in store.rows(sql, params)})


class HybridRunSearcher:
    """`RunSearcher.search`'s shape, fused with the run summaries' vectors."""

    def __init__(self, lexical: RunSearcher, vectors: VectorSearch, runs: RunVectors, mode: str) -> None:
        self.lexical = lexical
        self.vectors = vectors
        self.runs = runs
        self.mode = mode
        self.store = lexical.store

    def search(self, query: str, limit: int = 10, filters: RunFilters | None = None) -> list[RunHit]:
        filters = filters or RunFilters()
        limit = max(1, min(int(limit), MAX_LIMIT))
        pending_vector = self.vectors.embed_query(query)
        lexical: list[RunHit] = []
        if self.mode == "hybrid":
            depth = max(limit, LEXICAL_DEPTH)
            lexical = self.lexical.search(query, depth, filters)
        query_vector = pending_vector.result()
        with self.store.read():
            where = summary_filter_sql(self.store, filters)
            allowed = allowed_runs(self.store, where, filters.echoes)
            lexical_scores = {h.run.id: h.score for h in lexical}
            nearest, cosines = self.runs.nearest(query_vector, allowed, max(limit, FUSE_DEPTH), list(lexical_scores))
            if self.mode == "semantic":
                order = list(nearest.items())
            else:
                order = _fused(lexical_scores, nearest, cosines)
            order = order[:limit]
            known = {h.run.id: h for h in lexical}
            fetched = self._runs([i for i, _ in order if i not in known])
        out = []
        for run_id, score in order:
            if run_id in known:
                out.append(RunHit(known[run_id].run, score))
            elif run_id in fetched:
                out.append(RunHit(fetched[run_id], score))
        return out

    def _runs(self, ids: list[int]) -> dict[int, Any]:
        if not ids:
            return {}
        sql = f"""SELECT {RUN_COLUMNS} FROM run r JOIN session s ON s.id = r.session_id
                  WHERE {self.store.sql_in_list("r.id")}"""
        return {int(row[0]): run_from_row(row) for row in self.store.rows(sql, (self.store.list_param(ids),))}


def _fused(lexical: dict[int, float], nearest: dict[int, float], cosines: dict[int, float]) -> list[tuple[int, float]]:
    """As `hybrid.HybridSearcher._fused`: the lexical hits' scores and every candidate's cosine
    (`cosines`: the lexical hits') mixed; a run not embedded yet keeps its lexical share."""
    return fuse.mix_unjudged_kept(lexical, {**cosines, **nearest})
