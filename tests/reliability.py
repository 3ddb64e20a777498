"""Helpers of the reliability suite (`test_reliability_*.py`): session files, paused processes, waits.

A test that needs something to happen *while* an import runs does not hope for a race: it runs
the import in a child process that stops at a named point (`PAUSED_IMPORT`) and says so on
stdout, does its thing, then lets it go on. Waits are bounded by an event, never by a budget.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pi_memory

VUE = Path(__file__).parent / "data" / "pi" / "pi-0.73.1-vue-reactive-zh.jsonl"
PACKAGE_ROOT = str(Path(pi_memory.__file__).resolve().parent.parent)
WAIT_S = 120  # the bound of any wait for an event (a loaded machine is slow; a hung one fails)


def many_sessions(folder: Path, n: int, prefix: str = "copy") -> Path:
    """`n` copies of a real pi session under distinct session ids (23 messages each)."""
    lines = VUE.read_bytes().splitlines(keepends=True)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        header = json.loads(lines[0])
        header["id"] = f"{prefix}-{i:04d}"
        (folder / f"s{i:04d}.jsonl").write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
    return folder


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": PACKAGE_ROOT, **extra}


def eventually(condition: Callable[[], object], bound_s: float = WAIT_S, every_s: float = 0.01) -> bool:
    """Wait for `condition` (an event), looking every `every_s`; whether it came within `bound_s`."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every_s)
    return bool(condition())


def until(condition: Callable[[], object], what: str, bound_s: float = WAIT_S) -> None:
    """Wait for `condition` (an event), failing with `what` if it never comes."""
    assert eventually(condition, bound_s), what


# An import in a child process that stops after its first batch is written (the archive holds
# messages, the import's settings are in force) until a line arrives on its stdin, then finishes
# and prints its report as JSON. It prints "paused" when it stops.
PAUSED_IMPORT = """
import json, sys
from pi_memory import Archive
from pi_memory.ingest.importer import Importer

flush, paused = Importer.flush, []

def flush_then_pause(self, report):
    flush(self, report)
    if not paused and report.added:
        paused.append(1)
        print("paused", flush=True)
        sys.stdin.readline()

Importer.flush = flush_then_pause
with Archive.open(sys.argv[1]) as archive:
    report = archive.import_paths([sys.argv[2]])
print(json.dumps(report.to_dict()), flush=True)
"""


class PausedImport:
    """`PAUSED_IMPORT` of `folder` into `db`: `wait_paused()`, then `finish()` -> its report."""

    def __init__(self, db: Path, folder: Path, workers: str = "0") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PAUSED_IMPORT, str(db), str(folder)],
            env=env(PI_MEMORY_IMPORT_WORKERS=workers),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_paused(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # bounded: the child either pauses or ends (EOF)
        assert line.strip() == "paused", (
            f"the import never paused: {line!r} {self.proc.stderr.read() if self.proc.stderr else ''}"
        )
        assert self.proc.poll() is None

    def finish(self) -> dict[str, object]:
        out, err = self.proc.communicate("go\n", timeout=WAIT_S)
        assert self.proc.returncode == 0, err
        assert "Traceback" not in err, err
        return dict(json.loads(out.strip().splitlines()[-1]))

    def kill(self) -> None:
        """kill -9, mid-work (it is paused), and nothing of the child left open."""
        assert self.proc.poll() is None, "the import ended before the kill"
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=WAIT_S)


def pi_lines(sid: str, texts: list[str], cwd: str = "/w/probe", start_ms: int = 1_790_000_000_000) -> list[bytes]:
    """The lines of a minimal real-shaped pi v3 session (user/assistant turns), newline included."""
    lines = [{"type": "session", "version": 3, "id": sid, "timestamp": "2026-09-21T00:00:00.000Z", "cwd": cwd}]
    parent = None
    for i, text in enumerate(texts):
        eid = f"{i + 1:08x}"
        role = "user" if i % 2 == 0 else "assistant"
        msg = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": start_ms + i * 1000}
        entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-09-21T00:00:00Z", "message": msg}
        lines.append(entry)
        parent = eid
    return [json.dumps(x, ensure_ascii=False).encode() + b"\n" for x in lines]


def nested_line(depth: int = 1000) -> bytes:
    """One pi message line whose tool arguments nest `depth` deep (~2 KB at 1,000: a model can emit it)."""
    args = "[" * depth + "]" * depth
    call = '{"type":"toolCall","id":"call_1","name":"bash","arguments":{"x":' + args + "}}"
    msg = '{"role":"assistant","content":[' + call + '],"timestamp":1790000009000,"stopReason":"toolUse"}'
    return (
        '{"type":"message","id":"deadbeef","parentId":null,"timestamp":"2026-09-21T00:00:00Z","message":' + msg + "}\n"
    ).encode()
