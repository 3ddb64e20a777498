"""The vector side of a team archive: the nearest units found by pgvector, scored as SQLite scores them.

Design idea: only where the candidates come from changes. `PgVectorSearch` is the SQLite
`VectorSearch` (the query embedded on a worker thread while the lexical side runs, the lexical
hits' cosines looked up, the fusion in `hybrid.HybridSearcher` unchanged) whose nearest units come
from the server, one statement, in one of two ways (bench/pg_vector_scan.py, docs/semantic.md):

- a search that narrows (a project, a session, roles, a time range, a path, who wrote it): an exact
  scan, `ORDER BY emb <=> query LIMIT n` with every filter of the lexical side in the statement
  (`search.pg.filter_sql`), so the nearest allowed units are found whatever the filters keep. An
  HNSW index walks its graph first and filters after: at 100k units and a filter keeping 10% of
  the sessions it returned 19 of the 200 rows asked (pgvector 0.6), and 0.65 of the exact top 100
  with 0.8's iterative scan, in about the exact scan's time;
- a search over the whole archive: the HNSW index of the messages' vectors (`vec_emb`, where the
  server's pgvector has HNSW), `hnsw.ef_search` at the rows asked for: 0.999 of the exact top 100
  in ~5 ms instead of ~80 at 100k units; echoes and the asking run are then left out after, as on
  SQLite, by the echo mark the walk brings along (`_allowed_rows`). That walk starts as soon as the
  query's vector is there, on a connection of its own from the query's worker thread, while the
  keyword side still runs on the archive's: at 106k units (the bench/semantic_speed.py --pg archive,
  100 questions, both ways alternated in one process) hybrid added 10.3 / 28.6 ms p50 / p95 to the
  keyword search so, 16.9 / 31.9 walking after it, the same hits. One more connection per archive
  object that searches; once it fails, the walk runs after the keyword side on the archive's
  connection, as before.

Either way the candidates' cosines are taken from their int8 copies (`vec.vec`, `vec.scale`), the
very numbers the SQLite archive fuses, so both backends give a unit the same score; twice the units
asked for are fetched so that the int8 order decides the last places, as it does on SQLite, and
equal cosines (one text in two sessions) keep the order their vectors were written in, as SQLite's
scan of its index does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..search.messages import Filters
from ..search.pg import filter_sql
from ..storage.pg.sql import driver
from ..storage.pg.vectors import PgVectors, vector_literal
from ..storage.store import Store
from .hybrid import CHECK_PER_HIT, FUSE_DEPTH, VectorSearch, role_codes, row_cosines
from .units import KIND_MESSAGE


class PgVectorSearch(VectorSearch):
    """`VectorSearch` over a team archive whose server has pgvector (no index file: the server scans)."""

    def __init__(self, store: Store, pg: PgVectors, model_id: str, load: Callable[[], Any]) -> None:
        super().__init__(store, Path("."), model_id, load)  # no file: `index` is never asked here
        self.pg = pg
        self._aside: Any = None  # the walk's own connection: None not opened yet, False unusable
        self._walked: tuple[bytes, int, list[tuple[Any, ...]]] | None = None  # (query vector, rows asked, rows)
        self._walked_lock = threading.Lock()

    def index(self) -> None:
        return None

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)  # a walk under way ends before its connection
        if self._aside:
            self._aside.close()
        self._aside = False

    def embed_query(self, query: str, filters: Filters | None = None) -> Future[np.ndarray]:
        """The query's vector; for a search over the whole archive (`filters` given, not narrowing)
        the index walked right after it in the same worker thread, on the walk's own connection,
        while the keyword side runs on the archive's (`nearest` takes the rows)."""
        n = FUSE_DEPTH * CHECK_PER_HIT  # what `HybridSearcher` asks (a limit above FUSE_DEPTH: walked after)
        url = getattr(self.store, "url", None)
        if filters is None or filters.active or self._aside is False or not url or not self.pg.has_vector_index():
            return super().embed_query(query)
        sql = self._index_sql()  # (its names asked on the archive's connection, in this thread)

        def work() -> np.ndarray:
            vector = np.asarray(self.load().query(query), dtype=np.float32)
            rows = self._walk_aside(str(url), sql, vector, n)
            if rows is not None:
                with self._walked_lock:
                    self._walked = (vector.tobytes(), n, rows)
            return vector

        return self.pool.submit(work)

    def _walk_aside(self, url: str, sql: str, vector: np.ndarray, n: int) -> list[tuple[Any, ...]] | None:
        """The index walk on the walk's own connection (opened at the first); None when it fails
        (then never again for this archive object: the walk runs on the archive's connection)."""
        psycopg = driver()
        try:
            if self._aside is None:
                self._aside = psycopg.connect(url, autocommit=True, application_name="pi-memory", connect_timeout=10)
                self._aside.prepare_threshold = 0  # as the archive's connection (`PgStore.connect`)
            with self._aside.transaction():
                self._aside.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(max(n, 40)),))
                return list(self._aside.execute(sql, [self.model_id, vector_literal(vector), n]).fetchall())
        except psycopg.Error:
            if self._aside:
                self._aside.close()
            self._aside = False
            return None

    def _take_walked(self, query_vector: np.ndarray, n: int) -> list[tuple[Any, ...]] | None:
        """The rows `embed_query` walked for this vector and this many rows, once; None: none."""
        with self._walked_lock:
            walked, self._walked = self._walked, None
        if walked is None or walked[1] != n or walked[0] != np.asarray(query_vector, dtype=np.float32).tobytes():
            return None
        return walked[2]

    def nearest(self, query_vector: np.ndarray, filters: Filters, k: int) -> dict[int, float]:
        """msg id -> cosine of the `k` nearest units the filters allow, best first."""
        roles = role_codes(filters.roles)
        if roles is not None and not roles:  # only tool results asked for: none is a unit
            return {}
        narrowed = filters.active  # (`TeamFilters.active`: who wrote it too)
        with self.store.read():
            if narrowed or not self.pg.has_vector_index():
                return _best(query_vector, self._exact(query_vector, filters, k * CHECK_PER_HIT), k)
            rows = self._take_walked(query_vector, k * CHECK_PER_HIT)
            if rows is None:
                rows = self._by_index(query_vector, k * CHECK_PER_HIT)
            return _best(query_vector, _allowed_rows(rows, filters), k)

    def _exact(self, query_vector: np.ndarray, f: Filters, n: int) -> list[tuple[Any, ...]]:
        where, params = filter_sql(f, cast(Any, self.store))
        if not f.include_echoes:
            where += " AND m.echo = 0"
        if f.exclude_ids:
            where += " AND NOT (m.id = ANY(%s))"
            params.append(list(f.exclude_ids))
        # `+ 0`: an expression no index orders by, so the scan is exact (the HNSW index would be
        # walked first and filtered after, losing the units a selective filter keeps)
        sql = f"""SELECT v.ref, v.vec, v.scale, v.id FROM vec v
                  JOIN msg m ON m.id = v.ref JOIN session s ON s.id = m.session_id
                  WHERE v.kind = {KIND_MESSAGE} AND v.model = %s AND {where}
                  ORDER BY (v.emb {self.pg.distance_operator()} %s::{self.pg.vector_type()}) + 0 LIMIT %s"""
        return self.store.rows(sql, [self.model_id, *params, vector_literal(query_vector), n])

    def _by_index(self, query_vector: np.ndarray, n: int) -> list[tuple[Any, ...]]:
        self.store.scalar("SELECT set_config('hnsw.ef_search', %s, true)", (str(max(n, 40)),))
        return self.store.rows(self._index_sql(), [self.model_id, vector_literal(query_vector), n])

    def _index_sql(self) -> str:
        """The `n` nearest message units by the HNSW index (model, query vector, n), each with its
        message's echo mark: the walk's rows are then filtered without another statement
        (`_allowed_rows`; the ordered walk stays a subquery, so the join cannot change its plan)."""
        return f"""SELECT v.ref, v.vec, v.scale, v.id, m.echo FROM (
                     SELECT ref, vec, scale, id FROM vec WHERE kind = {KIND_MESSAGE} AND model = %s
                     ORDER BY emb {self.pg.distance_operator()} %s::{self.pg.vector_type()} LIMIT %s) v
                   JOIN msg m ON m.id = v.ref"""


def _allowed_rows(rows: list[tuple[Any, ...]], f: Filters) -> list[tuple[Any, ...]]:
    """The walked rows (ref, vec, scale, id, echo) a search over the whole archive allows: no echo
    unless asked for, none of the asking run. (A filter that narrows takes the exact scan, whose
    statement holds every filter.) SQLite's `VectorSearch._allowed` asks the archive the same in a
    statement of its own; here the walk brought the echo marks: 2.6 ms less per hybrid search at the
    median question of 106k units, the same hits (docs/semantic.md)."""
    excluded = set(f.exclude_ids)
    return [r for r in rows if (f.include_echoes or not r[4]) and int(r[0]) not in excluded]


def _best(query_vector: np.ndarray, rows: list[tuple[Any, ...]], k: int) -> dict[int, float]:
    """msg id -> int8 cosine of the best `k` rows (ref, vec, scale, id), equal cosines in written order."""
    scored = row_cosines(query_vector, [r[:3] for r in rows])
    written = {int(r[0]): int(r[3]) for r in rows}
    return dict(sorted(scored.items(), key=lambda kv: (-kv[1], written[kv[0]]))[:k])
