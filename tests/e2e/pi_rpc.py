"""Drive one real `pi --mode rpc` process: send steps, wait until pi has finished each, keep notifications.

Adapted from the `Rpc` class of the project's pi harness (`run-scenario.py`): pi 1.x ends a prompt
with `agent_settled`; pi 0.x only with `agent_end` (plus possible auto-retries), so for 0.x a prompt
counts as finished after a quiet second following `agent_end`.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any


class PiRpc:
    QUIET = 1.0

    def __init__(self, cmd: list[str], cwd: Path, env: dict[str, str], log: IO[str], settles: bool) -> None:
        self.p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.settles = settles
        self.n = 0
        self.q: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.notifications: list[str] = []
        self.selects: list[dict[str, Any]] = []  # select dialogs shown; each is answered with its first option
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.p.pid

    def _read(self) -> None:
        assert self.p.stdout
        for line in iter(self.p.stdout.readline, b""):  # bytes: split on LF only
            line = line.rstrip(b"\r\n")
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("type") == "extension_ui_request" and ev.get("method") == "notify":
                self.notifications.append(str(ev.get("message", "")))
            if ev.get("type") == "extension_ui_request" and ev.get("method") == "select":
                self.selects.append(ev)
                options = ev.get("options") or []
                answer = {"value": options[0]} if options else {"cancelled": True}
                self._write({"type": "extension_ui_response", "id": ev.get("id"), **answer})
            self.q.put(ev)
        self.q.put(None)

    def _write(self, obj: dict[str, Any]) -> None:
        assert self.p.stdin
        with self.lock:
            self.p.stdin.write(json.dumps(obj).encode("utf-8") + b"\n")
            self.p.stdin.flush()

    def send(self, obj: dict[str, Any]) -> str:
        self.n += 1
        rid = f"r{self.n}"
        self._write({"id": rid, **obj})
        return rid

    def next_event(self, timeout: float) -> dict[str, Any] | None:
        try:
            ev = self.q.get(timeout=timeout)
        except queue.Empty:
            return None
        if ev is None:
            raise RuntimeError(f"pi exited unexpectedly (code {self.p.poll()})")
        if ev.get("type") not in ("message_update", "tool_execution_update"):
            self.events.append(ev)
        return ev

    def request(self, obj: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        rid = self.send(obj)
        deadline = time.time() + timeout
        while time.time() < deadline:
            ev = self.next_event(timeout=1)
            if ev and ev.get("type") == "response" and ev.get("id") == rid:
                if not ev.get("success"):
                    raise RuntimeError(f"command failed: {ev}")
                return ev
        raise RuntimeError(f"timeout waiting for {obj}")

    def prompt(self, message: str, expect_run: bool = True, timeout: float = 60) -> None:
        rid = self.send({"type": "prompt", "message": message})
        state = {"responded": False, "finished": False}
        deadline = time.time() + timeout
        while time.time() < deadline:
            ev = self.next_event(timeout=self.QUIET if state["finished"] else 1)
            if ev is None:
                if state["finished"] and state["responded"]:
                    return  # pi 0.x: quiet after agent_end, no auto-retry pending
                continue
            if self._prompt_done(ev, rid, expect_run, state):
                return
        raise RuntimeError(f"timeout waiting for prompt {message!r}")

    def _prompt_done(self, ev: dict[str, Any], rid: str, expect_run: bool, state: dict[str, bool]) -> bool:
        t = ev.get("type")
        if t == "response" and ev.get("id") == rid:
            if not ev.get("success"):
                raise RuntimeError(f"prompt failed: {ev}")
            state["responded"] = True
            handled = (ev.get("data") or {}).get("disposition") == "handled"
            return not expect_run or handled or (state["finished"] and self.settles)
        if t == "agent_settled":
            state["finished"] = True
            return state["responded"]
        if t == "agent_end" and not self.settles:
            state["finished"] = True
        elif t in ("agent_start", "auto_retry_start"):
            state["finished"] = False
        return False

    def command(self, text: str) -> None:
        """An extension command (`/name args`); returns when pi has handled it."""
        self.prompt(text, expect_run=False)
        time.sleep(0.3)  # notifications of the command arrive right after the response

    def close(self, timeout: float = 60) -> int:
        assert self.p.stdin
        self.p.stdin.close()
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.terminate()
            self.p.wait(timeout=10)
        if self.p.stdout:
            self.p.stdout.close()
        return int(self.p.returncode)
