"""The usage tables on both backends: requests in, their quarter-hour sums kept, the old ones filled.

A mixin of `Store` (SQLite) and `PgStore` (PostgreSQL): its SQL is written once with `?`
placeholders and `ON CONFLICT`, which both accept. Design idea: a request row is written with
the messages of the same write (`writes.SessionWrite.usage`), keyed so that a request seen again
(a re-import, a live capture then the file, a fork's copy) is ignored, and only a row that went in
is added to `usage_sum`, so the sums stay exactly the sum of the rows. Pricing happens before the
transaction (`row_of`, in a parse worker or the capturing process).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..core.prices import price
from ..core.sources.pi import Entry
from ..core.sources.readers import reader_for_agent
from ..core.usage import TokenUsage
from .codec import decompress

BUCKET_MS = 900_000  # `usage_sum.bucket`: a quarter hour, the finest step of any time zone's offset

# (key, session_id, ts, provider, model, input, output, cache_read, cache_write, reasoning, cost,
#  cost_source, priced_at): a `usage` row, priced
UsageRow = tuple[Any, ...]
COLUMNS = "key, session_id, ts, provider, model, input, output, cache_read, cache_write, reasoning, cost, cost_source, priced_at"
# Plain single-row statements only: one with RETURNING, or an upsert, opens a statement journal,
# which makes FTS5 flush what the transaction indexed so far into a segment of its own.
_INSERT = f"INSERT INTO usage({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (key) DO NOTHING"
_ADD_TO_SUM = """
UPDATE usage_sum SET requests = requests + ?, input = input + ?, output = output + ?, cache_read = cache_read + ?,
  cache_write = cache_write + ?, cost = cost + ?, unpriced = unpriced + ?
WHERE bucket = ? AND session_id = ? AND provider = ? AND model = ?"""
_NEW_SUM = """
INSERT INTO usage_sum(bucket, session_id, provider, model, requests, input, output, cache_read, cache_write, cost, unpriced)
VALUES (?,?,?,?,?,?,?,?,?,?,?)"""


def row_of(session_id: str, u: TokenUsage, now: int | None = None) -> UsageRow:
    """A request as its `usage` row, priced (outside any transaction)."""
    cost, source = price(u)
    stamp = now if now is not None else int(time.time() * 1000)
    return (
        u.key,
        session_id,
        u.ts,
        u.provider,
        u.model,
        u.input,
        u.output,
        u.cache_read,
        u.cache_write,
        u.reasoning,
        cost,
        source,
        stamp if source is not None else None,
    )


def rows_of(session_id: str, entries: Iterable[Entry]) -> list[UsageRow]:
    now = int(time.time() * 1000)
    return [row_of(session_id, e.usage, now) for e in entries if e.usage is not None]


def _sums(rows: Sequence[UsageRow]) -> list[tuple[Any, ...]]:
    """`usage_sum` deltas of rows that went in, one per (bucket, session, provider, model)."""
    out: dict[tuple[int, str, str, str], list[Any]] = {}
    for r in rows:
        key = (int(r[2]) // BUCKET_MS, str(r[1]), str(r[3]), str(r[4]))
        acc = out.setdefault(key, [0, 0, 0, 0, 0, 0.0, 0])
        acc[0] += 1
        for i, col in enumerate((5, 6, 7, 8), start=1):
            acc[i] += int(r[col])
        if r[10] is None:
            acc[6] += 1
        else:
            acc[5] += float(r[10])
    return [(*k, *v) for k, v in out.items()]


class UsageStore:
    """`insert_usage`, the ledger's events and `backfill_usage` (m010's data step)."""

    if TYPE_CHECKING:  # the host class provides these (Store, PgStore)

        def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def execute(self, sql: str, params: Sequence[Any] = ()) -> int: ...

        def write(self) -> AbstractContextManager[None]: ...

        def sql_in_list(self, expr: str) -> str: ...

        def list_param(self, values: Iterable[Any]) -> Any: ...

    def insert_usage(self, rows: Sequence[UsageRow]) -> int:
        """Requests not archived yet go in, and into `usage_sum` (inside a write transaction); how many."""
        went_in = [r for r in rows if self.execute(_INSERT, r)]
        for delta in _sums(went_in):
            if not self.execute(_ADD_TO_SUM, (*delta[4:], *delta[:4])):
                self.execute(_NEW_SUM, delta)
        return len(went_in)

    def add_ledger_event(self, session_id: str, ts: int, kind: str, chars: int, tokens: int, detail: str) -> None:
        self.execute(
            "INSERT INTO context_ledger(session_id, ts, kind, chars, tokens, detail) VALUES (?,?,?,?,?,?)",
            (session_id, ts, kind, chars, tokens, detail),
        )

    def forget_usage(self, session_ids: Sequence[str]) -> None:
        """A forgotten session's requests and their sums (inside a write transaction)."""
        for sid in session_ids:
            self.execute("DELETE FROM usage WHERE session_id = ?", (sid,))
            self.execute("DELETE FROM usage_sum WHERE session_id = ?", (sid,))
            self.execute("DELETE FROM context_ledger WHERE session_id = ?", (sid,))

    def usage_keys_of(self, session_id: str, msg_ids: Sequence[int]) -> list[str]:
        """The requests some messages' own lines record (an assistant message's), read from their
        verbatim lines with the agent's parser, as the import keyed them."""
        if not msg_ids:
            return []
        agent = self.rows("SELECT agent FROM session WHERE id = ?", (session_id,))
        rows = self.rows(
            f"""SELECT e.raw, m.text FROM entry e JOIN msg m ON m.id = e.msg_id
                WHERE e.session_id = ? AND {self.sql_in_list("e.msg_id")} ORDER BY e.id""",
            (session_id, self.list_param(list(msg_ids))),
        )
        lines = [line for raw, text in rows for line in _lines(raw, text)]
        parsed = _usage_of_lines(session_id, str(agent[0][0] or "pi") if agent else "pi", lines)
        return [str(r[0]) for r in parsed]

    def remove_usage(self, keys: Sequence[str]) -> int:
        """Requests taken out (a forgotten message's), and out of `usage_sum`, so the sums stay the
        sum of the rows (inside a write transaction); how many were there."""
        gone: list[UsageRow] = []
        for key in keys:
            found = self.rows(f"SELECT {COLUMNS} FROM usage WHERE key = ?", (key,))
            if found and self.execute("DELETE FROM usage WHERE key = ?", (key,)):
                gone.append(found[0])
        for delta in _sums(gone):
            less = [-v for v in delta[4:]]
            self.execute(_ADD_TO_SUM, (*less, *delta[:4]))
            self.execute(
                """DELETE FROM usage_sum WHERE bucket = ? AND session_id = ? AND provider = ? AND model = ?
                   AND requests <= 0""",
                delta[:4],
            )
        return len(gone)

    # --- m010's data step: the requests of sessions archived before ---------------------------

    def backfill_usage(self) -> int:
        """Read every archived session's verbatim lines again with its agent's parser and write the
        requests they record (idempotent: a request already there is ignored). How many went in."""
        added = 0
        for sid, agent in self.rows("SELECT id, agent FROM session ORDER BY id"):
            rows = self._session_usage(str(sid), str(agent or "pi"))
            if rows:
                with self.write():
                    added += self.insert_usage(rows)
        return added

    def _session_usage(self, session_id: str, agent: str) -> list[UsageRow]:
        lines = [line for raw, text in self._verbatim(session_id) for line in _lines(raw, text)]
        return _usage_of_lines(session_id, agent, lines)

    def _verbatim(self, session_id: str) -> list[tuple[Any, Any]]:
        return self.rows(
            """SELECT e.raw, m.text FROM entry e LEFT JOIN msg m ON m.id = e.msg_id
               WHERE e.session_id = ? ORDER BY e.id""",
            (session_id,),
        )


def _usage_of_lines(session_id: str, agent: str, lines: list[bytes]) -> list[UsageRow]:
    """The requests some verbatim lines of a session record, priced."""
    if not lines:
        return []
    reader = reader_for_agent(agent, session_id)
    if agent == "pi":
        lines = [b'{"type":"session","version":3,"id":"%s"}' % session_id.encode(), *lines]
    return rows_of(session_id, reader.parse(lines).entries)


def _lines(raw: Any, text: Any) -> list[bytes]:
    """A kept entry's line(s): Claude Code's streamed message is its lines joined by newlines."""
    try:
        data = decompress(bytes(raw), text)
    except Exception:  # noqa: BLE001 - one unreadable row must not stop the backfill of the rest
        return []
    return data.split(b"\n")
