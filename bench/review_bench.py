"""Review benchmark: how long does `pi-memory review` take as the archive grows, and does memory stay flat?

Design idea: the review reads runs through the real archive, so the archive is
built through the real import path from generated pi sessions that look like
coding work: ~40 messages per session, runs of bash/read/edit tool calls with
their results (a fifth of the commands fail, with varying paths, numbers and
durations in the output; some reads and edits fail), final replies, and now and
then a user correction in Chinese or English. The archive grows in batches; at
each requested size a fresh process runs the review over the whole archive and
over its last `--since-days` days (`--since`: a bounded window), and reports
the time and that process's peak RSS (flat memory: the same at every size).

    python bench/review_bench.py --sizes 30000,100000 --json bench/results/review.json
    python bench/review_bench.py --db /path/to/sessions.db      # time an existing archive only
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import result_header, save_json, table  # noqa: E402

from pi_memory import Archive  # noqa: E402

BASE_TS_MS = 1_700_000_000_000
SESSION_GAP_MS = 3_600_000  # one session an hour
STEP_MS = 4_000
MESSAGES_PER_SESSION = 40
BATCH_SESSIONS = 250
PROJECTS = ("shop", "gateway", "docs-site", "infra", "mobile")
MODULES = ("cart", "orders", "auth", "cache", "search", "billing", "users", "events")
WORDS = (
    "the test fails because the fixture is stale; I refreshed it and re-ran the suite. "
    "缓存索引需要重建，接口参数保持不变，已经修改了配置并重新运行测试。 "
    "The handler now retries twice with backoff, and the config documents the timeout. "
).split()
CORRECTIONS = (
    "不对，别改 src/{m}.py 的接口",
    "Don't touch src/{m}.py, I said only the tests. Revert it.",
    "你又把 {m} 的配置删了，改回去",
    "Stop, that's the wrong file",
)


class SessionMaker:
    """Deterministic synthetic pi sessions of coding work."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def prose(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def command(self, cwd: str) -> tuple[str, str, bool]:
        r, m = self.rng, self.rng.choice(MODULES)
        templates = [
            f"cd {cwd} && python -m pytest tests/test_{m}.py -q",
            f"cd {cwd} && npm run build -- --filter {m}",
            "git status --short",
            f"ls {cwd}/src/{m}",
            f"curl -s localhost:{r.randint(3000, 9000)}/api/{m}/{r.randint(1, 999)}",
        ]
        command = r.choice(templates)
        if r.random() < 0.2:
            out = (
                f"FAILED tests/test_{m}.py::test_{m}_{r.randint(1, 9)} - AssertionError: assert {r.randint(1, 99)} == "
                f"{r.randint(1, 99)}\n1 failed in {r.random():.2f}s\n/tmp/tmp{r.getrandbits(32):08x}/log\n\n"
                f"Command exited with code {r.choice([1, 2])}"
            )
            return command, out, True
        return command, self.prose(self.rng.randint(20, 120)), False

    def steps(self, cwd: str) -> list[tuple[str, dict[str, Any], str, bool]]:
        out = []
        for _ in range(self.rng.randint(0, 6)):
            kind, m = self.rng.random(), self.rng.choice(MODULES)
            if kind < 0.5:
                command, text, failed = self.command(cwd)
                out.append(("bash", {"command": command}, text, failed))
            elif kind < 0.8:
                failed = self.rng.random() < 0.05
                text = f"ENOENT: no such file or directory, access '{cwd}/src/{m}_old.py'" if failed else self.prose(60)
                out.append(("read", {"path": f"src/{m}.py"}, text, failed))
            else:
                failed = self.rng.random() < 0.08
                text = (
                    f"Could not find the exact text in src/{m}.py. The old text must match exactly."
                    if failed
                    else f"Successfully replaced text in src/{m}.py."
                )
                out.append(("edit", {"path": f"src/{m}.py", "edits": [{"oldText": "a", "newText": "b"}]}, text, failed))
        return out

    def session(self, number: int) -> list[dict[str, Any]]:
        """The lines of one session: header, then runs until ~40 messages."""
        project = PROJECTS[number % len(PROJECTS)]
        cwd = f"/home/dev/{project}"
        sid = f"{number:08x}-0000-4000-8000-{self.rng.getrandbits(48):012x}"
        ts = BASE_TS_MS + number * SESSION_GAP_MS
        lines: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": sid, "timestamp": _iso(ts), "cwd": cwd}]
        count, run = 0, 0
        while count < MESSAGES_PER_SESSION:
            msgs = self.run(cwd, run)
            for message in msgs:
                ts += STEP_MS
                eid = f"{number % 0xFFFF:04x}{count % 0xFFFF:04x}"
                parent = lines[-1]["id"] if count else None
                message["timestamp"] = ts
                lines.append(
                    {"type": "message", "id": eid, "parentId": parent, "timestamp": _iso(ts), "message": message}
                )
                count += 1
            run += 1
        return lines

    def run(self, cwd: str, index: int) -> list[dict[str, Any]]:
        m = self.rng.choice(MODULES)
        if index and self.rng.random() < 0.1:
            prompt = self.rng.choice(CORRECTIONS).format(m=m)
        else:
            prompt = f"Please look at src/{m}.py: " + self.prose(self.rng.randint(8, 40))
        out: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
        for k, (name, args, text, failed) in enumerate(self.steps(cwd)):
            call = f"call_{index}_{k}"
            out.append(_assistant([{"type": "toolCall", "id": call, "name": name, "arguments": args}], "toolUse"))
            out.append(
                {"role": "toolResult", "toolCallId": call, "toolName": name, "content": [{"type": "text", "text": text}],
                 "details": {}, "isError": failed}
            )  # fmt: skip
        out.append(_assistant([{"type": "text", "text": self.prose(self.rng.randint(15, 80))}], "stop"))
        return out


def _assistant(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "provider": "bench", "model": "bench-1", "stopReason": stop}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def grow(archive: Archive, maker: SessionMaker, first: int, sessions: int, work: Path) -> None:
    """Write `sessions` sessions (numbered from `first`) in batches and import each batch."""
    for start in range(first, first + sessions, BATCH_SESSIONS):
        folder = work / "batch"
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(start, min(start + BATCH_SESSIONS, first + sessions)):
            lines = maker.session(n)
            (folder / f"s{n:07d}.jsonl").write_text(
                "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8"
            )
        archive.import_paths([folder])
        shutil.rmtree(folder)


# The peak RSS of the measuring process itself: VmHWM (a fresh address space after exec).
# `ru_maxrss` would not do: Linux carries it over from the parent across fork and exec, and the
# parent grew while it built the archive.
PEAK_RSS = """
def peak_rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
"""
MEASURE = (
    PEAK_RSS
    + """
import json, sys, time
sys.path.insert(0, {src!r})
from pi_memory import Archive
with Archive.open({db!r}) as a:
    t = time.perf_counter()
    r = a.review(since={since!r}, cwd="/nonexistent-workspace")
    ms = (time.perf_counter() - t) * 1000
print(json.dumps({{"ms": ms, "runs": r.totals["runs"], "failures": len(r.failures),
                  "corrections": r.totals["corrections"], "rss_mb": peak_rss_mb()}}))
"""
)


def measure(db: Path, since: int | None, repeat: int) -> dict[str, Any]:
    """Best of `repeat` fresh processes: review time and that process's peak RSS."""
    best: dict[str, Any] | None = None
    for _ in range(repeat):
        code = MEASURE.format(src=str(ROOT / "src"), db=str(db), since=since)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        found = json.loads(out.stdout)
        if best is None or found["ms"] < best["ms"]:
            best = found
    assert best is not None
    return best


def baseline_rss() -> float:
    """The peak RSS of a process that imports the library and does nothing: what the review adds is above it."""
    code = (
        PEAK_RSS
        + f"import sys; sys.path.insert(0,{str(ROOT / 'src')!r}); import pi_memory.review, pi_memory.archive.api\n"
    )
    code += "print(peak_rss_mb())"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def stats(db: Path) -> tuple[int, int, int]:
    with Archive.open(db) as a:
        st = a.stats()
        runs = int(a.store.scalar("SELECT count(*) FROM run") or 0)
        newest = int(a.store.scalar("SELECT max(start_ts) FROM run") or 0)
    return st.messages, runs, newest


def row_for(db: Path, since_days: int, repeat: int) -> dict[str, Any]:
    messages, runs, newest = stats(db)
    since = newest - since_days * 86_400_000
    whole, window = measure(db, None, repeat), measure(db, since, repeat)
    return {"messages": messages, "runs": runs, "whole": whole, "since": {**window, "days": since_days}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="30000,100000", help="archive sizes in messages, ascending")
    parser.add_argument("--db", type=Path, action="append", help="time this existing archive (repeatable), build none")
    parser.add_argument("--since-days", type=int, default=7, help="the bounded window: the last N days of runs")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per measurement; the best is kept")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--json", type=Path, help="write the results here (e.g. bench/results/review.json)")
    parser.add_argument("--keep", type=Path, help="build the archive at this path and keep it (default: a temp dir)")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    if args.db:
        rows += [row_for(db, args.since_days, args.repeat) for db in args.db]
    else:
        maker, done = SessionMaker(args.seed), 0
        with tempfile.TemporaryDirectory() as tmp:
            db = args.keep or Path(tmp) / "review.db"
            with Archive.open(db) as archive:
                for size in [int(s) for s in args.sizes.split(",")]:
                    started = time.perf_counter()
                    target = size // MESSAGES_PER_SESSION
                    grow(archive, maker, done, target - done, Path(tmp))
                    done = target
                    print(f"built {size} messages in {time.perf_counter() - started:.0f} s", flush=True)
                    rows.append(row_for(db, args.since_days, args.repeat))
    base = baseline_rss()
    print(
        f"\nreview (best of {args.repeat} fresh processes; MB = the process's peak RSS; importing the library: {base:.0f} MB)"
    )
    headers = ["messages", "runs", "whole: s", "whole: MB", f"last {args.since_days} d: runs", "s", "MB", "failures"]
    print(table(headers, [
        [r["messages"], r["runs"], r["whole"]["ms"] / 1000, r["whole"]["rss_mb"], r["since"]["runs"],
         r["since"]["ms"] / 1000, r["since"]["rss_mb"], r["whole"]["failures"]]
        for r in rows
    ]))  # fmt: skip
    given = {k: [str(v) for v in val] if isinstance(val, list) else val for k, val in vars(args).items()}
    given = {k: str(v) if isinstance(v, Path) else v for k, v in given.items()}
    save_json(args.json, {**result_header("review", given), "baseline_rss_mb": base, "sizes": rows})


if __name__ == "__main__":
    main()
