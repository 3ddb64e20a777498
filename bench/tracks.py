"""What the two search tracks cost a model: characters returned per query, summary vs content.

Usage:
    python bench/tracks.py [SESSION_FILE_OR_DIR ...] [--query Q ...] [--json]

Imports the repo's fixture sessions (tests/data/pi) plus any given files or
folders into a temporary archive, then runs every query through both tracks
(`scope="summary"` and `scope="content"`, limit 10) and formats the results as
a model would receive them (evidence header included). Prints the median and
mean characters per query for each track and their ratio. Queries: a fixed
bilingual list, `--query` ones, and for extra corpora two words from every
fifth run goal.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from pi_memory import Archive  # noqa: E402
from pi_memory.archive.present import format_search  # noqa: E402
from pi_memory.archive.runview import format_summary_hits  # noqa: E402

FIXTURES = ROOT / "tests" / "data" / "pi"
QUERIES = [
    "nginx 超时",
    "SSE 断流",
    "reactive 解构",
    "购物车 角标",
    "缓存索引 方案",
    "OPENAI_API_KEY",
    "cache miss latency",
    "heartbeat",
    "legacy.js",
    "README",
    "Last-Event-ID 重连",
    "full scan keys",
]


def goal_queries(archive: Archive, every: int = 5) -> list[str]:
    out = []
    for i, run in enumerate(archive.runs(limit=1000)):
        goal = (run.fields.get("goal") or {}).get("text", "")
        words = re.findall(r"[A-Za-z_][\w.-]{3,}|[\u4e00-\u9fff]{2,4}", goal)
        if i % every == 0 and len(words) >= 2:
            out.append(" ".join(words[:2]))
    return out


def measure(archive: Archive, queries: list[str]) -> dict[str, object]:
    summary_chars, content_chars = [], []
    for q in queries:
        runs = archive.search(q, limit=10, scope="summary")
        msgs = archive.search(q, limit=10)
        summary_chars.append(len(format_summary_hits(runs, q, evidence=True)))  # type: ignore[arg-type]
        content_chars.append(len(format_search(msgs, q, evidence=True)))  # type: ignore[arg-type]
    med_s, med_c = statistics.median(summary_chars), statistics.median(content_chars)
    return {
        "queries": len(queries),
        "summary_median_chars": med_s,
        "content_median_chars": med_c,
        "summary_mean_chars": round(statistics.mean(summary_chars), 1),
        "content_mean_chars": round(statistics.mean(content_chars), 1),
        "median_ratio": round(med_s / med_c, 3) if med_c else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--query", action="append", default=[])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Archive.open(Path(tmp) / "bench.db") as archive:
        archive.import_paths([FIXTURES, *args.paths])
        queries = QUERIES + args.query + (goal_queries(archive) if args.paths else [])
        stats = archive.stats()
        result = {"messages": stats.messages, "runs": len(archive.runs(limit=100_000)), **measure(archive, queries)}
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:22} {value}")


if __name__ == "__main__":
    main()
