"""A parse worker for bulk import: a plain child interpreter, `python -m pi_memory.parse_worker`.

Design idea: the importer's second core. Parsing, rendering, tokenizing and compressing a file
cost about what writing it costs, so a worker does them while the importer writes. The worker is
started as a module, not through `multiprocessing`: `spawn` and `forkserver` re-import the
caller's `__main__` (a script without a main guard starts the import again inside the worker and
dies), and `fork` would copy the caller's open SQLite connection into the child. Here the child
imports only this package, whoever the caller is (a script, `python -`, a REPL, a notebook).

Protocol: pickles over the child's stdin/stdout. The parent sends `(path, agent)`, the child
answers `("ok", result)` or `("oserror", strerror)`, in order. End of input ends the child (so a
killed importer leaves no worker behind). Requests are small and at most a few are in flight, so
neither side can block the other on a full pipe.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import IO, Any

# the folder holding this package: the child imports the same copy as its parent, whatever sys.path the caller built
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    from .ingest.importer import parse_and_tokenize

    while True:
        try:
            path, agent = pickle.load(inp)
        except EOFError:
            return
        try:
            answer: tuple[str, Any] = ("ok", parse_and_tokenize(path, agent))
        except OSError as exc:
            answer = ("oserror", exc.strerror or str(exc))
        pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


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
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")])),
            },
        )
        self.waiting: deque[str] = deque()

    def submit(self, path: str, agent: str | None) -> None:
        assert self.proc.stdin is not None
        try:
            pickle.dump((path, agent), self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerGone(path) from None
        self.waiting.append(path)

    def result(self) -> Any:
        """The oldest request's answer: the parse result; an `OSError` from reading the file is raised."""
        assert self.proc.stdout is not None
        path = self.waiting.popleft()
        try:
            kind, value = pickle.load(self.proc.stdout)
        except (EOFError, pickle.UnpicklingError, OSError):
            raise WorkerGone(path) from None
        if kind == "oserror":
            raise OSError(0, value)
        return value

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
