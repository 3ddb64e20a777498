"""Shared helpers of the benchmarks: percentiles, machine facts, result files, table printing."""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import apsw

# The spec's hand queries (000 §7.3) plus one of ours.
HAND_QUERIES = [
    "我一直搞不清楚响应式是怎么实现的",
    "之前那个组件的响应式实现有问题",
    "上次讨论过的缓存索引优化方案",
    "组件响应式原理",
    "响应式",
    "锁",
    "the whale and the sea",
    "how does the reactive system work",
    "宝玉",
]


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))
    return s[k]


def latency_summary(ms: list[float]) -> dict[str, float]:
    return {
        "n": len(ms),
        "p50": round(percentile(ms, 50), 3),
        "p95": round(percentile(ms, 95), 3),
        "p99": round(percentile(ms, 99), 3),
        "max": round(max(ms), 3) if ms else float("nan"),
    }


def git_commit() -> str:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--", ":/src"], capture_output=True, text=True
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def export_revision(rev: str, into: Path) -> Path:
    """`src/` of a git revision of this repository, for a baseline run of the same benchmark, with
    its optional C extension built in place when the revision has one (as an install builds it)."""
    repo = Path(__file__).resolve().parent.parent
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", rev, "src", "setup.py", "pyproject.toml", "README.md"], capture_output=True
    )
    if archive.returncode != 0:  # a revision before setup.py
        archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    if (into / "setup.py").exists():
        subprocess.run(
            [sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=into, check=True, capture_output=True
        )
    return into / "src"


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "mem": mem,
        "python": platform.python_version(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
    }


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine_speed_s() -> float:
    """Seconds for a fixed pure-Python loop (best of 3), printed and stored with every result: this
    virtual machine's speed drifts by 2x over a day with its neighbours, so two runs' absolute
    figures are comparable only beside it (ratios measured in one run need no such help)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i
        best = min(best, time.perf_counter() - start)
    return round(best, 3)


def result_header(name: str, args: dict[str, Any]) -> dict[str, Any]:
    speed = machine_speed_s()
    print(f"machine speed: a 2M-step Python loop takes {speed} s (lower is faster)", flush=True)
    return {
        "benchmark": name,
        "commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {**machine(), "python_loop_2m_s": speed},
        "args": args,
    }


def save_json(path: Path | None, data: dict[str, Any]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"results written to {path}")


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(out)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.ms = (time.perf_counter() - self.start) * 1000


def grow_archive(
    work: Path, sizes: list[int], write_batch: Callable[[Path, int], None], name: str
) -> list[dict[str, Any]]:
    """Grow one archive through `Archive.import_paths`, batch by batch, copying it at each size.

    `write_batch(folder, n)` writes about `n` messages of session files into `folder`; each copy is
    `work/{name}-{size}.db`. Returns, per size, the import rate, peak RSS and bytes per message.
    """
    from pi_memory.archive.api import Archive

    db = work / "grow.db"
    for p in work.glob("grow.db*"):
        p.unlink()
    archive = Archive.open(db)
    done, import_s, out = 0, 0.0, []
    for size in sizes:
        while done < size:
            folder = work / "batch"
            shutil.rmtree(folder, ignore_errors=True)
            write_batch(folder, size - done)
            t0 = time.perf_counter()
            done += archive.import_paths([folder]).added
            import_s += time.perf_counter() - t0
            shutil.rmtree(folder, ignore_errors=True)
            print(f"  {done:>8} messages  {done / import_s:7.0f} msg/s  peak RSS {peak_rss_mb():6.1f} MB", flush=True)
        archive.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        target = work / f"{name}-{size}.db"
        shutil.copyfile(db, target)
        db_bytes = target.stat().st_size
        row = {
            "size": size,
            "messages": done,
            "import_msgs_per_s": round(done / import_s, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "db_bytes": db_bytes,
            "db_bytes_per_msg": round(db_bytes / max(done, 1), 1),
        }
        print(f"size {size}: {row}", flush=True)
        out.append(row)
    archive.close()
    for p in work.glob("grow.db*"):
        p.unlink()
    return out
