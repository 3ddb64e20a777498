"""Live writes under contention (issue 38): 8 live writers + an import + 2 searchers on one archive.

Design idea: the design's target is stated for this crowd (p99 <= 10 ms, max <= 100 ms, nothing
lost), so the benchmark makes it: a base archive is imported first, then while one more import
runs (`pi-memory import`, its parse worker included), 8 writer processes capture a message each
every `--every-ms` as a pi bridge does (`live_mode`: indexing and runs left to an idle moment,
which comes after each `--turn` messages, as pi's turns leave one), and 2 searchers search the
hand queries in a loop. Each writer times every capture in its own process (wall, lock waits
included) and from its scheduled moment (what a waiting request would see), and keeps the text
of every message it was told was written; afterwards every such message must be in the archive.
For each capture over `--slow-ms` the writer notes what its connection waited for (`busy`: the
write lock, in SQLite's busy handler) and the rest, so a tail can be told apart: the lock held by
someone, or this process's own work (a checkpoint, a dictionary). A capture that found the lock
taken may be kept in its writer's spool (`ingest/spool.py`): the table says how many were, and the
longest one waited there before its writer wrote it (what a search by another process could miss
meanwhile). `--baseline REV` runs the same phases with another revision's code in the same run.

    python bench/contention.py --corpus ../shared/corpora --baseline main --json bench/results/contention.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import export_revision, latency_summary, result_header, save_json, table  # noqa: E402
from import_bench import Words, build_shape, remove_archive  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

WRITER = r"""
import json, sys, time, random
from pi_memory import Archive
db, n, every_s, turn, seed, stop_at = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1000, int(sys.argv[4]), sys.argv[5], float(sys.argv[6])
words = json.loads(sys.stdin.readline())
rng = random.Random(seed)
busy = [0.0]
with Archive.open(db) as archive:
    archive.live_mode()
    store = archive.store
    handler = store.conn.getbusyhandler() if hasattr(store.conn, "getbusyhandler") else None
    from pi_memory.storage import store as store_module
    # the store's own limit (a spooling capture waits LIVE_WAIT_S), where the code measured has one
    limit = [lambda: store.busy_limit_s] if hasattr(store, "busy_limit_s") else []
    waiter = store_module._busy_waiter(store._line.busy, *limit)
    def timed_wait(retries, _w=waiter):
        t = time.perf_counter()
        try:
            return _w(retries)
        finally:
            busy[0] += time.perf_counter() - t
    store.conn.setbusyhandler(timed_wait)
    sid = f"contention-{seed}"
    archive.ensure_session(sid, "/home/dev/contention")
    print("ready", flush=True)
    sys.stdin.readline()  # go
    service, response, slow, acked = [], [], [], []
    start = time.perf_counter()
    i = 0
    while i < n and time.time() < stop_at:
        due = start + i * every_s
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        text = f"{sid} message {i}: " + " ".join(rng.choice(words) for _ in range(rng.randint(8, 60)))
        message = {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": text}], "timestamp": int(time.time() * 1000)}
        busy[0] = 0.0
        t = time.perf_counter()
        archive.capture_message(sid, message)
        done = time.perf_counter()
        service.append((done - t) * 1000)
        response.append((done - max(due, start)) * 1000)
        acked.append(text)
        if service[-1] > float(sys.argv[7]):
            slow.append({"ms": round(service[-1], 1), "busy_ms": round(busy[0] * 1000, 1), "at_s": round(t - start, 2)})
        i += 1
        if i % turn == 0:  # a pi turn ends: the bridge's idle moment
            archive.catch_up()
            archive.checkpoint()
    live = archive.live
spooled, longest = getattr(live, "spooled", 0), getattr(live, "longest_wait_s", 0.0)  # close wrote the rest
print(json.dumps({"service": service, "response": response, "slow": slow, "acked": acked, "spooled": spooled, "spool_wait_ms": longest * 1000}))
"""

SEARCHER = r"""
import json, sys, time
from pi_memory import Archive
db, stop_at = sys.argv[1], float(sys.argv[2])
queries = ["响应式", "缓存索引", "the whale", "nginx proxy_buffering", "宝玉", "lock", "组件响应式原理", "how does it work"]
took = []
with Archive.open(db) as archive:
    archive.preload_search()
    print("ready", flush=True)
    sys.stdin.readline()
    i = 0
    while time.time() < stop_at:
        t = time.perf_counter()
        archive.search(queries[i % len(queries)])
        took.append((time.perf_counter() - t) * 1000)
        i += 1
        time.sleep(0.05)
print(json.dumps(took))
"""


def _spawn(code: str, src: Path, args: list[str], stdin: str = "") -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(src))
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin and proc.stdout
    if stdin:
        proc.stdin.write(stdin + "\n")
        proc.stdin.flush()
    return proc


def _ready(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.strip() == "ready", f"a child did not start: {line!r}"


def _go(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()


def _import(src: Path, folder: Path, db: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.Popen(
        [sys.executable, "-m", "pi_memory", "--db", str(db), "import", str(folder), "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def phase(src: Path, base: Path, crowd: Path, work: Path, args: argparse.Namespace, words: list[str]) -> dict[str, Any]:
    """One measurement: a fresh base archive, then the crowd."""
    db = work / "contention.db"
    remove_archive(db)
    done = _import(src, base, db)
    out, err = done.communicate()
    assert done.returncode == 0, err
    stop_at = time.time() + args.seconds
    vocabulary = json.dumps(words)
    writers = [
        _spawn(
            WRITER,
            src,
            [str(db), str(args.messages), str(args.every_ms), str(args.turn), str(n), str(stop_at), str(args.slow_ms)],
            vocabulary,
        )
        for n in range(args.writers)
    ]
    searchers = [_spawn(SEARCHER, src, [str(db), str(stop_at)]) for _ in range(args.searchers)]
    _ready(writers + searchers)
    importer = _import(src, crowd, db)
    t0 = time.perf_counter()
    _go(writers + searchers)
    results = [json.loads(p.communicate()[0]) for p in writers]
    searches = [t for p in searchers for t in json.loads(p.communicate()[0])]
    report_text, err = importer.communicate()
    import_s = time.perf_counter() - t0
    assert importer.returncode == 0, err
    lost = _lost(src, db, results)
    service = [ms for r in results for ms in r["service"]]
    response = [ms for r in results for ms in r["response"]]
    slow = sorted((s for r in results for s in r["slow"]), key=lambda s: -s["ms"])
    return {
        "captures": len(service),
        "service_ms": {
            **latency_summary(service),
            "over_10ms": sum(ms > 10 for ms in service),
            "over_100ms": sum(ms > 100 for ms in service),
        },
        "response_ms": latency_summary(response),
        "search_ms": latency_summary(searches),
        "import": {**json.loads(report_text), "seconds_with_crowd": round(import_s, 1)},
        "lost": lost,
        # captures kept in their writer's spool because the lock was taken, and the longest one
        # waited there before its writer wrote it (the lag a search by another process could see)
        "spooled": sum(r.get("spooled", 0) for r in results),
        "spool_wait_max_ms": round(max((r.get("spool_wait_ms", 0.0) for r in results), default=0.0), 1),
        "slowest": slow[:12],
    }


LOST = r"""
import json, sys
from pi_memory import Archive
from pi_memory.storage.store import decode_text
wanted = json.loads(sys.stdin.read())
with Archive.open(sys.argv[1]) as archive:
    have = {decode_text(r[0]) for r in archive.store.rows("SELECT text FROM msg WHERE session_id LIKE 'contention-%'")}
print(sum(1 for text in wanted if text not in have))
"""


def _lost(src: Path, db: Path, results: list[dict[str, Any]]) -> int:
    """Messages a writer was told were written that the archive does not hold."""
    wanted = [t for r in results for t in r["acked"]]
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, "-c", LOST, str(db)],
        input=json.dumps(wanted),
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--base", type=int, default=20_000, help="messages in the archive before the crowd")
    ap.add_argument("--import-messages", type=int, default=20_000, help="messages the import under contention adds")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--searchers", type=int, default=2)
    ap.add_argument("--every-ms", type=float, default=50.0, help="a writer captures a message this often")
    ap.add_argument("--turn", type=int, default=20, help="messages of a pi turn: the bridge's idle moment after each")
    ap.add_argument("--messages", type=int, default=400, help="most messages per writer")
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the writers and searchers run")
    ap.add_argument("--slow-ms", type=float, default=10.0, help="captures over this are itemized")
    ap.add_argument("--repeat", type=int, default=1, help="phases per code, alternating")
    ap.add_argument("--baseline", default=None, help="git revision measured the same way, same run")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    header = result_header("contention", {k: str(v) for k, v in vars(args).items()})
    work = args.work or Path(tempfile.mkdtemp(prefix="pi-memory-contention-"))
    work.mkdir(parents=True, exist_ok=True)
    word_source = Words(args.corpus, random.Random(38))
    folders = {}
    for name, n in (("base", args.base), ("crowd", args.import_messages)):
        folder = work / f"sessions-{name}"
        shutil.rmtree(folder, ignore_errors=True)
        word_source.rng = random.Random(f"contention {name}")
        facts = build_shape(folder, word_source, "long", n)
        folders[name] = folder
        print(f"{name}: {facts['files']} files, {facts['messages']} messages", flush=True)
    words = word_source.cut(20_000).split()[:3000] or ["word"]
    codes = [("this", REPO / "src")]
    if args.baseline:
        codes.append((args.baseline, export_revision(args.baseline, work / "baseline")))
    rows = []
    for _ in range(args.repeat):
        for label, src in codes:
            print(f"measuring {label} ...", flush=True)
            rows.append({"label": label, **phase(src, folders["base"], folders["crowd"], work, args, words)})
    print()
    print(
        table(
            [
                "code",
                "captures",
                "p50",
                "p99",
                "max",
                ">10 ms",
                ">100 ms",
                "resp p99",
                "search p95",
                "import s",
                "spooled",
                "spool max ms",
                "lost",
            ],
            [
                [
                    r["label"],
                    r["captures"],
                    r["service_ms"]["p50"],
                    r["service_ms"]["p99"],
                    r["service_ms"]["max"],
                    r["service_ms"]["over_10ms"],
                    r["service_ms"]["over_100ms"],
                    r["response_ms"]["p99"],
                    r["search_ms"]["p95"],
                    r["import"]["seconds_with_crowd"],
                    r["spooled"],
                    r["spool_wait_max_ms"],
                    r["lost"],
                ]
                for r in rows
            ],
        )
    )
    for r in rows:
        print(f"\n{r['label']}: slowest captures (ms, of which waiting for the write lock):")
        for s in r["slowest"][:6]:
            print(f"  {s['ms']:8.1f}  busy {s['busy_ms']:8.1f}  at {s['at_s']} s")
    save_json(args.json, {**header, "rows": rows})


if __name__ == "__main__":
    main()
