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
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from ..core.text import surface_text
from ..errors import ArchiveError, CorruptDatabase
from . import codec
from .checkpointer import WalCheckpointer
from .codec import LENGTH_CHANNEL, PACK_TEXT, compress, decode_text, decompress, encode_text, fts5_varints
from .pending import INDEX_PENDING, PendingIndex
from .rows import NewEntry, NewMessage, SessionRow, meta_json
from .runindex import RunSummaryIndex
from .schema import COMPACT_FTS, DATA_STEPS, MIGRATIONS, SCHEMA_VERSION
from .shared import NO_FILTER, RunFilter, SharedSql
from .waiting import WaitingLine

if TYPE_CHECKING:
    from .writes import SessionWrite

__all__ = [
    "LENGTH_CHANNEL",
    "NO_FILTER",
    "PACK_TEXT",
    "NewEntry",
    "NewMessage",
    "RunFilter",
    "SessionRow",
    "SharedSql",
    "Store",
    "compress",
    "decode_text",
    "decompress",
    "default_db_path",
    "encode_text",
    "fts5_varints",
]

BUSY_TIMEOUT_MS = 5000
# A bulk import checkpoints every this many pages of WAL (80 MB at 8 KB pages) instead of SQLite's
# 1,000: an import rewrites the same index pages commit after commit (~90 pages a commit, most of
# them leaves of the session-keyed indexes), and a checkpoint copies each page once however often
# it changed, then syncs. Fewer, larger checkpoints: ~7% off a short-session import's wall time.
# They run on a thread of their own (`checkpointer.py`): ~170 ms of each is waiting for the disk.
BULK_CHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT = 16 << 20
# The full-text indexes, and the pages of merging one step does in its own transaction while an
# import merges them in steps (`merging_in_steps`): p99 ~18 ms here, below an import's own writes
# (p99 ~30 ms), so a live writer waits no longer for them. 50 pages: p99 ~10 ms, but 1,002
# transactions instead of 887 on 20k messages and a 4% slower import.
FTS_INDEXES = ("msg_fts", "run_fts", "msg_typed")
MERGE_STEP_PAGES = 100
# pages a step of `shrink` gives back: moving a page from the file's end costs about as much as
# writing it, so a step stays within a few ms
VACUUM_STEP_PAGES = 200
_INCREMENTAL_VACUUM = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
# While an import runs, its merge steps merge a level once it holds this many segments, instead of
# the index's own rule (2, see `schema.COMPACT_FTS`), and merge the levels by that rule once at the
# end: a merge rewrites every token it takes in, and two at a time rewrites each ~log2(segments)
# times (~8 for 20k messages in transactions of ~100), fifteen at a time ~log15 plus the final pass.
# Eight instead of two: imports 12-35% faster, 70-90 bytes a message smaller, 2 segments left
# instead of 4-5 (the final pass merges further than automerge keeps them; 0.2-0.3 s of 20k
# messages). Fifteen instead of eight: ~23% less merging at any size (ln 8 / ln 15), ~11 us a
# message on 20k (bench/results/import.json). FTS5 merges a level inside the commit that brings it
# to `crisismerge` segments (16 by default): a 37 ms commit once the level-0 merge of 15 was under
# way, so an import raises that to IMPORT_CRISIS_MERGE while it runs.
IMPORT_MERGE_RULE = 15
IMPORT_CRISIS_MERGE = 64
# An import after which an index holds at least this many times the documents it held before (a
# first import: most of an archive's history) merges that index into one segment at its end, each
# segment once, instead of level by level: the same work, the smallest index (fewer terms written
# once per segment) and one segment for a search to read; the size no longer depends on how the
# machine's speed cut the transactions (the 625-char mix came to 2,381-2,418 bytes a message).
IMPORT_OPTIMIZES = 2
# the counter of each full-text index's documents
_DOCS_OF = {"msg_fts": "indexed_docs", "msg_typed": "indexed_docs", "run_fts": "run_docs"}
FTS5_CRISIS_MERGE = 16  # FTS5's default, which no archive changes but an import
# FTS5 writes what a transaction indexed as a segment at its commit, or sooner once it holds more
# than `hashsize` bytes (1 MB by default): 90 of 150 import transactions of 40-message sessions
# wrote two segments so (more to merge). An import lets a transaction hold 8 MB (~35 ms of writing
# is 1.5-3 MB here), and gives the default back after.
IMPORT_HASH_BYTES = 8 << 20
FTS5_HASH_BYTES = 1 << 20
# an import's record of an index's `automerge` before it turned it off (the counter table outlives
# a killed import: the next opening gives the setting back); -1: FTS5's default, never set
_AUTOMERGE_WAS = "automerge before import: "


def default_db_path() -> Path:
    env = os.environ.get("PI_MEMORY_DB")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".pi" / "memory" / "sessions.db"


def _create_private_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)


# A new message's row, its seq the session's max + 1 (a duplicate consumes none). Finding that max
# reads every index entry of the session (`msg_session_order` is ordered by ts, not seq): ~0.1 ms
# at 2,000 messages, on every live write. So a writer that knows the seq it gave the session's last
# message passes the next one (`Store._next_seq`, `_INSERT_MSG_AT`); otherwise the statement finds it.
_INSERT_MSG = """
INSERT OR IGNORE INTO msg(session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, meta, hash)
VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM msg WHERE session_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
RETURNING id, seq"""
_INSERT_MSG_AT = """
INSERT OR IGNORE INTO msg(session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, meta, hash)
VALUES (?1, ?11, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
RETURNING id, seq"""
_INSERT_MSG_WITH_ID = """
INSERT OR IGNORE INTO msg(session_id, seq, ts, role, text, nchars, indexed, entry_id, parent_id, meta, hash, id)
VALUES (?1, ?11, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?12)"""
_SESSION_NEXT_SEQ = "SELECT coalesce(max(seq), 0) + 1 FROM msg WHERE session_id = ?"
_INSERT_ENTRY = """
INSERT OR IGNORE INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw) VALUES (?,?,?,?,?,?,?)"""
# ... and that seq is still the session's max while the row that got it is the newest of the whole
# table (max(id): one page): any later row would have a larger id. Anything else (another writer,
# a rollback, a message forgotten) takes the scan. A statement of its own: SQLite computes a scalar
# subquery of constant inputs before the rest, even in a CASE branch or coalesce() not taken.
_SEQ_STILL_MAX = """
SELECT (SELECT max(id) FROM msg) = ?1 AND EXISTS (SELECT 1 FROM msg WHERE id = ?1 AND session_id = ?2 AND seq = ?3)"""


def _packed_now(m: NewMessage) -> bytes:
    """The verbatim line of a message that is already archived, compressed (an existing row is not
    pending: nothing would compress a plain line later)."""
    if m.packed_raw is not None and codec.plain_line(m.packed_raw) is None:
        return m.packed_raw
    assert m.raw is not None
    return compress(m.raw, m.text)


# How often a connection that finds the archive locked looks again. SQLite's own busy handler sleeps
# 1, 2, 5, 10 ... up to 100 ms between looks, so beside an import (whose write transactions follow
# one another with gaps of a millisecond or less) a live write kept missing the gaps: it waited
# 0.3-0.9 s at p99 and up to 2 s (bench/import_bench.py, "beside import"). Looking every
# millisecond still missed most gaps (p99 100-150 ms); the import now also leaves the lock to a
# writer that announced it waits (`waiting.py`), so the wait is the import's current transaction.
BUSY_POLL_S = 0.001


def _busy_waiter(on_first_look: Callable[[], None] = lambda: None) -> Callable[[int], bool]:
    """A busy handler: look again every `BUSY_POLL_S` until `BUSY_TIMEOUT_MS` has passed.
    `on_first_look` runs when a wait starts (a writer announces it waits: `waiting.py`)."""
    started: list[float] = []

    def wait(retries: int) -> bool:
        now = time.monotonic()
        if retries == 0:
            started[:] = [now]
            on_first_look()
        elif not started or now - started[0] > BUSY_TIMEOUT_MS / 1000:
            return False
        time.sleep(BUSY_POLL_S)
        return True

    return wait


def _merge_rule(automerge: int) -> int:
    """The automerge an index had (-1: FTS5's default, 4); 0 (an import's own) counts as the default."""
    return automerge if automerge > 0 else 4


class Store(PendingIndex, RunSummaryIndex, SharedSql):
    """One apsw connection and the SQL the rest of the library needs."""

    def __init__(self, path: Path, conn: apsw.Connection) -> None:
        self.path = path
        self.conn = conn
        self.text_dict_id = 0  # the dictionary new text is packed with (`text_codec`); 0: none yet
        self._codec_check_at = 0  # the max msg id from which `text_codec` looks for a dictionary again
        self._first_users: dict[str, tuple[int, str]] = {}  # session -> (id, hash) of its first user message, as set
        # session -> (id, seq, write transaction) of the last message this connection added to it
        self._last_seq: dict[str, tuple[int, int, int]] = {}
        self._txn = 0  # write transactions begun (`write`)
        self.aside_checkpointer: WalCheckpointer | None = None  # checkpoints on a thread of their own (`checkpointing`)
        self._wrote = False  # a write transaction committed since the last WAL this connection started (`checkpoint`)
        self._line = WaitingLine(path)  # who waits for the write lock (`waiting.py`)
        self._yielding = False  # a bulk writer: lets announced waiters in first (`yielding_to_waiters`)
        self.write_pace = 0.0  # seconds a write transaction took per unit of its size (`writes.TXN_TARGET_S`)

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
            store.restore_automerge()  # what a killed import left off
            store.watch_dictionaries()
            store.index_pending()  # what a live writer that ended before its idle moment left unindexed
        except (apsw.NotADBError, apsw.CorruptError) as exc:
            conn.close()
            raise CorruptDatabase(db_path, str(exc)) from None
        except apsw.BusyError:
            conn.close()
            raise ArchiveError(f"archive {db_path} stayed locked by another process; try again") from None
        return store

    def _configure(self) -> None:
        self.conn.setbusyhandler(_busy_waiter(self._line.busy))
        # a new file's pages: 8 KB instead of 4 KB leave less of each page unused around rows of ~1 KB
        # (~70 bytes a message on the 625-char mix); no effect on an existing file (WAL fixes it)
        self.conn.execute("PRAGMA page_size=8192")
        # a new file can give pages back: an import's merges free the old segments' pages, and
        # without this they stay in the file (~5% of it) until something reuses them (`shrink`)
        self.conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self._enter_wal_mode()
        self.conn.execute("PRAGMA synchronous=NORMAL")
        # the WAL file shrinks back to this when it starts over after an import let it grow
        # (`BULK_CHECKPOINT_PAGES`); a live writer's WAL never reaches it
        self.conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
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
        self._forget_reloader()
        self.conn.close()
        self._line.close()

    # --- the packed text's dictionaries (codec.py, format 2) -----------------------------

    TRAIN_AFTER = 1_000  # messages archived before the archive's dictionary is trained from them

    def load_dictionaries(self) -> None:
        """Register every dictionary of `codec_dict` with the codec; the newest packs new text."""
        rows = self.rows("SELECT id, data FROM codec_dict ORDER BY created_at, rowid")
        for _, data in rows:
            codec.register_dictionary(bytes(data))
        if rows:
            self.text_dict_id = int(rows[-1][0])

    def watch_dictionaries(self) -> None:
        """Leave a reloader with the codec: a row packed with a dictionary this process has not
        registered yet (trained by another process, or not looked up: the table is read when a
        write or a row needs it, not at open) is read after one look at `codec_dict`."""
        ref = weakref.ref(self)

        def reload(dict_id: int) -> None:
            store = ref()
            if store is not None:
                store.load_dictionaries()

        self._reloader = reload
        codec._RELOADERS.append(reload)

    def _forget_reloader(self) -> None:
        reload = getattr(self, "_reloader", None)
        if reload in codec._RELOADERS:
            codec._RELOADERS.remove(reload)

    def text_codec(self) -> int:
        """The dictionary id new text is packed with: trained once from the first `TRAIN_AFTER`
        messages (outside any transaction: ~30-150 ms, once per archive), or found in `codec_dict`
        when another process trained it. Cheap when there is one, or too few messages to learn from."""
        if self.text_dict_id or not codec.PACK_TEXT or self.conn.in_transaction:
            return self.text_dict_id
        top = self.max_msg_id()
        if top < max(self._codec_check_at, self.TRAIN_AFTER):
            return 0
        self.load_dictionaries()
        if not self.text_dict_id:
            self._train_dictionary()
        self._codec_check_at = top * 2  # too little to learn from yet: try again at twice the size
        return self.text_dict_id

    def dictionary_due(self) -> bool:
        """Whether new text would be packed with a dictionary this archive has yet to learn (its
        text is stored as it is meanwhile, and packed once the dictionary exists)."""
        return codec.PACK_TEXT and not self.text_dict_id

    def _train_dictionary(self) -> None:
        rows = self.rows("SELECT text FROM msg ORDER BY id DESC LIMIT ?", (2 * self.TRAIN_AFTER,))
        self._adopt_dictionary(
            codec.train_dictionary([decode_text(t).encode("utf-8", "surrogatepass") for (t,) in rows])
        )

    def _adopt_dictionary(self, data: bytes | None) -> None:
        """Keep a learned dictionary in `codec_dict` (unless another writer was first) and pack with
        the archive's from now on; the messages packed before it, packed again (a young archive's)."""
        if data is None:
            return
        dict_id = codec.register_dictionary(data)
        with self.write():
            if not self.scalar("SELECT EXISTS (SELECT 1 FROM codec_dict)"):  # another writer was first
                self.conn.execute(
                    "INSERT OR IGNORE INTO codec_dict(id, created_at, data) VALUES (?,?,?)",
                    (dict_id, int(time.time() * 1000), data),
                )
        self.load_dictionaries()
        if self.text_dict_id == dict_id:
            self._repack_first_messages(dict_id)

    def _repack_first_messages(self, dict_id: int) -> None:
        """The messages written before the archive had its dictionary (their text as it is, or packed
        without a dictionary by an earlier version or a live write), packed with it, in short
        transactions. Only in a young archive (its first few thousand messages): an archive upgraded
        from an older schema keeps its older rows as they are (every form is read)."""
        top = self.max_msg_id()
        if top > 10 * self.TRAIN_AFTER:
            return
        last, undictionaried = 0, codec.encode_text("", 0)[:5]
        while rows := self.rows(
            """SELECT id, text FROM msg WHERE id > ? AND id <= ? AND (typeof(text) = 'text' OR substr(text, 1, 5) = ?)
               ORDER BY id LIMIT ?""",
            (last, top, undictionaried, self.DATA_STEP_BATCH),
        ):
            last = int(rows[-1][0])
            packed = [(encode_text(decode_text(text), dict_id), int(msg_id), text) for msg_id, text in rows]
            with self.write():
                self.conn.executemany("UPDATE msg SET text = ? WHERE id = ? AND text = ?", packed)

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
                if version == SCHEMA_VERSION and self._holds_nothing_indexed():
                    self.conn.execute(COMPACT_FTS)  # a new archive: the compact indexes (see schema.py)
                self.conn.execute(f"PRAGMA user_version={version}")

    def _holds_nothing_indexed(self) -> bool:
        return not self.scalar("SELECT EXISTS (SELECT 1 FROM msg) OR EXISTS (SELECT 1 FROM run)")

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
        if self._yielding:
            self._line.let_waiters_in()
        if self.aside_checkpointer is not None and self.aside_checkpointer.finish_due:
            self.aside_checkpointer.finish(self.conn)
        with self._line.beginning():
            self.conn.execute("BEGIN IMMEDIATE")
        self._txn += 1
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            self._first_users.clear()  # what was set in the transaction is gone
            raise
        self.conn.execute("COMMIT")
        self._wrote = True

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

    def executemany_returning(self, sql: str, seq: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """One statement run over many rows, and the rows its RETURNING clause gave, in order."""
        return list(self.conn.cursor().executemany(sql, seq))

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

        self.text_codec()  # before the transactions: training the dictionary takes a moment, once
        return write_sessions(self, units)

    def unindex_messages(self, msg_ids: list[int]) -> None:
        """Take messages out of the full-text index (inside a write transaction; `forget`)."""
        for msg_id in msg_ids:
            self.conn.execute("DELETE FROM msg_fts WHERE rowid=?", (msg_id,))
            self.conn.execute("DELETE FROM msg_typed WHERE rowid=?", (msg_id,))

    def index_typed(self, msg_id: int, text: str, typed: str | None = None) -> None:
        """The characters of a message typed in a script that folds to another, as typed (`msg_typed`);
        `typed`: those characters joined by spaces, when a parse worker found them already."""
        if typed is None:
            typed = surface_text(text)
        if typed:
            self.conn.execute("INSERT INTO msg_typed(rowid, typed) VALUES (?, ?)", (msg_id, typed))

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

    def stored_text(self, value: str) -> str | bytes:
        return encode_text(value, self.text_dict_id, codec.FIELDS_LEVEL)

    def insert_message(self, m: NewMessage) -> int | None:
        """Insert unless present; returns the new msg id, or None for a duplicate.

        Three statements for a new message (row, index, verbatim copy); the seq
        is taken in the same INSERT, so a duplicate consumes none (see `_INSERT_MSG`). Counters and
        the session's last_at are settled once per batch by `finish_batch`. A
        message captured live (no entry id) and later imported from the file
        gets its entry id filled in here.
        """
        # a live message's text is packed with its index entry, at the idle moment (`index_pending`)
        row = self._message_row(m, 0)[:-1]
        seq = self._next_seq(m.session_id)
        added = self.rows(_INSERT_MSG, row) if seq is None else self.rows(_INSERT_MSG_AT, (*row, seq))
        if not added:
            self._reconcile_entry_id(m)
            return None
        msg_id, seq = int(added[0][0]), int(added[0][1])
        self._remember_seq(m.session_id, msg_id, seq)
        if m.index_waits:
            self.pending_index = True
        elif m.indexed:
            self.conn.execute("INSERT INTO msg_fts(rowid, chars, grams) VALUES (?,?,?)", (msg_id, m.chars, m.grams))
            self.index_typed(msg_id, m.text, m.typed)
        if m.has_line:
            self.conn.execute(
                _INSERT_ENTRY, (m.session_id, "msg:" + m.hash, m.entry_id, m.entry_type, m.ts, msg_id, m.packed_raw)
            )
        return msg_id

    def insert_messages(self, messages: list[NewMessage]) -> list[int | None]:
        """Insert one session's messages unless present, as `insert_message` does each (inside a
        write transaction); their new ids, None for each duplicate.

        An import's chunk of a session: each table gets one statement run over all its rows
        (`executemany`), instead of three or four statements a message, each a call from Python.
        The seqs follow the session's last one; a message already there consumes none (the rows
        after it move up, which only a live writer racing the import ever causes).
        """
        if len(messages) < 2:
            return [self.insert_message(m) for m in messages]
        session_id = messages[0].session_id
        first_seq = self._next_seq(session_id)
        if first_seq is None:
            first_seq = int(self.scalar(_SESSION_NEXT_SEQ, (session_id,)))
        # the ids the rows get, given (this transaction holds the lock): no RETURNING, whose rows SQLite
        # gathers in a table of their own before handing the first back
        first_id = int(self.scalar("SELECT coalesce(max(id), 0) + 1 FROM msg"))
        rows = [(*self._message_row(m, first_seq + k), first_id + k) for k, m in enumerate(messages)]
        before = self.conn.total_changes()
        self.conn.executemany(_INSERT_MSG_WITH_ID, rows)
        ids: list[int | None] = list(range(first_id, first_id + len(rows)))
        if self.conn.total_changes() - before < len(rows):  # some were there already: which rows went in
            present = {int(i) for (i,) in self.rows("SELECT id FROM msg WHERE id >= ?", (first_id,))}
            ids = [i if i in present else None for i in ids]
        added = [(msg_id, m) for msg_id, m in zip(ids, messages, strict=True) if msg_id is not None]
        if len(added) < len(messages):
            for m in (m for msg_id, m in zip(ids, messages, strict=True) if msg_id is None):
                self._reconcile_entry_id(m)
            self.conn.executemany(  # a duplicate consumes no seq
                "UPDATE msg SET seq = ? WHERE id = ?", [(first_seq + k, msg_id) for k, (msg_id, _m) in enumerate(added)]
            )
        if added:
            self._remember_seq(session_id, added[-1][0], first_seq + len(added) - 1)
            self._index_and_keep(added)
        return ids

    def _message_row(self, m: NewMessage, seq: int) -> tuple[Any, ...]:
        """`_INSERT_MSG_AT`'s values for a message, its text packed (or left for the idle moment)."""
        meta = m.meta_json if m.meta_json is not None else meta_json(m.meta)
        m.index_waits = m.indexed and self.index_deferred and not m.chars and not m.grams
        m.pack(self.text_dict_id, later=m.index_waits)
        indexed = INDEX_PENDING if m.index_waits else int(m.indexed)
        return (m.session_id, m.ts, m.role, m.packed, len(m.text), indexed, m.entry_id, m.parent_id, meta, m.hash, seq)

    def _remember_seq(self, session_id: str, msg_id: int, seq: int) -> None:
        if len(self._last_seq) > 1000:
            self._last_seq.clear()
        self._last_seq[session_id] = (msg_id, seq, self._txn)

    def _index_and_keep(self, added: list[tuple[int, NewMessage]]) -> None:
        """The index entries and verbatim copies of new messages, one statement a table."""
        if any(m.index_waits for _, m in added):
            self.pending_index = True
        indexed = [(msg_id, m) for msg_id, m in added if m.indexed and not m.index_waits]
        self.conn.executemany(
            "INSERT INTO msg_fts(rowid, chars, grams) VALUES (?,?,?)", [(i, m.chars, m.grams) for i, m in indexed]
        )
        typed = [(i, m.typed if m.typed is not None else surface_text(m.text)) for i, m in indexed]
        self.conn.executemany("INSERT INTO msg_typed(rowid, typed) VALUES (?, ?)", [t for t in typed if t[1]])
        self.conn.executemany(
            _INSERT_ENTRY,
            [
                (m.session_id, "msg:" + m.hash, m.entry_id, m.entry_type, m.ts, msg_id, m.packed_raw)
                for msg_id, m in added
                if m.has_line
            ],
        )

    def _next_seq(self, session_id: str) -> int | None:
        """The session's next seq when this connection added its last message and nothing was added
        since: sure inside the same write transaction (an import's session), else asked of the
        table (`_SEQ_STILL_MAX`, a live write); None: the insert finds it."""
        last = self._last_seq.get(session_id)
        if last is None:
            return None
        msg_id, seq, txn = last
        if (txn != self._txn or not self.conn.in_transaction) and not self.scalar(
            _SEQ_STILL_MAX, (msg_id, session_id, seq)
        ):
            return None
        return seq + 1

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
        if m.has_line:
            self.conn.execute(
                "UPDATE entry SET raw=?, entry_id=?, type=? WHERE msg_id=?",
                (_packed_now(m), m.entry_id, m.entry_type, msg_id),
            )

    def finish_batch(self, session_id: str, added: list[NewMessage], totals: dict[str, int] | None = None) -> None:
        """Counters the ranking needs, and the session's newest time, once per batch.

        With `totals`, the counter deltas are added there, for the caller to write once per transaction.
        """
        indexed = [m for m in added if m.indexed and not m.index_waits]  # waiting ones count when indexed
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

    def insert_entries(self, entries: list[NewEntry]) -> None:
        """Non-message lines kept verbatim, one statement for all (inside a write transaction)."""
        self.conn.executemany(
            "INSERT OR IGNORE INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw) VALUES (?,?,?,?,?,NULL,?)",
            [(e.session_id, e.key, e.entry_id, e.type, e.ts, e.packed_raw or compress(e.raw)) for e in entries],
        )

    def set_first_user(self, session_id: str, msg_id: int, hash_: str, text: str) -> None:
        """The headline of a session whose first user message the writer knows (a new session
        written whole): what `update_first_user` would find, without reading it back."""
        self.conn.execute("UPDATE session SET first_user = ? WHERE id = ?", (text[:200], session_id))
        if len(self._first_users) > 1000:
            self._first_users.clear()
        self._first_users[session_id] = (msg_id, hash_)

    def insert_entry(self, e: NewEntry) -> bool:
        self.conn.execute(
            "INSERT OR IGNORE INTO entry(session_id, entry_key, entry_id, type, ts, msg_id, raw) VALUES (?,?,?,?,?,NULL,?)",
            (e.session_id, e.key, e.entry_id, e.type, e.ts, e.packed_raw or compress(e.raw)),
        )
        return self.conn.changes() > 0

    def update_first_user(self, session_id: str) -> None:
        """The session's headline: its first user message, cut. Decoded only when that message changed
        (a live session calls this for every user message; decoding a packed text costs ~10-50 us)."""
        rows = self.rows(
            "SELECT id, hash, text FROM msg WHERE session_id = ? AND role = 'user' ORDER BY ts, seq LIMIT 1",
            (session_id,),
        )
        first = (int(rows[0][0]), str(rows[0][1])) if rows else None
        if first is not None and self._first_users.get(session_id) == first:
            return
        value = decode_text(rows[0][2])[:200] if rows else None
        self.conn.execute("UPDATE session SET first_user = ? WHERE id = ?", (value, session_id))
        if first is not None:
            if len(self._first_users) > 1000:
                self._first_users.clear()
            self._first_users[session_id] = first

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

    # verbatim lines are stored against their message's text (`codec.compress(raw, text)`), which
    # an import's parse worker does: it sends the packed line, not the line (`ingest.prepare`)
    packs_lines = True
    checkpoints_deferred = False
    # session id -> new msg ids whose after-write hooks (runs) wait for an idle moment; None: run at once
    deferred_hooks: dict[str, list[int]] | None = None

    def defer_hooks(self) -> None:
        """Live capture: a message's write returns before it is indexed and its run re-summarized.

        The owner (the bridge) calls `storage.writes.run_deferred_hooks` when idle and before any
        request that reads what the hooks build (the index, runs), so a live write costs the
        message's row and verbatim copy only.
        """
        self.deferred_hooks = {}
        self.index_deferred = True

    def defer_checkpoints(self) -> None:
        """This connection never checkpoints inside a commit; its owner calls `checkpoint()` when idle."""
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self.checkpoints_deferred = True

    @contextmanager
    def checkpointing(self, pages: int = 1000, aside: bool = False) -> Iterator[None]:
        """Checkpoints for a bulk write, every `pages` pages of WAL: the WAL stays bounded even on a
        deferring connection (which otherwise checkpoints only when idle). SQLite's own, inside the
        commits; or `aside`, on a thread of their own while the writer goes on (`checkpointer.py`).
        The setting before is restored after."""
        if self.aside_checkpointer is not None:  # inside a bulk write that checkpoints aside already
            yield
            return
        before = int(self.scalar("PRAGMA wal_autocheckpoint"))
        mine = WalCheckpointer(self.path, pages) if aside else None
        if mine is not None:
            self.aside_checkpointer = mine
            mine.start(self.conn)
        else:
            self.conn.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")
        try:
            yield
        finally:
            if mine is not None:
                mine.stop(self.conn)
                self.aside_checkpointer = None
            self.conn.execute(f"PRAGMA wal_autocheckpoint={before}")

    def writer_waiting(self) -> bool:
        """Inside a bulk write (`yielding_to_waiters`): whether another writer announced that it
        waits for the lock (`waiting.py`), so that the transaction under way ends early."""
        return self._yielding and self._line.someone_waiting()

    @contextmanager
    def yielding_to_waiters(self) -> Iterator[None]:
        """A bulk write: before each of its transactions, a writer that announced it waits for
        the lock goes first (`waiting.py`), so a live session beside an import waits out one
        transaction, not several."""
        before, self._yielding = self._yielding, True
        try:
            yield
        finally:
            self._yielding = before

    @contextmanager
    def merging_in_steps(self) -> Iterator[None]:
        """A bulk import's full-text merges in bounded steps (`merge_steps`) instead of FTS5's own.

        FTS5's automerge works in bursts: each time 64 more leaf pages have been written, one commit
        merges 64 x (levels) pages, and 17-24% of an import's write transactions held the lock over
        50 ms that way (up to ~150 ms), which a live writer waits out. Here automerge is off while
        the import runs and the importer merges after each write, `MERGE_STEP_PAGES` at a time, each
        step its own transaction, levels of `IMPORT_MERGE_RULE` segments (`usermerge`, with
        `crisismerge` out of their way); at the end it merges on, in steps still, as far as the
        index's own rule goes (its automerge: levels of one segment, as automerge keeps them). The
        setting before is kept in `counter` until it is given back, so a killed import's next
        opening restores it (its levels are merged by the next writes' automerge). An import that
        wrote most of an index (a first one) merges it into one segment at the end instead
        (`IMPORT_OPTIMIZES`).
        """
        before = self.counters()
        with self.write():
            for table in FTS_INDEXES:
                key = _AUTOMERGE_WAS + table  # kept as it is when another import (or a killed one) set it
                self.conn.execute(
                    "INSERT OR IGNORE INTO counter(name, value) VALUES (?, ?)", (key, self._automerge(table))
                )
                self._set_merge_rule(table, IMPORT_MERGE_RULE)
                self.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', 0)")
                self._set_import_limits(table, IMPORT_CRISIS_MERGE, IMPORT_HASH_BYTES)
        try:
            yield
            with self.write():
                for table in FTS_INDEXES:
                    self._set_merge_rule(table, self._rule_before_import(table))
            self.merge_steps(whole=self._mostly_new(before))  # in steps still
            self.shrink()  # the pages those merges freed
        finally:
            self.restore_automerge()

    def shrink(self) -> int:
        """Give the file's free pages back, `VACUUM_STEP_PAGES` at a time, each step its own
        transaction (a live writer waits out one step, not all); returns the pages given back.

        Only a file made with incremental auto-vacuum can (every file this version creates); in
        an older one the free pages stay and are reused by later writes."""
        if int(self.scalar("PRAGMA auto_vacuum")) != _INCREMENTAL_VACUUM:
            return 0
        freed = 0
        while (free := int(self.scalar("PRAGMA freelist_count"))) > 0:
            with self.write():
                self.conn.execute(f"PRAGMA incremental_vacuum({min(free, VACUUM_STEP_PAGES)})").fetchall()
            freed += min(free, VACUUM_STEP_PAGES)
        return freed

    def _set_import_limits(self, table: str, crisis: int, hash_bytes: int) -> None:
        """The segments a level takes before FTS5 merges it inside a commit, and the bytes a
        transaction indexes before FTS5 writes them as a segment (see `IMPORT_CRISIS_MERGE`)."""
        self.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('crisismerge', ?)", (crisis,))
        self.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('hashsize', ?)", (hash_bytes,))

    def _set_merge_rule(self, table: str, rule: int) -> None:
        self.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('usermerge', ?)", (rule,))

    def _rule_before_import(self, table: str) -> int:
        return _merge_rule(int(self.scalar("SELECT value FROM counter WHERE name = ?", (_AUTOMERGE_WAS + table,))))

    def _mostly_new(self, before: dict[str, int]) -> set[str]:
        """The full-text indexes whose documents are at least half this import's (`IMPORT_OPTIMIZES`)."""
        now = self.counters()
        return {
            table
            for table, counter in _DOCS_OF.items()
            if now.get(counter, 0) >= IMPORT_OPTIMIZES * before.get(counter, 0) and now.get(counter, 0) > 0
        }

    def merge_steps(self, whole: set[str] | frozenset[str] = frozenset()) -> int:
        """Merge each full-text index in steps of `MERGE_STEP_PAGES` pages, one transaction each,
        until none has work left (see `merging_in_steps`); returns the steps taken. The indexes in
        `whole` are merged into one segment (FTS5's 'merge' with a negative count: every segment in
        one merge), the others by their merge rule."""
        steps = 0
        for table in FTS_INDEXES:
            pages = -MERGE_STEP_PAGES if table in whole else MERGE_STEP_PAGES
            while True:
                with self.write():
                    before = self.conn.total_changes()
                    self.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', {pages})")
                    worked = self.conn.total_changes() - before >= 2  # FTS5's sign that a merge did work
                steps += 1
                if not worked:
                    break
        return steps

    def restore_automerge(self) -> None:
        """Give the full-text indexes back the automerge an import turned off (see `merging_in_steps`)."""
        rows = self.rows(
            "SELECT name, value FROM counter WHERE name >= ? AND name < ?", (_AUTOMERGE_WAS, _AUTOMERGE_WAS + "\uffff")
        )
        if not rows:
            return
        with self.write():
            for name, was in rows:
                table = str(name)[len(_AUTOMERGE_WAS) :]
                if table in FTS_INDEXES:
                    self.conn.execute(
                        f"INSERT INTO {table}({table}, rank) VALUES ('automerge', ?)", (_merge_rule(int(was)),)
                    )
                    self._set_merge_rule(table, _merge_rule(int(was)))
                    self._set_import_limits(table, FTS5_CRISIS_MERGE, FTS5_HASH_BYTES)
                self.conn.execute("DELETE FROM counter WHERE name = ?", (name,))

    def _automerge(self, table: str) -> int:
        value = self.scalar(f"SELECT v FROM {table}_config WHERE k = 'automerge'")
        return -1 if value is None else int(value)

    def checkpoint(self) -> None:
        """Copy the WAL into the database without waiting for readers or writers, then start the
        next WAL at once when all of it was copied.

        The first write after a complete checkpoint starts the WAL over, and SQLite syncs the new
        WAL's header before that write's frames (synchronous=NORMAL): 0.3-10 ms of `fdatasync` on
        this machine, which would land on the next live write. A write of one page that changes
        nothing pays it now, at the owner's idle moment: the schema version written again as it is
        (a row updated to its own value writes nothing: SQLite compares the bytes). Only after this
        connection wrote: an owner that only reads leaves the WAL to its writers.
        """
        ((_busy, frames, copied),) = self.rows("PRAGMA wal_checkpoint(PASSIVE)")
        if frames > 0 and copied == frames and self._wrote and not self.conn.in_transaction:
            with self.write():
                self.conn.execute(f"PRAGMA user_version={self.user_version}")
            self._wrote = False
