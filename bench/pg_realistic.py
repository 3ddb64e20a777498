"""The team archive on realistic sessions and the questions people type, PostgreSQL beside SQLite.

Usage:
    python bench/pg_realistic.py --corpus ../shared/corpora --qsets bench/data --pg URL
                                 [--messages 50000] [--questions 40] [--out bench/results/pg_realistic.json]

Design idea: `pg_scale.py` measures the plan on a synthetic corpus, one query per kind; people ask
questions in their own words over agent sessions, and nearly every question brings words no earlier
one had, whose document frequencies are counted at that moment. This bench writes realistic
sessions (`realistic.py`: short requests, long replies, tool calls and errors, many short sessions),
imports them through the real import path into a fresh SQLite file and a fresh PostgreSQL schema
(then `VACUUM ANALYZE`, as autovacuum would after a bulk load), and asks `search_bench.py`'s query
mix (Chinese and English natural questions, the public question sets' questions, hand queries,
mixed, single characters, common and rare words) on both:

- `first`: one process, each question asked once, the team server's kept counts cleared first: a
  long-lived process (the bridge, the MCP server, the viewer) meeting new questions;
- `counted`: the same after the server counted every word of the archive once, as any team
  member's bridge or `watch` does at idle (`PgStore.count_words`, m018; its time is reported with
  the import's);
- `fresh`: each question again in an archive object of its own (a CLI search), every count kept by
  the server by then.

Each PostgreSQL search's statements are timed and summed by what they do (`STATEMENTS`): where the
difference from SQLite goes. The hits of every question are compared (session, seq, score).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import git_commit  # noqa: E402
from pg_scale import about, count_words, fresh_pg_schema, write  # noqa: E402
from realistic import SessionWriter, load_pools  # noqa: E402
from search_bench import query_mix  # noqa: E402

from pi_memory import Archive  # noqa: E402

# What a PostgreSQL search's statements do, by the first words of their SQL
STATEMENTS = {
    "pi_memory_capped_counts": "counts (exact, up to the cap)",
    "pi_memory_window_dfs": "window estimates (frequent tokens)",
    "pi_memory_kept_dfs": "kept counts looked up",
    "most_common_elems": "ANALYZE's statistics",
    "pi_memory_mean_length": "mean length",
    "sum(q.w)": "rare track",
    "ORDER BY m.id DESC": "recent track",
    "m.text": "candidates' rows",
    "ntokens FROM msg": "candidates' lengths",
    "set_config": "settings and counters",
    "pg_extension": "pgvector check",
}


def what(sql: bytes) -> str:
    text = sql.decode(errors="replace")
    return next((kind for key, kind in STATEMENTS.items() if key in text), "other")


def write_archives(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The sessions written once, imported into both backends; their rates."""
    folder = work / "sessions"
    SessionWriter(load_pools(args.corpus), random.Random(args.seed)).write(folder, args.messages)
    targets = {"sqlite": str(work / "realistic.db"), "postgres": fresh_pg_schema(args.pg)}
    out: dict[str, Any] = {"targets": targets}
    for backend, target in targets.items():
        with Archive.open(target) as archive:
            start = time.perf_counter()
            report = archive.import_paths([folder])
            took = time.perf_counter() - start
        out[backend] = {"messages": report.added, "import_msgs_per_s": round(report.added / took)}
        if backend == "postgres":
            import psycopg

            with psycopg.connect(target, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE msg")
                conn.execute("VACUUM ANALYZE run")
                conn.execute("TRUNCATE token_df")
        print(f"  {backend}: {json.dumps(out[backend])}", file=sys.stderr, flush=True)
    return out


class StatementClock:
    """Times every statement the archive's connection runs, summed by `what` it does."""

    def __init__(self) -> None:
        self.ms: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()

    def __enter__(self) -> StatementClock:
        import psycopg

        self._real = real = psycopg.Connection.execute
        clock = self

        def timed(conn: Any, sql: Any, params: Any = None, **kw: Any) -> Any:
            start = time.perf_counter()
            try:
                return real(conn, sql, params, **kw)
            finally:
                kind = what(sql if isinstance(sql, bytes) else str(sql).encode())
                clock.ms[kind] += (time.perf_counter() - start) * 1000
                clock.calls[kind] += 1

        psycopg.Connection.execute = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        import psycopg

        psycopg.Connection.execute = self._real  # type: ignore[method-assign]


def ask(target: str, mix: list[tuple[str, str]], fresh: bool, clock: StatementClock | None) -> dict[str, Any]:
    """Each question once: in one archive object (`fresh` False) or each in its own. The latencies,
    and each question's hits (session, seq, score)."""
    ms: list[float] = []
    hits: list[list[tuple[Any, ...]]] = []
    archive = None if fresh else Archive.open(target)
    try:
        if archive is not None:
            archive.preload_search()
        for query, _kind in mix:
            one = Archive.open(target) if fresh else archive
            assert one is not None
            if fresh:
                one.preload_search()
            start = time.perf_counter()
            if clock is not None:
                with clock:
                    found = one.search(query, limit=10)
            else:
                found = one.search(query, limit=10)
            ms.append((time.perf_counter() - start) * 1000)
            hits.append([(h.session_id, h.seq, round(h.score, 9)) for h in found])
            if fresh:
                one.close()
    finally:
        if archive is not None:
            archive.close()
    return {"ms": ms, "hits": hits}


def summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "max_ms": round(ordered[-1], 2),
        "mean_ms": round(statistics.fmean(ordered), 2),
    }


def by_kind(mix: list[tuple[str, str]], ms: list[float]) -> dict[str, float]:
    kinds: dict[str, list[float]] = {}
    for (_, kind), value in zip(mix, ms, strict=True):
        kinds.setdefault(kind, []).append(value)
    return {kind: round(statistics.median(values), 2) for kind, values in sorted(kinds.items())}


MODES = ("first", "counted", "fresh")


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="pi-memory-realistic-"))
    built = write_archives(args, work)
    targets = built.pop("targets")
    mix = query_mix(args.corpus, args.questions, args.seed, args.qsets)
    random.Random(args.seed).shuffle(mix)  # the kinds interleaved, as a day's questions are
    results: dict[str, Any] = {"archives": built, "questions": len(mix), "kinds": dict(Counter(k for _, k in mix))}
    for mode in MODES:
        if mode == "counted":  # what the searches kept cleared, then every word counted at idle
            built["postgres"].update(count_words(targets["postgres"]))
            print(f"  counted: {json.dumps(built['postgres'])}", file=sys.stderr, flush=True)
        clock = StatementClock()
        lite = ask(targets["sqlite"], mix, mode == "fresh", None)
        team = ask(targets["postgres"], mix, mode == "fresh", clock)
        same = sum(a == b for a, b in zip(lite["hits"], team["hits"], strict=True))
        total = sum(team["ms"])
        results[mode] = {
            "sqlite": summary(lite["ms"]),
            "postgres": summary(team["ms"]),
            "p95_ratio": round(summary(team["ms"])["p95_ms"] / max(summary(lite["ms"])["p95_ms"], 0.01), 2),
            "mean_ratio": round(summary(team["ms"])["mean_ms"] / max(summary(lite["ms"])["mean_ms"], 0.01), 2),
            "postgres_statements": {
                kind: {"ms": round(ms, 1), "calls": clock.calls[kind], "share": round(ms / total, 3)}
                for kind, ms in clock.ms.most_common()
            },
            "postgres_outside_sql_share": round(1 - sum(clock.ms.values()) / total, 3),
            "median_by_kind_ms": {"sqlite": by_kind(mix, lite["ms"]), "postgres": by_kind(mix, team["ms"])},
            "same_hits": f"{same}/{len(mix)}",
        }
        print(f"  {mode}: {json.dumps(results[mode])}", file=sys.stderr, flush=True)
    return results


def table(results: dict[str, Any]) -> str:
    head = "mode    backend   p50 ms  p95 ms  max ms  mean ms   same hits"
    lines = [head, "-" * len(head)]
    for mode in MODES:
        r = results[mode]
        for backend in ("sqlite", "postgres"):
            s = r[backend]
            same = r["same_hits"] if backend == "postgres" else ""
            lines.append(
                f"{mode:7} {backend:9} {s['p50_ms']:>6} {s['p95_ms']:>7} {s['max_ms']:>7} {s['mean_ms']:>8}   {same}"
            )
        lines.append(f"{mode:7} postgres/sqlite: p95 {r['p95_ratio']}x, mean {r['mean_ratio']}x")
        for kind, row in r["postgres_statements"].items():
            lines.append(f"          {row['share'] * 100:5.1f}%  {row['ms']:>8} ms  x{row['calls']:<5} {kind}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    parser.add_argument("--qsets", type=Path, default=Path(__file__).parent / "data")
    parser.add_argument("--pg", default=os.environ.get("PI_MEMORY_TEST_PG"), help="PostgreSQL URL (a schema is made)")
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--questions", type=int, default=40, help="per language (search_bench.py's mix)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default="bench/results/pg_realistic.json")
    args = parser.parse_args()
    if not args.pg:
        parser.error("give --pg URL or set PI_MEMORY_TEST_PG")
    commit = git_commit()
    results = run(args)
    text = table(results)
    print(text)
    out = {
        "benchmark": "pg_realistic",
        "commit": commit,
        **about(args),
        "args": {"messages": args.messages, "questions": args.questions, "seed": args.seed},
        "results": results,
        "table": text.splitlines(),
    }
    write(args.out, out)


if __name__ == "__main__":
    main()
