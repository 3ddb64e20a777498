"""Benchmark the memory log: append, list, search, verify and injection cost as a workspace's log grows.

Every append verifies and replays the whole chain inside its transaction (that
is what makes a broken chain refuse writes), so its cost grows with the log;
this measures how much, at log sizes far beyond what a person writes by hand.

    python bench/memory_log.py [--sizes 100,1000,3000] [--db /tmp/bench-memory.db]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pi_memory import Archive
from pi_memory.frontends.tools.memory import MEMORY_TOOLS

TEXTS = ["使用 pnpm 而不是 npm", "不要修改生产数据库", "Run the linter before committing", "测试放在 tests/ 目录"]


def timed_ms(fn: object, *args: object, **kwargs: object) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def run(db: Path, sizes: list[int]) -> None:
    archive = Archive.open(db)
    mem = archive.memories
    workspace = tempfile.mkdtemp(prefix="bench-ws-")
    written = 0
    print("events  append p50/max ms  list ms  search ms  verify ms  inject ms  memory_search ms")
    for size in sizes:
        appends = []
        while written < size:
            appends.append(timed_ms(mem.remember, workspace, f"{TEXTS[written % 4]} #{written}", priority=written % 5))
            written += 1
        tail = appends[-50:] or [0.0]
        list_ms = timed_ms(mem.list, workspace)
        search_ms = timed_ms(mem.list, workspace, "pnpm 数据库")
        verify_ms = timed_ms(mem.log.report, str(Path(workspace).resolve()))
        inject_ms = timed_ms(mem.injection_text, workspace, None)
        tool_ms = timed_ms(MEMORY_TOOLS["memory_search"], archive, {"cwd": workspace, "query": "pnpm"})
        print(
            f"{size:6d}  {statistics.median(tail):7.2f}/{max(tail):6.2f}  {list_ms:7.1f}  {search_ms:8.1f}  "
            f"{verify_ms:8.1f}  {inject_ms:8.1f}  {tool_ms:8.1f}"
        )
    archive.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,3000")
    parser.add_argument("--db", type=Path, default=None)
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="bench-mem-")) / "memory.db"
    run(db, [int(s) for s in args.sizes.split(",")])


if __name__ == "__main__":
    main()
