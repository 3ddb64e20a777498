"""Import and size benchmark (issue 13): three archive shapes, through the real `pi-memory import`.

Design idea: a new user's first import is what is measured, so the input is real pi session files
and the import is the CLI itself in a child process (its peak RSS and its worker's, each its own high-water
mark). Two realistic shapes:
many short sessions (1-3 messages, most history looks like that) and 40-message sessions. Message
lengths follow real traffic: user prompts ~250 chars, assistant replies log-normal with a mean of
~1,000 chars and a tail to ~6,000, tool calls with results (some failed), now and then a long
compaction summary; the words are cut from the corpora (Chinese and English) given as arguments.
A third shape, `mix625`, is the issue's own: 40-message sessions of ~625-char
messages cut from the corpus, as `scale.py` imports them (its size target is stated on that mix).
Each imported archive is then measured: bytes per message by table (`dbstat`), and live single-message
writes through a real `pi-memory bridge` (p50/p99) with the same length mix. `--baseline REV` runs
the same files through another revision's code (exported with `git archive`) in the same run, so
the noisy shared machine gives ratios.

    python bench/import_bench.py --corpus ../shared/corpora --baseline main --json bench/results/import.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import export_revision, latency_summary, result_header, save_json, table  # noqa: E402
from corpus import BASE_TS_MS, MESSAGES_PER_SESSION, corpus_docs, synthetic_texts, write_session  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TOOLS = ("bash", "read", "edit", "grep")


class Words:
    """Text of a wanted length cut from the corpus mix at random offsets (Chinese and English)."""

    def __init__(self, corpus: Path, rng: random.Random) -> None:
        by_source: dict[str, list[str]] = {}
        for d in corpus_docs(corpus):
            by_source.setdefault(d.source, []).append(d.text)
        self.blobs = ["\n".join(v) for _, v in sorted(by_source.items())]
        self.rng = rng
        self.corpus = corpus

    def cut(self, n: int) -> str:
        blob = self.rng.choice(self.blobs)
        start = self.rng.randrange(0, max(1, len(blob) - n))
        return blob[start : start + n].strip() or "ok"

    def user_len(self) -> int:
        return max(20, min(1500, int(self.rng.gauss(250, 110))))

    def assistant_len(self) -> int:
        # log-normal with mean ~1,000: mu = ln(1000) - sigma^2 / 2
        sigma = 0.8
        return max(40, min(6000, int(self.rng.lognormvariate(math.log(1000) - sigma * sigma / 2, sigma))))


def _iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def agent_messages(words: Words, n: int, start_ms: int) -> list[dict[str, Any]]:
    """`n` pi agent messages of one conversation: user, assistant (with tool calls), tool results."""
    rng = words.rng
    out: list[dict[str, Any]] = []
    pending_call: str | None = None
    while len(out) < n:
        ts = start_ms + len(out) * 7_000
        if pending_call is not None:
            failed = rng.random() < 0.15
            body = ("Error: " if failed else "") + words.cut(rng.choice((120, 400, 1500)))
            out.append(
                {
                    "role": "toolResult",
                    "toolCallId": pending_call,
                    "toolName": rng.choice(TOOLS),
                    "content": [{"type": "text", "text": body}],
                    "isError": failed,
                    "timestamp": ts,
                }
            )
            pending_call = None
        elif not out or out[-1]["role"] == "assistant" and out[-1].get("stopReason") == "stop":
            out.append(
                {"role": "user", "content": [{"type": "text", "text": words.cut(words.user_len())}], "timestamp": ts}
            )
        else:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": words.cut(words.assistant_len())}]
            stop = "stop"
            if rng.random() < 0.3 and len(out) < n - 1:
                pending_call = f"call_{uuid.UUID(int=rng.getrandbits(128)).hex[:12]}"
                blocks.append(
                    {
                        "type": "toolCall",
                        "id": pending_call,
                        "name": "bash",
                        "arguments": {"command": f"grep -rn {words.cut(12)!r} src"},
                    }
                )
                stop = "toolUse"
            out.append(
                {
                    "role": "assistant",
                    "content": blocks,
                    "api": "anthropic-messages",
                    "provider": "anthropic",
                    "model": "claude-sonnet-4-5",
                    "stopReason": stop,
                    "usage": {
                        "input": rng.randrange(800, 60_000),
                        "output": rng.randrange(50, 2_000),
                        "cacheRead": rng.randrange(0, 50_000),
                        "cacheWrite": 0,
                        "totalTokens": rng.randrange(1_000, 100_000),
                        "cost": {
                            "input": 0.0036,
                            "output": 0.0045,
                            "cacheRead": 0.0,
                            "cacheWrite": 0.0,
                            "total": 0.0081,
                        },
                    },
                    "timestamp": ts,
                }
            )
    return out


def session_file(folder: Path, words: Words, no: int, n_msgs: int) -> tuple[Path, int]:
    """One pi v3 session file of `n_msgs` messages (a long summary now and then); returns (path, messages)."""
    rng = words.rng
    start = BASE_TS_MS + no * 600_000
    sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    lines = [{"type": "session", "version": 3, "id": sid, "timestamp": _iso(start), "cwd": f"/home/dev/p{no % 17}"}]
    # every session pi writes opens with the model and the thinking level (kept verbatim, not messages)
    model_id, level_id = f"m{no:07x}"[-8:], f"t{no:07x}"[-8:]
    lines.append(
        {
            "type": "model_change",
            "id": model_id,
            "parentId": None,
            "timestamp": _iso(start),
            "provider": "anthropic",
            "modelId": "claude-sonnet-4-5",
        }
    )
    lines.append(
        {
            "type": "thinking_level_change",
            "id": level_id,
            "parentId": model_id,
            "timestamp": _iso(start),
            "thinkingLevel": "off",
        }
    )
    parent: str | None = level_id
    count = 0
    for i, message in enumerate(agent_messages(words, n_msgs, start)):
        entry_id = f"{no:05x}{i:03x}"[-8:]
        lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": _iso(message["timestamp"]),
                "message": message,
            }
        )
        parent, count = entry_id, count + 1
        if n_msgs >= 20 and i == n_msgs // 2 and rng.random() < 0.3:
            summary_id = f"c{no:04x}{i:03x}"[-8:]
            summary = "## Goal\n" + words.cut(2500) + "\n## Progress\n" + words.cut(1500)
            lines.append(
                {
                    "type": "compaction",
                    "id": summary_id,
                    "parentId": parent,
                    "timestamp": _iso(message["timestamp"] + 1),
                    "summary": summary,
                    "firstKeptEntryId": entry_id,
                    "tokensBefore": 90_000,
                }
            )
            parent, count = summary_id, count + 1
    path = folder / f"p{no % 17}" / f"s{no:07d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    # as pi writes them: compact JSON, one entry a line
    text = "\n".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) for x in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path, count


def build_mix625(folder: Path, corpus: Path, messages: int) -> dict[str, int]:
    """The issue's own mix: 40-message sessions of ~625-char user/assistant messages cut from the
    corpus (`corpus.synthetic_texts`, what `scale.py` imports), no tool calls."""
    rng = random.Random(17)
    texts = synthetic_texts(corpus_docs(corpus), rng, messages)
    for no, start in enumerate(range(0, len(texts), MESSAGES_PER_SESSION)):
        batch = texts[start : start + MESSAGES_PER_SESSION]
        write_session(folder, [t for _, t in batch], batch[0][0], no, rng)
    source_bytes = sum(p.stat().st_size for p in folder.rglob("*.jsonl"))
    files = (len(texts) + MESSAGES_PER_SESSION - 1) // MESSAGES_PER_SESSION
    return {"files": files, "messages": len(texts), "source_bytes": source_bytes}


def build_shape(folder: Path, words: Words, shape: str, messages: int) -> dict[str, int]:
    """Session files of one shape holding about `messages` messages."""
    if shape == "mix625":
        return build_mix625(folder, words.corpus, messages)
    total = files = 0
    while total < messages:
        n = words.rng.choice((1, 2, 2, 3)) if shape == "short" else 40
        _, count = session_file(folder, words, files, n)
        total += count
        files += 1
    source_bytes = sum(p.stat().st_size for p in folder.rglob("*.jsonl"))
    return {"files": files, "messages": total, "source_bytes": source_bytes}


# --- running the import ------------------------------------------------------------------


def run_import(src: Path, folder: Path, db: Path) -> dict[str, Any]:
    """`pi-memory import FOLDER --json` in a child process: wall seconds, peak RSS, its report.

    The peak RSS is each process's own high-water mark (`VmHWM`, which starts over at `exec`), read
    while it runs (`HighWater`): the importer's and its parse worker's. Not `wait4`'s `ru_maxrss`,
    which counts the memory of the process that started the child (this benchmark, with its corpus
    in memory) at the `fork`: it read 84 MB for every shape and 173 MB for an import of 100k.
    """
    env = dict(os.environ, PYTHONPATH=str(src), PI_MEMORY_DB=str(db))
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "pi_memory", "import", str(folder), "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
        )
        assert proc.stdout
        with HighWater(proc.pid) as peaks:
            out = proc.stdout.read()
            _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"import failed: {err.read().decode(errors='replace')[-2000:]}")
    cpu = usage.ru_utime + usage.ru_stime  # the importer and its parse worker together
    return {
        "seconds": wall,
        "cpu_seconds": cpu,
        "peak_rss_mb": peaks.importer / 1024,
        "worker_peak_rss_mb": peaks.worker / 1024,
        "report": json.loads(out),
    }


class HighWater:
    """The peak RSS (KB) of a process and of its children, each its own (`VmHWM`), read every 10 ms
    from /proc until the process is gone (a high-water mark: the last reading is the peak)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.importer = 0
        self.worker = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> HighWater:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(0.01):
            self.importer = max(self.importer, _hwm_kb(self.pid))
            for child in _children(self.pid):
                self.worker = max(self.worker, _hwm_kb(child))


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


# A live writer beside the import: what a pi session capturing while the user's first import runs
# waits for each message (the write lock included), one message every 20 ms until told to stop.
LIVE_DURING = """
import json, sys, time, select
from pi_memory import Archive
from pi_memory.storage.writes import run_deferred_hooks
db = sys.argv[1]
waits = []
with Archive.open(db) as archive:
    archive.store.defer_checkpoints()
    archive.store.defer_hooks()
    archive.ensure_session("live-during-import", "/home/dev/live")
    print("ready", flush=True)
    i = 0
    while not select.select([sys.stdin], [], [], 0.02)[0]:
        message = {"role": "user", "content": [{"type": "text", "text": f"live message {i} 实时写入"}], "timestamp": int(time.time() * 1000)}
        t = time.perf_counter()
        archive.capture_message("live-during-import", message)
        waits.append((time.perf_counter() - t) * 1000)
        i += 1
        if i % 40 == 0:
            run_deferred_hooks(archive.store)
print(json.dumps(waits))
"""


def remove_archive(db: Path) -> None:
    """The archive at `db` gone with its WAL, shared-memory and wait-announcement files (a run
    starts from an empty one)."""
    for suffix in ("", "-wal", "-shm", "-wait"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def import_beside_a_live_writer(src: Path, folder: Path, db: Path) -> dict[str, Any]:
    """One more import of the folder into a fresh archive while a live writer captures a message
    every 20 ms (`LIVE_DURING`): how long each of its writes took, lock waits included (not counted
    in the import rates)."""
    remove_archive(db)
    env = dict(os.environ, PYTHONPATH=str(src))
    writer = subprocess.Popen(
        [sys.executable, "-c", LIVE_DURING, str(db)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin and writer.stdout
    writer.stdout.readline()  # ready: the archive exists and the writer waits for nothing
    run_import(src, folder, db)
    writer.stdin.write("stop\n")
    writer.stdin.flush()
    waits = json.loads(writer.stdout.read())
    writer.wait()
    summary = latency_summary(waits)
    summary["over_50ms"] = sum(1 for w in waits if w > 50)
    return summary


def table_bytes(src: Path, db: Path) -> dict[str, Any]:
    """Bytes per table (indexes and FTS shadow tables included) from `dbstat`, after a checkpoint."""
    code = (
        "import apsw, json, sys; c = apsw.Connection(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)');"
        "rows = c.execute('SELECT name, sum(pgsize) FROM dbstat GROUP BY name').fetchall();"
        "n = c.execute('SELECT count(*) FROM msg').fetchone()[0];"
        "raw = c.execute('SELECT coalesce(sum(length(raw)), 0) FROM entry').fetchone()[0];"
        "pages = c.execute('PRAGMA page_count').fetchone()[0] * c.execute('PRAGMA page_size').fetchone()[0];"
        "print(json.dumps({'tables': dict(rows), 'messages': n, 'entry_raw_bytes': raw, 'file_bytes': pages}))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    n = max(1, data["messages"])
    groups = {
        "msg (row + text)": ["msg"],
        "msg indexes": ["sqlite_autoindex_msg_1", "msg_session_order", "msg_entry"],
        "msg_fts": [k for k in data["tables"] if k.startswith("msg_fts")],
        "entry (verbatim)": ["entry", "sqlite_autoindex_entry_1", "entry_msg"],
        "run + run_msg + run_file": [
            k for k in data["tables"] if k.startswith(("run", "sqlite_autoindex_run")) and not k.startswith("run_fts")
        ],
        "run_fts": [k for k in data["tables"] if k.startswith("run_fts")],
    }
    per = {name: sum(data["tables"].get(k, 0) for k in keys) / n for name, keys in groups.items()}
    per["other"] = sum(data["tables"].values()) / n - sum(per.values())
    per["total"] = sum(data["tables"].values()) / n
    # the file itself: the tables plus the pages FTS5's merges freed and later writes will reuse
    per["file"] = data["file_bytes"] / n
    return {
        "per_message": {k: round(v) for k, v in per.items()},
        "messages": data["messages"],
        "entry_raw_bytes": data["entry_raw_bytes"],
    }


def live_writes(
    src: Path, db: Path, words: Words, n: int, turn: int = 40, gap: float = 0.5
) -> tuple[dict[str, float], dict[str, float]]:
    """Single-message captures through a real `pi-memory bridge` on the imported archive (round trip, ms),
    and the floor: after each capture, a request the bridge answers without touching the archive (a
    method it does not know, answered with an error), timed the same way in the same moments. On a
    shared machine most of a round trip's tail is waiting to be scheduled; the floor shows how much.

    Turns of `turn` messages with `gap` seconds between them: the bridge's idle moment comes after
    `bridge.IDLE_SECONDS` (0.2 s) without a request, and its work (indexing the turn's messages,
    run summaries, a checkpoint) takes tens of ms; a gap of exactly 0.2 s would time that work
    as the next turn's first write, which a person typing or a model thinking never does.
    """
    env = dict(os.environ, PYTHONPATH=str(src), PI_MEMORY_DB=str(db))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pi_memory", "bridge"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    assert proc.stdin and proc.stdout

    def call(req_id: int, method: str, params: dict[str, Any]) -> None:
        assert proc.stdin and proc.stdout
        proc.stdin.write(
            json.dumps({"id": req_id, "method": method, "params": params}, ensure_ascii=False).encode() + b"\n"
        )
        proc.stdin.flush()
        response = json.loads(proc.stdout.readline())
        if "error" in response and method != "no_such_method":
            raise SystemExit(f"bridge error: {response['error']}")

    sid = f"live-{uuid.uuid4()}"
    call(0, "session_start", {"session_id": sid, "cwd": "/home/dev/live"})
    messages = agent_messages(words, n, int(time.time() * 1000))
    ms, floor = [], []
    for i, message in enumerate(messages):
        t0 = time.perf_counter()
        call(i + 1, "capture", {"session_id": sid, "message": message})
        ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        call(-i - 1, "no_such_method", {})
        floor.append((time.perf_counter() - t0) * 1000)
        if turn and i % turn == turn - 1:
            time.sleep(gap)  # the idle moment between turns: indexing, run summaries, checkpoints
    call(n + 1, "shutdown", {})
    proc.wait(timeout=60)
    return latency_summary(ms), latency_summary(floor)


LIVE_CPU = """
import json, sys, time
from pi_memory import Archive
from pi_memory.storage.writes import run_deferred_hooks
db, messages = sys.argv[1], json.loads(sys.stdin.read())
cpu = []
with Archive.open(db) as archive:
    archive.store.defer_checkpoints()
    archive.store.defer_hooks()
    archive.ensure_session("live-cpu", "/home/dev/live")
    for i, m in enumerate(messages):
        c = time.process_time()
        archive.capture_message("live-cpu", m)
        cpu.append((time.process_time() - c) * 1000)
        if i % 40 == 39:
            run_deferred_hooks(archive.store)
            archive.store.checkpoint()
print(json.dumps(cpu))
"""


def live_cpu(src: Path, db: Path, words: Words, n: int) -> dict[str, float]:
    """The same captures in-process, CPU time of each: the write's own cost, free of the machine's load."""
    messages = agent_messages(words, n, int(time.time() * 1000) + 50_000_000)
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, "-c", LIVE_CPU, str(db)],
        input=json.dumps(messages),
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return latency_summary(json.loads(out.stdout))


FTS_FLOOR = """
import json, sys, tempfile, time
from pathlib import Path
import apsw
from pi_memory.ingest.importer import discover
cuts = []
try:
    from pi_memory.ingest.prepare import parse_and_tokenize  # a message line holds its two columns at 10 and 11
    for f in discover([Path(sys.argv[1])]):
        cuts += [(m[10], m[11]) for m in parse_and_tokenize(str(f), None).messages if m[10] or m[11]]
except ImportError:  # a revision from before: its cuts by hash
    from pi_memory.ingest.importer import parse_and_tokenize
    for f in discover([Path(sys.argv[1])]):
        prepared = parse_and_tokenize(str(f), None)
        tokens = prepared[1] if isinstance(prepared, tuple) else prepared.cuts
        cuts += [(c[0], c[1]) for c in tokens.values() if c[0] or c[1]]
conn = apsw.Connection(str(Path(tempfile.mkdtemp()) / "floor.db"))
conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
try:
    from pi_memory.storage.schema import COMPACT_FTS  # the indexes of a new archive (detail='none')
    detail = "none"
except ImportError:  # a revision from before
    detail = "column"
conn.execute(f\"\"\"CREATE VIRTUAL TABLE msg_fts USING fts5(chars, grams, content='', contentless_delete=1,
               tokenize="ascii tokenchars '_'", detail='{detail}')\"\"\")
start = time.process_time()
for i in range(0, len(cuts), 200):
    with conn:
        for j, (chars, grams) in enumerate(cuts[i : i + 200]):
            conn.execute("INSERT INTO msg_fts(rowid, chars, grams) VALUES (?,?,?)", (i + j + 1, chars, grams))
print(json.dumps({"messages": len(cuts), "cpu_ms_per_msg": (time.process_time() - start) * 1000 / max(1, len(cuts))}))
"""


def fts_floor(src: Path, folder: Path) -> dict[str, float]:
    """CPU per message of the FTS5 inserts alone (bare table, msg_fts's definition, 200 per transaction)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, "-c", FTS_FLOOR, str(folder)], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def verbatim_share(src: Path, work: Path) -> float:
    """Verbatim store bytes / source bytes on the real pi fixture sessions (tests/data/pi)."""
    files = sorted((REPO / "tests" / "data" / "pi").glob("*.jsonl"))
    db = work / "fixtures.db"
    remove_archive(db)  # a `--work` folder used before holds the last run's archive
    folder = work / "fixtures"
    folder.mkdir(exist_ok=True)
    for f in files:
        shutil.copy(f, folder / f.name)
    run_import(src, folder, db)
    raw = table_bytes(src, db)["entry_raw_bytes"]
    return raw / sum(f.stat().st_size for f in files)


def measure(
    label: str,
    src: Path,
    shape: str,
    folder: Path,
    built: dict[str, int],
    work: Path,
    args: argparse.Namespace,
    words: Words,
    runs: list[dict[str, Any]],
) -> dict[str, Any]:
    """The figures of one code on one shape: the fastest of its imports, then sizes and live writes on its archive."""
    db = work / f"{label}-{shape}.db"
    imported = min(runs, key=lambda r: r["seconds"])
    report = imported["report"]
    sizes = table_bytes(src, db)
    live, floor = live_writes(src, db, words, args.live) if args.live else ({}, {})
    cpu = live_cpu(src, db, words, args.live) if args.live else {}
    beside = import_beside_a_live_writer(src, folder, work / f"{label}-{shape}-beside.db") if args.live else {}
    return {
        "label": label,
        "shape": shape,
        **built,
        "seconds": round(imported["seconds"], 2),
        "all_runs_seconds": [round(r["seconds"], 2) for r in runs],
        "all_runs_cpu_seconds": [round(r["cpu_seconds"], 2) for r in runs],
        "msg_per_s": round(report["added"] / imported["seconds"]),
        "cpu_ms_per_msg": round(imported["cpu_seconds"] * 1000 / max(1, report["added"]), 3),
        "cpu_ms_per_session": round(imported["cpu_seconds"] * 1000 / max(1, report["sessions"]), 3),
        "sessions_per_s": round(report["sessions"] / imported["seconds"]),
        "added": report["added"],
        "peak_rss_mb": round(imported["peak_rss_mb"]),
        "worker_peak_rss_mb": round(imported["worker_peak_rss_mb"]),
        "bytes_per_message": sizes["per_message"],
        "source_bytes_per_message": round(built["source_bytes"] / max(1, built["messages"])),
        "live_write_ms": live,
        "live_round_trip_floor_ms": floor,
        "live_write_cpu_ms": cpu,
        "live_write_during_import_ms": beside,
    }


def measure_all(
    shapes: dict[str, tuple[Path, dict[str, int]]],
    codes: list[tuple[str, Path]],
    work: Path,
    args: argparse.Namespace,
    words: Words,
) -> list[dict[str, Any]]:
    rows = []
    for shape, (folder, built) in shapes.items():
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in codes}
        for _ in range(args.repeat):  # alternating, so a burst of load on the shared machine hits both
            for label, src in codes:
                db = work / f"{label}-{shape}.db"
                remove_archive(db)
                runs[label].append(run_import(src, folder, db))
        for label, src in codes:
            row = measure(label, src, shape, folder, built, work, args, words, runs[label])
            rows.append(row)
            print(
                f"  {label} {shape}: {row['msg_per_s']} msg/s, {row['sessions_per_s']} sessions/s, "
                f"{row['cpu_ms_per_msg']} CPU ms/msg, {row['bytes_per_message']['total']} B/msg, live {row['live_write_ms']}"
            )
    return rows


def ratios_of(rows: list[dict[str, Any]], shapes: list[str], baseline: str) -> dict[str, dict[str, Any]]:
    """This code's figures over the baseline's, per shape (the same files, the same run)."""
    ratios = {}
    for shape in shapes:
        new = next(r for r in rows if r["shape"] == shape and r["label"] == "this")
        old = next(r for r in rows if r["shape"] == shape and r["label"] == baseline)
        ratios[shape] = {
            "msg_per_s": round(new["msg_per_s"] / max(1, old["msg_per_s"]), 2),
            "cpu_per_msg": round(new["cpu_ms_per_msg"] / max(1e-9, old["cpu_ms_per_msg"]), 2),
            "bytes_per_message": round(
                new["bytes_per_message"]["total"] / max(1, old["bytes_per_message"]["total"]), 2
            ),
            "live_p99": round(new["live_write_ms"].get("p99", 0) / max(1e-9, old["live_write_ms"].get("p99", 1)), 2),
            "live_cpu_p99": round(
                new["live_write_cpu_ms"].get("p99", 0) / max(1e-9, old["live_write_cpu_ms"].get("p99", 1)), 2
            ),
        }
        r = ratios[shape]
        print(
            f"{shape}: this / {baseline}: import rate x{r['msg_per_s']}, CPU per message x{r['cpu_per_msg']}, "
            f"bytes per message x{r['bytes_per_message']}, live p99 x{r['live_p99']} (CPU x{r['live_cpu_p99']})"
        )
    return ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--corpus", type=Path, default=Path("../shared/corpora"), help="corpus root (gutenberg/, vue-docs-zh-cn/)"
    )
    ap.add_argument(
        "--short", type=int, default=20_000, help="messages in the many-short-sessions shape (~10,000 sessions)"
    )
    ap.add_argument("--long", type=int, default=20_000, help="messages in the 40-message-sessions shape")
    ap.add_argument(
        "--mix625", type=int, default=20_000, help="messages in the 625-char mix (scale.py's; 40 per session; 0: skip)"
    )
    ap.add_argument("--live", type=int, default=1000, help="live single-message writes per archive (0: none)")
    ap.add_argument("--repeat", type=int, default=1, help="imports per code and shape, alternating; the fastest counts")
    ap.add_argument("--baseline", default=None, help="git revision to measure the same way (e.g. main)")
    ap.add_argument(
        "--work", type=Path, default=None, help="folder for session files and archives (default: temporary)"
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="pi-memory-import-"))
    work.mkdir(parents=True, exist_ok=True)
    words = Words(args.corpus, random.Random(13))
    shapes = {}
    for shape, n in (("short", args.short), ("long", args.long), ("mix625", args.mix625)):
        if n <= 0:
            continue
        folder = work / f"sessions-{shape}"
        shutil.rmtree(folder, ignore_errors=True)
        words.rng = random.Random(f"import_bench {shape}")  # each shape the same files, whichever others are built
        shapes[shape] = (folder, build_shape(folder, words, shape, n))
        print(
            f"{shape}: {shapes[shape][1]['files']} files, {shapes[shape][1]['messages']} messages, {shapes[shape][1]['source_bytes'] / 1e6:.1f} MB"
        )
    codes = [("this", REPO / "src")]
    if args.baseline:
        codes.append((args.baseline, export_revision(args.baseline, work / "baseline")))
    rows = measure_all(shapes, codes, work, args, words)
    verbatim = {}
    for label, src in codes:
        (work / f"v-{label}").mkdir(exist_ok=True)
        verbatim[label] = round(verbatim_share(src, work / f"v-{label}"), 3)
    print()
    print(
        table(
            [
                "code",
                "shape",
                "msgs",
                "msg/s",
                "sessions/s",
                "CPU ms/msg",
                "peak MB",
                "worker MB",
                "B/msg",
                "live p50",
                "live p99",
                "floor p99",
                "CPU p50",
                "CPU p99",
                "beside import p99",
                "max",
                ">50 ms",
            ],
            [
                [
                    r["label"],
                    r["shape"],
                    r["added"],
                    r["msg_per_s"],
                    r["sessions_per_s"],
                    r["cpu_ms_per_msg"],
                    r["peak_rss_mb"],
                    r["worker_peak_rss_mb"],
                    r["bytes_per_message"]["total"],
                    r["live_write_ms"].get("p50", ""),
                    r["live_write_ms"].get("p99", ""),
                    r["live_round_trip_floor_ms"].get("p99", ""),
                    r["live_write_cpu_ms"].get("p50", ""),
                    r["live_write_cpu_ms"].get("p99", ""),
                    r["live_write_during_import_ms"].get("p99", ""),
                    r["live_write_during_import_ms"].get("max", ""),
                    r["live_write_during_import_ms"].get("over_50ms", ""),
                ]
                for r in rows
            ],
        )
    )
    print()
    groups = list(rows[0]["bytes_per_message"])
    print(
        table(
            ["bytes per message", *[f"{r['label']}/{r['shape']}" for r in rows]],
            [[g, *[r["bytes_per_message"][g] for r in rows]] for g in groups],
        )
    )
    print()
    print("verbatim store / source bytes on tests/data/pi: " + ", ".join(f"{k} {v:.1%}" for k, v in verbatim.items()))
    ratios = ratios_of(rows, list(shapes), args.baseline) if args.baseline else {}
    floor = {shape: fts_floor(REPO / "src", folder) for shape, (folder, _) in shapes.items()}
    for shape, f in floor.items():
        print(f"{shape}: FTS5 inserts alone (the writer's floor): {f['cpu_ms_per_msg']:.3f} CPU ms per indexed message")
    data = result_header("import_bench", {k: str(v) for k, v in vars(args).items()})
    data.update(
        {
            "load_average": os.getloadavg(),
            "results": rows,
            "verbatim_share": verbatim,
            "ratios": ratios,
            "fts_floor": floor,
            # whether each code's indexing tokenizer ran in C (`core/_cut.c`, built at install)
            "native_tokenizer": {label: any((src / "pi_memory" / "core").glob("_cut.*.so")) for label, src in codes},
        }
    )
    if args.baseline:
        data["baseline_commit"] = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", args.baseline], capture_output=True, text=True
        ).stdout.strip()
    save_json(args.json, data)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
