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
from pi_memory.storage.pg import redact  # noqa: E402

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
    """Fanned-out top 10 against the single server's: same hits (any order), same hits and scores."""
    same_hits = same_scores = 0
    archives = [Archive.open(u) for u in shard_urls]
    try:
        with Archive.open(single_url) as single, ThreadPoolExecutor(max_workers=len(archives)) as pool:
            for _kind, q in queries:
                a = [(h.session_id, h.seq, h.score) for h in single.search(q, limit=10)]
                b = [(h.session_id, h.seq, h.score) for h in fanned_out(archives, pool, q)]
                same_hits += {x[:2] for x in a} == {x[:2] for x in b}
                same_scores += a == b
    finally:
        for a in archives:
            a.close()
    return {"queries": len(queries), "same_hits": same_hits, "same_hits_and_scores": same_scores}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default=os.environ.get("PI_MEMORY_TEST_PG"))
    parser.add_argument("--messages", type=int, default=120_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", default="bench/results/pg_shards.json")
    args = parser.parse_args()
    if not args.pg:
        parser.error("give --pg URL or set PI_MEMORY_TEST_PG")
    commit = git_commit()
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
    projects = sorted(by_project)
    results = {
        "import": {
            "single_s": round(single_s, 1),
            "single_msgs_per_s": round(args.messages / single_s),
            "sharded_s": round(sharded_s, 1),
            "sharded_msgs_per_s": round(args.messages / sharded_s),
            "shards": sizes,
        },
        **measure(single_url, shard_urls, Corpus(args.seed).queries(), projects),
    }
    lines = [
        f"{args.messages} messages, {len(projects)} workspaces, {args.shards} shards (schemas of one local server)",
        f"import: single {results['import']['single_msgs_per_s']} msg/s, "
        f"{args.shards} concurrent shard imports {results['import']['sharded_msgs_per_s']} msg/s",
    ]
    for mode in ("single", "fan_out", "scoped_single", "scoped_one_shard"):
        r = results[mode]
        lines.append(f"{mode:17} p50 {r['p50_ms']:7} p95 {r['p95_ms']:7} max {r['max_ms']:7} ms")
    ag = results["agreement"]
    lines.append(
        f"fan-out top 10 = single server's: same hits {ag['same_hits']}/{ag['queries']}, "
        f"same hits and scores {ag['same_hits_and_scores']}/{ag['queries']}"
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
