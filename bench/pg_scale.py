"""Scale benchmark, PostgreSQL beside SQLite: import rate and search latency at two archive sizes.

Usage:
    python bench/pg_scale.py --pg postgresql://user:pass@127.0.0.1:5432/db [--sizes 30000,300000]
                             [--out bench/results/pg_scale.json]
    python bench/pg_scale.py --pg 'postgresql://...?options=-csearch_path%3Dbench_x' --reuse /tmp/.../bench.db
                             [--rounds 2] --out bench/results/pg_scale_reuse.json

A synthetic bilingual corpus (Zipf-distributed Chinese words, English words,
identifiers; deterministic from --seed) is written as pi session files, then
imported through the real import path into a fresh SQLite file and a fresh
PostgreSQL schema, first up to the smaller size, then up to the larger one.
At each size the same queries (one CJK char, common and rare CJK words, English
words and phrases, identifiers, mixed and long questions) run twice on a fresh
archive object (cold df cache, then warm); every latency is recorded. A team
archive's server keeps the document frequencies any searcher counted (m016):
they are cleared before each of these measurements, so the cold pass counts
everything, as it did before the server kept them. With `--counted` the server
counts every word once after each import (timed), as a bridge or `watch` does at
idle (m018), and what that count kept is put back before each measurement: the
cold pass then finds every count made, as on a server a front end counted for. Then each query is asked by a
fresh archive object once more: after another one asked the other half of the
queries (`fresh_other_*`: the tokens they share are counted already), after
another one asked the same queries (`fresh_same_*`), and alone in an archive
object of its own after that, as a CLI search is (`fresh_single_*`). After a PostgreSQL import
the bench runs ANALYZE (timed), as autovacuum would. Prints a table and writes
the figures as JSON.

`--reuse SQLITE_FILE` measures the queries only, on archives an earlier run built (the SQLite file
it names, the schema in --pg's search_path): both backends alternated for --rounds rounds, so a
server setting (`shared_buffers`, recorded with the results) can be compared on the same archives
without importing them again.

PGPASSWORD or ~/.pgpass work as usual; the URL printed is redacted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import git_commit, machine_speed_s  # noqa: E402

from pi_memory import Archive  # noqa: E402
from pi_memory.storage.pg import redact  # noqa: E402

SESSION_MESSAGES = 40
PASSES = 2


class Corpus:
    """Deterministic bilingual text with Zipf-like word frequencies."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        chars = [chr(c) for c in range(0x4E00, 0x4E00 + 3500)]
        self.zh_words = ["".join(self.rng.sample(chars, 2)) for _ in range(30_000)]
        syll = ["ka", "lo", "mi", "ne", "tor", "sha", "vel", "qui", "ran", "dex", "pol", "mur", "sen", "fi", "gra"]
        self.en_words = sorted({"".join(self.rng.choices(syll, k=self.rng.randint(1, 3))) for _ in range(20_000)})
        self.idents = [
            f"{self.rng.choice(self.en_words)}_{self.rng.choice(self.en_words)}_{self.rng.randint(0, 999)}"
            for _ in range(50_000)
        ]
        self.zh_cum = _zipf_cum(len(self.zh_words))
        self.en_cum = _zipf_cum(len(self.en_words))
        self.id_cum = _zipf_cum(len(self.idents), 0.8)

    def message(self) -> str:
        rng = self.rng
        n = rng.randint(4, 60)
        zh = rng.choices(self.zh_words, cum_weights=self.zh_cum, k=n)
        en = rng.choices(self.en_words, cum_weights=self.en_cum, k=rng.randint(0, n))
        parts = zh + en
        if rng.random() < 0.3:
            parts += rng.choices(self.idents, cum_weights=self.id_cum, k=rng.randint(1, 3))
        rng.shuffle(parts)
        out, zh_run = [], False
        for p in parts:
            is_zh = "\u4e00" <= p[0] <= "\u9fff"
            out.append(p if (is_zh and zh_run) else (" " + p))
            zh_run = is_zh
        return "".join(out).strip()

    def queries(self) -> list[tuple[str, str]]:
        rng = random.Random(7)
        z, e, i = self.zh_words, self.en_words, self.idents
        return [
            ("zh-char", z[0][0]),
            ("zh-char", z[50][1]),
            ("zh-common", z[1]),
            ("zh-common", z[5]),
            ("zh-mid", z[300]),
            ("zh-mid", z[2000]),
            ("zh-rare", z[25_000]),
            ("zh-pair", z[3] + z[40]),
            ("zh-pair", z[120] + z[900]),
            ("zh-long", "".join(rng.sample(z[:3000], 6))),
            ("zh-long", "之前" + z[10] + z[200] + z[4000] + "是怎么定的"),
            ("en-common", e[0]),
            ("en-mid", e[500]),
            ("en-rare", e[len(e) * 3 // 4]),
            ("en-phrase", f"{e[2]} {e[30]} {e[400]}"),
            ("en-long", " ".join(rng.sample(e[:5000], 7))),
            ("ident", i[0]),
            ("ident", i[100]),
            ("ident-rare", i[40_000]),
            ("ident-parts", i[5].split("_")[0] + " " + i[5].split("_")[1]),
            ("mixed", f"{z[4]} {e[3]}"),
            ("mixed", f"{z[700]} {e[800]} {i[60]}"),
            ("mixed-long", f"{z[2]}{z[9]} {e[1]} {z[33]} {i[2]} {e[70]}"),
            ("none", "zzzyx qqqvw"),
        ]


def _zipf_cum(n: int, s: float = 1.0) -> list[float]:
    total, cum = 0.0, []
    for rank in range(1, n + 1):
        total += 1.0 / rank**s
        cum.append(total)
    return cum


def write_sessions(corpus: Corpus, folder: Path, start: int, count: int, t0_ms: int) -> list[Path]:
    """`count` messages as pi v3 session files of SESSION_MESSAGES each."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(start // SESSION_MESSAGES, (start + count) // SESSION_MESSAGES):
        sid = str(uuid.UUID(int=s + 1))
        lines = [
            {
                "type": "session",
                "version": 3,
                "id": sid,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "cwd": f"/w/p{s % 37}",
            }
        ]
        parent = None
        for k in range(SESSION_MESSAGES):
            eid = f"{(s * SESSION_MESSAGES + k) % 16**8:08x}"
            role = "user" if k % 2 == 0 else "assistant"
            msg: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": corpus.message()}]}
            msg["timestamp"] = t0_ms + (s * SESSION_MESSAGES + k) * 1000
            if role == "assistant":
                msg["stopReason"] = "stop"
            lines.append(
                {
                    "type": "message",
                    "id": eid,
                    "parentId": parent,
                    "timestamp": "2026-01-01T00:00:00.000Z",
                    "message": msg,
                }
            )
            parent = eid
        path = folder / f"{sid}.jsonl"
        path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


COUNTED = False  # `--counted`: the cleared counts are those an idle count made (`count_words`)


def forget_shared_counts(target: str) -> None:
    """Clear what a team archive's server keeps of earlier searches' counts (nothing on SQLite); with
    `--counted`, put back what the server's idle count made after the import (`count_words`)."""
    if not target.startswith("postgres"):
        return
    import psycopg

    with Archive.open(target):  # an archive made by an earlier version gets the table first
        pass
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("TRUNCATE token_df")
        if COUNTED:
            conn.execute("INSERT INTO token_df SELECT * FROM bench_idle_counts")


def count_words(target: str) -> dict[str, Any]:
    """Every word counted once, as a bridge or `watch` does at idle after an import (m018): timed,
    and kept aside for `forget_shared_counts` to put back before each measurement."""
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("TRUNCATE token_df")
    with Archive.open(target) as archive:
        start = time.perf_counter()
        words = archive.store.count_words(min_rows=0)  # type: ignore[attr-defined]
        took = time.perf_counter() - start
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_idle_counts")
        conn.execute("CREATE TABLE bench_idle_counts AS SELECT * FROM token_df")
    return {"words_counted": words, "count_words_s": round(took, 1)}


def ask_once(target: str, queries: list[tuple[str, str]], scope: str) -> list[float]:
    """Each query once, on a fresh archive object (a new process's caches): the latencies."""
    out = []
    with Archive.open(target) as archive:
        archive.preload_search()
        for _, q in queries:
            t = time.perf_counter()
            archive.search(q, limit=10, scope=scope)
            out.append((time.perf_counter() - t) * 1000)
    return out


def measure_fresh(target: str, queries: list[tuple[str, str]], scope: str = "content") -> dict[str, Any]:
    """Fresh processes after others: each half of the queries asked after another process asked the
    other half (`other`), all of them after another process asked the same (`same`), and then each
    alone in a process of its own, as a CLI search is (`single`)."""
    evens, odds = queries[::2], queries[1::2]
    other: list[float] = []
    for first, then in ((evens, odds), (odds, evens)):
        forget_shared_counts(target)
        ask_once(target, first, scope)
        other += ask_once(target, then, scope)
    forget_shared_counts(target)
    ask_once(target, queries, scope)
    same = ask_once(target, queries, scope)
    single = [ms for query in queries for ms in ask_once(target, [query], scope)]  # a CLI search each
    out: dict[str, Any] = {}
    for name, values in (("other", other), ("same", same), ("single", single)):
        out.update(
            {
                f"fresh_{name}_p50_ms": round(statistics.median(values), 2),
                f"fresh_{name}_p95_ms": round(_pct(values, 95), 2),
                f"fresh_{name}_max_ms": round(max(values), 2),
            }
        )
    return out


def measure_queries(target: str, queries: list[tuple[str, str]], scope: str = "content") -> dict[str, Any]:
    """Latencies of the queries on a fresh archive object; `scope="summary"` searches run summaries."""
    forget_shared_counts(target)
    latencies: list[float] = []
    per_kind: dict[str, list[float]] = {}
    warm: list[float] = []  # the last pass: every token's document frequency cached (a long-lived process)
    with Archive.open(target) as archive:
        archive.preload_search()  # NumPy, loaded at a first search otherwise: not a query's cost
        for k in range(PASSES):
            for kind, q in queries:
                t = time.perf_counter()
                archive.search(q, limit=10, scope=scope)
                ms = (time.perf_counter() - t) * 1000
                latencies.append(ms)
                per_kind.setdefault(kind, []).append(ms)
                if k == PASSES - 1:
                    warm.append(ms)
    return {
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(_pct(latencies, 95), 2),
        "max_ms": round(max(latencies), 2),
        "warm_p95_ms": round(_pct(warm, 95), 2),
        "queries": len(latencies),
        "max_by_kind_ms": {k: round(max(v), 2) for k, v in sorted(per_kind.items())},
    }


FRESH_HEAD = (
    "backend   size      track      2-pass p95  after others: p50  p95  max   after the same: p50  p95  max"
    "   alone: p50  p95  max"
)


def fresh_table(results: dict[str, Any], sizes: list[str]) -> str:
    """A fresh process's latencies: cold, after others asked other queries, after the same ones."""
    lines = [FRESH_HEAD, "-" * len(FRESH_HEAD)]
    for backend, by_size in results.items():
        for size in sizes if backend != "same" else []:
            r = by_size[size]
            for track, pre in (("messages", ""), ("summaries", "summary_")):
                if f"{pre}fresh_other_p95_ms" not in r:
                    continue
                lines.append(
                    f"{backend:9} {size:>8}  {track:9}  {r[pre + 'p95_ms']:>10}  "
                    f"{r[pre + 'fresh_other_p50_ms']:>17}  {r[pre + 'fresh_other_p95_ms']:>4}  "
                    f"{r[pre + 'fresh_other_max_ms']:>4}  {r[pre + 'fresh_same_p50_ms']:>19}  "
                    f"{r[pre + 'fresh_same_p95_ms']:>4}  {r[pre + 'fresh_same_max_ms']:>4}"
                    f"  {r.get(pre + 'fresh_single_p50_ms', '')!s:>10}  {r.get(pre + 'fresh_single_p95_ms', '')!s:>4}"
                    f"  {r.get(pre + 'fresh_single_max_ms', '')!s:>4}"
                )
    return "\n".join(lines)


def prefixed(prefix: str, figures: dict[str, Any]) -> dict[str, Any]:
    return {f"{prefix}{k}": v for k, v in figures.items()}


def _pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def fresh_pg_schema(url: str) -> str:
    import psycopg

    schema = "bench_" + uuid.uuid4().hex[:8]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


def analyze(url: str) -> float:
    """What autovacuum does in the background after a bulk load: refresh the planner's statistics
    (the search reads the common tokens' frequencies from them). Timed, and done before measuring."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        t = time.perf_counter()
        conn.execute("ANALYZE msg")
        conn.execute("ANALYZE run")
        return round(time.perf_counter() - t, 1)


def server_settings(url: str) -> dict[str, str]:
    """The server settings that decide how often a posting's heap page is read from the OS."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ('shared_buffers', 'server_version')"
        ).fetchall()
    return {str(name): str(value) for name, value in rows}


def reuse(args: argparse.Namespace) -> dict[str, Any]:
    """Queries only on archives built before: both backends alternated, `--rounds` rounds."""
    queries = Corpus(args.seed).queries()
    out: dict[str, Any] = {}
    for k in range(args.rounds):
        for backend, target in (("sqlite", args.reuse), ("postgres", args.pg)):
            for scope in ("content", "summary"):
                figures = measure_queries(target, queries, scope)
                del figures["max_by_kind_ms"]
                out[f"round{k + 1} {backend} {scope}"] = figures
                print(f"  round {k + 1} {backend:8} {scope:7} {json.dumps(figures)}", file=sys.stderr, flush=True)
    return out


def reuse_table(results: dict[str, Any]) -> str:
    head = "round  backend   scope    p50 ms  p95 ms  max ms  warm p95"
    lines = [head, "-" * len(head)]
    for key, r in results.items():
        rnd, backend, scope = key.split()
        lines.append(
            f"{rnd:6} {backend:9} {scope:7} {r['p50_ms']:>7} {r['p95_ms']:>7} {r['max_ms']:>7} {r['warm_p95_ms']:>9}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(s) for s in args.sizes.split(",")]
    corpus = Corpus(args.seed)
    queries = corpus.queries()
    work = Path(tempfile.mkdtemp(prefix="pi-memory-bench-"))
    targets = {"sqlite": str(work / "bench.db"), "postgres": fresh_pg_schema(args.pg)}
    results: dict[str, Any] = {b: {} for b in targets}  # and "same": both backends' hits compared
    done = 0
    for size in sizes:
        files = write_sessions(corpus, work / f"upto-{size}", done, size - done, 1_760_000_000_000)
        for backend, target in targets.items():
            with Archive.open(target) as archive:
                t = time.perf_counter()
                report = archive.import_paths(files)
                took = time.perf_counter() - t
                stats = archive.stats()
            analyze_s = analyze(target) if backend == "postgres" else None
            entry = {
                "messages": stats.messages,
                "import_added": report.added,
                "import_s": round(took, 1),
                "import_msgs_per_s": round(report.added / took),
                "db_bytes": stats.db_bytes,
                "bytes_per_msg": round(stats.db_bytes / max(stats.messages, 1)),
            }
            if analyze_s is not None:
                entry["analyze_s"] = analyze_s
                if COUNTED:
                    entry.update(count_words(target))
            entry.update(measure_queries(target, queries))
            entry["runs"] = stats_runs(target)
            entry.update(prefixed("summary_", measure_queries(target, queries, scope="summary")))
            entry.update(measure_fresh(target, queries))
            entry.update(prefixed("summary_", measure_fresh(target, queries, scope="summary")))
            results[backend][str(size)] = entry
            print(f"  {backend:8} {size:>8}: {json.dumps(entry)}", file=sys.stderr, flush=True)
        results.setdefault("same", {})[str(size)] = same_hits(targets["sqlite"], targets["postgres"], queries)
        print(f"  same hits and scores {size:>8}: {results['same'][str(size)]}", file=sys.stderr, flush=True)
        done = size
    return results


def same_hits(lite_target: str, team_target: str, queries: list[tuple[str, str]]) -> dict[str, Any]:
    """How many queries get the same hits with the same scores, in the same order, on both backends
    (messages: session, seq, score; run summaries: session, start, score), and which do not."""
    out: dict[str, Any] = {}
    with Archive.open(lite_target) as lite, Archive.open(team_target) as team:
        for scope in ("content", "summary"):
            differ = [q for _kind, q in queries if _hit_keys(lite, q, scope) != _hit_keys(team, q, scope)]
            out[scope] = f"{len(queries) - len(differ)}/{len(queries)}"
            if differ:
                out[f"{scope}_differ"] = differ
    return out


def _hit_keys(archive: Any, query: str, scope: str) -> list[tuple[Any, ...]]:
    hits = archive.search(query, limit=10, scope=scope)
    if scope == "summary":
        return [(h.run.session_id, h.run.start_ts, h.score) for h in hits]
    return [(h.session_id, h.seq, h.score) for h in hits]


def stats_runs(target: str) -> int:
    with Archive.open(target) as archive:
        return int(archive.store.scalar("SELECT count(*) FROM run") or 0)


def table(results: dict[str, Any], sizes: list[str]) -> str:
    head = "backend   size      import msg/s  p50 ms  p95 ms  max ms  bytes/msg    runs  runs p50  runs p95  runs max"
    lines = [head, "-" * len(head)]
    for backend, by_size in results.items():
        if backend == "same":
            continue
        for size in sizes:
            r = by_size[size]
            lines.append(
                f"{backend:9} {size:>8}  {r['import_msgs_per_s']:>12}  {r['p50_ms']:>6}  {r['p95_ms']:>6}  "
                f"{r['max_ms']:>6}  {r['bytes_per_msg']:>9}  {r['runs']:>6}  {r['summary_p50_ms']:>8}  "
                f"{r['summary_p95_ms']:>8}  {r['summary_max_ms']:>8}"
            )
        first, last = by_size[sizes[0]], by_size[sizes[-1]]
        ratio = last["p95_ms"] / max(first["p95_ms"], 0.01)
        runs_ratio = last["summary_p95_ms"] / max(first["summary_p95_ms"], 0.01)
        lines.append(f"{backend:9} p95({sizes[-1]})/p95({sizes[0]}) = {ratio:.2f}, run summaries {runs_ratio:.2f}")
    for size in sizes:
        lite, team = results["sqlite"][size], results["postgres"][size]
        same = results.get("same", {}).get(size, {})
        lines.append(
            f"{size:>8}: postgres/sqlite import {team['import_msgs_per_s'] / max(lite['import_msgs_per_s'], 1):.2f}, "
            f"p95 {team['p95_ms'] / max(lite['p95_ms'], 0.01):.2f}, summary p95 "
            f"{team['summary_p95_ms'] / max(lite['summary_p95_ms'], 0.01):.2f}; same hits and scores: "
            f"messages {same.get('content')}, summaries {same.get('summary')}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default=os.environ.get("PI_MEMORY_TEST_PG"), help="PostgreSQL URL (a schema is made)")
    parser.add_argument("--sizes", default="30000,300000")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="bench/results/pg_scale.json")
    parser.add_argument("--reuse", metavar="SQLITE_FILE", help="measure queries only on archives built before")
    parser.add_argument("--rounds", type=int, default=2, help="with --reuse: rounds of both backends")
    parser.add_argument(
        "--counted", action="store_true", help="measure after the server counted every word at idle (m018)"
    )
    args = parser.parse_args()
    global COUNTED
    COUNTED = args.counted
    if not args.pg:
        parser.error("give --pg URL or set PI_MEMORY_TEST_PG")
    commit = git_commit()  # what is measured: the code as it is when the run starts
    if args.reuse:
        results = reuse(args)
        text = reuse_table(results)
        print(text)
        write(
            args.out,
            {
                "benchmark": "pg_scale_reuse",
                "commit": commit,
                **about(args),
                "results": results,
                "table": text.splitlines(),
            },
        )
        return
    results = run(args)
    sizes = [s.strip() for s in args.sizes.split(",")]
    text = table(results, sizes) + "\n\n" + fresh_table(results, sizes)
    print(text)
    out = {
        "benchmark": "pg_scale",
        "commit": commit,
        **about(args),
        "corpus": {"seed": args.seed, "messages_per_session": SESSION_MESSAGES, "passes": PASSES},
        "counted_at_idle": args.counted,
        "results": results,
        "p95_ratio": {
            b: round(results[b][sizes[-1]]["p95_ms"] / max(results[b][sizes[0]]["p95_ms"], 0.01), 2)
            for b in ("sqlite", "postgres")
        },
        "table": text.splitlines(),
    }
    write(args.out, out)


def about(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "system": platform.platform(),
            # the shared machine's speed and load as the run ends (`common.machine_speed_s`)
            "python_loop_2m_s": machine_speed_s(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
        "pg": redact(args.pg),
        "server": server_settings(args.pg),
    }


def write(path: str, out: dict[str, Any]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(out, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
