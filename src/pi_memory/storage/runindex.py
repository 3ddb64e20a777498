"""The SQLite store's index of run summaries and the token counts run search reads.

A mixin of `Store` (its connection and query helpers). A new archive indexes run N's summary in
`msg_fts` as rowid `RUN_ROWIDS + N`, above every message (rowid = msg id; why: `schema.COMPACT_FTS`);
an older one keeps them in an index of their own, `run_fts`, under their ids. Every query keeps to
its side of that line (message queries to `rowid < RUN_ROWIDS`), so both answer alike. Above, not
below (negative rowids): FTS5 writes what a transaction indexed as a new segment each time a rowid
is not above the one before, and a transaction indexes its messages, then their runs, in id order.
PgStore keeps the same summaries in a tsvector column of `run` and answers the same calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.text import QueryToken, fts_or
from .codec import LENGTH_CHANNEL, fts5_varints
from .shared import NO_FILTER, RunFilter

if TYPE_CHECKING:
    import apsw

# run N's rowid in msg_fts is RUN_ROWIDS + N: more ids than any archive gives its messages (2^40)
RUN_ROWIDS = 1 << 40


class RunSummaryIndex:
    """`index_run_summary`, `run_summary_df`, `run_summary_postings`, `run_summary_recent`, `msg_token_counts`."""

    conn: apsw.Connection
    _runs_in_msg_fts: bool | None  # `runs_in_msg_fts`, once read

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

    @property
    def runs_in_msg_fts(self) -> bool:
        """Whether this archive indexes run summaries in `msg_fts` (rowid `RUN_ROWIDS` + N for run N)
        rather than in `run_fts` (an archive created before: `schema.COMPACT_FTS`). Read once per
        migration."""
        if self._runs_in_msg_fts is None:
            self._runs_in_msg_fts = not self.scalar(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'run_fts')"
            )
        return self._runs_in_msg_fts

    def _run_index(self) -> tuple[str, int]:
        """The run summaries' FTS5 table and what a run's id is added to for its rowid there."""
        return ("msg_fts", RUN_ROWIDS) if self.runs_in_msg_fts else ("run_fts", 0)

    def index_run_summary(self, run_id: int, chars: str, grams: str) -> None:
        self.index_run_summaries([(run_id, chars, grams)])

    def index_run_summaries(self, rows: Sequence[tuple[int, str, str]]) -> None:
        """(run id, chars, grams) of several runs, one statement for all."""
        table, base = self._run_index()
        self.conn.executemany(f"INSERT INTO {table}(rowid, chars, grams) VALUES (? + {base},?,?)", rows)

    def unindex_run_summary(self, run_id: int) -> None:
        table, base = self._run_index()
        self.conn.execute(f"DELETE FROM {table} WHERE rowid = ? + {base}", (run_id,))

    def run_summary_df(self, token: QueryToken, cap: int) -> int:
        """Runs whose summary holds a token, counted up to `cap`."""
        table, base = self._run_index()
        sql = f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? AND rowid > {base} LIMIT ?)"
        return int(self.scalar(sql, (token.fts(), cap)))

    def run_summary_postings(self, token: QueryToken, limit: int, where: RunFilter = NO_FILTER) -> list[int]:
        """The newest `limit` runs whose summary holds the token (and that pass `where`)."""
        return self._runs_matching(token.fts(), limit, where)

    def run_summary_recent(self, tokens: Sequence[QueryToken], limit: int, where: RunFilter = NO_FILTER) -> list[int]:
        """The newest `limit` runs whose summary holds any of the tokens (FTS5 walks back from the newest)."""
        return self._runs_matching(fts_or(list(tokens)), limit, where)

    def _runs_matching(self, expr: str, limit: int, where: RunFilter) -> list[int]:
        table, base = self._run_index()
        runs = f"SELECT rowid - {base} FROM {table} WHERE {table} MATCH ? AND rowid > {base}"
        if where[0] == NO_FILTER[0]:
            return [int(r[0]) for r in self.conn.execute(f"{runs} ORDER BY rowid DESC LIMIT ?", (expr, limit))]
        sql = f"""SELECT r.id FROM run r JOIN session s ON s.id = r.session_id
                  WHERE r.id IN ({runs}) AND {where[0]}
                  ORDER BY r.id DESC LIMIT ?"""
        return [int(r[0]) for r in self.conn.execute(sql, [expr, *where[1], limit])]
