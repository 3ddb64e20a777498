"""Web viewer benchmark: the server time of every page on a large archive (target <= 100 ms).

Design idea: time what the server does for one page, in process, through the ASGI app
(Starlette's test client: routing, the archive calls, the template; no network and no
browser). Each page is asked `--repeat` times; the first answer is reported on its own
(cold caches), the rest as p50/p95/max. The archive is an argument (the scale
benchmark's `scale-1000000.db`, say); without one, one of `--messages` generated
messages is built through the import path with the scale benchmark's corpus mix, plus
a memory log of a few hundred events to list and verify.

    python bench/web_bench.py --db /tmp/pi-memory-scale/scale-1000000.db --json bench/results/web.json
    python bench/web_bench.py --corpus ../shared/corpora --messages 100000 --work /tmp/pi-memory-web
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import latency_summary, result_header, save_json, table  # noqa: E402

from pi_memory.archive.api import Archive

TARGET_MS = 100
MEMORY_EVENTS = 300
WORKSPACE = "/home/dev/bench-workspace"
QUERIES = ["响应式", "the whale and the sea", "Vue 响应式", "组件", "Elizabeth Darcy letter", "nextTick 更新"]


def build(corpus: Path, messages: int, work: Path, seed: int) -> Path:
    """An archive of `messages` generated messages (the scale benchmark's build, one size)."""
    from scale import build as grow

    work.mkdir(parents=True, exist_ok=True)
    grow(corpus, [messages], work, seed)
    return work / f"scale-{messages}.db"


def ensure_memories(archive: Archive) -> None:
    """A workspace memory log to list and verify (added once; a re-run reuses it)."""
    if archive.memory_verify(WORKSPACE)[0][1].rows >= MEMORY_EVENTS:
        return
    for i in range(MEMORY_EVENTS // 3):
        archive.memory_remember(WORKSPACE, f"bench fact number {i}: the build uses make target t{i}", kind="fact")
        archive.memory_propose(WORKSPACE, f"bench proposal {i}: tests live in tests/t{i}", kind="fact")
        archive.memory_remember(WORKSPACE, f"bench preference {i}", kind="preference")


def pages(archive: Archive) -> list[tuple[str, str]]:
    """(name, URL) of every page, pointed at real sessions, runs and messages of this archive."""
    newest = archive.sessions(limit=1)[0]
    hit = archive.search(QUERIES[0], limit=1)[0]
    run = archive.runs(limit=1)[0]
    out = [("overview", "/")]
    out += [(f"search messages {q}", f"/search?q={q}") for q in QUERIES]
    out += [(f"search runs {q}", f"/search?q={q}&track=runs") for q in QUERIES[:3]]
    out += [
        ("search sessions 响应式", "/search?q=响应式&track=sessions"),
        ("search filtered", f"/search?q=响应式&project={hit.project}&kind=user&since=2000-01-01&until=2999-01-01"),
        ("search as you type (fragment)", "/search?q=Vue 响应式&partial=1"),
        ("sessions list", "/search?track=sessions&limit=100"),
        ("session first page", f"/session/{newest.id}"),
        ("session at a hit", f"/session/{hit.session_id}?at={hit.msg_id}"),
        ("session last page", f"/session/{newest.id}?last=1"),
        ("run", f"/read/{run.address}"),
        ("message detail", f"/read/{run.address}/m1"),
        ("message raw", f"/read/{run.address}/m1?raw=1"),
        ("timeline (kept 30 s; cold: read)", "/timeline"),
        ("timeline day", f"/timeline?day={time.strftime('%Y-%m-%d', time.gmtime(run.start_ts / 1000))}"),
        ("memory index", "/memory"),
        ("memory workspace", f"/memory?ws={WORKSPACE}"),
        ("not found", "/session/no-such-session-at-all"),
    ]
    return out


def measure(archive: Archive, repeat: int) -> list[dict[str, Any]]:
    from starlette.testclient import TestClient

    from pi_memory.frontends.web.app import Settings, create_app

    client = TestClient(create_app(archive, Settings(write=True)), raise_server_exceptions=True)
    out = []
    for name, url in pages(archive):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
        if response.status_code >= 500:
            raise SystemExit(f"{name}: {response.status_code} {response.text[:200]}")
        warm = latency_summary(times[1:] or times)
        row = {"page": name, "url": url, "status": response.status_code, "bytes": len(response.content)}
        out.append({**row, "cold_ms": round(times[0], 2), **{k: round(v, 2) for k, v in warm.items()}})
        print(f"  {name:<36} cold {times[0]:7.1f} ms  p50 {warm['p50']:6.1f}  max {warm['max']:6.1f}", flush=True)
    return out


def overview_uncached(archive: Archive, repeat: int) -> dict[str, Any]:
    """The overview's figures computed afresh (what a visitor waits for once per `OVERVIEW_TTL_S`)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        archive.overview()
        times.append((time.perf_counter() - t0) * 1000)
    summary = {k: round(v, 2) for k, v in latency_summary(times[1:]).items()}
    print(f"  {'overview figures, uncached':<36} cold {times[0]:7.1f} ms  p50 {summary['p50']:6.1f}", flush=True)
    return {
        "page": "overview figures, uncached",
        "url": "Archive.overview()",
        "status": 200,
        "bytes": 0,
        "cold_ms": round(times[0], 2),
        **summary,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, default=None, help="a large archive to measure (a copy is measured)")
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--messages", type=int, default=100_000, help="size of the archive built without --db")
    ap.add_argument("--work", type=Path, default=None, help="folder for the built archive (default: a temp dir)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    header = result_header("web", {k: str(v) for k, v in vars(args).items()})
    work = args.work or Path(tempfile.mkdtemp(prefix="pi-memory-web-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.db:
        db = work / "web-bench.db"  # a copy: the memory log is added to it, never to the original
        shutil.copyfile(args.db, db)
    else:
        db = build(args.corpus, args.messages, work, args.seed)
    with Archive.open(db) as archive:
        archive.preload_search()  # as `pi-memory serve` does at its start (NumPy: not a page's cost)
        ensure_memories(archive)
        stats = archive.stats()
        print(f"archive {db}: {stats.messages} messages, {stats.sessions} sessions, {stats.db_bytes >> 20} MB")
        rows = measure(archive, args.repeat)
        rows.append(overview_uncached(archive, max(3, args.repeat // 5)))
    over = [r["page"] for r in rows if r["p95"] > TARGET_MS]
    print()
    head = ["page", "status", "KB", "cold ms", "p50 ms", "p95 ms", "max ms"]
    print(
        table(
            head,
            [
                [r["page"], r["status"], round(r["bytes"] / 1024, 1), r["cold_ms"], r["p50"], r["p95"], r["max"]]
                for r in rows
            ],
        )
    )
    print(f"\npages over {TARGET_MS} ms at p95: {', '.join(over) if over else 'none'}")
    data = header
    data.update(
        {
            "archive": {"messages": stats.messages, "sessions": stats.sessions, "db_bytes": stats.db_bytes},
            "target_ms": TARGET_MS,
            "pages": rows,
            "over_target": over,
        }
    )
    save_json(args.json, data)


if __name__ == "__main__":
    main()
