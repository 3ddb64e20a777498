"""Simulated sharding of the team archive by workspace: one PostgreSQL server against K shards and a fan-out client.

Usage:
    python bench/pg_shards.py --pg postgresql://... [--messages 120000] [--shards 4]
                              [--json bench/results/pg_shards.json]

What it simulates: the layout docs/team-archive.md proposes for a distributed PostgreSQL
(Citus): every table distributed by workspace (the session's project), so a session and all its
rows live on one shard. Here each shard is a schema of the same local server (Citus is not
packaged for this machine), filled by its own `pi-memory import` process running at the same
time as the others (what K workers of a Citus cluster do when people push at once), and the
client fans a search out to every shard over one connection each, in parallel threads, and
merges the hits by score. A search scoped to a workspace goes to its shard only (the routing a
distribution column gives).

It measures: import wall time and rate, single server against K concurrent shard imports;
search p50/p95/max (cold then warm pass, as pg_scale.py) on the single server, fanned out to
every shard, and scoped to one workspace (single server with the filter against its shard
alone); how many fanned-out top-10s hold the single server's hits, and with the same scores, for
three coordinators: each shard's own search merged by score (naive), the same with the global
statistics of round 1, and the plan's three rounds (statistics, the global cut of the candidates,
one scoring).

What it does not show: the network between coordinator and workers (here a loopback socket),
K machines' own CPUs, memory and disks (here K schemas share 2 cores and one buffer cache, so
fan-out parallelism is capped by the machine, not by K), Citus's own planner and coordinator
overhead, distributed transactions, and rebalancing shards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import git_commit  # noqa: E402
from pg_scale import Corpus, analyze, fresh_pg_schema, write_sessions  # noqa: E402

from pi_memory import Archive  # noqa: E402
from pi_memory.core import ranking, scoring  # noqa: E402
from pi_memory.core.text import normalize, query_tokens, surface_tokens, typed_forms, typed_runs  # noqa: E402
from pi_memory.search.messages import (  # noqa: E402
    RARE_CANDIDATES,
    RECENT_ANCHORS,
    RECENT_BEHIND_FULL_RARE,
    RECENT_CANDIDATES,
    SCORE_DIGITS,
    Filters,
    without_surface,
)
from pi_memory.storage.pg import redact  # noqa: E402
from pi_memory.storage.pg.sql import lexeme  # noqa: E402

PASSES = 2


def shard_of(project: str, shards: int) -> int:
    """The shard a workspace lives on: a stable hash of its name (Citus hashes the distribution column)."""
    return int.from_bytes(hashlib.md5(project.encode(), usedforsecurity=False).digest()[:4], "big") % shards


def project_of(path: Path) -> str:
    with path.open(encoding="utf-8") as fh:
        return Path(json.loads(fh.readline())["cwd"]).name


def import_dirs(urls: list[str], dirs: list[Path]) -> float:
    """`pi-memory import` of each folder into its archive, all at once in their own processes: wall seconds."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pi_memory", "--db", url, "import", str(folder), "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for url, folder in zip(urls, dirs, strict=True)
    ]
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"import failed: {err.decode()[-500:]}")
    return time.perf_counter() - start


def fanned_out(archives: list[Any], pool: ThreadPoolExecutor, query: str, **kw: Any) -> list[Any]:
    """Every shard's top 10, merged by score (newer first on ties): what a coordinator returns."""
    parts = pool.map(lambda a: a.search(query, limit=10, **kw), archives)
    hits = [h for part in parts for h in part]
    return sorted(hits, key=lambda h: (h.score, h.ts, h.msg_id), reverse=True)[:10]


def global_statistics(stats: list[Any], pool: ThreadPoolExecutor, query: str) -> tuple[dict[str, int], int, float]:
    """Round 1 of a coordinator: every shard's document frequencies of the query's tokens, its
    document count and its mean length (`stats`: one archive object a shard), summed (the mean
    weighed by the shards' sizes: one server reads its newest 500 messages; the shards' ids are not
    one sequence, so no newest 500 of all exists)."""

    def local(a: Any) -> tuple[dict[str, int], int, float]:
        with a.pg.searching():
            plan = a.searcher.plan(query)
            return plan.df, plan.n_docs, a.searcher._avg_len()

    parts = list(pool.map(local, stats))
    n_docs = sum(n for _df, n, _avg in parts)
    mean = sum(avg * n for _df, n, avg in parts) / max(n_docs, 1)
    df: dict[str, int] = {}
    for part, _n, _avg in parts:
        for text, count in part.items():
            df[text] = df.get(text, 0) + count
    return df, n_docs, mean


@contextmanager
def seeded(a: Any, query: str, df: dict[str, int], n_docs: int, mean: float) -> Iterator[None]:
    """A shard's searcher with the archive's global statistics: its df cache seeded, its document
    count the sum, its mean length the weighed mean."""
    real = a.pg.counters
    a.pg.counters = lambda: {**real(), "indexed_docs": n_docs}
    try:
        a.searcher.df_cache.check(n_docs)
        for t in query_tokens(query) + surface_tokens(query):
            if t.text in df:
                a.searcher.df_cache.put(lexeme(t), df[t.text])
        a.searcher._avg = (a.searcher.df_cache.generation, mean)
        yield
    finally:
        a.pg.counters = real


def two_phase(stats: list[Any], archives: list[Any], pool: ThreadPoolExecutor, query: str) -> list[Any]:
    """A fan-out with the archive's global statistics (round 1), then every shard's own search with
    them (`archives`) and the hits merged by score: round 2's global cut left out."""
    df, n_docs, mean = global_statistics(stats, pool, query)

    def search(a: Any) -> list[Any]:
        with seeded(a, query, df, n_docs, mean):
            return list(a.search(query, limit=10))

    hits = [h for part in pool.map(search, archives) for h in part]
    return sorted(hits, key=lambda h: (h.score, h.ts, h.msg_id), reverse=True)[:10]


def three_rounds(stats: list[Any], archives: list[Any], pool: ThreadPoolExecutor, query: str) -> list[Any]:
    """The plan's coordinator in full. Round 1: the global statistics. Round 2: every shard's
    candidates with what ranks them (the rare track's weight sums, the recent track's times), of
    which the coordinator keeps what one server would (the best `RARE_CANDIDATES` sums, the newest
    holders of the common anchors). Round 3: those candidates' rows scored once with the global
    statistics, merged by score. Ties go to the newer message (one server breaks them by id, which
    is insertion order there; across shards the time is). Returns (session_id, seq, ts, score) rows."""
    df, n_docs, mean = global_statistics(stats, pool, query)
    norm = normalize(query)

    def candidates(a: Any) -> dict[str, Any]:
        s = a.searcher
        with seeded(a, query, df, n_docs, mean), a.pg.searching():
            plan = s.plan(query)
            if not plan.rare and not plan.common:
                return {"plan": plan}
            weights = ranking.token_weights(plan.tokens + plan.surface, plan.df, plan.n_docs, norm)
            s.rare_candidates = RARE_CANDIDATES
            rare = _rare_with_sums(s, plan, weights)
            anchors = without_surface(plan.common)[:RECENT_ANCHORS]
            recent = s._recent_candidates(anchors, Filters(), RECENT_CANDIDATES) if anchors else []
            either = s._recent_candidates(anchors, Filters(), RECENT_CANDIDATES, True) if anchors else []
            times = _times(a, [i for i, _w in rare] + recent + either)
        return {
            "plan": plan,
            "weights": weights,
            "anchors": anchors,
            "rare": [(w, times[i], i) for i, w in rare],
            "recent": [(times[i], i) for i in recent],
            "either": [(times[i], i) for i in either],
        }

    parts = list(pool.map(candidates, archives))
    plan = parts[0]["plan"]
    if not plan.rare and not plan.common:
        return []
    rare = sorted(((w, ts, k, i) for k, p in enumerate(parts) for w, ts, i in p["rare"]), reverse=True)
    chosen = [(k, i) for _w, _ts, k, i in rare[:RARE_CANDIDATES]]
    if parts[0]["anchors"]:
        limit = RECENT_BEHIND_FULL_RARE if len(chosen) >= RARE_CANDIDATES else RECENT_CANDIDATES
        recent = sorted(((ts, k, i) for k, p in enumerate(parts) for ts, i in p["recent"]), reverse=True)
        if not recent and not chosen:
            recent = sorted(((ts, k, i) for k, p in enumerate(parts) for ts, i in p["either"]), reverse=True)
        chosen += [(k, i) for _ts, k, i in recent[:limit] if (k, i) not in chosen]
    weights = parts[0]["weights"]
    matched = [t for t in plan.tokens if plan.df.get(t.text, 0) > 0]
    prepared = scoring.prepare(matched, weights, norm, typed_forms(query), typed_runs(query))

    def score(k: int) -> list[tuple[Any, dict[str, Any]]]:
        ids = [i for kk, i in chosen if kk == k]
        if not ids:
            return []
        s = archives[k].searcher
        with seeded(archives[k], query, df, n_docs, mean), archives[k].pg.searching():
            rows = s._fetch(ids, Filters())
            lengths = s._token_lengths([int(r["id"]) for r in rows], {int(r["id"]): r["text"] for r in rows})
        results = scoring.score_documents(
            [r["lower"] for r in rows], [lengths[int(r["id"])] for r in rows], mean, prepared
        )
        return list(zip(results, rows, strict=True))

    scored = [(res, row) for part in pool.map(score, range(len(archives))) for res, row in part if res.score > 0]
    if any(res.meaningful for res, _row in scored):
        scored = [(res, row) for res, row in scored if res.meaningful]
    out = [(row["session_id"], row["seq"], row["ts"], round(res.score, SCORE_DIGITS)) for res, row in scored]
    return sorted(out, key=lambda h: (h[3], h[2]), reverse=True)[:10]


def _rare_with_sums(searcher: Any, plan: Any, weights: dict[str, float]) -> list[tuple[int, float]]:
    """The shard's rare-track candidates with their weight sums (the searcher's own statement,
    asked for the sum beside the id)."""
    real, got = searcher.pg.rows, []

    def rows(sql: str, params: Any = ()) -> list[Any]:
        head = "SELECT c.id FROM (SELECT id, sum(w) AS s"
        if sql.startswith(head):
            out = real(sql.replace("SELECT c.id FROM", "SELECT c.id, c.s FROM", 1), params)
            got.extend(out)
            return out
        return real(sql, params)

    searcher.pg.rows = rows
    try:
        searcher._rare_candidates(plan, weights, Filters())
    finally:
        del searcher.pg.rows
    return [(int(i), float(w)) for i, w in got]


def _times(a: Any, ids: list[int]) -> dict[int, int]:
    if not ids:
        return {}
    sql = f"SELECT id, ts FROM msg WHERE {a.store.sql_in_list('id')}"
    return {int(i): int(ts) for i, ts in a.store.rows(sql, (a.store.list_param(sorted(set(ids))),))}


def latencies(run: Any, queries: list[tuple[str, str]]) -> dict[str, Any]:
    values = []
    for _ in range(PASSES):
        for _kind, q in queries:
            start = time.perf_counter()
            run(q)
            values.append((time.perf_counter() - start) * 1000)
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(values), 2),
        "p95_ms": round(ordered[int(round(0.95 * (len(ordered) - 1)))], 2),
        "max_ms": round(ordered[-1], 2),
    }


def measure(single_url: str, shard_urls: list[str], queries: list[tuple[str, str]], projects: list[str]) -> dict:
    shards = len(shard_urls)
    out: dict[str, Any] = {}
    with Archive.open(single_url) as single:
        single.preload_search()
        out["single"] = latencies(lambda q: single.search(q, limit=10), queries)
    archives = [Archive.open(u) for u in shard_urls]
    try:
        for a in archives:
            a.preload_search()
        with ThreadPoolExecutor(max_workers=shards) as pool:
            out["fan_out"] = latencies(lambda q: fanned_out(archives, pool, q), queries)
    finally:
        for a in archives:
            a.close()
    archives, stats = [Archive.open(u) for u in shard_urls], [Archive.open(u) for u in shard_urls]
    try:
        for a in archives + stats:
            a.preload_search()
        with ThreadPoolExecutor(max_workers=shards) as pool:
            out["fan_out_global_stats"] = latencies(lambda q: two_phase(stats, archives, pool, q), queries)
    finally:
        for a in archives + stats:
            a.close()
    archives, stats = [Archive.open(u) for u in shard_urls], [Archive.open(u) for u in shard_urls]
    try:
        for a in archives + stats:
            a.preload_search()
        with ThreadPoolExecutor(max_workers=shards) as pool:
            out["fan_out_three_rounds"] = latencies(lambda q: three_rounds(stats, archives, pool, q), queries)
    finally:
        for a in archives + stats:
            a.close()
    # a search inside one workspace: the single server filters, the sharded layout asks one shard
    scoped = [(kind, q) for kind, q in queries[::2]]
    with Archive.open(single_url) as single:
        single.preload_search()
        out["scoped_single"] = latencies(lambda q: single.search(q, limit=10, project=projects[0]), scoped)
    with Archive.open(shard_urls[shard_of(projects[0], shards)]) as one:
        one.preload_search()
        out["scoped_one_shard"] = latencies(lambda q: one.search(q, limit=10, project=projects[0]), scoped)
    out["agreement"] = agreement(single_url, shard_urls, queries)
    return out


def agreement(single_url: str, shard_urls: list[str], queries: list[tuple[str, str]]) -> dict[str, Any]:
    """Fanned-out top 10 against the single server's: the same hits (any order), the same hits in the
    same order, and the largest relative difference of a shared hit's score."""
    counts = {
        mode: {"same_hits": 0, "same_order": 0, "overlap": 0.0, "max_score_diff": 0.0, "tenth_not_lower": 0}
        for mode in ("naive", "global_stats", "three_rounds")
    }
    archives = [Archive.open(u) for u in shard_urls]
    stats = [Archive.open(u) for u in shard_urls]
    seeded_shards = [Archive.open(u) for u in shard_urls]
    full = [Archive.open(u) for u in shard_urls]
    full_stats = [Archive.open(u) for u in shard_urls]
    try:
        with Archive.open(single_url) as single, ThreadPoolExecutor(max_workers=len(archives)) as pool:
            for _kind, q in queries:
                a = [((h.session_id, h.seq), h.score) for h in single.search(q, limit=10)]
                for mode, hits in (
                    ("naive", fanned_out(archives, pool, q)),
                    ("global_stats", two_phase(stats, seeded_shards, pool, q)),
                ):
                    b = [((h.session_id, h.seq), h.score) for h in hits]
                    _agree(counts[mode], a, b, len(queries))
                b = [((sid, seq), score) for sid, seq, _ts, score in three_rounds(full_stats, full, pool, q)]
                _agree(counts["three_rounds"], a, b, len(queries))
    finally:
        for x in archives + stats + seeded_shards + full + full_stats:
            x.close()
    for c in counts.values():
        c["max_score_diff"] = round(c["max_score_diff"], 4)
        c["overlap"] = round(c["overlap"], 3)
    return {"queries": len(queries), **counts}


def _agree(c: dict[str, Any], a: list[Any], b: list[Any], queries: int) -> None:
    """One query's fanned-out top 10 (`b`) against the single server's (`a`), added to `c`."""
    c["same_hits"] += {k for k, _ in a} == {k for k, _ in b}
    c["same_order"] += [k for k, _ in a] == [k for k, _ in b]
    c["overlap"] += len({k for k, _ in a} & {k for k, _ in b}) / max(len(a), 1) / queries
    # the shards together may score more candidates than one server: is their 10th hit as good?
    c["tenth_not_lower"] += bool(a) and bool(b) and b[-1][1] >= 0.99 * a[-1][1]
    theirs = dict(b)
    for key, score in a:
        if key in theirs and score:
            c["max_score_diff"] = max(c["max_score_diff"], abs(theirs[key] - score) / score)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default=os.environ.get("PI_MEMORY_TEST_PG"))
    parser.add_argument("--messages", type=int, default=120_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", default="bench/results/pg_shards.json")
    parser.add_argument(
        "--reuse",
        help="SINGLE,SHARD,...: schemas an earlier run filled; measure search again (its import figures are read back)",
    )
    args = parser.parse_args()
    if not args.pg:
        parser.error("give --pg URL or set PI_MEMORY_TEST_PG")
    commit = git_commit()
    if args.reuse:
        schemas = args.reuse.split(",")
        urls = [f"{args.pg}{'&' if '?' in args.pg else '?'}options=-csearch_path%3D{name}" for name in schemas]
        imported = json.loads(Path(args.json).read_text(encoding="utf-8"))["results"]["import"]
        report(args, commit, urls[0], urls[1:], imported, workspaces(urls[1:]))
        return
    corpus = Corpus(args.seed)
    work = Path(tempfile.mkdtemp(prefix="pi-memory-shards-"))
    files = write_sessions(corpus, work / "all", 0, args.messages, 1_760_000_000_000)
    dirs = [work / f"shard{k}" for k in range(args.shards)]
    for folder in dirs:
        folder.mkdir()
    by_project: dict[str, int] = {}
    for path in files:
        project = project_of(path)
        k = shard_of(project, args.shards)
        by_project[project] = k
        (dirs[k] / path.name).symlink_to(path)
    single_url = fresh_pg_schema(args.pg)
    shard_urls = [fresh_pg_schema(args.pg) for _ in range(args.shards)]
    for url in [single_url, *shard_urls]:
        with Archive.open(url):
            pass  # the schema, before the clock starts
    single_s = import_dirs([single_url], [work / "all"])
    sharded_s = import_dirs(shard_urls, dirs)
    for url in [single_url, *shard_urls]:
        analyze(url)
    sizes = []
    for url in shard_urls:
        with Archive.open(url) as a:
            st = a.stats()
            sizes.append({"messages": st.messages, "db_bytes": st.db_bytes})
    imported = {
        "single_s": round(single_s, 1),
        "single_msgs_per_s": round(args.messages / single_s),
        "sharded_s": round(sharded_s, 1),
        "sharded_msgs_per_s": round(args.messages / sharded_s),
        "shards": sizes,
    }
    report(args, commit, single_url, shard_urls, imported, sorted(by_project))


def workspaces(shard_urls: list[str]) -> list[str]:
    names: set[str] = set()
    for url in shard_urls:
        with Archive.open(url) as a:
            names |= {str(r[0]) for r in a.store.rows("SELECT DISTINCT project FROM session")}
    return sorted(names)


def report(
    args: argparse.Namespace,
    commit: str,
    single_url: str,
    shard_urls: list[str],
    imported: dict[str, Any],
    projects: list[str],
) -> None:
    results = {"import": imported, **measure(single_url, shard_urls, Corpus(args.seed).queries(), projects)}
    lines = [
        f"{args.messages} messages, {len(projects)} workspaces, {args.shards} shards (schemas of one local server)",
        f"import: single {results['import']['single_msgs_per_s']} msg/s, "
        f"{args.shards} concurrent shard imports {results['import']['sharded_msgs_per_s']} msg/s",
    ]
    for mode in (
        "single",
        "fan_out",
        "fan_out_global_stats",
        "fan_out_three_rounds",
        "scoped_single",
        "scoped_one_shard",
    ):
        r = results[mode]
        lines.append(f"{mode:17} p50 {r['p50_ms']:7} p95 {r['p95_ms']:7} max {r['max_ms']:7} ms")
    ag = results["agreement"]
    for mode in ("naive", "global_stats", "three_rounds"):
        c = ag[mode]
        lines.append(
            f"fan-out ({mode}) top 10 against the single server's: same hits {c['same_hits']}/{ag['queries']}, "
            f"same order {c['same_order']}/{ag['queries']}, mean overlap {100 * c['overlap']:.0f}%, "
            f"largest score difference {100 * c['max_score_diff']:.1f}%, "
            f"its 10th hit scores at least the single server's 10th in {c['tenth_not_lower']}/{ag['queries']}"
        )
    print("\n".join(lines))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(
        json.dumps(
            {
                "benchmark": "pg_shards",
                "commit": commit,
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()},
                "pg": redact(args.pg),
                "messages": args.messages,
                "shards": args.shards,
                "workspaces": len(projects),
                "results": results,
                "table": lines,
            },
            ensure_ascii=False,
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
