"""How long from a line appended to a session file until `pi-memory watch` has archived it.

    python bench/watch_latency.py [N]

Runs `python -m pi_memory watch` on a temporary Claude Code folder, appends N user lines one at
a time (waiting for each), and prints p50 / p95 / max latency in milliseconds. Nothing outside
the temporary folder is touched.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pi_memory import Archive


def line(n: int) -> bytes:
    return (
        json.dumps(
            {
                "type": "user",
                "uuid": f"u{n}",
                "parentUuid": None,
                "sessionId": "bench-watch",
                "cwd": "/w",
                "timestamp": f"2026-01-01T10:{n // 60 % 60:02d}:{n % 60:02d}Z",
                "message": {"role": "user", "content": f"latency probe number {n}"},
            }
        ).encode()
        + b"\n"
    )


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        folder = home / "claude" / "projects" / "-w"
        folder.mkdir(parents=True)
        session = folder / "bench-watch.jsonl"
        session.write_bytes(line(0))
        db = home / "archive.db"
        env = dict(os.environ, PI_MEMORY_DB=str(db), CLAUDE_CONFIG_DIR=str(home / "claude"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "pi_memory", "watch", "--agent", "claude"], env=env, stderr=subprocess.DEVNULL
        )
        try:
            while not db.exists():
                time.sleep(0.05)
            with Archive.open(db) as archive:
                count = lambda: int(archive.store.scalar("SELECT count(*) FROM msg"))  # noqa: E731
                while count() < 1:
                    time.sleep(0.01)
                latencies = []
                for i in range(1, n + 1):
                    start = time.perf_counter()
                    with open(session, "ab") as fh:
                        fh.write(line(i))
                    while count() < i + 1:
                        time.sleep(0.001)
                    latencies.append((time.perf_counter() - start) * 1000)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    latencies.sort()
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    print(f"{n} appends: p50 {statistics.median(latencies):.1f} ms, p95 {p95:.1f} ms, max {latencies[-1]:.1f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
