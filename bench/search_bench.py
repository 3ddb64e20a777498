"""Search latency on realistic archives, per kind of query, beside FTS5 bm25 in the same run.

Design idea: the promise is "p95 <= 10 ms and max <= 50 ms from 10k to 1M
messages" on what people really type. So the archive is built from realistic
agent sessions (`realistic.py`: short user requests, long log-normal assistant
replies, tool calls and errors, summaries, short and long sessions) through
the real import path, grown once and copied at each size; the queries are
natural-language questions in Chinese (CMRC trial) and English (built from the
novels, and questions about code), the questions of bench/quality.py's public sets (English
questions over paragraphs, questions about dated conversations in English and Chinese: these
are questions about other texts, so they time the candidate work of a question that has no
answer here), the spec's hand queries, single characters,
very common words, rare words and mixed queries. Each kind gets its own
p50/p95/max, and FTS5 `ORDER BY bm25` over all query tokens runs on the same
database in the same run (the baseline the ratio is read against: the machine
is shared and noisy). The first query of a fresh process is reported as cold. The same mix is
also timed on the summary track (`scope="summary"`: run summaries, the model's first recall step).

    python bench/search_bench.py --corpus ../shared/corpora --sizes 10000,30000,300000,1000000 \
        --work /tmp/pi-memory-search --json bench/results/search.json
    python bench/search_bench.py --corpus ../shared/corpora --sizes 30000 --work /tmp/pi-memory-search --reuse
    python bench/search_bench.py --corpus ../shared/corpora --work /tmp/pi-memory-search --reuse --baseline ed4f935

`--baseline REV` adds a same-run A/B: the query mix run by REV's code and by this code on the same
archive, each in its own process (CPU time per query, so a neighbour's load counts less), the two
alternated `--ab-rounds` times; each query's median over all passes and rounds, p50/p95/max per kind
for both, and this code's p95 over the baseline's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    HAND_QUERIES,
    Timer,
    export_revision,
    grow_archive,
    latency_summary,
    result_header,
    save_json,
    table,
)
from qsets import read_set  # noqa: E402
from realistic import CODE_QUESTIONS, SessionWriter, chinese_questions, english_questions, load_pools  # noqa: E402
from scale import bm25_query  # noqa: E402  (the same baseline as scale.py)

from pi_memory.archive.api import Archive

BATCH_MESSAGES = 10_000

FIXED_QUERIES: list[tuple[str, str]] = [(q, "hand") for q in HAND_QUERIES] + [
    ("龙", "1-char"),
    ("锁", "1-char"),
    ("灿", "1-char"),
    ("的", "common"),
    ("the", "common"),
    ("我们", "common"),
    ("组件", "common"),
    ("索引", "2-char"),
    ("cetology", "rare"),
    ("Queequeg harpoon", "rare"),
    ("defineEmits", "rare"),
    ("proxy_buffering", "rare"),
    ("Vue 响应式", "mixed"),
    ("nextTick 更新", "mixed"),
    ("v-model 组件", "mixed"),
    ("npm test 失败", "mixed"),
    ("Elizabeth Darcy letter", "mixed"),
]


QSETS = Path(__file__).parent / "data"  # bench/quality.py's public question sets (bench/qsets_build.py)


def public_questions(folder: Path, n: int, rng: random.Random) -> list[tuple[str, str]]:
    """The questions of bench/quality.py's public sets, as people asked them: English questions over
    paragraphs (BoolQ, PubMedQA) and questions about dated conversations in English (REALTALK) and
    Chinese (MemDaily). A set not built under `folder` is left out, said."""

    def rows(name: str) -> list[dict[str, Any]]:
        if not (folder / name / f"{name}.jsonl.gz").exists():
            print(f"question set {name} not found under {folder} (bench/qsets_build.py builds it): left out")
            return []
        return read_set(folder, name)

    def some(texts: list[str]) -> list[str]:
        return rng.sample(texts, min(n, len(texts)))

    english = [r["q"] for r in rows("boolq") + rows("pubmedqa")]
    talks = [qa["q"] for talk in rows("realtalk") for qa in talk["qa"]]
    days = [r["q"] for r in rows("memdaily")]
    return (
        [(q, "question-en-qa") for q in some(english)]
        + [(q, "conversation-en") for q in some(talks)]
        + [(q, "conversation-zh") for q in some(days)]
    )


def query_mix(corpus: Path, n_questions: int, seed: int, qsets: Path = QSETS) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pools = load_pools(corpus)
    zh = chinese_questions(corpus)
    zh = rng.sample(zh, min(n_questions, len(zh)))
    en = english_questions(pools, rng, n_questions - len(CODE_QUESTIONS)) + CODE_QUESTIONS
    return (
        FIXED_QUERIES
        + [(q, "question-zh") for q in zh]
        + [(q, "question-en") for q in en]
        + public_questions(qsets, n_questions // 2, rng)
    )


def build(corpus: Path, sizes: list[int], work: Path, seed: int) -> list[dict[str, Any]]:
    """Grow one archive through the import path, keeping a copy at each size."""
    writer = SessionWriter(load_pools(corpus), random.Random(seed))
    return grow_archive(
        work, sizes, lambda folder, remaining: writer.write(folder, min(BATCH_MESSAGES, remaining)), "search"
    )


def cold_first_query(db: Path, query: str) -> float:
    """The first search of a fresh process (module imports excluded, NumPy's too, which scoring loads
    at its first use: `core.scoring.preload`, as the long-lived front ends do; archive open included)."""
    code = (
        "import sys, time; from pi_memory.archive.api import Archive; from pi_memory.core import scoring\n"
        "scoring.preload()\n"
        "t=time.perf_counter(); a=Archive.open(sys.argv[1]); a.search(sys.argv[2], limit=10)\n"
        "print((time.perf_counter()-t)*1000)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(db), query], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def by_kind(mix: list[tuple[str, str]], ms: list[float]) -> dict[str, dict[str, float]]:
    kinds: dict[str, list[float]] = {}
    for (_, kind), t in zip(mix, ms, strict=True):
        kinds.setdefault(kind, []).append(t)
    kinds["all"] = list(ms)
    return {k: latency_summary(v) for k, v in kinds.items()}


def measure(db: Path, mix: list[tuple[str, str]], passes: int, bm25_cap: int) -> dict[str, Any]:
    Archive.open(db).close()  # an archive made by an older version is upgraded once, not in a cold query
    cold = [cold_first_query(db, q) for q in ("我一直搞不清楚响应式是怎么实现的", "how does the reactive system work")]
    archive = Archive.open(db)
    runs = timed_passes(archive, mix, passes, time.perf_counter)
    best = [sorted(r)[len(r) // 2] for r in runs]  # median over passes: one query's cost, less a noisy neighbour
    summary = [sorted(r)[len(r) // 2] for r in timed_passes(archive, mix, passes, time.perf_counter, "summary")]
    worst = sorted(((b, q) for b, (q, _) in zip(best, mix, strict=True)), reverse=True)[:8]
    sample = mix[:: max(1, len(mix) // bm25_cap)][:bm25_cap]
    bm25_ms = []
    for q, _ in sample:
        with Timer() as t:
            bm25_query(archive, q)
        bm25_ms.append(t.ms)
    archive.close()
    return {
        "project": by_kind(mix, best),
        "summary_track": by_kind(mix, summary),
        "fts5_bm25": by_kind(sample, bm25_ms),
        "cold_ms": [round(c, 1) for c in cold],
        "slowest": [[q, round(b, 2)] for b, q in worst],
    }


def timed_passes(
    archive: Archive, mix: list[tuple[str, str]], passes: int, clock: Callable[[], float], scope: str = "content"
) -> list[list[float]]:
    """Each query's ms by `clock` (wall or CPU) in each of `passes` passes, after one warm-up pass
    (the df cache, the page cache); `scope="summary"`: the summary track (run summaries), the
    model's first recall step."""
    for q, _ in mix:
        archive.search(q, limit=10, scope=scope)
    runs: list[list[float]] = [[] for _ in mix]
    for _ in range(passes):
        for i, (q, _) in enumerate(mix):
            start = clock()
            archive.search(q, limit=10, scope=scope)
            runs[i].append((clock() - start) * 1000)
    return runs


def cpu_per_query(db: Path, mix: list[tuple[str, str]], passes: int) -> list[list[float]]:
    """Each query's CPU ms in each of `passes` warm passes, in this process."""
    archive = Archive.open(db)
    runs = timed_passes(archive, mix, passes, time.process_time)
    archive.close()
    return runs


def child_cpu_per_query(src: Path, db: Path, args: argparse.Namespace) -> list[list[float]]:
    """`cpu_per_query` run by the code in `src` (a fresh process, `PYTHONPATH` first)."""
    cmd = [sys.executable, __file__, "--child", str(db), "--corpus", str(args.corpus)]
    cmd += ["--questions", str(args.questions), "--seed", str(args.seed), "--passes", str(args.passes)]
    out = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=str(src)), capture_output=True, text=True, check=True)
    runs: list[list[float]] = json.loads(out.stdout)
    return runs


def same_run_ab(
    db: Path, mix: list[tuple[str, str]], codes: dict[str, Path], args: argparse.Namespace
) -> dict[str, Any]:
    """Both codes on one archive, alternated; per query the median of every pass of every round."""
    runs: dict[str, list[list[float]]] = {label: [[] for _ in mix] for label in codes}
    for _ in range(args.ab_rounds):
        for label, src in codes.items():
            for i, times in enumerate(child_cpu_per_query(src, db, args)):
                runs[label][i] += times
    medians = {label: [sorted(t)[len(t) // 2] for t in per_query] for label, per_query in runs.items()}
    return {label: by_kind(mix, ms) for label, ms in medians.items()}


def print_ab(size: int, ab: dict[str, Any], baseline: str) -> None:
    rows = []
    for kind in ab["this"]:
        old, new = ab[baseline][kind], ab["this"][kind]
        ratio = new["p95"] / max(old["p95"], 1e-9)
        rows.append([kind, old["n"], old["p50"], old["p95"], new["p50"], new["p95"], f"x{ratio:.2f}"])
    print(f"\n{size} messages, same-run A/B in CPU ms ({baseline} vs this code)")
    heads = ["kind", "n", f"{baseline} p50", f"{baseline} p95", "this p50", "this p95", "p95 this/base"]
    print(table(heads, rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--sizes", default="10000,30000,300000,1000000")
    ap.add_argument("--work", type=Path, default=Path("/tmp/pi-memory-search"))
    ap.add_argument("--reuse", action="store_true", help="measure archives built by an earlier run")
    ap.add_argument("--questions", type=int, default=150, help="questions per language")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--bm25-queries", type=int, default=60, help="queries of the mix run through FTS5 bm25")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--baseline", default=None, help="git revision measured beside this code (same-run A/B)")
    ap.add_argument("--ab-rounds", type=int, default=2, help="times the two codes alternate per archive")
    ap.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)  # one A/B side, JSON on stdout
    args = ap.parse_args()
    if args.child:
        print(json.dumps(cpu_per_query(args.child, query_mix(args.corpus, args.questions, args.seed), args.passes)))
        return
    header = result_header("search", {k: str(v) for k, v in vars(args).items()})
    sizes = [int(s) for s in args.sizes.split(",") if s]
    args.work.mkdir(parents=True, exist_ok=True)
    builds_file = args.work / "builds.json"
    builds = json.loads(builds_file.read_text()) if args.reuse and builds_file.exists() else []
    if not args.reuse:
        builds = build(args.corpus, sizes, args.work, args.seed)
        builds_file.write_text(json.dumps(builds))
    mix = query_mix(args.corpus, args.questions, args.seed)
    results = {}
    for size in sizes:
        print(f"measuring {len(mix)} queries at {size} ...", flush=True)
        results[size] = measure(args.work / f"search-{size}.db", mix, args.passes, args.bm25_queries)
    kinds = list(results[sizes[0]]["project"])
    for size in sizes:
        r = results[size]
        rows = [
            [
                k,
                r["project"][k]["n"],
                r["project"][k]["p50"],
                r["project"][k]["p95"],
                r["project"][k]["max"],
                r["fts5_bm25"].get(k, {}).get("p50", "-"),
                r["fts5_bm25"].get(k, {}).get("p95", "-"),
            ]
            for k in kinds
        ]
        for row in rows:
            row[5:5] = [r["summary_track"][row[0]]["p50"], r["summary_track"][row[0]]["p95"]]
            row[7:7] = [r["summary_track"][row[0]]["max"]]
        print(f"\n{size} messages (cold first query: {r['cold_ms']} ms)")
        heads = ["kind", "n", "p50 ms", "p95 ms", "max ms", "runs p50", "runs p95", "runs max", "bm25 p50", "bm25 p95"]
        print(table(heads, rows))
        print("slowest:", ", ".join(f"{q[:40]!r} {ms}" for q, ms in r["slowest"][:5]))
    ratio = results[sizes[-1]]["project"]["all"]["p95"] / max(results[sizes[0]]["project"]["all"]["p95"], 1e-9)
    mid = next((s for s in sizes if s >= 30_000), sizes[0])
    ratio_30k = results[sizes[-1]]["project"]["all"]["p95"] / max(results[mid]["project"]["all"]["p95"], 1e-9)
    print(f"\np95({sizes[-1]}) / p95({sizes[0]}) = {ratio:.2f};  p95({sizes[-1]}) / p95({mid}) = {ratio_30k:.2f}")
    data = header
    data.update({"builds": builds, "search": {str(k): v for k, v in results.items()}, "p95_ratio_vs_30k": ratio_30k})
    if args.baseline:
        data["baseline"] = args.baseline
        data["same_run_ab_cpu_ms"] = ab_results(args, sizes, mix)
    data["queries"] = [{"query": q, "kind": k} for q, k in mix]
    save_json(args.json, data)


def ab_results(args: argparse.Namespace, sizes: list[int], mix: list[tuple[str, str]]) -> dict[str, Any]:
    """The same-run A/B at every size, printed and returned."""
    with tempfile.TemporaryDirectory() as tmp:
        codes = {args.baseline: export_revision(args.baseline, Path(tmp)), "this": Path(__file__).parents[1] / "src"}
        out = {}
        for size in sizes:
            print(f"A/B: {len(mix)} queries at {size}, {args.ab_rounds} rounds ...", flush=True)
            out[str(size)] = same_run_ab(args.work / f"search-{size}.db", mix, codes, args)
            print_ab(size, out[str(size)], args.baseline)
    return out


if __name__ == "__main__":
    main()
