"""The SQLite store's index of run summaries (`run_fts`) and the token counts run search reads.

A mixin of `Store` (its connection and query helpers). PgStore keeps the same
summaries in a tsvector column of `run` and answers the same calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.echo import fts_without_echoes
from ..core.text import QueryToken, fts_or
from .codec import LENGTH_CHANNEL, fts5_varints
from .shared import NO_FILTER, RunFilter

if TYPE_CHECKING:
    import apsw


class RunSummaryIndex:
    """`index_run_summary`, `run_summary_df`, `run_summary_postings`, `run_summary_recent`, `msg_token_counts`."""

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
        """Runs whose summary holds a token, counted up to `cap`."""
        sql = "SELECT count(*) FROM (SELECT rowid FROM run_fts WHERE run_fts MATCH ? LIMIT ?)"
        return int(self.scalar(sql, (token.fts(), cap)))

    def run_summary_postings(
        self, token: QueryToken, limit: int, where: RunFilter = NO_FILTER, echoes: bool = False
    ) -> list[int]:
        """The newest `limit` runs whose summary holds the token (and that pass `where`); runs that only
        asked the archive (`core.echo`) unless `echoes`."""
        return self._runs_matching(token.fts(), limit, where, echoes)

    def run_summary_recent(
        self, tokens: Sequence[QueryToken], limit: int, where: RunFilter = NO_FILTER, echoes: bool = False
    ) -> list[int]:
        """The newest `limit` runs whose summary holds any of the tokens (FTS5 walks back from the newest)."""
        return self._runs_matching(fts_or(list(tokens)), limit, where, echoes)

    def _runs_matching(self, expr: str, limit: int, where: RunFilter, echoes: bool) -> list[int]:
        expr = expr if echoes else fts_without_echoes(expr)
        if where[0] == NO_FILTER[0]:
            sql = "SELECT rowid FROM run_fts WHERE run_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
            return [int(r[0]) for r in self.conn.execute(sql, (expr, limit))]
        sql = f"""SELECT r.id FROM run r JOIN session s ON s.id = r.session_id
                  WHERE r.id IN (SELECT rowid FROM run_fts WHERE run_fts MATCH ?) AND {where[0]}
                  ORDER BY r.id DESC LIMIT ?"""
        return [int(r[0]) for r in self.conn.execute(sql, [expr, *where[1], limit])]
