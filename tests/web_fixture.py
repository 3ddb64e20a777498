"""A small archive for the web viewer's browser tests and screenshots, and the real server over it.

The archive holds the real pi fixture sessions, one session with hostile HTML in a
message, and the memory logs of two workspaces: a sound one and one whose second
event was edited behind the library's back (a broken chain).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from pi_memory import Archive

DATA = Path(__file__).parent / "data"
SRC = Path(__file__).resolve().parent.parent / "src"
HOSTILE = '<script>window.__pwned = 1; document.title = "pwned"</script><img src=x onerror="window.__pwned = 2">'
HOSTILE_SESSION = "hostile-session-0001"
SOUND_WS, BROKEN_WS = "/home/dev/shop", "/home/dev/broken"


def build_archive(db: Path) -> dict[str, str]:
    """Fill `db`; returns what the tests look for (the hostile message id, memory ids)."""
    with Archive.open(db) as archive:
        archive.import_paths([DATA / "pi"])
        archive.ensure_session(HOSTILE_SESSION, "/home/dev/evil", name="a hostile session")
        hostile = archive.capture_message(
            HOSTILE_SESSION, {"role": "user", "content": "zebrafish " + HOSTILE, "timestamp": 1_796_000_000_000}
        )
        archive.memory_remember(SOUND_WS, "Use pnpm, never npm, in this repo", kind="preference", pin=True)
        keep = archive.memory_remember(SOUND_WS, "The cart store lives in src/store/cart.js", kind="fact")
        archive.memory_propose(SOUND_WS, "购物车角标用 computed 计算数量", kind="fact")
        for i in range(3):
            archive.memory_remember(BROKEN_WS, f"broken-log memory {i}", kind="fact")
    tamper(db, BROKEN_WS, seq=2)
    return {"hostile_msg": str(hostile), "memory": keep.record.id}


def tamper(db: Path, workspace: str, seq: int) -> None:
    """Edit one memory event with the append-only triggers dropped (what the chain must detect)."""
    conn = apsw.Connection(str(db))
    conn.execute("DROP TRIGGER IF EXISTS memory_event_no_update")
    ((chain,),) = list(conn.execute("SELECT max(id) FROM memory_chain WHERE workspace=?", (workspace,)))
    ((event,),) = list(conn.execute("SELECT event FROM memory_event WHERE chain=? AND seq=?", (chain, seq)))
    changed = json.loads(str(event))
    changed["body"] = "edited behind the library's back"
    conn.execute("UPDATE memory_event SET event=? WHERE chain=? AND seq=?", (json.dumps(changed), chain, seq))
    conn.close()


@contextmanager
def running_server(db: Path, *options: str) -> Iterator[str]:
    """`python -m pi_memory serve` as a user starts it, on any free port; yields its URL."""
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "pi_memory", "--db", str(db), "serve", "--port", "0", *options]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # printed once the socket listens
        found = re.search(r"(http://\S+/)", line)
        if not found:
            raise RuntimeError(f"the server did not start: {line}{proc.stderr.read()}")
        yield found.group(1).rstrip("/")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
