"""A parse worker for bulk import: a plain child interpreter, `python -m pi_memory.parse_worker`.

Design idea: the importer's second core. Parsing, rendering, tokenizing and compressing a file
cost about what writing it costs, so a worker does them while the importer writes. The worker is
started as a module, not through `multiprocessing`: `spawn` and `forkserver` re-import the
caller's `__main__` (a script without a main guard starts the import again inside the worker and
dies), and `fork` would copy the caller's open SQLite connection into the child. Here the child
imports only this package, whoever the caller is (a script, `python -`, a REPL, a notebook).

This module is the child's side (`serve`); the parent's (`Worker`) is `ingest.workers`.

Protocol: pickles over the child's stdin/stdout. The child first says `("ready", None)` once it has
imported what it parses with (the parent parses files itself until then: a child takes ~0.1-0.2 s to
start, a writer's ~5% of 20k messages). The parent sends `("file", path, agent, dict_id,
keep_lines)`, the child answers `("ok", result)` (an `ingest.prepare.PreparedFile`) or
`("oserror", strerror)`, in order; `dict_id` is the archive dictionary to pack the messages' text
with (0: none, the writer packs it), `keep_lines` asks for the verbatim lines as they are. `("dict", data)` hands
the child a dictionary (the archive's, once it has one) and gets no answer. End of input ends the
child (so a killed importer leaves no worker behind). The parent writes its requests and reads the
answers on two threads of its own (`ingest.workers.Worker`), so neither side ever waits on the
other's full pipe: a dictionary (~110 KB, more than a pipe holds) waits in the pipe until the
child has answered the files asked for before it, and the parent writes on meanwhile.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import IO, Any


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    from .core.text import fold_chinese
    from .ingest.prepare import parse_and_tokenize
    from .storage.codec import register_dictionary

    # before saying ready: the fold table is built at its first use, and opencc (for a phrase it
    # converts otherwise than character by character, `回覆`) loads its dictionaries at its first
    fold_chinese("準備回覆")
    pickle.dump(("ready", None), out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()
    held: set[int] = set()  # the dictionaries handed to this child (their ids, from their bytes)
    while True:
        try:
            request = pickle.load(inp)
        except EOFError:
            return
        if request[0] == "dict":
            held.add(register_dictionary(request[1]))
            continue
        _, path, agent, dict_id, keep_lines = request
        try:
            prepared = parse_and_tokenize(path, agent, dict_id if dict_id in held else 0, keep_lines)
            answer: tuple[str, Any] = ("ok", prepared)
        except OSError as exc:
            answer = ("oserror", exc.strerror or str(exc))
        pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


# The worker yields its core to the writer whenever both want it: the writer is the import's
# critical path (a transaction's FTS5 work cannot be split), while the worker parses ahead of it
# and has time to spare; and if the worker falls behind, the writer parses files itself
# (`ingest.importer._Ahead.parse_while_waiting`). At 300k messages of 40-message sessions, the
# writer's thread waited for a core 1.7-2.4 s instead of 2.4-3.3 s of ~60 (four imports each).
NICENESS = 10


def _yield_to_the_writer() -> None:
    nice = getattr(os, "nice", None)  # not on Windows
    if nice is not None:
        try:
            nice(NICENESS)
        except OSError:
            pass


if __name__ == "__main__":
    _yield_to_the_writer()
    serve(sys.stdin.buffer, sys.stdout.buffer)
