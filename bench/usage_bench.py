"""`pi-memory usage` on big archives, and what keeping usage costs the import.

Design idea: the promise is "`usage daily` on a 1M-message archive in <= 200 ms". The views read
`usage_sum` (requests summed per quarter hour, session, provider and model), so their cost grows
with the quarter hours that saw requests, not with messages; this measures that on archives
grown through the real import path from `import_bench.py`'s realistic 40-message pi sessions
(user ~250 chars, log-normal assistant replies, tool calls and failed results, every assistant
line with its usage, a session every 10 minutes: 1M messages span ~174 days), copied at each
size. Per size, in a fresh process: each view's first answer (cold) and the median of
`--repeat` more (warm), the library's time; and `pi-memory usage daily` as a user runs it (the
whole command, interpreter start included). While growing, the writer's CPU inside
`insert_usage` is summed, and one batch of files is parsed with and without the usage step: the
share of the import's CPU that usage takes.

    python bench/usage_bench.py --corpus ../shared/corpora --sizes 30000,300000,1000000 \
        --work /tmp/pi-memory-usage --json bench/results/usage.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import grow_archive, result_header, save_json, table  # noqa: E402
from import_bench import Words, session_file  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
VIEWS = ("daily", "weekly", "monthly", "session", "model", "project")


class Batches:
    """Session files of the long shape, numbered on from the last batch (one generator, seeded)."""

    def __init__(self, corpus: Path) -> None:
        self.words = Words(corpus, random.Random("usage_bench"))
        self.next_no = 0
        self.parse_sample: list[Path] = []

    def __call__(self, folder: Path, messages: int) -> None:
        written = 0
        while written < messages:
            path, count = session_file(folder, self.words, self.next_no, 40)
            self.next_no += 1
            written += count
        if not self.parse_sample:
            self.parse_sample = [p for p in sorted(folder.rglob("*.jsonl"))[:300]]
            self.parse_cost = parse_cost(self.parse_sample)


def parse_cost(files: list[Path]) -> dict[str, float]:
    """CPU seconds to parse and prepare some files for the writer, with and without the usage step
    (reading each request's usage and pricing it), alternated, the fastest of three each."""
    from pi_memory.core.sources import pi as pi_source
    from pi_memory.ingest import prepare

    def once() -> float:
        start = time.process_time()
        for f in files:
            prepare.parse_and_tokenize(str(f), None)
        return time.process_time() - start

    with_usage, without = [], []
    usage_of, rows_of = pi_source.usage_of, prepare.rows_of
    for _ in range(3):
        with_usage.append(once())
        pi_source.usage_of, prepare.rows_of = (lambda e: None), (lambda sid, entries: [])
        without.append(once())
        pi_source.usage_of, prepare.rows_of = usage_of, rows_of
    return {"with_usage_s": round(min(with_usage), 3), "without_usage_s": round(min(without), 3)}


class WriteMeter:
    """The writer's CPU inside `insert_usage` (thread time), and the importing process's CPU (the
    parse workers' apart), summed over the imports."""

    def __init__(self) -> None:
        from pi_memory.archive.api import Archive
        from pi_memory.storage.store import Store

        self.seconds, self.rows, self.import_seconds = 0.0, 0, 0.0
        original = Store.insert_usage
        importing = Archive.import_paths

        def timed_import(archive: Any, *a: Any, **k: Any) -> Any:
            start = time.process_time()
            try:
                return importing(archive, *a, **k)
            finally:
                self.import_seconds += time.process_time() - start

        Archive.import_paths = timed_import  # type: ignore[method-assign]

        def timed(store: Any, rows: Any) -> int:
            start = time.thread_time()
            try:
                return original(store, rows)
            finally:
                self.seconds += time.thread_time() - start
                self.rows += len(rows)

        Store.insert_usage = timed  # type: ignore[method-assign]


def child(db: Path, repeat: int) -> dict[str, Any]:
    """In a fresh process: each view's first (cold) and median warm time, the statusline, a ledger."""
    from pi_memory.archive.api import Archive

    out: dict[str, Any] = {}
    with Archive.open(db) as archive:
        sid = archive.store.scalar("SELECT session_id FROM usage_sum ORDER BY bucket DESC LIMIT 1")
        calls = {view: (lambda v=view: archive.usage(v)) for view in VIEWS}
        calls["statusline"] = lambda: archive.usage_today()
        calls["ledger"] = lambda: archive.usage_ledger(str(sid))
        for name, call in calls.items():
            times = []
            for _ in range(repeat + 1):
                start = time.perf_counter()
                result = call()
                times.append((time.perf_counter() - start) * 1000)
            out[name] = {"cold_ms": round(times[0], 2), "warm_p50_ms": round(statistics.median(times[1:]), 2)}
            if name == "daily":
                out["daily_rows"] = len(result.lines)
                out["requests"] = result.total.requests
        out["usage_sum_rows"] = archive.store.scalar("SELECT count(*) FROM usage_sum")
    return out


def cli_daily(db: Path) -> float:
    """`pi-memory usage daily` as a user runs it: the whole command, interpreter start included."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pi_memory", "--db", str(db), "usage", "daily"], env=env, check=True, capture_output=True
    )
    return round((time.perf_counter() - start) * 1000, 1)


def measure(db: Path, repeat: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, __file__, "--child", str(db), "--repeat", str(repeat)]
    found = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
    found["cli_daily_ms"] = min(cli_daily(db) for _ in range(3))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--sizes", default="30000,300000,1000000")
    ap.add_argument("--work", type=Path, default=Path("/tmp/pi-memory-usage"))
    ap.add_argument("--repeat", type=int, default=5, help="warm answers per view after the cold one")
    ap.add_argument("--reuse", action="store_true", help="measure archives an earlier run built")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.repeat)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    header = result_header("usage", {k: str(v) for k, v in vars(args).items()})
    args.work.mkdir(parents=True, exist_ok=True)
    grown: list[dict[str, Any]] = []
    cost: dict[str, Any] = {}
    if not args.reuse:
        batches, meter = Batches(args.corpus), WriteMeter()
        grown = grow_archive(args.work, sizes, batches, "usage")
        cost = {
            "importer_cpu_s": round(meter.import_seconds, 2),
            "insert_usage_cpu_s": round(meter.seconds, 2),
            "usage_rows": meter.rows,
            "insert_usage_us_per_row": round(meter.seconds / max(1, meter.rows) * 1e6, 1),
            "parse_300_files": batches.parse_cost,
        }
    rows = []
    for size in sizes:
        found = measure(args.work / f"usage-{size}.db", args.repeat)
        found["size"] = size
        rows.append(found)
        print(f"size {size}: {json.dumps(found)}", flush=True)
    print()
    print(
        table(
            [
                "messages",
                "requests",
                "usage_sum rows",
                *(f"{v} cold/warm ms" for v in (*VIEWS, "ledger")),
                "CLI daily ms",
            ],
            [
                [
                    r["size"],
                    r["requests"],
                    r["usage_sum_rows"],
                    *(f"{r[v]['cold_ms']}/{r[v]['warm_p50_ms']}" for v in (*VIEWS, "ledger")),
                    r["cli_daily_ms"],
                ]
                for r in rows
            ],
        )
    )
    if cost:
        p = cost["parse_300_files"]
        share = cost["insert_usage_cpu_s"] / max(cost["importer_cpu_s"], 1e-9)
        print(
            f"\nimport: insert_usage {cost['insert_usage_cpu_s']} s of the importer's {cost['importer_cpu_s']} s CPU "
            f"({share:.1%}; {cost['insert_usage_us_per_row']} us a request); parsing 300 files "
            f"{p['with_usage_s']} s with the usage step, {p['without_usage_s']} s without"
        )
    save_json(args.json, {**header, "grown": grown, "import_cost": cost, "results": rows})


if __name__ == "__main__":
    main()
