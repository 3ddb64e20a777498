"""Blame of a 2,000-line file on archives of 30k to 1M messages: cold and warm time, and how exact.

The archive is grown through the import path (`common.grow_archive`) from generated pi session files
(pi's v3 format, 40 messages a session: prompts, replies, and tool calls, a quarter of them writes
and edits of files of many projects, so the `edit` table grows with the archive). The file blamed
has its own history in the first batch, so every size holds the same: a 2,000-line file written by
one run, then `--edits` edits over `--sessions` sessions (each replacing one line of an earlier run
with one to three lines), and a few lines typed by hand in between. Each edit's line carries a
marker of its run, so the attribution is checked too. Times are of `Archive.blame` itself: cold, a
fresh process's first call (its imports not counted, as search_bench.py's cold query), best of
`--repeat`; warm, p50/p95/max of `--warm` calls in one process. The ratio largest/smallest is
measured in the same run (the machine is shared and noisy).

    python bench/blame_bench.py --sizes 30000,1000000 --work /tmp/pi-memory-blame --json bench/results/blame.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from common import grow_archive, latency_summary, result_header, save_json, table  # noqa: E402

FILE_LINES = 2000
START_MS = 1_780_000_000_000
WORDS = ("cache index shard query latency build test deploy retry config loader parser token stream "
         "buffer nginx timeout worker queue schema migrate vector search rank score commit branch").split()  # fmt: skip
MARK = re.compile(r"# run (\d+)|# hand")


def _iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


class SessionWriter:
    """pi v3 session files: a header, then message entries linked by parentId."""

    def __init__(self, sid: str, cwd: str, start: int) -> None:
        self.lines = [json.dumps({"type": "session", "version": 3, "id": sid, "timestamp": _iso(start), "cwd": cwd})]
        self.ts = start
        self.parent: str | None = None

    def add(self, message: dict[str, Any]) -> None:
        self.ts += 1500
        eid = f"{len(self.lines):08x}"
        message["timestamp"] = self.ts
        entry = {"type": "message", "id": eid, "parentId": self.parent, "timestamp": _iso(self.ts), "message": message}
        self.lines.append(json.dumps(entry, ensure_ascii=False))
        self.parent = eid

    def tool(self, call_id: str, name: str, args: dict[str, Any], ok: bool = True) -> None:
        call = {"type": "toolCall", "id": call_id, "name": name, "arguments": args}
        self.add({"role": "assistant", "content": [call], "stopReason": "toolUse"})
        text = f"{name} done" if ok else f"{name} failed"
        self.add({"role": "toolResult", "toolCallId": call_id, "toolName": name, "isError": not ok,
                  "content": [{"type": "text", "text": text}]})  # fmt: skip

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")


# --- the file blamed ------------------------------------------------------------------------------


def target_history(repo: Path, out: Path, edits: int, sessions: int, rng: random.Random) -> Path:
    """The file's history as session files in `out`; the file as it ends up in `repo`. Returns its path."""
    path = repo / "src" / "big.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"value_{i} = compute({i}, '{rng.choice(WORDS)}')  # run 0" for i in range(FILE_LINES)]
    first = SessionWriter("b1a3e000-0000-4000-8000-000000000000", str(repo), START_MS)
    first.add({"role": "user", "content": [{"type": "text", "text": "run 0: write the big module"}]})
    first.tool("t0", "write", {"path": "src/big.py", "content": "\n".join(lines) + "\n"})
    first.add({"role": "assistant", "content": [{"type": "text", "text": "Written."}], "stopReason": "stop"})
    first.save(out / "target-000.jsonl")
    per = max(1, edits // sessions)
    run = 0
    for s in range(sessions):
        w = SessionWriter(f"b1a3e000-0000-4000-8000-{s + 1:012d}", str(repo), START_MS + (s + 1) * 3_600_000)
        for k in range(per):
            run += 1
            at = rng.randrange(len(lines))
            old = lines[at]
            new = [
                f"step_{run}_{j} = adjust(value_{at % FILE_LINES}, {j})  # run {run}" for j in range(rng.randint(1, 3))
            ]
            w.add({"role": "user", "content": [{"type": "text", "text": f"run {run}: adjust line {at + 1}"}]})
            w.tool(
                f"e{run}",
                "edit",
                {"path": "src/big.py", "edits": [{"oldText": old + "\n", "newText": "\n".join(new) + "\n"}]},
            )
            w.add({"role": "assistant", "content": [{"type": "text", "text": "Adjusted."}], "stopReason": "stop"})
            lines[at : at + 1] = new
            if k == 0 and s % 5 == 4:  # now and then a person adds a line by hand
                hand_at = rng.randrange(len(lines))
                lines.insert(hand_at, f"# reviewed by hand before session {s + 1}  # hand")
        w.save(out / f"target-{s + 1:03d}.jsonl")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- the rest of the archive -------------------------------------------------------------------------


def bulk_sessions(folder: Path, n_messages: int, rng: random.Random, offset: list[int]) -> None:
    """About `n_messages` messages in 40-message sessions of many projects (a quarter of the tool
    calls write or edit a file, which the edit table keeps)."""
    made = 0
    while made < n_messages:
        k = offset[0]
        offset[0] += 1
        project = f"/home/dev/p{k % 400}"
        w = SessionWriter(f"0b000000-0000-4000-8000-{k:012d}", project, START_MS + 86_400_000 + k * 60_000)
        for turn in range(10):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
            w.add({"role": "user", "content": [{"type": "text", "text": f"{words}?"}]})
            call = f"c{turn}"
            if turn % 4 == 0:
                w.tool(call, "write", {"path": f"src/f{turn}.py", "content": f"# {words}\nx = {turn}\n"})
            elif turn % 4 == 1:
                w.tool(
                    call,
                    "edit",
                    {
                        "path": f"src/f{turn - 1}.py",
                        "edits": [{"oldText": f"x = {turn - 1}\n", "newText": f"x = {turn}\n"}],
                    },
                )
            else:
                w.tool(call, "bash", {"command": f"grep -rn {rng.choice(WORDS)} src"})
            w.add({"role": "assistant", "content": [{"type": "text", "text": f"Done: {words}."}], "stopReason": "stop"})
        w.save(folder / f"bulk-{k:07d}.jsonl")
        made += len(w.lines) - 1


# --- measuring ----------------------------------------------------------------------------------------

COLD = """
import json, sys, time
sys.path.insert(0, {src!r})
from pi_memory import Archive
archive = Archive.open({db!r})
archive.edits_ready()
start = time.perf_counter()
found = archive.blame({path!r})
print(json.dumps({{"ms": (time.perf_counter() - start) * 1000, "lines": len(found.lines)}}))
"""


def cold_ms(db: Path, path: Path, repeat: int) -> list[float]:
    src = str(HERE.parent / "src")
    out = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", COLD.format(src=src, db=str(db), path=str(path))],
                              capture_output=True, text=True, check=True)  # fmt: skip
        out.append(json.loads(done.stdout.strip().splitlines()[-1])["ms"])
    return out


def exactness(found: Any, path: Path) -> dict[str, int]:
    """Lines whose marker names the run blame gave them (run N is the Nth ask)."""
    counts = {"agent_lines": 0, "right": 0, "hand_lines": 0, "hand_attributed": 0}
    for line in found.lines:
        m = MARK.search(line.text)
        said = re.match(r"run (\d+):", line.edit.ask) if line.edit and line.edit.ask else None
        if m and m.group(1) is not None:
            counts["agent_lines"] += 1
            counts["right"] += bool(said and said.group(1) == m.group(1))
        elif m:
            counts["hand_lines"] += 1
            counts["hand_attributed"] += line.edit is not None
    return counts


def measure(db: Path, path: Path, warm: int, repeat: int) -> dict[str, Any]:
    from pi_memory import Archive

    with Archive.open(db) as archive:
        archive.edits_ready()
        times = []
        for _ in range(warm):
            start = time.perf_counter()
            found = archive.blame(str(path))
            times.append((time.perf_counter() - start) * 1000)
        edits = int(archive.store.scalar("SELECT count(*) FROM edit") or 0)
        messages = int(archive.store.scalar("SELECT count(*) FROM msg") or 0)
    cold = cold_ms(db, path, repeat)
    return {
        "messages": messages,
        "edit_rows": edits,
        "file_lines": found.total_lines,
        "changes_replayed": found.considered,
        "cold_ms": {"best": round(min(cold), 1), "all": [round(c, 1) for c in cold]},
        "warm_ms": latency_summary(times),
        "exactness": exactness(found, path),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="30000,1000000", help="archive sizes in messages, ascending")
    ap.add_argument("--work", type=Path, default=Path("/tmp/pi-memory-blame"))
    ap.add_argument("--reuse", action="store_true", help="measure the archives in --work again, build none")
    ap.add_argument("--edits", type=int, default=300, help="edits of the blamed file")
    ap.add_argument("--sessions", type=int, default=60, help="sessions those edits are spread over")
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes for the cold time (the best is kept)")
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    header = result_header("blame_bench", {k: str(v) for k, v in vars(args).items()})
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    path = work / "repo" / "src" / "big.py"
    built: list[dict[str, Any]] = []
    if args.reuse and args.json is not None and args.json.exists():  # the build's figures, read back
        built = json.loads(args.json.read_text(encoding="utf-8")).get("built", [])
    if not args.reuse:
        rng = random.Random(args.seed)
        target = work / "target"
        target_history(work / "repo", target, args.edits, args.sessions, rng)
        offset = [0]

        def write_batch(folder: Path, n: int) -> None:
            folder.mkdir(parents=True, exist_ok=True)
            if target.exists():  # the file's history goes in with the first batch
                for f in sorted(target.glob("*.jsonl")):
                    f.rename(folder / f.name)
                target.rmdir()
            bulk_sessions(folder, min(n, 100_000), rng, offset)

        built = grow_archive(work, sizes, write_batch, "blame")
    results = []
    for size in sizes:
        print(f"measuring blame on {size:,} messages", flush=True)
        results.append({"size": size, **measure(work / f"blame-{size}.db", path, args.warm, args.repeat)})
    rows = [
        [r["size"], r["messages"], r["edit_rows"], r["changes_replayed"], r["cold_ms"]["best"], r["warm_ms"]["p50"],
         r["warm_ms"]["p95"], r["warm_ms"]["max"], f"{r['exactness']['right']}/{r['exactness']['agent_lines']}",
         f"{r['exactness']['hand_attributed']}/{r['exactness']['hand_lines']}"]
        for r in results
    ]  # fmt: skip
    print(
        table(
            [
                "size",
                "messages",
                "edit rows",
                "replayed",
                "cold ms",
                "p50 ms",
                "p95 ms",
                "max ms",
                "agent right",
                "hand given",
            ],
            rows,
        )
    )
    ratio = results[-1]["warm_ms"]["p95"] / results[0]["warm_ms"]["p95"] if len(results) > 1 else 1.0
    print(f"p95 ratio largest/smallest: {ratio:.2f}")
    save_json(args.json, {**header, "built": built, "results": results, "p95_ratio": round(ratio, 3)})


if __name__ == "__main__":
    main()
