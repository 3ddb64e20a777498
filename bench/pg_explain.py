"""EXPLAIN (ANALYZE, BUFFERS) of every statement a search runs on a PostgreSQL archive.

Usage:
    python bench/pg_explain.py --pg 'postgresql://...?options=-csearch_path%3Dbench_x' [--scope content|summary]
                               [--warm] QUERY [QUERY ...]

Each query is searched once with the statements recorded (the archive's own connection, its own
settings: `PgStore.searching`), then every recorded SELECT is run again inside a transaction with
the same settings under EXPLAIN (ANALYZE, BUFFERS) and printed, with the time it took in the search.
`--warm` searches every query once first, so the cached document frequencies are not counted again
(what a long-lived process runs); without it, a fresh process's first search with the counts the
server keeps for every searcher cleared first (what `pg_scale.py`'s cold pass measures). The server's
counting functions (m016) are shown by the statements they run: their plans are not in the call's.
docs/team-archive.md keeps this output for the bench's queries.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg

from pi_memory import Archive
from pi_memory.storage.pg.store import SEARCH_SNAPSHOT


def recorded(archive: Any, query: str, scope: str) -> list[tuple[bytes, Any, float]]:
    """The statements the search ran: (sql, params, ms)."""
    calls: list[tuple[bytes, Any, float]] = []
    real = psycopg.Connection.execute

    def spy(self: Any, sql: Any, params: Any = None, **kw: Any) -> Any:
        start = time.perf_counter()
        try:
            return real(self, sql, params, **kw)
        finally:
            text = sql if isinstance(sql, bytes) else str(sql).encode()
            calls.append((text, params, (time.perf_counter() - start) * 1000))

    psycopg.Connection.execute = spy  # type: ignore[method-assign]
    try:
        archive.search(query, limit=10, scope=scope)
    finally:
        psycopg.Connection.execute = real  # type: ignore[method-assign]
    return calls


def as_run_by_the_server(sql: bytes, params: Any) -> tuple[bytes, Any]:
    """A call of m016's counting functions as the statements they run on a cache miss: the capped
    counts (one token at a time, all of them here), the window walk (its newest ids as the search
    saw them)."""
    text = sql.decode()
    if "pi_memory_capped_counts(" in text:
        table, lexemes, cap, _ = params
        return (
            f"""SELECT (SELECT count(*) FROM (SELECT FROM {table} WHERE tokens @@ u.q::tsquery LIMIT %s) c)
                FROM unnest(%s::text[]) AS u(q)""".encode(),
            (cap + 1, lexemes),
        )
    if "pi_memory_window_dfs(" in text:
        table, lexemes, window, _, _ = params
        tests = ", ".join("count(*) FILTER (WHERE tokens @@ %s::tsquery)" for _ in lexemes)
        low = f"(SELECT coalesce(max(id), 0) - {int(window)} FROM {table})"
        return f"SELECT {tests} FROM {table} WHERE id > {low}".encode(), tuple(lexemes)
    return sql, params


def explain(archive: Any, sql: bytes, params: Any) -> list[str]:
    sql, params = as_run_by_the_server(sql, params)
    conn = archive.store.conn
    with conn.transaction():
        conn.execute(SEARCH_SNAPSHOT)
        rows = conn.execute(b"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, params, prepare=False).fetchall()
    return [str(r[0]) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", required=True)
    parser.add_argument("--scope", default="content")
    parser.add_argument("--warm", action="store_true")
    parser.add_argument("queries", nargs="+")
    args = parser.parse_args()
    with Archive.open(args.pg) as archive:
        archive.preload_search()
        if args.warm:
            for query in args.queries:
                archive.search(query, limit=10, scope=args.scope)
        else:
            archive.store.conn.execute("TRUNCATE token_df")
        for query in args.queries:
            print(f"### {args.scope}: {query!r}\n")
            for sql, params, ms in recorded(archive, query, args.scope):
                if not sql.lstrip().upper().startswith(b"SELECT") or b"set_config" in sql:
                    continue
                print(f"-- {ms:.2f} ms in the search: {' '.join(sql.decode().split())[:160]}")
                print("\n".join(explain(archive, sql, params)))
                print()


if __name__ == "__main__":
    main()
