"""Benchmark the memory log: append, list, search, verify and injection cost as a workspace's log grows.

Every append verifies and replays the whole chain inside its transaction (that
is what makes a broken chain refuse writes), so its cost grows with the log;
this measures how much, at log sizes far beyond what a person writes by hand.

A process keeps what it verified and replayed (`pi_memory.memory.clear_caches`): "warm" is a
call in a process that has seen the chain before (the bridge, `watch`, the MCP server), "cold"
one in a new process (one `pi-memory` command), measured with those caches cleared first.

    python bench/memory_log.py [--sizes 100,1000,3000] [--db /tmp/bench-memory.db] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import result_header, save_json, table  # noqa: E402

from pi_memory import Archive  # noqa: E402
from pi_memory.frontends.tools.memory import MEMORY_TOOLS  # noqa: E402

try:
    from pi_memory.memory import clear_caches
except ImportError:  # a version without the caches: every call is cold

    def clear_caches() -> None:
        pass


TEXTS = ["使用 pnpm 而不是 npm", "不要修改生产数据库", "Run the linter before committing", "测试放在 tests/ 目录"]
REPEAT = 5


def timed_ms(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - start) * 1000


def cold_ms(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
    """The median of a few calls, each after the process's caches were cleared."""
    samples = []
    for _ in range(REPEAT):
        clear_caches()
        samples.append(timed_ms(fn, *args, **kwargs))
    return statistics.median(samples)


def warm_ms(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
    fn(*args, **kwargs)
    return statistics.median(timed_ms(fn, *args, **kwargs) for _ in range(REPEAT))


def run(db: Path, sizes: list[int]) -> list[dict[str, Any]]:
    archive = Archive.open(db)
    mem = archive.memories
    workspace = tempfile.mkdtemp(prefix="bench-ws-")
    written = 0
    rows = []

    def remember() -> None:
        nonlocal written
        mem.remember(workspace, f"{TEXTS[written % 4]} #{written}", priority=written % 5)
        written += 1

    for size in sizes:
        appends = []
        while written < size - 2 * REPEAT:
            appends.append(timed_ms(remember))
        row = {
            "events": size,
            "append_warm_p50_ms": statistics.median(appends[-50:] or [0.0]),
            "append_cold_ms": cold_ms(remember),
            "list_warm_ms": warm_ms(mem.list, workspace),
            "search_warm_ms": warm_ms(mem.list, workspace, "pnpm 数据库"),
            "search_cold_ms": cold_ms(mem.list, workspace, "pnpm 数据库"),
            "verify_cold_ms": cold_ms(mem.log.report, str(Path(workspace).resolve())),
            "inject_warm_ms": warm_ms(mem.injection_text, workspace, None),
            "memory_search_tool_warm_ms": warm_ms(
                MEMORY_TOOLS["memory_search"], archive, {"cwd": workspace, "query": "pnpm"}
            ),
        }
        while written < size:
            remember()
        rows.append({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()})
        print(table(list(rows[-1]), [list(rows[-1].values())]), flush=True)
    archive.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,3000")
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    header = result_header("memory-log", {k: str(v) for k, v in vars(args).items()})
    work = Path(tempfile.mkdtemp(prefix="bench-mem-"))
    os.environ["XDG_CONFIG_HOME"] = str(work / "config")  # the log's key and pins: the run's own, not the user's
    rows = run(args.db or work / "memory.db", [int(s) for s in args.sizes.split(",")])
    print(table(list(rows[0]), [list(r.values()) for r in rows]))
    save_json(args.json, {**header, "results": rows})


if __name__ == "__main__":
    main()
