"""Live write latency: `capture_message` in-process, and a capture round trip through `pi-memory bridge`.

    python bench/bridge_bench.py [--n 2000] [--db /tmp/bench.db] [--keep]

Messages are synthetic but shaped like real pi traffic (user prompts, assistant
replies with tool calls, tool results, failed tool results; Chinese and English).
The archive starts empty unless --db names an existing file. Target (design
brief): p50 <= 0.5 ms, p99 <= 2 ms per live write.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pi_memory import Archive
from pi_memory.storage.writes import run_deferred_hooks

WORDS = "缓存 索引 重建 断流 proxy_buffering SSE nginx reactive ref computed vue 组件 渲染 build test error".split()


def message(i: int, base_ms: int) -> dict[str, Any]:
    text = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12 + i % 30)) + f" #{i}"
    ts = base_ms + i
    kind = i % 4
    if kind == 0:
        return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}
    if kind == 1:
        blocks = [
            {"type": "text", "text": text},
            {"type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {"command": f"grep -r {i} src"}},
        ]
        return {"role": "assistant", "content": blocks, "stopReason": "toolUse", "model": "faux-1", "timestamp": ts}
    is_error = kind == 3
    return {
        "role": "toolResult",
        "toolCallId": f"c{i}",
        "toolName": "bash",
        "content": [{"type": "text", "text": text * 4}],
        "isError": is_error,
        "timestamp": ts,
    }


def percentiles(samples_ms: list[float]) -> str:
    s = sorted(samples_ms)
    p = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return f"n={len(s)} p50={p(0.50):.3f} ms  p90={p(0.90):.3f} ms  p99={p(0.99):.3f} ms  max={s[-1]:.3f} ms  mean={statistics.fmean(s):.3f} ms"


def bench_in_process(db: Path, n: int, turn: int) -> tuple[list[float], list[float]]:
    """Wall and CPU ms per capture; like the bridge, run summaries and checkpoints wait for the idle gap
    between turns (untimed).

    CPU time (user + system of this process) is the write's own cost, free of the waits a
    loaded machine adds when other processes hold the cores.
    """
    base = int(time.time() * 1000)
    wall: list[float] = []
    cpu: list[float] = []
    with Archive.open(db) as archive:
        archive.store.defer_checkpoints()
        archive.store.defer_hooks()
        archive.ensure_session("bench-in-process", "/home/dev/bench")
        for i in range(n):
            m = message(i, base)
            t0, c0 = time.perf_counter(), time.process_time()
            archive.capture_message("bench-in-process", m)
            wall.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
            if turn and i % turn == turn - 1:
                run_deferred_hooks(archive.store)
                archive.store.checkpoint()
        run_deferred_hooks(archive.store)
    return wall, cpu


def bench_bridge(db: Path, n: int, turn: int, gap: float) -> list[float]:
    """Capture round trips; with `turn`, a pause of `gap` seconds after every `turn` messages (the bridge checkpoints then)."""
    env = dict(os.environ, PI_MEMORY_DB=str(db))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pi_memory", "bridge"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    assert proc.stdin and proc.stdout

    def call(req_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin and proc.stdout
        proc.stdin.write(
            json.dumps({"id": req_id, "method": method, "params": params}, ensure_ascii=False).encode() + b"\n"
        )
        proc.stdin.flush()
        response: dict[str, Any] = json.loads(proc.stdout.readline())
        if "error" in response:
            raise SystemExit(f"bridge error: {response['error']}")
        return response

    call(0, "session_start", {"session_id": "bench-bridge", "cwd": "/home/dev/bench"})
    base = int(time.time() * 1000) + 10_000_000
    out = []
    for i in range(n):
        params = {"session_id": "bench-bridge", "message": message(i, base)}
        t0 = time.perf_counter()
        call(i + 1, "capture", params)
        out.append((time.perf_counter() - t0) * 1000)
        if turn and i % turn == turn - 1:
            time.sleep(gap)
    call(n + 1, "shutdown", {})
    proc.wait(timeout=30)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--db", type=Path)
    ap.add_argument("--turn", type=int, default=40, help="messages per turn, then an idle gap (0: no gaps)")
    ap.add_argument("--gap", type=float, default=0.3, help="idle seconds between turns")
    ap.add_argument("--keep", action="store_true", help="keep the temporary archive")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pi-memory-bench-")
    db = a.db or Path(tmp) / "bench.db"
    print(f"archive {db}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"turns of {a.turn} messages, {a.gap} s idle between turns" if a.turn else "continuous, no idle gaps")
    wall, cpu = bench_in_process(db, a.n, a.turn)
    print("capture_message in-process:    " + percentiles(wall))
    print("  same, CPU time only:          " + percentiles(cpu))
    print("capture via bridge round trip: " + percentiles(bench_bridge(db, a.n, a.turn, a.gap)))
    with Archive.open(db) as archive:
        print(f"archive now holds {archive.stats().messages} messages")
    if not a.keep and a.db is None:
        for f in Path(tmp).iterdir():
            f.unlink()
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
