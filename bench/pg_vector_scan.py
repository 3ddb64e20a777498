"""pgvector on a team archive: the exact scan against an HNSW index, for semantic recall's vector side.

What decides it: a search asks for the 200 nearest units that its filters allow (a project, a
session, roles, a time range; echoes out), and gets them in one statement (`vectors.pg`). Measured
here, on one table of `--units` vectors shaped like e5's (clustered: a unit is one of a few hundred
topics plus noise, so the nearest cosines sit ~0.1 above the rest, as in an archive), `--queries`
questions drawn the same way:

- the exact scan (no index): p50 / p95 ms, unfiltered and with a filter keeping ~10% of sessions;
- an HNSW index (`vector_cosine_ops`, m 16, ef_construction 64): build time, then the same queries
  with `hnsw.ef_search` at 200 (the rows asked for): time, the share of the exact top 100 found, and
  how many rows a filtered query returns (the index walks the graph first and filters after);
- on pgvector 0.8 or later, the filtered queries again with `hnsw.iterative_scan = strict_order`
  (the index scan goes on until enough rows pass the filter).

Usage: python bench/pg_vector_scan.py --url postgresql://... [--units 100000] [--queries 30]
(the database must have `CREATE EXTENSION vector`; the bench works in a schema of its own, dropped
at the end). Results: printed, and with `--out` as JSON with the commit measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
from common import result_header

DIM = 384
ASK = 200  # rows a search asks for (`hybrid.FUSE_DEPTH` x `hybrid.CHECK_PER_HIT`)
SESSIONS = 2_000


def unit_vectors(rng: np.random.Generator, centers: np.ndarray, n: int) -> np.ndarray:
    picked = centers[rng.integers(0, len(centers), n)]
    v = picked + rng.normal(scale=0.9 / np.sqrt(DIM), size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6g}" for x in v) + "]"


def timed(conn: psycopg.Connection, sql: str, params: list) -> tuple[float, list[int]]:
    start = time.perf_counter()
    rows = conn.execute(sql, params).fetchall()
    return (time.perf_counter() - start) * 1000, [int(r[0]) for r in rows]


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--units", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    centers = rng.normal(size=(400, DIM))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    schema = "bench_vec_" + uuid.uuid4().hex[:8]
    with psycopg.connect(args.url, autocommit=True) as conn:
        home = conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE extname = 'vector'"
        ).fetchone()
        assert home, "CREATE EXTENSION vector first"
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        server = conn.execute("SHOW server_version").fetchone()[0]
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}, {home[0]}")
        try:
            conn.execute(f"CREATE TABLE v (id int PRIMARY KEY, sess int NOT NULL, emb vector({DIM}) NOT NULL)")
            start = time.perf_counter()
            done = 0
            while done < args.units:
                n = min(10_000, args.units - done)
                vecs = unit_vectors(rng, centers, n)
                with conn.cursor().copy("COPY v (id, sess, emb) FROM STDIN") as copy:
                    for i, vec in enumerate(vecs):
                        copy.write_row((done + i + 1, int(rng.integers(0, SESSIONS)), literal(vec)))
                done += n
            load_s = time.perf_counter() - start
            conn.execute("ANALYZE v")
            queries = [literal(q) for q in unit_vectors(rng, centers, args.queries)]
            some = list(range(0, SESSIONS, 10))  # ~10% of the sessions: a project's
            plain = "SELECT id FROM v ORDER BY emb <=> %s::vector LIMIT %s"
            filtered = "SELECT id FROM v WHERE sess = ANY(%s) ORDER BY emb <=> %s::vector LIMIT %s"
            exact: dict[str, list] = {"plain": [], "filtered": []}
            times: dict[str, list[float]] = {k: [] for k in ("exact", "exact_filtered", "hnsw", "hnsw_filtered")}
            for q in queries:
                ms, ids = timed(conn, plain, [q, ASK])
                times["exact"].append(ms)
                exact["plain"].append(ids)
                ms, ids = timed(conn, filtered, [some, q, ASK])
                times["exact_filtered"].append(ms)
                exact["filtered"].append(ids)
            start = time.perf_counter()
            conn.execute("SET maintenance_work_mem = '512MB'")
            conn.execute("CREATE INDEX ON v USING hnsw (emb vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
            build_s = time.perf_counter() - start
            conn.execute(f"SET hnsw.ef_search = {ASK}")
            recall, recall_f, returned_f = [], [], []
            for q, want, want_f in zip(queries, exact["plain"], exact["filtered"], strict=True):
                ms, ids = timed(conn, plain, [q, ASK])
                times["hnsw"].append(ms)
                recall.append(len(set(ids[:100]) & set(want[:100])) / 100)
                ms, ids = timed(conn, filtered, [some, q, ASK])
                times["hnsw_filtered"].append(ms)
                returned_f.append(len(ids))
                recall_f.append(len(set(ids[:100]) & set(want_f[:100])) / 100)
            iterative = tuple(int(x) for x in version.split(".")[:2]) >= (0, 8)
            if iterative:  # pgvector 0.8: the index scan goes on until the filter has let enough rows through
                conn.execute("SET hnsw.iterative_scan = strict_order")
                times["hnsw_iterative_filtered"] = []
                recall_i, returned_i = [], []
                for q, want_f in zip(queries, exact["filtered"], strict=True):
                    ms, ids = timed(conn, filtered, [some, q, ASK])
                    times["hnsw_iterative_filtered"].append(ms)
                    returned_i.append(len(ids))
                    recall_i.append(len(set(ids[:100]) & set(want_f[:100])) / 100)
            size = conn.execute("SELECT pg_relation_size('v'), pg_indexes_size('v')").fetchone()
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    result = {
        **result_header("pg_vector_scan", {"units": args.units, "queries": args.queries}),
        "server": server,
        "pgvector": version,
        "units": args.units,
        "queries": args.queries,
        "rows_asked": ASK,
        "load_s": round(load_s, 1),
        "hnsw_build_s": round(build_s, 1),
        "table_mb": round(size[0] / 2**20, 1),
        "indexes_mb": round(size[1] / 2**20, 1),
        "ms": {k: {"p50": pct(v, 50), "p95": pct(v, 95)} for k, v in times.items()},
        "hnsw_recall_at_100": round(statistics.mean(recall), 3),
        "hnsw_filtered_recall_at_100": round(statistics.mean(recall_f), 3),
        "hnsw_filtered_rows_returned_min": min(returned_f),
        "hnsw_filtered_rows_returned_mean": round(statistics.mean(returned_f), 1),
    }
    if iterative:
        result["hnsw_iterative_filtered_recall_at_100"] = round(statistics.mean(recall_i), 3)
        result["hnsw_iterative_filtered_rows_returned_min"] = min(returned_i)
    print(f"| scan | p50 ms | p95 ms |  ({args.units:,} units, pgvector {version}, PostgreSQL {server})")
    print("| --- | ---: | ---: |")
    for k, v in result["ms"].items():
        print(f"| {k} | {v['p50']} | {v['p95']} |")
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
