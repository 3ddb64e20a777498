"""What a recall costs inside a long session: latency per kind of call, and output size.

Usage:
    python bench/recall.py [--turns N] [--repeat R] [SESSION_FILE_OR_DIR ...]

Writes one synthetic pi session of N turns (user, assistant calling `read`, a
2 KB tool output, a reply: 4 messages a turn) with an abandoned branch of 20
turns in its middle, imports it (plus the repo's fixtures and any given files
or folders) into a temporary archive, then times `Archive.recall` R times for
each kind of call: branch / session search, the tool-output scan, file filter,
list pages, reads by id (text and raw). Prints p50 / max milliseconds and the
largest answer in characters (the cap is 16,000).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from pi_memory import Archive  # noqa: E402
from pi_memory.core.sources.pi import active_branch, read_session_file  # noqa: E402

SESSION = "01b00000-0000-7000-8000-00000000bench"
WORDS = "cache index latency timeout retry token refresh parser buffer socket 缓存 索引 超时 重试 刷新".split()


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


class Writer:
    def __init__(self) -> None:
        self.lines = [
            json.dumps(
                {"type": "session", "version": 3, "id": SESSION, "timestamp": _iso(1_700_000_000_000), "cwd": "/b"}
            )
        ]
        self.n = 0
        self.ts = 1_700_000_000_000

    def add(self, parent: str | None, message: dict[str, Any]) -> str:
        self.n += 1
        self.ts += 1000
        entry_id = f"{self.n:08x}"
        message["timestamp"] = self.ts
        entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": _iso(self.ts), "message": message}
        self.lines.append(json.dumps(entry, ensure_ascii=False))
        return entry_id

    def turn(self, parent: str | None, i: int) -> str:
        word = WORDS[i % len(WORDS)]
        path = f"src/module_{i % 50}.py"
        last = self.add(parent, {"role": "user", "content": f"turn {i}: check {path} for the {word} bug"})
        call = {"type": "toolCall", "id": f"c{i}", "name": "read", "arguments": {"path": path}}
        last = self.add(last, {"role": "assistant", "content": [{"type": "text", "text": "Reading."}, call]})
        output = "\n".join(f"{j:4d} def f_{i}_{j}(x): return x  # {WORDS[(i + j) % len(WORDS)]}" for j in range(50))
        result = {"role": "toolResult", "toolCallId": f"c{i}", "toolName": "read", "content": output, "isError": False}
        last = self.add(last, result)
        return self.add(
            last, {"role": "assistant", "content": [{"type": "text", "text": f"Fixed the {word} bug in {path}."}]}
        )


def write_session(folder: Path, turns: int) -> Path:
    w = Writer()
    last: str | None = None
    for i in range(turns // 2):
        last = w.turn(last, i)
    fork_point, abandoned = last, last
    for i in range(20):
        abandoned = w.turn(abandoned, 100_000 + i)
    last = fork_point
    for i in range(turns // 2, turns):
        last = w.turn(last, i)
    path = folder / f"bench_{SESSION}.jsonl"
    path.write_text("\n".join(w.lines) + "\n", encoding="utf-8")
    return path


def calls(branch: list[str]) -> dict[str, dict[str, Any]]:
    base = {"session": SESSION, "branch_ids": branch}
    return {
        "branch search": base | {"query": "timeout module_7"},
        "session search": {"session": SESSION, "scope": "session", "query": "timeout module_7"},
        "tool output scan": base | {"kind": "tool_result", "query": "f_4999_7"},
        "file filter": base | {"file": "src/module_7.py"},
        "list page 1": base | {"action": "list"},
        "list page 100": base | {"action": "list", "page": 100},
        "read 8 ids": base | {"entry_ids": branch[-8:]},
        "read 8 ids raw": base | {"entry_ids": branch[-8:], "raw": True},
    }


def measure(archive: Archive, params: dict[str, Any], repeat: int) -> tuple[float, float, int]:
    times, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        out = archive.recall(params)
        times.append((time.perf_counter() - start) * 1000)
        size = max(size, len(out["text"]))
    return statistics.median(times), max(times), size


def probe(archive: Archive, branch: list[str]) -> tuple[str, str]:
    """A turn only the abandoned branch has: never found on the branch, found in the session."""
    ask = {"session": SESSION, "query": "turn 100005"}

    def count(params: dict[str, Any]) -> int:
        return sum("100005" in r["snippet"] for r in archive.recall(params)["results"])

    return (
        f"{count(ask | {'branch_ids': branch})} on the branch,",
        f"{count(ask | {'scope': 'session'})} in the session",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        session_file = write_session(Path(tmp), args.turns)
        branch = [e.entry_id for e in active_branch(read_session_file(session_file).entries) if e.entry_id]
        with Archive.open(Path(tmp) / "bench.db") as archive:
            start = time.perf_counter()
            report = archive.import_paths([session_file, ROOT / "tests" / "data" / "pi", *args.paths])
            print(
                f"imported {report.added} messages in {time.perf_counter() - start:.1f} s; branch of {len(branch)} entries"
            )
            print("abandoned-branch probe (hits naming turn 100005):", *probe(archive, branch))
            print(f"{'call':<18} {'p50 ms':>8} {'max ms':>8} {'chars':>7}")
            for name, params in calls(branch).items():
                p50, worst, size = measure(archive, params, args.repeat)
                print(f"{name:<18} {p50:8.1f} {worst:8.1f} {size:7d}")


if __name__ == "__main__":
    main()
