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
alone); how many fanned-out top-10s hold the single server's hits, and with the same scores.

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import git_commit  # noqa: E402
from pg_scale import Corpus, analyze, fresh_pg_schema, write_sessions  # noqa: E402

from pi_memory import Archive  # noqa: E402
from pi_memory.core.text import query_tokens, surface_tokens  # noqa: E402
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


def two_phase(stats: list[Any], archives: list[Any], pool: ThreadPoolExecutor, query: str) -> list[Any]:
    """A fan-out with the archive's global statistics: first every shard's document frequencies of
    the query's tokens and its document count (`stats`: one archive object a shard), summed; then
    every shard searches with those (`archives`: their df caches seeded, their document count the
    sum), and the hits are merged by score. What a coordinator does so that a sharded archive ranks
    as one server would."""

    def local(a: Any) -> tuple[dict[str, int], int, float]:
        with a.pg.searching():
            plan = a.searcher.plan(query)
            return plan.df, plan.n_docs, a.searcher._avg_len()

    parts = list(pool.map(local, stats))
    n_docs = sum(n for _df, n, _avg in parts)
    # the mean length BM25 divides by: the shards' means weighed by their sizes (one server reads its
    # newest 500 messages; the shards' ids are not one sequence, so no newest 500 of all exists)
    mean = sum(avg * n for _df, n, avg in parts) / max(n_docs, 1)
    df: dict[str, int] = {}
    for part, _n, _avg in parts:
        for text, count in part.items():
            df[text] = df.get(text, 0) + count
    tokens = query_tokens(query) + surface_tokens(query)

    def search(a: Any) -> list[Any]:
        real = a.pg.counters
        a.pg.counters = lambda: {**real(), "indexed_docs": n_docs}
        try:
            a.searcher.df_cache.check(n_docs)
            for t in tokens:
                if t.text in df:
                    a.searcher.df_cache.put(lexeme(t), df[t.text])
            a.searcher._avg = (a.searcher.df_cache.generation, mean)
            return list(a.search(query, limit=10))
        finally:
            a.pg.counters = real

    hits = [h for part in pool.map(search, archives) for h in part]
    return sorted(hits, key=lambda h: (h.score, h.ts, h.msg_id), reverse=True)[:10]


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
        for mode in ("naive", "global_stats")
    }
    archives = [Archive.open(u) for u in shard_urls]
    stats = [Archive.open(u) for u in shard_urls]
    seeded = [Archive.open(u) for u in shard_urls]
    try:
        with Archive.open(single_url) as single, ThreadPoolExecutor(max_workers=len(archives)) as pool:
            for _kind, q in queries:
                a = [((h.session_id, h.seq), h.score) for h in single.search(q, limit=10)]
                for mode, hits in (
                    ("naive", fanned_out(archives, pool, q)),
                    ("global_stats", two_phase(stats, seeded, pool, q)),
                ):
                    b = [((h.session_id, h.seq), h.score) for h in hits]
                    c = counts[mode]
                    c["same_hits"] += {k for k, _ in a} == {k for k, _ in b}
                    c["same_order"] += [k for k, _ in a] == [k for k, _ in b]
                    c["overlap"] += len({k for k, _ in a} & {k for k, _ in b}) / max(len(a), 1) / len(queries)
                    # the shards together score more candidates than one server: is their 10th hit as good?
                    c["tenth_not_lower"] += bool(a) and bool(b) and b[-1][1] >= 0.99 * a[-1][1]
                    theirs = dict(b)
                    for key, score in a:
                        if key in theirs and score:
                            c["max_score_diff"] = max(c["max_score_diff"], abs(theirs[key] - score) / score)
    finally:
        for a in archives + stats + seeded:
            a.close()
    for c in counts.values():
        c["max_score_diff"] = round(c["max_score_diff"], 4)
        c["overlap"] = round(c["overlap"], 3)
    return {"queries": len(queries), **counts}


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
    for mode in ("single", "fan_out", "fan_out_global_stats", "scoped_single", "scoped_one_shard"):
        r = results[mode]
        lines.append(f"{mode:17} p50 {r['p50_ms']:7} p95 {r['p95_ms']:7} max {r['max_ms']:7} ms")
    ag = results["agreement"]
    for mode in ("naive", "global_stats"):
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
