"""The one database connection: opening, migrations, transactions, write and read primitives.

Design idea: SQLite in WAL mode is the whole concurrency story. Readers never
block the writer; every write is one short `BEGIN IMMEDIATE` transaction that
holds only SQL (no file or network I/O inside), so several pi processes, a
watcher and an import can write at once and each waits at most a few ms
(`busy_timeout` absorbs it, no `SQLITE_BUSY` reaches the user). Everything a
write needs (rendering, tokenizing, compressing) is computed before the
transaction starts.

The file holds everything the user ever pasted, secrets included, so it is
created with mode 0600 inside a 0700 folder.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from ..core.text import QueryToken, fts_or, surface_chars, tokenize
from ..errors import ArchiveError, CorruptDatabase
from .schema import DATA_STEPS, MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    from .writes import SessionWrite

BUSY_TIMEOUT_MS = 5000
# a condition over `run r JOIN session s` and its parameters (runsearch's filters)
RunFilter = tuple[str, Sequence[Any]]
NO_FILTER: RunFilter = ("TRUE", ())


def default_db_path() -> Path:
    env = os.environ.get("PI_MEMORY_DB")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".pi" / "memory" / "sessions.db"


@dataclass
class SessionRow:
    id: str
    agent: str
    cwd: str
    project: str
    started_at: int
    last_at: int
    name: str | None = None
    parent_session: str | None = None
    source_path: str | None = None


@dataclass
class NewMessage:
    """A message ready to write: everything but its seq and id is computed."""

    session_id: str
    ts: int
    role: str
    text: str
    indexed: bool
    entry_id: str | None
    parent_id: str | None
    meta: dict[str, Any]
    hash: str
    raw: bytes | None = None  # the verbatim source line, if any
    entry_type: str = "message"
    chars: str = ""
    grams: str = ""
    packed: str | bytes | None = None  # `encode_text(text)`, made before the transaction (or by a parse worker)
    packed_raw: bytes | None = None  # `compress(raw, text)`, likewise

    def prepare(self) -> None:
        """Tokenize outside the transaction."""
        if self.indexed and not self.chars and not self.grams:
            toks = tokenize(self.text)
            self.chars, self.grams = toks.chars_text(), toks.grams_text()
            if not self.chars and not self.grams:
                self.indexed = False

    def pack(self) -> None:
        """Compress the text and the verbatim line outside the transaction (SQLite's storage)."""
        if self.packed is None:
            self.packed = encode_text(self.text)
        if self.packed_raw is None and self.raw is not None:
            self.packed_raw = compress(self.raw, self.text)


@dataclass
class NewEntry:
    """A non-message source line, kept verbatim."""

    session_id: str
    key: str
    entry_id: str | None
    type: str
    ts: int
    raw: bytes


# Verbatim lines are compressed one by one (any line can be read or forgotten alone), and
# most are short: a preset dictionary of the JSON shapes agents write lets zlib refer back to
# them from the first byte (on the real pi fixtures: 47% of the source bytes without it, 33%
# with it). The dictionary is part of the file format: never edit it; a new one gets a new
# format byte. Blobs without a format byte are plain zlib streams (they start with 0x78).
_RAW_DICT_V1 = (
    b'{"type":"session","version":3,"id":"","timestamp":"","cwd":"/home/","parentSession":""}'
    b'{"type":"model_change","id":"","parentId":null,"timestamp":"","provider":"","modelId":""}'
    b'{"type":"thinking_level_change","id":"","parentId":"","timestamp":"","thinkingLevel":"off"}'
    b'{"type":"session_info","name":""}{"type":"label","targetId":"","label":""}'
    b'{"type":"compaction","summary":"","firstKeptEntryId":"","tokensBefore":0,"details":{},"fromHook":true}'
    b'{"type":"custom_message","customType":"","content":"","display":true}{"type":"custom","data":{}}'
    b'{"type":"message","id":"","parentId":"","timestamp":"2026-01-01T00:00:00.000Z","message":'
    b'{"role":"user","content":[{"type":"text","text":""},{"type":"image","data":"","mimeType":"image/png"}],"timestamp":1}}'
    b'{"role":"toolResult","toolCallId":"call_","toolName":"bash","content":[{"type":"text","text":""}],'
    b'"details":{"truncation":{},"fullOutputPath":""},"isError":false,"timestamp":1}}'
    b'{"role":"bashExecution","command":"","output":"","exitCode":0,"cancelled":false,"truncated":false}'
    b'{"role":"assistant","content":[{"type":"thinking","thinking":"","thinkingSignature":""},{"type":"text","text":""},'
    b'{"type":"toolCall","id":"call_","name":"read","arguments":{"path":""}},{"type":"toolCall","name":"edit",'
    b'"arguments":{"path":"","edits":[{"oldText":"","newText":""}]}},{"type":"toolCall","name":"write",'
    b'"arguments":{"path":"","content":""}},{"type":"toolCall","name":"bash","arguments":{"command":""}}],'
    b'"api":"anthropic-messages","provider":"anthropic","model":"claude-","usage":{"input":0,"output":0,'
    b'"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,'
    b'"total":0}},"stopReason":"toolUse","timestamp":1}}'
    b'{"parentUuid":"","isSidechain":false,"userType":"external","cwd":"","sessionId":"","version":"2.1.0",'
    b'"gitBranch":"main","type":"assistant","message":{"id":"msg_","type":"message","role":"assistant",'
    b'"model":"claude-","content":[{"type":"tool_use","id":"toolu_","name":"Bash","input":{"command":""}},'
    b'{"type":"tool_result","tool_use_id":"toolu_","content":"","is_error":false}],"stop_reason":"tool_use",'
    b'"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}},'
    b'"requestId":"req_","uuid":"","timestamp":""}'
    b'{"timestamp":"","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"",'
    b'"call_id":"call_"}}{"type":"function_call_output","call_id":"call_","output":""}'
    b'{"type":"message","role":"user","content":[{"type":"input_text","text":""}]}'
    b'{"type":"event_msg","payload":{"type":"token_count","info":{}}}{"type":"turn_context","payload":{}}'
)
_RAW_V1 = b"\x01"
# A message's verbatim line holds its words a second time (the rendered text is in `msg`): format 2
# compresses the line with the v1 dictionary followed by the message's text as JSON writes it, so
# the words cost one copy and the line only its envelope (~120 bytes instead of ~1 KB). Reading it
# needs that text: `decompress(blob, text)` with the message's stored `text` value.
_RAW_V2 = b"\x02"
_WINDOW = 32768  # zlib's window: the last 32 KB of a preset dictionary are all it can refer to
# The rendered text of a message (`msg.text`) is stored as a BLOB: a format byte, then raw deflate
# against this dictionary of the shapes `render.py` writes and words agents repeat. Rows written
# before (schema <= 5) hold TEXT; `decode_text` reads both, so no migration rewrites them.
_TEXT_DICT_V1 = (
    b"\xe2\x86\x92 read(path=) \xe2\x86\x92 bash(command=) \xe2\x86\x92 edit(path=) \xe2\x86\x92 write(path=) "
    b"$ git status  [exit 1]\n[image]\n\xe2\x9c\x97 error: \n\xe2\x80\xa6[truncated, more chars]"
    b" the function return self import from def class if else for in and or not is None True False"
    b" error Error Traceback (most recent call last): File line test tests src/ .py .ts .js .json"
    b" const let await async export default npm run build pytest python3 node_modules package.json"
    b" README.md http:// https:// localhost The This that with which should would could have been"
    b" \xe7\x9a\x84\xe6\x98\xaf\xe4\xb8\x8d\xe4\xba\x86\xe5\x9c\xa8\xe4\xb8\x80\xe4\xb8\xaa\xe6\x88\x91\xe4\xbd\xa0"
    b"\xe6\x9c\x89\xe8\xbf\x99\xe4\xb8\xaa\xe4\xbb\xa3\xe7\xa0\x81\xe6\x96\x87\xe4\xbb\xb6\xe9\x97\xae\xe9\xa2\x98"
    b"\xe3\x80\x82\xef\xbc\x8c\xef\xbc\x9a"
)
_TEXT_V1 = b"\x01"


def _deflate(data: bytes, zdict: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=zdict)
    return packer.compress(data) + packer.flush()


def _inflate(data: bytes, zdict: bytes) -> bytes:
    unpacker = zlib.decompressobj(-15, zdict=zdict)
    return unpacker.decompress(data) + unpacker.flush()


# Whether new rows store `msg.text` (and a run's fields) deflated. Reading costs ~40 us per
# candidate: a search's candidates are long (~2,700 chars on average, bench/search_bench.py), so
# decoding its ~45 of them took ~1.9 ms, a fifth of a query, against ~0.5 KB per message saved
# (bench/import_bench.py). The search targets come first: plain. Both forms are read by
# `decode_text` (archives written packed stay readable), so this can change without a migration.
PACK_TEXT = False


def encode_text(text: str) -> str | bytes:
    """A message's rendered text as `msg.text` stores it (SQLite; PostgreSQL keeps plain text)."""
    if not PACK_TEXT:
        return text
    return _TEXT_V1 + _deflate(text.encode("utf-8", "surrogatepass"), _TEXT_DICT_V1)


def decode_text(value: str | bytes | None) -> str:
    """The one reader of `msg.text`: a BLOB is format byte + deflate, TEXT (older rows, PostgreSQL) is as it is."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if value[:1] == _TEXT_V1:
        return _inflate(value[1:], _TEXT_DICT_V1).decode("utf-8", "surrogatepass")
    raise ValueError(f"unknown message text format {value[:1]!r}")


def _text_dict(text: str | bytes) -> bytes:
    words = decode_text(text) if isinstance(text, bytes) else text
    escaped = json.dumps(words, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
    return (_RAW_DICT_V1 + escaped)[-_WINDOW:]


def compress(raw: bytes, text: str | bytes | None = None) -> bytes:
    """A verbatim line behind a one-byte format mark: against its message's text (format 2) when given."""
    if text is not None:
        return _RAW_V2 + _deflate(raw, _text_dict(text))
    packer = zlib.compressobj(6, zdict=_RAW_DICT_V1)
    return _RAW_V1 + packer.compress(raw) + packer.flush()


def decompress(blob: bytes, text: str | bytes | None = None) -> bytes:
    """A verbatim line; `text` is its message's `msg.text` value (stored or decoded), needed by format 2."""
    if blob[:1] == _RAW_V2:
        if text is None:
            raise ValueError("this verbatim line is stored against its message's text: pass it")
        return _inflate(blob[1:], _text_dict(text))
    if blob[:1] == _RAW_V1:
        unpacker = zlib.decompressobj(zdict=_RAW_DICT_V1)
        return unpacker.decompress(blob[1:]) + unpacker.flush()
    return zlib.decompress(blob)


LENGTH_CHANNEL = 1  # msg_fts column whose token count is a message's length: `grams`


def fts5_varints(blob: bytes) -> list[int]:
    """The SQLite varints of an FTS5 record (docsize, averages): 7 bits a byte, high bit = more."""
    out, value, count = [], 0, 0
    for byte in blob:
        count += 1
        if count == 9:  # the ninth byte of a varint carries 8 bits
            out.append((value << 8) | byte)
            value, count = 0, 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            out.append((value << 7) | byte)
            value, count = 0, 0
    return out


def _create_private_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)


class SharedSql:
    """The store calls whose SQL is the same on both backends, written once.

    `Store` (SQLite) and `PgStore` (PostgreSQL) inherit them; each provides `rows`, `scalar` and
    `execute` for the `?`-style SQL, and `text_param` for what its text columns cannot hold.
    """

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        raise NotImplementedError

    @staticmethod
    def text_param(value: str) -> str:
        """Text as its column stores it (PostgreSQL cannot hold NUL; SQLite keeps it as it is)."""
        return value

    @staticmethod
    def stored_text(value: str) -> str | bytes:
        """Long derived text (a run's fields JSON) as this backend keeps it: PostgreSQL plain, SQLite packed.

        Read back with `decode_text`, which takes either.
        """
        return value

    def msg_token_counts(self, msg_ids: Sequence[int]) -> dict[int, int]:
        """msg id -> `ranking.doc_tokens` counted at write time, where the backend keeps it (else {})."""
        return {}

    def sql_in_list(self, expr: str) -> str:
        """`expr` is one of the values of the parameter `list_param` made (each backend spells it its way)."""
        raise NotImplementedError

    @staticmethod
    def list_param(values: Iterable[Any]) -> Any:
        raise NotImplementedError

    # --- what the importer and live capture ask ---------------------------------------

    def existing_hashes(self, session_id: str) -> dict[str, bool]:
        """hash -> whether that message still lacks its entry id, for one session."""
        return {
            str(h): bool(missing)
            for h, missing in self.rows("SELECT hash, entry_id IS NULL FROM msg WHERE session_id=?", (session_id,))
        }

    def copied_from_elsewhere(self, entry_id: str | None, hash_: str) -> bool:
        """A fork or clone copies entries under the same ids: the same entry id and content exists."""
        if not entry_id:
            return False
        return self.scalar("SELECT 1 FROM msg WHERE entry_id=? AND hash=? LIMIT 1", (entry_id, hash_)) is not None

    def session_exists(self, session_id: str) -> bool:
        return self.scalar("SELECT 1 FROM session WHERE id=?", (session_id,)) is not None

    def message_by_hash(self, session_id: str, hash_: str) -> tuple[int, str | None] | None:
        """(msg id, entry id) of the message with this content hash in the session."""
        rows = self.rows("SELECT id, entry_id FROM msg WHERE session_id=? AND hash=?", (session_id, hash_))
        return (int(rows[0][0]), rows[0][1]) if rows else None

    def find_unkeyed_twin(self, session_id: str, role: str, text: str, ts: int, window_ms: int) -> int | None:
        """The live-captured (no entry id) message with this role and text stamped nearest to ts."""
        rows = self.rows(
            """SELECT id, text FROM msg WHERE session_id=? AND entry_id IS NULL AND role=?
                 AND ts BETWEEN ? AND ? ORDER BY abs(ts - ?), id""",
            (session_id, role, ts - window_ms, ts + window_ms, ts),
        )
        wanted = self.text_param(text)
        return next((int(r[0]) for r in rows if decode_text(r[1]) == wanted), None)

    def raw_blob(self, raw: bytes, text: str) -> bytes:
        """A verbatim line as this backend's `entry.raw` holds it (PostgreSQL: alone, format 1)."""
        return compress(raw)

    def rekey_message(
        self,
        msg_id: int,
        hash_: str,
        entry_id: str | None,
        parent_id: str | None,
        raw: bytes | None,
        text: str = "",
    ) -> None:
        """Give a live message the identity (hash, ids, verbatim line) of its session-file entry.

        Its time stays the live one: the moment the message was made, which orders it truly
        (the file stamps the entry when it is written, possibly after the next message was made).
        """
        self.execute("UPDATE msg SET hash=?, entry_id=?, parent_id=? WHERE id=?", (hash_, entry_id, parent_id, msg_id))
        self.execute("UPDATE entry SET entry_key=?, entry_id=? WHERE msg_id=?", ("msg:" + hash_, entry_id, msg_id))
        if raw is not None:
            self.execute("UPDATE entry SET raw=? WHERE msg_id=?", (self.raw_blob(raw, text), msg_id))

    def messages_without_run(self, session_id: str) -> list[int]:
        """Archived messages of the session that no run holds yet (their import was killed before its runs)."""
        sql = """SELECT m.id FROM msg m WHERE m.session_id = ?
                 AND NOT EXISTS (SELECT 1 FROM run_msg rm WHERE rm.msg_id = m.id)"""
        return [int(r[0]) for r in self.rows(sql, (session_id,))]

    def set_session_name(self, session_id: str, name: str | None) -> None:
        self.execute("UPDATE session SET name=? WHERE id=?", (self.text_param(name) if name else None, session_id))

    # --- reads the Archive facade makes --------------------------------------------

    def session_row(self, session_id: str) -> tuple[Any, ...] | None:
        rows = self.rows(
            """SELECT id, agent, cwd, project, started_at, last_at, name, first_user,
                      (SELECT count(*) FROM msg WHERE session_id = session.id)
               FROM session WHERE id=?""",
            (session_id,),
        )
        return rows[0] if rows else None

    def window_pivot(self, session_id: str, msg_id: int | None, first: bool = False) -> tuple[int, int] | None:
        """(ts, seq) of a message of the session, or of its last (`first`: its first) one; None if there is none."""
        if msg_id is None:
            order = "ts, seq" if first else "ts DESC, seq DESC"
            rows = self.rows(f"SELECT ts, seq FROM msg WHERE session_id=? ORDER BY {order} LIMIT 1", (session_id,))
        else:
            rows = self.rows("SELECT ts, seq FROM msg WHERE session_id=? AND id=?", (session_id, int(msg_id)))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def message_window(
        self, session_id: str, ts: int, seq: int, before: int, after: int
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """Up to `before` messages before (ts, seq), newest first, and `after` from it on, in order."""
        cols = "id, seq, ts, role, text, entry_id, meta"
        older = self.rows(
            f"""SELECT {cols} FROM msg WHERE session_id=? AND (ts < ? OR (ts = ? AND seq < ?))
                ORDER BY ts DESC, seq DESC LIMIT ?""",
            (session_id, ts, ts, seq, before),
        )
        newer = self.rows(
            f"""SELECT {cols} FROM msg WHERE session_id=? AND (ts > ? OR (ts = ? AND seq >= ?))
                ORDER BY ts, seq LIMIT ?""",
            (session_id, ts, ts, seq, after),
        )
        return older, newer

    def stats_rows(self) -> tuple[dict[str, int], int, int, int | None, int | None]:
        """Messages per role, sessions, projects, oldest start, newest activity."""
        roles = {str(r): int(n) for r, n in self.rows("SELECT role, count(*) FROM msg GROUP BY role")}
        sessions, projects = self.rows("SELECT count(*), count(DISTINCT project) FROM session")[0]
        oldest, newest = self.rows("SELECT min(started_at), max(last_at) FROM session")[0]
        return roles, int(sessions), int(projects), oldest, newest

    def run_addresses(self, msg_ids: Iterable[int]) -> dict[int, str]:
        """msg id -> its address `r<N>/m<K>` (messages outside any run are left out)."""
        rows = self.rows(
            f"SELECT msg_id, run_id, pos FROM run_msg WHERE {self.sql_in_list('msg_id')}",
            (self.list_param(int(i) for i in msg_ids),),
        )
        return {int(m): f"r{int(r)}/m{int(p)}" for m, r, p in rows}

    def max_msg_id(self) -> int:
        return int(self.scalar("SELECT coalesce(max(id), 0) FROM msg") or 0)


class Store(SharedSql):
    """One apsw connection and the SQL the rest of the library needs."""

    def __init__(self, path: Path, conn: apsw.Connection) -> None:
        self.path = path
        self.conn = conn

    # --- opening ------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str | None = None) -> Store:
        if str(path or os.environ.get("PI_MEMORY_DB", "")).startswith(("postgresql:", "postgres:")):
            # Path() would turn the URL into a relative file name: a team archive opens through Archive.open
            raise ArchiveError("a postgresql:// URL is a team archive: open it with Archive.open, not Store.open")
        db_path = Path(path).expanduser() if path else default_db_path()
        if db_path.exists() and db_path.is_dir():
            raise ArchiveError(f"{db_path} is a directory, not an archive file")
        try:
            if not db_path.exists():
                _create_private_file(db_path)
            conn = apsw.Connection(str(db_path))
        except (OSError, apsw.CantOpenError) as exc:
            raise ArchiveError(f"cannot open archive {db_path}: {exc}") from None
        store = cls(db_path, conn)
        try:
            store._configure()
            store.migrate()
        except (apsw.NotADBError, apsw.CorruptError) as exc:
            conn.close()
            raise CorruptDatabase(db_path, str(exc)) from None
        except apsw.BusyError:
            conn.close()
            raise ArchiveError(f"archive {db_path} stayed locked by another process; try again") from None
        return store

    def _configure(self) -> None:
        self.conn.setbusytimeout(BUSY_TIMEOUT_MS)
        self._enter_wal_mode()
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=OFF")
        self.conn.execute("PRAGMA temp_store=MEMORY")

    def _enter_wal_mode(self) -> None:
        """Switch a new file to WAL, retrying when another process is doing the same.

        Two processes opening a fresh file at once both read it under a shared lock and then
        both try to upgrade to switch the journal mode; SQLite refuses one of them with BUSY
        at once, without calling the busy handler (waiting would deadlock). So the busy
        timeout alone does not cover this, and we retry until it has passed.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                if str(self.scalar("PRAGMA journal_mode")).lower() != "wal":
                    self.conn.execute("PRAGMA journal_mode=WAL")
                return
            except apsw.BusyError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def close(self) -> None:
        self.conn.close()

    @property
    def user_version(self) -> int:
        return int(self.scalar("PRAGMA user_version") or 0)

    def migrate(self) -> None:
        """Apply every migration after the database's version, each in its own transaction."""
        current = self.user_version
        if current > SCHEMA_VERSION:
            raise ArchiveError(
                f"{self.path} has schema version {current}, newer than this pi-memory ({SCHEMA_VERSION}); upgrade pi-memory"
            )
        for version, (name, sql) in enumerate(MIGRATIONS, start=1):
            if version <= current:
                continue
            if name in DATA_STEPS:
                self._run_data_step(version, sql, DATA_STEPS[name])
                continue
            with self.write():
                if self.user_version >= version:  # another process got there first
                    continue
                self.conn.execute(sql)
                self.conn.execute(f"PRAGMA user_version={version}")

    def _run_data_step(self, version: int, sql: str, step: str) -> None:
        """A migration with a data step: its (idempotent) SQL, the step in short transactions, the bump."""
        with self.write():
            if self.user_version >= version:
                return
            self.conn.execute(sql)
        getattr(self, step)()
        with self.write():
            self.conn.execute(f"PRAGMA user_version={max(version, self.user_version)}")

    DATA_STEP_BATCH = 500  # messages read per transaction of a data migration

    def index_surface_chars(self) -> None:
        """m007's data step: `msg_typed` for the messages archived before it (idempotent)."""
        last = 0
        while rows := self.rows(
            "SELECT id, text FROM msg WHERE indexed AND id > ? ORDER BY id LIMIT ?", (last, self.DATA_STEP_BATCH)
        ):
            last = int(rows[-1][0])
            texts = [(int(i), decode_text(raw)) for i, raw in rows]
            with self.write():
                for msg_id, text in texts:
                    self.conn.execute("DELETE FROM msg_typed WHERE rowid = ?", (msg_id,))
                    self.index_typed(msg_id, text)

    def integrity_errors(self) -> list[str]:
        rows = [str(r[0]) for r in self.conn.execute("PRAGMA integrity_check")]
        return [] if rows == ["ok"] else rows

    # --- transactions -------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[None]:
        """One short write transaction; the lock is taken at BEGIN, not at first write."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[None]:
        """A consistent snapshot for multi-statement reads."""
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN")
            try:
                yield
            finally:
                self.conn.execute("COMMIT")
        else:
            yield

    def scalar(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        for row in self.conn.execute(sql, params):
            return row[0]
        return None

    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        return list(self.conn.execute(sql, params))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the rows it changed."""
        self.conn.execute(sql, params)
        return int(self.conn.changes())

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(sql, seq)

    # --- the few places where the two dialects differ, named (PgStore has the same) ---------
    # SQL shared by both backends is written once with `?` placeholders; what SQLite and
    # PostgreSQL spell differently comes from these.

    @staticmethod
    def sql_in_list(expr: str) -> str:
        """`expr` is one of the values of the parameter `list_param` made (any number of them)."""
        return f"{expr} IN (SELECT value FROM json_each(?))"

    @staticmethod
    def list_param(values: Iterable[Any]) -> Any:
        return json.dumps(list(values))

    @staticmethod
    def sql_json_has(column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}') IS NOT NULL"

    def write_sessions(self, units: list[SessionWrite]) -> tuple[int, int]:
        """The one write path (`storage.writes.write_sessions`); returns (added, duplicates)."""
        from .writes import write_sessions

        return write_sessions(self, units)

    def unindex_messages(self, msg_ids: list[int]) -> None:
        """Take messages out of the full-text index (inside a write transaction; `forget`)."""
        for msg_id in msg_ids:
            self.conn.execute("DELETE FROM msg_fts WHERE rowid=?", (msg_id,))
            self.conn.execute("DELETE FROM msg_typed WHERE rowid=?", (msg_id,))

    def index_typed(self, msg_id: int, text: str) -> None:
        """The characters of a message typed in a script that folds to another, as typed (`msg_typed`)."""
        typed = surface_chars(text)
        if typed:
            self.conn.execute("INSERT INTO msg_typed(rowid, typed) VALUES (?, ?)", (msg_id, " ".join(typed)))

    def lock_workspace(self, workspace: str) -> None:
        """Nothing to do: `BEGIN IMMEDIATE` already lets one writer at a time into the file.

        (On PostgreSQL, appends to one workspace's memory chain take an advisory lock.)
        """

    # --- what `watch` remembers of a followed file (tail.py) ---------------------------------

    def file_state(self, path: str) -> tuple[Any, ...] | None:
        """(session id, read offset, line number, inode, first-line hash, size, mtime_ns) of a file."""
        rows = self.rows(
            "SELECT session_id, read_offset, line_no, inode, head_hash, size, mtime_ns FROM source_file WHERE path = ?",
            (path,),
        )
        return rows[0] if rows else None

    def remember_file(self, path: str, session_id: str | None, state: Sequence[Any], agent: str | None) -> None:
        """Record where reading a file stopped: state is (size, mtime_ns, offset, line_no, inode, head hash)."""
        size, mtime_ns, offset, line_no, inode, head = state
        self.conn.execute(
            """INSERT INTO source_file(path, session_id, size, mtime_ns, imported_at, read_offset, line_no,
                                       inode, head_hash, agent)
               VALUES (?,?,?,?,?,?,?,?,?,?)
               ON CONFLICT(path) DO UPDATE SET session_id = coalesce(excluded.session_id, session_id),
                 size = excluded.size, mtime_ns = excluded.mtime_ns, imported_at = excluded.imported_at,
                 read_offset = excluded.read_offset, line_no = excluded.line_no, inode = excluded.inode,
                 head_hash = excluded.head_hash, agent = coalesce(excluded.agent, agent)""",
            (path, session_id, size, mtime_ns, int(time.time() * 1000), offset, line_no, inode, head, agent),
        )

    def forget_file_offsets(self, path: str) -> None:
        """The file is gone: what was read of it no longer describes anything on disk."""
        self.conn.execute(
            "UPDATE source_file SET read_offset = 0, line_no = 0, inode = NULL, head_hash = NULL WHERE path = ?",
            (path,),
        )

    # --- run summaries' index (runs.py; PgStore keeps them in a column of `run`) ---------------

    def msg_token_counts(self, msg_ids: Sequence[int]) -> dict[int, int]:
        """msg id -> `ranking.doc_tokens`, as FTS5 counted it at write time (docsize, `grams` column)."""
        if not msg_ids:
            return {}
        sql = f"SELECT id, sz FROM msg_fts_docsize WHERE {self.sql_in_list('id')}"
        return {int(i): fts5_varints(sz)[LENGTH_CHANNEL] for i, sz in self.rows(sql, (self.list_param(msg_ids),)) if sz}

    def index_run_summary(self, run_id: int, chars: str, grams: str) -> None:
        self.conn.execute("INSERT INTO run_fts(rowid, chars, grams) VALUES (?,?,?)", (run_id, chars, grams))

    def unindex_run_summary(self, run_id: int) -> None:
        self.conn.execute("DELETE FROM run_fts WHERE rowid=?", (run_id,))

    def run_summary_df(self, token: QueryToken, cap: int) -> int:
        """Runs whose summary holds a token, counted up to `cap`."""
        sql = "SELECT count(*) FROM (SELECT rowid FROM run_fts WHERE run_fts MATCH ? LIMIT ?)"
        return int(self.scalar(sql, (token.fts(), cap)))

    def run_summary_postings(self, token: QueryToken, limit: int, where: RunFilter = NO_FILTER) -> list[int]:
        """The newest `limit` runs whose summary holds the token (and that pass `where`)."""
        return self._runs_matching(token.fts(), limit, where)

    def run_summary_recent(self, tokens: Sequence[QueryToken], limit: int, where: RunFilter = NO_FILTER) -> list[int]:
        """The newest `limit` runs whose summary holds any of the tokens (FTS5 walks back from the newest)."""
        return self._runs_matching(fts_or(list(tokens)), limit, where)

    def _runs_matching(self, expr: str, limit: int, where: RunFilter) -> list[int]:
        if where[0] == NO_FILTER[0]:
            sql = "SELECT rowid FROM run_fts WHERE run_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
            return [int(r[0]) for r in self.conn.execute(sql, (expr, limit))]
        sql = f"""SELECT r.id FROM run r JOIN session s ON s.id = r.session_id
                  WHERE r.id IN (SELECT rowid FROM run_fts WHERE run_fts MATCH ?) AND {where[0]}
                  ORDER BY r.id DESC LIMIT ?"""
        return [int(r[0]) for r in self.conn.execute(sql, [expr, *where[1], limit])]

    # --- writes (call inside `write()`) -----------------------------------------------

    def ensure_session(self, row: SessionRow) -> None:
        """Create the session or widen its time range; a later non-empty cwd/name wins."""
        self.conn.execute(
            """
            INSERT INTO session(id, agent, cwd, project, started_at, last_at, name, parent_session, source_path)
            VALUES (?,?,?,?,?,?,?,?,?)
            ON CONFLICT(id) DO UPDATE SET
              cwd = CASE WHEN excluded.cwd != '' THEN excluded.cwd ELSE session.cwd END,
              project = CASE WHEN excluded.project != '' THEN excluded.project ELSE session.project END,
              started_at = min(session.started_at, excluded.started_at),
              last_at = max(session.last_at, excluded.last_at),
              name = coalesce(excluded.name, session.name),
              parent_session = coalesce(excluded.parent_session, session.parent_session),
              source_path = coalesce(excluded.source_path, session.source_path)
            """,
            (
                row.id,
                row.agent,
                row.cwd,
                row.project,
                row.started_at,
                row.last_at,
                row.name,
                row.parent_session,
                row.source_path,
            ),
        )

    def raw_blob(self, raw: bytes, text: str) -> bytes:
        return compress(raw, text)

    @staticmethod
    def stored_text(value: str) -> str | bytes:
        return encode_text(value)

    def insert_message(self, m: NewMessage) -> int | None:
        """Insert unless present; returns the new msg id, or None for a duplicate.

        Three statements for a new message (row, index, verbatim copy); the seq
        is taken in the same INSERT, so a duplicate consumes none. Counters and
        the session's last_at are settled once per batch by `finish_batch`. A
        message captured live (no entry id) and later imported from the file
        gets its entry id filled in here.
        """
        meta = json.dumps(m.meta, ensure_ascii=False, separators=(",", ":"), default=str) if m.meta else None
        m.pack()
        self.conn.execute(
            """INSERT OR IGNORE INTO msg(session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, meta, hash)
               VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM msg WHERE session_id = ?1),
                       ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)""",
            (m.session_id, m.ts, m.role, m.packed, len(m.text), int(m.indexed), m.entry_id, m.parent_id, meta, m.hash),
        )
        if self.conn.changes() == 0:
            self._reconcile_entry_id(m)
            return None
        msg_id = self.conn.last_insert_rowid()
        if m.indexed:
            self.conn.execute("INSERT INTO msg_fts(rowid, chars, grams) VALUES (?,?,?)", (msg_id, m.chars, m.grams))
            self.index_typed(msg_id, m.text)
        if m.raw is not None:
            self.conn.execute(
                "INSERT OR IGNORE INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw) VALUES (?,?,?,?,?,?,?)",
                (m.session_id, "msg:" + m.hash, m.entry_id, m.entry_type, m.ts, msg_id, m.packed_raw),
            )
        return msg_id

    def _reconcile_entry_id(self, m: NewMessage) -> None:
        if not m.entry_id:
            return
        rows = self.rows(
            "SELECT id FROM msg WHERE session_id=? AND hash=? AND entry_id IS NULL", (m.session_id, m.hash)
        )
        if not rows:
            return
        msg_id = rows[0][0]
        self.conn.execute("UPDATE msg SET entry_id=?, parent_id=? WHERE id=?", (m.entry_id, m.parent_id, msg_id))
        if m.raw is not None:
            self.conn.execute(
                "UPDATE entry SET raw=?, entry_id=?, type=? WHERE msg_id=?",
                (m.packed_raw or compress(m.raw, m.text), m.entry_id, m.entry_type, msg_id),
            )

    def finish_batch(self, session_id: str, added: list[NewMessage], totals: dict[str, int] | None = None) -> None:
        """Counters the ranking needs, and the session's newest time, once per batch.

        With `totals`, the counter deltas are added there, for the caller to write once per transaction.
        """
        indexed = [m for m in added if m.indexed]
        if indexed:
            deltas = {"indexed_docs": len(indexed), "indexed_chars": sum(len(m.text) for m in indexed)}
            if totals is None:
                self.add_to_counters(deltas)
            else:
                for name, delta in deltas.items():
                    totals[name] = totals.get(name, 0) + delta
        if added:
            self.conn.execute(
                "UPDATE session SET last_at = max(last_at, ?) WHERE id=?", (max(m.ts for m in added), session_id)
            )

    def add_to_counters(self, deltas: dict[str, int]) -> None:
        """One single-row UPDATE per counter (inside a write transaction).

        A statement that may change several rows and abort midway needs a statement
        journal, and opening one makes FTS5 flush its pending inserts into a new
        segment: a two-row UPDATE after every insert would cost one segment each.
        """
        for name, delta in deltas.items():
            self.conn.execute("UPDATE counter SET value = value + ? WHERE name = ?", (delta, name))

    def insert_entry(self, e: NewEntry) -> bool:
        self.conn.execute(
            "INSERT OR IGNORE INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw) VALUES (?,?,?,?,?,NULL,?)",
            (e.session_id, e.key, e.entry_id, e.type, e.ts, compress(e.raw)),
        )
        return self.conn.changes() > 0

    def update_first_user(self, session_id: str) -> None:
        first = self.scalar(
            "SELECT text FROM msg WHERE session_id = ? AND role = 'user' ORDER BY ts, seq LIMIT 1", (session_id,)
        )
        value = decode_text(first)[:200] if first is not None else None
        self.conn.execute("UPDATE session SET first_user = ? WHERE id = ?", (value, session_id))

    def record_source_file(
        self, path: str, session_id: str | None, size: int, mtime_ns: int, imported_at: int | None = None
    ) -> None:
        self.conn.execute(
            """INSERT INTO source_file(path, session_id, size, mtime_ns, imported_at) VALUES (?,?,?,?,?)
               ON CONFLICT(path) DO UPDATE SET session_id=excluded.session_id, size=excluded.size,
                 mtime_ns=excluded.mtime_ns, imported_at=excluded.imported_at""",
            (path, session_id, size, mtime_ns, imported_at if imported_at is not None else int(time.time() * 1000)),
        )

    def source_file_state(self, path: str) -> tuple[int, int] | None:
        rows = self.rows("SELECT size, mtime_ns FROM source_file WHERE path=?", (path,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    # --- reads ----------------------------------------------------------------------

    def counters(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.conn.execute("SELECT name, value FROM counter")}

    def db_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    # --- live capture (capture.py) ----------------------------------------------------

    checkpoints_deferred = False
    # session id -> new msg ids whose after-write hooks (runs) wait for an idle moment; None: run at once
    deferred_hooks: dict[str, list[int]] | None = None

    def defer_hooks(self) -> None:
        """Live capture: a message's write returns before its run is re-summarized.

        The owner (the bridge) calls `storage.writes.run_deferred_hooks` when idle and before any
        request that reads what the hooks build, so a live write costs the message's own
        transaction only.
        """
        self.deferred_hooks = {}

    def defer_checkpoints(self) -> None:
        """This connection never checkpoints inside a commit; its owner calls `checkpoint()` when idle."""
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self.checkpoints_deferred = True

    @contextmanager
    def checkpointing(self) -> Iterator[None]:
        """SQLite's own checkpoints for a bulk write, so the WAL stays small even on a deferring connection."""
        if not self.checkpoints_deferred:
            yield
            return
        self.conn.execute("PRAGMA wal_autocheckpoint=1000")
        try:
            yield
        finally:
            self.conn.execute("PRAGMA wal_autocheckpoint=0")

    def checkpoint(self) -> None:
        """Copy the WAL into the database without waiting for readers or writers."""
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
