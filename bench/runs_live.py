"""Cost of keeping runs current during live capture: one message at a time into one long run.

Usage:
    python bench/runs_live.py [--steps N]

Writes a user message, then N tool-loop steps (assistant tool calls and tool
results taken from the vue-reactive fixture, with fresh timestamps), one
`write_messages` call each as live capture does, then the final reply. Prints
the median and p99 milliseconds per step (write plus run hook) and the cost of
the step that closes the run (the one full re-summarize).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from pi_memory import Archive  # noqa: E402
from pi_memory.core.sources.pi import read_session_file  # noqa: E402
from pi_memory.ingest.importer import message_from_entry  # noqa: E402
from pi_memory.storage.store import SessionRow  # noqa: E402
from pi_memory.storage.writes import write_messages  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "pi" / "pi-0.73.1-vue-reactive-zh.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    entries = read_session_file(FIXTURE).messages
    steps = [e for e in entries if e.rendered and (e.rendered.meta.get("tools") or e.rendered.role == "tool_result")]
    final = next(
        e for e in entries if e.rendered and e.rendered.role == "assistant" and not e.rendered.meta.get("tools")
    )
    with tempfile.TemporaryDirectory() as tmp, Archive.open(Path(tmp) / "bench.db") as archive:
        with archive.store.write():
            archive.store.ensure_session(SessionRow("bench", "pi", "/bench", "bench", 0, 0))
        first = message_from_entry("bench", entries[0])
        first.prepare()
        write_messages(archive.store, "bench", [first])
        times, ts = [], first.ts
        for i in range(args.steps + 1):
            m = message_from_entry("bench", steps[i % len(steps)] if i < args.steps else final)
            ts += 1
            m.ts, m.hash = ts, f"step{i}"
            m.prepare()
            start = time.perf_counter()
            write_messages(archive.store, "bench", [m])
            times.append((time.perf_counter() - start) * 1000)
        run = archive.runs(limit=1)[0]
    loop = sorted(times[:-1])
    print(f"steps            {args.steps} (run r{run.id}: {run.messages} messages, {run.status})")
    print(f"step median      {statistics.median(loop):.3f} ms")
    print(f"step p99         {loop[int(len(loop) * 0.99) - 1]:.3f} ms")
    print(f"closing step     {times[-1]:.2f} ms")


if __name__ == "__main__":
    main()
