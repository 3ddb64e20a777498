"""The SQLite store's index of run summaries (`run_fts`) and the token counts run search reads.

A mixin of `Store` (its connection and query helpers). PgStore keeps the same
summaries in a tsvector column of `run` and answers the same calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.echo import fts_without_echoes
from ..core.ranking import candidate_weight, spread_ids
from ..core.text import QueryToken, fts_and, fts_or
from .codec import LENGTH_CHANNEL, fts5_varints
from .shared import NO_FILTER, RunFilter

if TYPE_CHECKING:
    import apsw

RUN_DF_WINDOW = 10_000  # newest runs a very common token's run count is estimated from


class RunSummaryIndex:
    """`index_run_summary`, `run_summary_df`, `run_summary_rare`, `run_summary_recent`, the token counts."""

    conn: apsw.Connection

    if TYPE_CHECKING:

        def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

        def sql_in_list(self, expr: str) -> str: ...

        @staticmethod
        def list_param(values: Any) -> Any: ...

    def msg_token_counts(self, msg_ids: Sequence[int]) -> dict[int, int]:
        """msg id -> `ranking.doc_tokens`, as FTS5 counted it at write time (docsize, `grams` column)."""
        if not msg_ids:
            return {}
        sql = f"SELECT id, sz FROM msg_fts_docsize WHERE {self.sql_in_list('id')}"
        return {int(i): fts5_varints(sz)[LENGTH_CHANNEL] for i, sz in self.rows(sql, (self.list_param(msg_ids),)) if sz}

    def index_run_summary(self, run_id: int, chars: str | bytes, grams: str | bytes) -> None:
        self.conn.execute("INSERT INTO run_fts(rowid, chars, grams) VALUES (?,?,?)", (run_id, chars, grams))

    def index_run_summaries(self, rows: Sequence[tuple[int, str | bytes, str | bytes]]) -> None:
        """(run id, chars, grams) of several runs, one statement for all."""
        self.conn.executemany("INSERT INTO run_fts(rowid, chars, grams) VALUES (?,?,?)", rows)

    def unindex_run_summary(self, run_id: int) -> None:
        self.conn.execute("DELETE FROM run_fts WHERE rowid=?", (run_id,))

    def run_summary_df(self, token: QueryToken, cap: int) -> int:
        """Runs whose summary holds a token: counted up to `cap`, estimated above it from the density
        among the newest `RUN_DF_WINDOW` runs (a common token's count would read its whole posting list)."""
        sql = "SELECT count(*) FROM (SELECT rowid FROM run_fts WHERE run_fts MATCH ? LIMIT ?)"
        count = int(self.scalar(sql, (token.fts(), cap + 1)))
        if count <= cap:
            return count
        top = int(self.scalar("SELECT coalesce(max(id), 0) FROM run") or 0)
        low = max(0, top - RUN_DF_WINDOW)
        in_window = int(
            self.scalar("SELECT count(*) FROM run_fts WHERE run_fts MATCH ? AND rowid > ?", (token.fts(), low))
        )
        runs = int(self.scalar("SELECT value FROM counter WHERE name = 'run_docs'") or 0)
        in_window_runs = max(1, int(runs * (top - low) / max(top, 1)))
        return max(cap + 1, min(runs, int(runs * in_window / in_window_runs)))

    def run_summary_rare(
        self,
        weighted: Sequence[tuple[QueryToken, float]],
        limit: int,
        where: RunFilter = NO_FILTER,
        echoes: bool = False,
    ) -> list[int]:
        """The `limit` runs holding the most weight of these (rare) tokens, every posting of each read
        and summed inside SQLite; runs that only asked the archive (`core.echo`) left out unless `echoes`."""
        if not weighted:
            return []
        parts, params = [], []
        for token, weight in weighted:
            parts.append("SELECT rowid AS id, ? AS w FROM run_fts WHERE run_fts MATCH ?")
            params += [candidate_weight(weight), token.fts() if echoes else fts_without_echoes(token.fts())]
        union = " UNION ALL ".join(parts)
        if where[0] == NO_FILTER[0]:
            sql = f"SELECT id FROM ({union}) GROUP BY id ORDER BY sum(w) DESC, id DESC LIMIT ?"
            return [int(r[0]) for r in self.conn.execute(sql, [*params, limit])]
        sql = f"""SELECT c.id FROM (SELECT id, sum(w) AS s FROM ({union}) GROUP BY id) c
                  JOIN run r ON r.id = c.id JOIN session s ON s.id = r.session_id WHERE {where[0]}
                  ORDER BY c.s DESC, c.id DESC LIMIT ?"""
        return [int(r[0]) for r in self.conn.execute(sql, [*params, *where[1], limit])]

    def run_summary_recent(
        self,
        tokens: Sequence[QueryToken],
        limit: int,
        where: RunFilter = NO_FILTER,
        echoes: bool = False,
        all_of: bool = False,
    ) -> list[int]:
        """The newest `limit` runs whose summary holds any (`all_of`: every one) of the tokens (FTS5 walks
        back from the newest)."""
        expr = fts_and(list(tokens)) if all_of else fts_or(list(tokens))
        return self._runs_matching(expr, limit, where, echoes)

    def run_token_counts(self, run_ids: Sequence[int]) -> dict[int, int]:
        """run id -> its summary's length in `ranking.doc_tokens` units, as FTS5 counted it (docsize)."""
        if not run_ids:
            return {}
        sql = f"SELECT id, sz FROM run_fts_docsize WHERE {self.sql_in_list('id')}"
        return {int(i): fts5_varints(sz)[LENGTH_CHANNEL] for i, sz in self.rows(sql, (self.list_param(run_ids),)) if sz}

    def run_token_sample(self, n: int) -> list[int]:
        """The summary lengths (`run_token_counts`) of up to `n` indexed runs spread evenly over their
        ids (not the newest: they may be all of one kind), for the collection's mean."""
        low, high = self.rows("SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM run_fts_docsize")[0]
        wanted = spread_ids(int(low), int(high), n)
        sql = f"SELECT sz FROM run_fts_docsize WHERE {self.sql_in_list('id')}"
        return [fts5_varints(sz)[LENGTH_CHANNEL] for (sz,) in self.rows(sql, (self.list_param(wanted),)) if sz]

    def _runs_matching(self, expr: str, limit: int, where: RunFilter, echoes: bool) -> list[int]:
        expr = expr if echoes else fts_without_echoes(expr)
        if where[0] == NO_FILTER[0]:
            sql = "SELECT rowid FROM run_fts WHERE run_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
            return [int(r[0]) for r in self.conn.execute(sql, (expr, limit))]
        # from the index, newest first, until `limit` pass the filters (FTS5 walks back along rowids)
        sql = f"""SELECT f.rowid FROM run_fts f JOIN run r ON r.id = f.rowid JOIN session s ON s.id = r.session_id
                  WHERE run_fts MATCH ? AND {where[0]} ORDER BY f.rowid DESC LIMIT ?"""
        return [int(r[0]) for r in self.conn.execute(sql, [expr, *where[1], limit])]
