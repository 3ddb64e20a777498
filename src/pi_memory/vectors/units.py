"""What is embedded: the units a question is answered from, and which of them still wait.

Design idea: a question about the past is answered by what people asked and what the agent
concluded, not by the file it read on the way. So the units are a session's user messages and
its replies: the assistant messages that call no tool (the final reply of each run, and any other
the model wrote without acting). Tool calls, their output and compaction summaries are never
embedded: they are most of an archive's bytes and say little that a question is asked about, and
the lexical index finds their exact strings anyway. Echoes (`core.echo`) are embedded like the
rest, since whether a message is one can change as its run goes on; a search leaves them out.

Newest first: the recent past is asked about most, so a half-embedded archive already helps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..storage.pg.vectors import PgVectors
from ..storage.store import Store, decode_text

KIND_MESSAGE = 1
ROLE_CODES = {"user": 1, "assistant": 2}

# a message is a unit: a user message, or an assistant message that calls no tool (`render` keeps
# the tools an assistant message calls in `meta.tools`); with text (`indexed`: not empty)
UNIT_CONDITION = """m.indexed != 0 AND (m.role = 'user' OR (m.role = 'assistant'
    AND (m.meta IS NULL OR json_extract(m.meta, '$.tools') IS NULL)))"""
# ... on a team archive (PostgreSQL: `indexed` a boolean, `meta` JSON text)
PG_UNIT_CONDITION = """m.indexed AND (m.role = 'user' OR (m.role = 'assistant'
    AND (m.meta IS NULL OR (m.meta::jsonb -> 'tools') IS NULL)))"""


def unit_condition(store: Store) -> str:
    return PG_UNIT_CONDITION if isinstance(store, PgVectors) else UNIT_CONDITION


@dataclass
class Unit:
    """One message to embed: its id, session, time, role and text (as stored, not yet cut)."""

    ref: int
    session_id: str
    ts: int
    role: str
    text: str


def pending_sql(
    since_ms: int | None, until_id: int | None, above_id: int | None = None, condition: str = UNIT_CONDITION
) -> tuple[str, list[Any]]:
    """The units without a vector of `model` (the first parameter), newest first, with ids between
    `above_id` and `until_id` (both excluded)."""
    sql = f"""SELECT m.id, m.session_id, m.ts, m.role, m.text FROM msg m
              WHERE {condition}
              AND NOT EXISTS (SELECT 1 FROM vec v WHERE v.kind = {KIND_MESSAGE} AND v.ref = m.id AND v.model = ?)"""
    params: list[Any] = []
    if since_ms is not None:
        sql += " AND m.ts >= ?"
        params.append(since_ms)
    if until_id is not None:
        sql += " AND m.id < ?"
        params.append(until_id)
    if above_id is not None:
        sql += " AND m.id > ?"
        params.append(above_id)
    return sql + " ORDER BY m.id DESC LIMIT ?", params


def pending(
    store: Store,
    model: str,
    limit: int,
    since_ms: int | None = None,
    until_id: int | None = None,
    above_id: int | None = None,
) -> list[Unit]:
    """Up to `limit` units still to embed with `model`, newest first (below `until_id`: a job's cursor;
    above `above_id`: what a finished pass already looked at)."""
    sql, params = pending_sql(since_ms, until_id, above_id, unit_condition(store))
    rows = store.rows(sql, [model, *params, limit])
    return [Unit(int(i), str(sid), int(ts), str(role), decode_text(text)) for i, sid, ts, role, text in rows]


def count_units(store: Store, since_ms: int | None = None) -> int:
    """Every unit of the archive (from `since_ms`), embedded or not."""
    sql = f"SELECT count(*) FROM msg m WHERE {unit_condition(store)}"
    params: list[Any] = []
    if since_ms is not None:
        sql += " AND m.ts >= ?"
        params.append(since_ms)
    return int(store.scalar(sql, params) or 0)


def count_pending(store: Store, model: str, since_ms: int | None = None) -> int:
    sql = f"""SELECT count(*) FROM msg m WHERE {unit_condition(store)}
              AND NOT EXISTS (SELECT 1 FROM vec v WHERE v.kind = {KIND_MESSAGE} AND v.ref = m.id AND v.model = ?)"""
    params: list[Any] = [model]
    if since_ms is not None:
        sql += " AND m.ts >= ?"
        params.append(since_ms)
    return int(store.scalar(sql, params) or 0)
