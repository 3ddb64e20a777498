"""The archive side of the review: runs read in bounded pages, addresses, memories and links.

Design idea: the review never holds the archive in memory. Runs are read in
pages of `PAGE_RUNS`, in time order, by a keyset on (start time, id) that the
`run_start` index answers, so `--since` reads only the window asked for and a
whole-archive review costs one pass; each page's error messages are read with
it (their text names a failed tool call), and each page is dropped once the
`Collector` has seen it. Only the messages a report cites are turned into
`rN/mK` addresses, at the end. The SQL is the library's shared dialect (`?`
placeholders, `sql_in_list`), so the same code reads a PostgreSQL team archive.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..core import jsonline
from ..runs.table import load_fields
from ..storage.store import Store, decode_text
from .collect import Collector, RunRow
from .report import Addresses, Link, MemoryInfo, Report, build_report, cited_msgs
from .signature import command_signature, finding_key, is_finding_key

PAGE_RUNS = 500
IN_LIST_CHUNK = 500
NO_END = 1 << 62
_PREFIXED = r"^[\w-]+: "

RUN_SQL = """SELECT r.id, r.session_id, s.cwd, s.project, s.agent, r.start_ts, r.end_ts, r.n_msgs,
                    r.tool_calls, r.tool_errors, r.fields, r.first_msg
             FROM run r JOIN session s ON s.id = r.session_id
             WHERE r.start_ts >= ? AND (r.start_ts > ? OR r.id > ?) AND r.start_ts < ? {filters}
             ORDER BY r.start_ts, r.id LIMIT ?"""


@dataclass
class Scope:
    """What to review: a time window [since, until) in unix ms, and optional project and agent."""

    since_ms: int | None = None
    until_ms: int | None = None
    project: str | None = None
    agent: str | None = None

    def filters(self) -> tuple[str, list[Any]]:
        sql, params = "", []
        if self.project:
            sql += " AND (s.project = ? OR s.cwd = ?)"
            params += [self.project, self.project]
        if self.agent:
            sql += " AND s.agent = ?"
            params.append(self.agent)
        return sql, params


def _row(values: tuple[Any, ...]) -> RunRow:
    rid, sid, cwd, project, agent, start, end, n_msgs, calls, errors, fields, first_msg = values
    loaded = load_fields(fields, int(first_msg))
    # interned: the sets of sessions per finding then hold one shared string per session, not one per run
    return RunRow(int(rid), sys.intern(str(sid)), str(cwd or ""), str(project or ""), str(agent or ""), int(start), int(end),
                  int(n_msgs), int(calls), int(errors), loaded)  # fmt: skip


def run_pages(store: Store, scope: Scope, page: int = PAGE_RUNS) -> Iterator[list[RunRow]]:
    """The runs of the scope in (start time, id) order, one page at a time, with their error messages."""
    extra, extra_params = scope.filters()
    sql = RUN_SQL.format(filters=extra)
    ts, last_id = scope.since_ms or 0, -1
    until = scope.until_ms if scope.until_ms is not None else NO_END
    while True:
        rows = store.rows(sql, [ts, ts, last_id, until, *extra_params, page])
        if not rows:
            return
        runs = [_row(r) for r in rows]
        attach_errors(store, runs)
        yield runs
        ts, last_id = runs[-1].start_ts, runs[-1].id
        if len(rows) < page:
            return


def attach_errors(store: Store, runs: list[RunRow]) -> None:
    """Each run's tool_error messages: (tool name, error text), read in one query per page."""
    owner: dict[int, RunRow] = {}
    for run in runs:
        for msg_id in (run.fields.get("errors") or {}).get("msgs") or []:
            owner[int(msg_id)] = run
    for chunk in _chunks(sorted(owner)):
        sql = f"SELECT id, role, text, meta FROM msg WHERE {store.sql_in_list('id')}"
        for msg_id, role, text, meta in store.rows(sql, (store.list_param(chunk),)):
            if role != "tool_error":
                continue  # an assistant message that ended in a provider error: not a tool's failure
            tool = str(_meta(meta).get("tool") or "")
            owner[int(msg_id)].errors[int(msg_id)] = (tool, decode_text(text).removeprefix(f"✗ {tool}: "))


def _meta(raw: str | None) -> dict[str, Any]:
    try:
        value = jsonline.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _chunks(values: list[int]) -> Iterator[list[int]]:
    for i in range(0, len(values), IN_LIST_CHUNK):
        yield values[i : i + IN_LIST_CHUNK]


def addresses(store: Store, msg_ids: set[int]) -> Addresses:
    """msg id -> `rN/mK`, for the cited messages only."""
    out: Addresses = {}
    for chunk in _chunks(sorted(msg_ids)):
        sql = f"SELECT msg_id, run_id, pos FROM run_msg WHERE {store.sql_in_list('msg_id')}"
        for msg_id, run_id, pos in store.rows(sql, (store.list_param(chunk),)):
            out[int(msg_id)] = f"r{run_id}/m{pos}"
    return out


# --- links: which memory is about which finding (`review link`) --------------------------------


def link_key(signature: str) -> tuple[str, str]:
    """(key, signature) for what the user typed: a `sig_` key, a signature, or a bare command."""
    import re

    value = " ".join(signature.split())
    if is_finding_key(value):
        return value.lower(), ""
    if not re.match(_PREFIXED, value):
        value = command_signature(value)  # a command as typed: `pytest tests/x.py` means `bash: ...`
    return finding_key(value), value


def add_link(store: Store, workspace: str, memory_id: str, key: str, signature: str) -> bool:
    """Record that a memory addresses a finding; False when it already did."""
    with store.write():
        existing = store.scalar(
            "SELECT 1 FROM review_link WHERE workspace=? AND memory_id=? AND key=?", (workspace, memory_id, key)
        )
        if existing is not None:
            return False
        store.execute(
            "INSERT INTO review_link(workspace, memory_id, key, signature, created_at) VALUES (?,?,?,?,?)",
            (workspace, memory_id, key, signature, int(time.time() * 1000)),
        )
    return True


def links(store: Store, workspace: str) -> list[Link]:
    rows = store.rows(
        "SELECT memory_id, key, signature FROM review_link WHERE workspace=? ORDER BY created_at, memory_id, key",
        (workspace,),
    )
    return [Link(str(m), str(k), str(s)) for m, k, s in rows]


# --- the whole review ----------------------------------------------------------------------------


def review(
    store: Store,
    scope: Scope,
    min_count: int,
    workspace: str,
    memories: list[MemoryInfo],
) -> Report:
    """One pass over the scope's runs, then the report with its addresses and the ledger."""
    started = time.perf_counter()
    collector = Collector()
    for page in run_pages(store, scope):
        for run in page:
            collector.add(run)
    cited = addresses(store, cited_msgs(collector))
    window = {
        "since": scope.since_ms,
        "until": scope.until_ms,
        "project": scope.project,
        "agent": scope.agent,
        "min_count": min_count,
        "workspace": workspace,
    }
    report = build_report(collector, cited, window, min_count, memories, links(store, workspace))
    report.took_ms = round((time.perf_counter() - started) * 1000, 1)
    return report
