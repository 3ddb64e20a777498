"""`pi-memory bridge`: the `Archive` API as newline-delimited JSON over stdio, for the pi extension.

Design idea: the pi extension is a thin TypeScript shim; everything it does is
one request here. One process per pi process holds one `Archive` (one SQLite
connection) for its whole life, so a live write costs one short transaction and
no process start. The protocol is one JSON object per line each way:

    -> {"id": 7, "method": "capture", "params": {"session_id": "...", "message": {...}}}
    <- {"id": 7, "result": 1234}
    <- {"id": 7, "error": {"code": "bad_params", "message": "session_id is required"}}

Methods are a plain registry (`protocol.METHODS`: name -> function(archive,
params)); each method module adds its own with `@method("name")`: `methods` (the
archive's), `compact`, `fold`, and the memory and review tools. A bad request of any kind
(not JSON, unknown method, bad params, a line over `MAX_REQUEST_BYTES`) gets an
error response and the loop goes on: the bridge exits only on EOF or `shutdown`.
"""

from __future__ import annotations

import gc
import json
import select
import sys
import traceback
from pathlib import Path
from typing import IO, Any

import apsw

from ...archive import Archive
from ...core import jsonline
from ...errors import ArchiveError, BadInput, NotFound
from . import compact as _compact_methods  # noqa: F401  (registers the compact_* methods)
from . import fold as _fold_methods  # noqa: F401  (registers the fold_* methods)
from . import methods as _archive_methods  # noqa: F401  (registers hello, capture, search, read...)
from . import provenance as _provenance_methods  # noqa: F401  (registers edit_observed, session_blame, resume)
from .protocol import METHODS, BadParams

MAX_REQUEST_BYTES = 8 * 1024 * 1024
IDLE_SECONDS = 0.2
EMBED_POLL_SECONDS = 0.5  # while vectors are due: how long the bridge waits for a request before a step
CHECKPOINT_EVERY = 500


class Shutdown(Exception):
    """Raised by the `shutdown` handler after its response is decided."""


# --- the loop ---------------------------------------------------------------------------


def error(req_id: Any, code: str, message: str) -> dict[str, Any]:
    return {"id": req_id, "error": {"code": code, "message": message}}


class RequestError(Exception):
    def __init__(self, req_id: Any, code: str, message: str) -> None:
        super().__init__(message)
        self.req_id, self.code, self.message = req_id, code, message


def parse_request(line: bytes) -> tuple[Any, str, dict[str, Any]]:
    """(id, method, params) of one request line, or a `RequestError` saying what is wrong with it."""
    try:
        request = jsonline.loads(line)
    except ValueError as exc:  # not JSON, not UTF-8, nested too deep
        raise RequestError(None, "parse_error", f"request refused: {exc}") from None
    if not isinstance(request, dict):
        raise RequestError(None, "invalid_request", "request must be a JSON object")
    req_id = request.get("id")
    name = request.get("method")
    params = request.get("params") or {}
    if not isinstance(name, str):
        raise RequestError(req_id, "invalid_request", "method is required (a string)")
    if not isinstance(params, dict):
        raise RequestError(req_id, "bad_params", "params must be a JSON object")
    if name not in METHODS:
        raise RequestError(req_id, "unknown_method", f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    return req_id, name, params


# Library errors -> protocol error codes, most specific first.
ERROR_CODES: list[tuple[type[BaseException], str]] = [
    (BadParams, "bad_params"),
    (NotFound, "not_found"),
    (BadInput, "bad_input"),
    (ArchiveError, "archive_error"),
    (apsw.BusyError, "busy"),
    (apsw.Error, "archive_error"),
]


def error_code(exc: BaseException) -> str:
    return next((code for kind, code in ERROR_CODES if isinstance(exc, kind)), "internal")


def handle_line(archive: Archive | None, line: bytes, open_error: str | None = None) -> dict[str, Any]:
    """One request line -> one response object. Never raises (but `Shutdown` after a shutdown)."""
    try:
        req_id, name, params = parse_request(line)
    except RequestError as bad:
        return error(bad.req_id, bad.code, bad.message)
    if archive is None:
        return error(req_id, "archive_error", open_error or "the archive is not open")
    try:
        if name not in LIVE_WRITES:
            archive.catch_up()  # what the hooks build (runs) is current for any read
        result = METHODS[name](archive, params)
    except Exception as exc:  # any failure, a bug included, is one error response: the bridge goes on
        code = error_code(exc)
        if code == "internal":
            traceback.print_exc(file=sys.stderr)
        message = str(exc) if code != "internal" else f"{type(exc).__name__}: {exc}"
        return error(req_id, code, message)
    if name == "shutdown":
        raise Shutdown({"id": req_id, "result": result})
    return {"id": req_id, "result": result}


TOO_LARGE = object()  # marker: a request line over the limit was skipped


class LineReader:
    """Request lines from an unbuffered byte stream, with a way to ask "is a request waiting?".

    Our own buffer (not `readline`) so `idle()` can ask `select` truthfully: a
    buffered reader may hold a whole request that `select` would not see.
    """

    def __init__(self, stream: IO[bytes], limit: int = MAX_REQUEST_BYTES) -> None:
        self.stream = stream
        self.limit = limit
        self.buf = bytearray()
        self.eof = False
        try:
            self.fd: int | None = stream.fileno()
        except (OSError, AttributeError, ValueError):
            self.fd = None  # an in-memory stream: never idle

    def idle(self, timeout: float) -> bool:
        """True when no request arrives within `timeout` seconds."""
        if self.fd is None or self.eof or b"\n" in self.buf:
            return False
        ready, _, _ = select.select([self.fd], [], [], timeout)
        return not ready

    def _fill(self) -> bool:
        chunk = self.stream.read(1 << 16)
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def readline(self) -> bytes | object | None:
        """The next line; None at EOF; `TOO_LARGE` for a line over the limit (skipped to its end)."""
        skipping = False
        while True:
            cut = self.buf.find(b"\n")
            if cut >= 0:
                line = bytes(self.buf[: cut + 1])
                del self.buf[: cut + 1]
                return TOO_LARGE if skipping or len(line) > self.limit + 1 else line
            if len(self.buf) > self.limit:
                skipping = True
                self.buf.clear()  # keep memory flat while the rest of the line streams past
            if not self._fill():
                if skipping:
                    return TOO_LARGE
                line = bytes(self.buf)
                self.buf.clear()
                return line or None


def encode(response: dict[str, Any]) -> bytes:
    text = json.dumps(response, ensure_ascii=False, separators=(",", ":"), default=str)
    # a lone surrogate (from a JS string) becomes its JSON escape again instead of failing
    return text.encode("utf-8", "backslashreplace") + b"\n"


# Requests that only add messages: their after-write hooks (runs) wait for an idle moment.
LIVE_WRITES = frozenset({"session_start", "capture", "capture_entry", "backfill", "set_name", "edit_observed"})


def _when_idle(archive: Archive) -> None:
    """Deferred run summaries, then a WAL checkpoint: work that must not land on a live write."""
    try:
        archive.catch_up()
    except (ArchiveError, apsw.Error) as exc:  # never fatal: the next import or rebuild redoes runs
        print(f"pi-memory bridge: deferred run update failed: {exc}", file=sys.stderr)
    archive.checkpoint()


def _embed_when_idle(archive: Archive) -> bool:
    """A step of semantic recall's embedding (the model runs on a worker thread; only the short write
    of its vectors lands here, between requests); whether more is due. Never fatal: why nothing is
    embedded (a team archive's server without pgvector) is said once on stderr."""
    try:
        return archive.embed_when_idle(say=_say)
    except (ArchiveError, apsw.Error) as exc:
        print(f"pi-memory bridge: background embedding stopped: {exc}", file=sys.stderr)
        return False


def _say(line: str) -> None:
    print(f"pi-memory bridge: {line}", file=sys.stderr)


def _close(archive: Archive | None) -> None:
    if archive is None:
        return
    try:
        archive.catch_up()  # no run left half-built at exit
    except (ArchiveError, apsw.Error):
        pass
    archive.close()


def serve(db: Path | None, stdin: IO[bytes], stdout: IO[bytes], limit: int = MAX_REQUEST_BYTES) -> int:
    """Answer requests until EOF or `shutdown`. Returns the exit code.

    The WAL is checkpointed while the bridge is idle (no request for
    `IDLE_SECONDS`) instead of inside whichever commit crosses SQLite's
    threshold: a checkpoint costs milliseconds and would otherwise land on a
    live write. A long busy stretch still checkpoints every `CHECKPOINT_EVERY`.
    """
    archive: Archive | None = None
    open_error: str | None = None
    try:
        archive = Archive.open(db)
        archive.live_mode()
        archive.preload_search()
    except ArchiveError as exc:
        open_error = str(exc)  # keep answering, so the host can show why
    # what is loaded by now lives as long as the process: out of the collector's sight, so a full
    # collection landing on a write walks only what requests made since
    gc.freeze()
    reader = LineReader(stdin, limit)
    since_checkpoint = 0
    embedding = archive is not None  # semantic recall's background embedding may have work
    try:
        while True:
            if (
                archive is not None
                and since_checkpoint
                and (since_checkpoint >= CHECKPOINT_EVERY or reader.idle(IDLE_SECONDS))
            ):
                _when_idle(archive)
                since_checkpoint = 0
            if archive is not None and embedding and reader.idle(EMBED_POLL_SECONDS):
                embedding = _embed_when_idle(archive)
                continue
            line = reader.readline()
            if line is None:
                return 0
            if line is TOO_LARGE:
                response = error(None, "too_large", f"request is over {limit} bytes")
            elif isinstance(line, bytes) and line.strip():
                try:
                    response = handle_line(archive, line, open_error)
                except Shutdown as done:
                    stdout.write(encode(done.args[0]))
                    stdout.flush()
                    return 0
                since_checkpoint += 1
                embedding = True  # new messages may wait for their vectors
            else:
                continue
            stdout.write(encode(response))
            stdout.flush()
    except BrokenPipeError:
        return 0  # the host is gone: nobody is left to answer
    finally:
        _close(archive)
