"""The parent's side of a parse worker: a child interpreter running `python -m pi_memory.parse_worker`.

Why a plain child and not `multiprocessing`: see `pi_memory.parse_worker`, the child's side.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any

# the folder holding this package: the child imports the same copy as its parent, whatever sys.path the caller built
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerGone(Exception):
    """The worker process ended before answering (killed, or out of memory)."""


class Worker:
    """One child interpreter; `submit` then `result` in the same order."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pi_memory.parse_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={
                "OPENBLAS_NUM_THREADS": "1",  # a worker never multiplies matrices (see `frontends.cli`)
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")])),
            },
        )
        self.waiting: deque[str] = deque()
        self.text_dict = 0  # the archive dictionary this worker holds (`send_dictionary`); 0: none
        self.started = threading.Event()  # the child said it is ready (its first answer)
        _widen_pipe(self.proc.stdout)
        # Answers are read as soon as they are written, by a thread of their own: an answer is
        # ~4x its file's source (~250 KB for 40 messages), so the pipe holds fewer files than one
        # flush writes, and a worker left to wait on it sat idle through every flush (~30% of its
        # time). How many answers wait here is bounded by the caller, which stops handing out
        # files `AHEAD_BYTES` of source ahead of the writer.
        self._answers: queue.SimpleQueue[tuple[str, Any] | None] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read_answers, name="pi-memory parse answers", daemon=True)
        self._reader.start()
        # Requests are written by a thread of their own too: the archive's dictionary (~110 KB) is
        # larger than the request pipe, and the child reads it only after the files it has in hand
        # (~20 of them, 60 ms of parsing when the dictionary is learned), which the writer waited out.
        self._requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._gone = False  # the child's pipes broke: later requests fail at once
        self._sender = threading.Thread(target=self._write_requests, name="pi-memory parse requests", daemon=True)
        self._sender.start()

    @property
    def ready(self) -> bool:
        """Whether the child has started (or is gone): until then, the caller parses files itself."""
        return self.started.is_set()

    def submit(self, path: str, agent: str | None, keep_lines: bool = False) -> None:
        """Ask for a file, its messages' text packed with the dictionary this worker holds (and their
        lines as they are with `keep_lines`: `prepare.prepare`)."""
        self._send(("file", path, agent, self.text_dict, keep_lines), path)
        self.waiting.append(path)

    def send_dictionary(self, dict_id: int, data: bytes) -> None:
        """Hand over the archive's dictionary (no answer); the files asked for after it come back
        with their text packed."""
        self._send(("dict", data), "the archive's dictionary")
        self.text_dict = dict_id

    def _send(self, request: tuple[Any, ...], what: str) -> None:
        """Queue a request for the sending thread; a child known gone fails at once (one that goes
        later fails its requests at `result`: the reading thread meets the end of its answers)."""
        if self._gone:
            raise WorkerGone(what)
        self._requests.put(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))

    def _write_requests(self) -> None:
        """The sending thread: each request in order, until `close` (None) or a broken pipe; then the
        child's input is closed, which ends it once it has answered what it read."""
        stdin = self.proc.stdin
        assert stdin is not None
        while (request := self._requests.get()) is not None:
            try:
                stdin.write(request)
                stdin.flush()
            except (OSError, ValueError):  # the child is gone (a broken pipe) or its input closed
                self._gone = True
                break
        try:
            stdin.close()
        except OSError:
            pass

    def _read_answers(self) -> None:
        """The reading thread: every answer in order, then None once the worker is gone."""
        assert self.proc.stdout is not None
        while True:
            try:
                answer = pickle.load(self.proc.stdout)
            except Exception:  # EOF, a torn answer, a closed pipe: the worker is gone either way
                self._gone = True
                self._answers.put(None)
                self.started.set()  # gone: nothing to wait for (its requests fail, and are parsed here)
                return
            if answer[0] == "ready":
                self.started.set()
            else:
                self._answers.put(answer)

    def answered(self) -> bool:
        """Whether the oldest request's answer is here (or the worker is gone): `result` would not wait."""
        return not self._answers.empty()

    def result(self) -> Any:
        """The oldest request's answer: the parse result; an `OSError` from reading the file is raised."""
        path = self.waiting.popleft()
        answer = self._answers.get()
        if answer is None:
            self._answers.put(None)  # gone for every later request too
            raise WorkerGone(path)
        kind, value = answer
        if kind == "oserror":
            raise OSError(0, value)
        return value

    def close(self) -> None:
        self._requests.put(None)  # the sending thread closes the child's input: it ends at the end of its requests
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._sender.join(timeout=5)  # a write to a killed child fails: the thread ends
        self._reader.join(timeout=5)  # the pipe is at its end now that the worker is gone
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# A file's answer (its messages, tokens and packed copies) is often larger than the 64 KB a pipe
# holds by default; a worker whose answer does not fit waits for the importer to read it, and the
# two processes take turns instead of working at once. A 1 MB pipe (Linux's default limit for
# any user) lets the worker stay several files ahead.
PIPE_BYTES = 1 << 20


def _widen_pipe(pipe: Any) -> None:
    setter = getattr(fcntl, "F_SETPIPE_SZ", None)
    if pipe is None or setter is None:
        return
    try:
        fcntl.fcntl(pipe.fileno(), setter, PIPE_BYTES)
    except OSError:
        pass  # a lower system limit: the default pipe still works, only with less overlap
