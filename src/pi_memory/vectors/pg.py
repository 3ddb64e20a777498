"""The vector side of a team archive: the nearest units found by pgvector, scored as SQLite scores them.

Design idea: only where the candidates come from changes. `PgVectorSearch` is the SQLite
`VectorSearch` (the query embedded on a worker thread while the lexical side runs, the lexical
hits' cosines looked up, the fusion in `hybrid.HybridSearcher` unchanged) whose nearest units are
one statement: `ORDER BY emb <=> query LIMIT n` over the units every filter of the lexical side
allows (the same SQL: `search.pg.filter_sql`, so project, session, role, time, kind, path and who
wrote it; echoes and the asking run left out, as for keyword hits). The scan is exact: the filters
are in the same statement, so the nearest allowed units are found whatever the filters keep (an
HNSW index answers an `ORDER BY ... LIMIT` from its graph first and filters after, which loses
units under a selective filter; docs/semantic.md has the measurement that chose the exact scan).

The candidates' cosines are then taken from their int8 copies (`vec.vec`, `vec.scale`), the very
numbers the SQLite archive fuses, so both backends give a unit the same score; twice the units
asked for are fetched so that the int8 order decides the last places, as it does on SQLite, and
equal cosines (one text in two sessions) keep the order their vectors were written in, as SQLite's
scan of its index does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..search.messages import Filters
from ..search.pg import filter_sql
from ..storage.pg.vectors import PgVectors, vector_literal
from ..storage.store import Store
from .hybrid import CHECK_PER_HIT, VectorSearch, _role_codes, _scores
from .units import KIND_MESSAGE


class PgVectorSearch(VectorSearch):
    """`VectorSearch` over a team archive whose server has pgvector (no index file: the server scans)."""

    def __init__(self, store: Store, pg: PgVectors, model_id: str, load: Callable[[], Any]) -> None:
        super().__init__(store, Path("."), model_id, load)  # no file: `index` is never asked here
        self.pg = pg

    def index(self) -> None:
        return None

    def nearest(self, query_vector: np.ndarray, filters: Filters, k: int) -> dict[int, float]:
        """msg id -> cosine of the `k` nearest units the filters allow, best first."""
        roles = _role_codes(filters.roles)
        if roles is not None and not roles:  # only tool results asked for: none is a unit
            return {}
        where, params = filter_sql(filters, cast(Any, self.store))
        if not filters.include_echoes:
            where += " AND m.echo = 0"
        if filters.exclude_ids:
            where += " AND NOT (m.id = ANY(%s))"
            params.append(list(filters.exclude_ids))
        sql = f"""SELECT v.ref, v.vec, v.scale, v.id FROM vec v
                  JOIN msg m ON m.id = v.ref JOIN session s ON s.id = m.session_id
                  WHERE v.kind = {KIND_MESSAGE} AND v.model = %s AND {where}
                  ORDER BY v.emb {self.pg.distance_operator()} %s::{self.pg.vector_type()} LIMIT %s"""
        with self.store.read():
            rows = self.store.rows(sql, [self.model_id, *params, vector_literal(query_vector), k * CHECK_PER_HIT])
        scored = _scores(query_vector, rows)
        written = {int(r[0]): int(r[3]) for r in rows}  # equal cosines in the order written, as SQLite's scan
        return dict(sorted(scored.items(), key=lambda kv: (-kv[1], written[kv[0]]))[:k])
