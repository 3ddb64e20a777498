"""Peak RSS of `pi-memory import` on archive shapes (issue 38: <= 200 MB on any shape).

Design idea: memory is a high-water mark per process, so each import runs as the CLI in a child
process and its own `VmHWM` (and its parse worker's) is read from /proc while it runs
(`import_bench.HighWater`): not `wait4`'s `ru_maxrss`, which counts the memory of whoever started
the child at the `fork` (a harness holding 10k sessions in memory inflates it; both are printed).
Shapes: many short sessions (1-3 messages, ~10,000 files), 40-message sessions, and one session
file of `--big-mb` (a long pi session: its whole history in one file). `--baseline REV` imports
the same files with another revision's code in the same run.

    python bench/import_memory.py --corpus ../shared/corpora --baseline main --json bench/results/import-memory.json
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import export_revision, result_header, save_json, table  # noqa: E402
from import_bench import Words, build_shape, remove_archive, run_import, session_file  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def build_big(folder: Path, words: Words, megabytes: int) -> dict[str, int]:
    """One pi session file of about `megabytes` MB (realistic messages, tool calls and results)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = 400
    while True:
        path, count = session_file(folder, words, 0, n)
        size = path.stat().st_size
        if size >= megabytes << 20:
            return {"files": 1, "messages": count, "source_bytes": size}
        path.unlink()
        n = int(n * (megabytes << 20) / max(size, 1) * 1.05) + 1


def measure(src: Path, folder: Path, db: Path) -> dict[str, Any]:
    remove_archive(db)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    found = run_import(src, folder, db)
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "peak_rss_mb": round(found["peak_rss_mb"], 1),
        "worker_peak_rss_mb": round(found["worker_peak_rss_mb"], 1),
        "ru_maxrss_mb": round(max(before, after) / 1024, 1),
        "seconds": round(found["seconds"], 1),
        "added": found["report"]["added"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--short", type=int, default=20_000, help="messages of 1-3-message sessions (~10,000 files)")
    ap.add_argument("--long", type=int, default=20_000, help="messages of 40-message sessions")
    ap.add_argument("--big-mb", type=int, default=40, help="size of the one-session file (0: skip)")
    ap.add_argument("--baseline", default=None, help="git revision measured the same way, same run")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    header = result_header("import-memory", {k: str(v) for k, v in vars(args).items()})
    work = args.work or Path(tempfile.mkdtemp(prefix="pi-memory-import-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    words = Words(args.corpus, random.Random(38))
    shapes: dict[str, tuple[Path, dict[str, int]]] = {}
    for shape, n in (("short", args.short), ("long", args.long), ("one big session", args.big_mb)):
        if n <= 0:
            continue
        folder = work / f"sessions-{shape.replace(' ', '-')}"
        shutil.rmtree(folder, ignore_errors=True)
        words.rng = random.Random(f"import_memory {shape}")
        facts = build_big(folder, words, n) if shape == "one big session" else build_shape(folder, words, shape, n)
        shapes[shape] = (folder, facts)
        print(f"{shape}: {facts['files']} files, {facts['messages']} messages, {facts['source_bytes'] / 1e6:.1f} MB")
    codes = [("this", REPO / "src")]
    if args.baseline:
        codes.append((args.baseline, export_revision(args.baseline, work / "baseline")))
    rows = []
    for shape, (folder, facts) in shapes.items():
        for label, src in codes:
            print(f"importing {shape} with {label} ...", flush=True)
            rows.append({"label": label, "shape": shape, **facts, **measure(src, folder, work / "memory.db")})
    os.environ.pop("PI_MEMORY_DB", None)
    print()
    print(
        table(
            ["code", "shape", "files", "messages", "source MB", "peak MB", "worker MB", "ru_maxrss MB", "s"],
            [
                [
                    r["label"],
                    r["shape"],
                    r["files"],
                    r["added"],
                    round(r["source_bytes"] / 1e6, 1),
                    r["peak_rss_mb"],
                    r["worker_peak_rss_mb"],
                    r["ru_maxrss_mb"],
                    r["seconds"],
                ]
                for r in rows
            ],
        )
    )
    save_json(args.json, {**header, "rows": rows})


if __name__ == "__main__":
    main()
