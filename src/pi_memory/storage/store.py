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

`Store` is one class assembled from mixins by topic: the message writes
(`messages.py`), an import's merges (`merging.py`), the index entries live writes
left for later (`pending.py`), the run summaries' index (`runindex.py`) and the
SQL both backends share (`shared.py`); this module holds opening, migrations,
transactions, the packing dictionaries and checkpoints.
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

from ..core.echo import with_echo_token
from ..core.text import index_texts, surface_text
from ..errors import ArchiveError, CorruptDatabase
from . import codec
from .checkpointer import WalCheckpointer
from .codec import LENGTH_CHANNEL, PACK_TEXT, compress, decode_text, decompress, encode_text, fts5_varints
from .echoes import EchoMarks
from .merging import FTS_INDEXES, IMPORT_CRISIS_MERGE, IMPORT_HASH_BYTES, IMPORT_MERGE_RULE, ImportMerging
from .messages import MessageWrites, typed_column
from .pending import PendingIndex
from .presence import ImportPresence, OpeningLock
from .rows import NewEntry, NewMessage, SessionRow
from .runindex import RunSummaryIndex
from .schema import COMPACT_FTS, DATA_STEPS, MIGRATIONS, SCHEMA_VERSION
from .shared import NO_FILTER, RunFilter, SharedSql
from .usage import UsageStore
from .waiting import WaitingLine

if TYPE_CHECKING:
    from .writes import SessionWrite

__all__ = [
    "FTS_INDEXES",
    "IMPORT_CRISIS_MERGE",
    "IMPORT_HASH_BYTES",
    "IMPORT_MERGE_RULE",
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
# How long a bulk writer keeps its transactions short after it last saw a live writer wait for the
# lock (`Store.contended`): live writers come in turns (a pi turn's messages), a second covers a gap.
CONTENDED_S = 2.0
# A bulk import checkpoints every this many pages of WAL (80 MB at 8 KB pages) instead of SQLite's
# 1,000: an import rewrites the same index pages commit after commit (~90 pages a commit, most of
# them leaves of the session-keyed indexes), and a checkpoint copies each page once however often
# it changed, then syncs. Fewer, larger checkpoints: ~7% off a short-session import's wall time.
# They run on a thread of their own (`checkpointer.py`): ~170 ms of each is waiting for the disk.
BULK_CHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT = 16 << 20


def tune_own_process() -> bool:
    """Set SQLite up for a process pi-memory owns (its CLI and the servers the CLI starts), before it
    opens any database: no memory statistics. SQLite counts every allocation under a global mutex
    while they are kept, ~770 of them a message in an import's writer (callgrind: ~4% of its
    instructions). The setting is the whole process's, so the library never makes it on its own
    (a host program may read those statistics); False, and nothing changed, once a connection is open."""
    if apsw.connections():
        return False
    try:
        apsw.shutdown()
        apsw.config(apsw.SQLITE_CONFIG_MEMSTATUS, 0)
    except apsw.Error:
        return False  # SQLite in use after all (a connection apsw does not list): left as it was
    finally:
        apsw.initialize()
    return True


def default_db_path() -> Path:
    env = os.environ.get("PI_MEMORY_DB")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".pi" / "memory" / "sessions.db"


def file_id(path: Path) -> tuple[int, int] | None:
    """Which file a path names now (device, inode); None if none."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _holds_pages(path: Path) -> bool:
    """Whether an archive file has any page: in itself, or (a new one) in its WAL."""
    for suffix in ("", "-wal"):
        try:
            if Path(str(path) + suffix).stat().st_size > 0:
                return True
        except OSError:
            continue
    return False


def _create_private_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)


# How often a connection that finds the archive locked looks again. SQLite's own busy handler sleeps
# 1, 2, 5, 10 ... up to 100 ms between looks, so beside an import (whose write transactions follow
# one another with gaps of a millisecond or less) a live write kept missing the gaps: it waited
# 0.3-0.9 s at p99 and up to 2 s (bench/import_bench.py, "beside import"). Looking every
# millisecond still missed most gaps (p99 100-150 ms); the import now also leaves the lock to a
# writer that announced it waits (`waiting.py`), so the wait is the import's current transaction.
BUSY_POLL_S = 0.001


def _busy_waiter(
    on_first_look: Callable[[], None] = lambda: None, limit_s: Callable[[], float] = lambda: BUSY_TIMEOUT_MS / 1000
) -> Callable[[int], bool]:
    """A busy handler: look again every `BUSY_POLL_S` until `limit_s()` has passed (`BUSY_TIMEOUT_MS`
    unless `Store.waiting_at_most`). `on_first_look` runs when a wait starts (a writer announces
    it waits: `waiting.py`)."""
    started: list[float] = []

    def wait(retries: int) -> bool:
        now = time.monotonic()
        if retries == 0:
            if limit_s() <= 0:
                return False  # only if free now: no sleep, no announcement
            started[:] = [now]
            on_first_look()
        elif not started or now - started[0] > limit_s():
            return False
        time.sleep(BUSY_POLL_S)
        return True

    return wait


class Store(MessageWrites, ImportMerging, PendingIndex, RunSummaryIndex, EchoMarks, UsageStore, SharedSql):
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
        self.presence = ImportPresence(path)  # which imports are under way (`presence.py`)
        self._yielding = False  # a bulk writer: lets announced waiters in first (`yielding_to_waiters`)
        self.write_pace = 0.0  # seconds a write transaction took per unit of its size (`writes.TXN_TARGET_S`)
        self.own_pending: list[int] = []  # ids written `INDEX_PENDING` by this connection (`index_own_pending`)
        self._contended_until = 0.0  # live writers were seen waiting until then (`contended`)

    # --- opening ------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str | None = None) -> Store:
        """Open the archive, creating it if there is none. A file found empty (0 bytes, no WAL) that
        no process is creating is damaged (`CorruptDatabase`), never taken for a new archive."""
        if str(path or os.environ.get("PI_MEMORY_DB", "")).startswith(("postgresql:", "postgres:")):
            # Path() would turn the URL into a relative file name: a team archive opens through Archive.open
            raise ArchiveError("a postgresql:// URL is a team archive: open it with Archive.open, not Store.open")
        db_path = Path(path).expanduser() if path else default_db_path()
        if db_path.exists() and db_path.is_dir():
            raise ArchiveError(f"{db_path} is a directory, not an archive file")
        if not _holds_pages(db_path):
            try:
                db_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as exc:
                raise ArchiveError(f"cannot open archive {db_path}: {exc}") from None
            with OpeningLock(db_path).held():  # another process may be making it: wait, then look
                if db_path.exists() and not _holds_pages(db_path):
                    raise CorruptDatabase(db_path, "the file is empty (0 bytes): not an archive", file_id(db_path))
                return cls._connect(db_path, create=True)  # its first page written before the lock is free
        return cls._connect(db_path, create=False)

    @classmethod
    def _connect(cls, db_path: Path, create: bool) -> Store:
        try:
            if create and not db_path.exists():
                _create_private_file(db_path)
            identity = file_id(db_path)
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
            store.close()
            raise CorruptDatabase(db_path, str(exc), identity) from None
        except apsw.BusyError:
            store.close()
            raise ArchiveError(f"archive {db_path} stayed locked by another process; try again") from None
        # the file was moved aside under this connection by another process's recovery: SQLite refuses
        # to write to it (read-only), or fails reading the fresh archive's WAL beside it by name (an
        # I/O error: seen once in CI, 8 processes opening one damaged file); the fresh one is opened
        except (apsw.ReadOnlyError, apsw.IOError):
            store.close()
            if file_id(db_path) != identity:
                return cls.open(db_path)
            raise
        return store

    def _configure(self) -> None:
        self.conn.setbusyhandler(_busy_waiter(self._line.busy, lambda: self.busy_limit_s))
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
        self.presence.close()

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

    def text_codec(self, train: bool = True) -> int:
        """The dictionary id new text is packed with: trained once from the first `TRAIN_AFTER`
        messages (outside any transaction: ~30-150 ms, once per archive), or found in `codec_dict`
        when another process trained it. Cheap when there is one, or too few messages to learn from.
        `train=False`: only look for one (a live write, which would wait out the training)."""
        if self.text_dict_id or not codec.PACK_TEXT or self.conn.in_transaction:
            return self.text_dict_id
        top = self.max_msg_id()
        if top < max(self._codec_check_at, self.TRAIN_AFTER):
            return 0
        self.load_dictionaries()
        if not self.text_dict_id:
            if not train:
                return 0  # the next call that may train looks again
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
            if name in DATA_STEPS and not self._holds_nothing_indexed():  # a new archive: nothing to step through
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
        if self.scalar("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'codec_dict')"):
            self.load_dictionaries()  # a step reads packed text, before the opening registers them
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

    def index_typed_targets(self) -> None:
        """m015's data step: `msg_typed` written again for the messages that have an entry there (idempotent)."""
        last = 0
        while rows := self.rows(
            """SELECT m.id, m.text, m.echo FROM msg_typed_docsize d JOIN msg m ON m.id = d.id
               WHERE d.id > ? ORDER BY d.id LIMIT ?""",
            (last, self.DATA_STEP_BATCH),
        ):
            last = int(rows[-1][0])
            texts = [(int(i), decode_text(raw), bool(echo)) for i, raw, echo in rows]
            with self.write():
                for msg_id, text, echo in texts:
                    self.conn.execute("DELETE FROM msg_typed WHERE rowid = ?", (msg_id,))
                    self.index_typed(msg_id, text, echo=echo)

    def integrity_errors(self) -> list[str]:
        rows = [str(r[0]) for r in self.conn.execute("PRAGMA integrity_check")]
        return [] if rows == ["ok"] else rows

    # --- transactions -------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[None]:
        """One short write transaction; the lock is taken at BEGIN, not at first write."""
        if self._yielding and self._line.let_waiters_in():
            self._saw_waiters()
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

        # before the transactions: training the dictionary takes a moment, once; a deferring store's
        # live writes leave it to its idle moment (`run_deferred_hooks`) or to a bulk write (an import,
        # `yielding_to_waiters`): a live write that trained it waited ~0.1-0.15 s (the training, then
        # its first messages packed again)
        self.text_codec(train=self.deferred_hooks is None or self._yielding)
        return write_sessions(self, units)

    def unindex_messages(self, msg_ids: list[int]) -> None:
        """Take messages out of the full-text index (inside a write transaction; `forget`)."""
        for msg_id in msg_ids:
            self.conn.execute("DELETE FROM msg_fts WHERE rowid=?", (msg_id,))
            self.conn.execute("DELETE FROM msg_typed WHERE rowid=?", (msg_id,))

    def _rewrite_echo_entries(self, changed: list[tuple[int, bool, int, Any]]) -> None:
        """`EchoMarks`: the flags, and each indexed message's entries cut again with or without the
        echo token (a contentless index cannot change a token of a row in place)."""
        for msg_id, echo, indexed, stored in changed:
            self.conn.execute("UPDATE msg SET echo = ? WHERE id = ?", (int(echo), msg_id))
            if indexed != 1:
                continue  # not indexed, or waiting for `index_pending`, which reads the flag
            text = decode_text(stored)
            chars, grams = index_texts(text)
            self.conn.execute("DELETE FROM msg_fts WHERE rowid = ?", (msg_id,))
            self.conn.execute("DELETE FROM msg_typed WHERE rowid = ?", (msg_id,))
            self.conn.execute(
                "INSERT INTO msg_fts(rowid, chars, grams) VALUES (?,?,?)", (msg_id, with_echo_token(chars, echo), grams)
            )
            self.index_typed(msg_id, text, echo=echo)

    def index_typed(self, msg_id: int, text: str, typed: str | bytes | None = None, echo: bool = False) -> None:
        """The characters of a message typed in a script that folds to another, as typed (`msg_typed`);
        `typed`: those characters joined by spaces, when a parse worker found them already; an echo's
        entry carries `ECHO_TOKEN` as its `msg_fts` entry does."""
        if typed is None:
            typed = surface_text(text)
        if typed:
            self.conn.execute("INSERT INTO msg_typed(rowid, typed) VALUES (?, ?)", (msg_id, typed_column(typed, echo)))

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
    # memory events get keyed seals here (`memory/seal.py`): the file is one user's, its key too
    seals_memory = True
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

    # how long a write waits for the lock before `apsw.BusyError` (`waiting_at_most`)
    busy_limit_s = BUSY_TIMEOUT_MS / 1000
    # a live writer that finds the lock taken may keep its capture in a spool file (`ingest/spool.py`)
    spools_live_writes = True

    @property
    def write_transactions(self) -> int:
        """Write transactions this connection began (`write`)."""
        return self._txn

    @contextmanager
    def waiting_at_most(self, seconds: float) -> Iterator[None]:
        """Writes inside wait at most `seconds` for the lock, then raise `apsw.BusyError` (a live
        capture that keeps its message in its spool instead)."""
        before, self.busy_limit_s = self.busy_limit_s, seconds
        try:
            yield
        finally:
            self.busy_limit_s = before

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
        # The first commit after a checkpoint starts the WAL over and cuts the file down to
        # `journal_size_limit`: ~80 MB to 16 MB after each bulk checkpoint, 25-30 ms of `ftruncate`
        # inside an import's commit (which a live writer waited out), and the file grown back after.
        # A bulk write keeps the WAL's pages and overwrites them; the limit comes back after, and
        # the next start-over cuts the file once (the bridge's at its idle moment: `checkpoint`).
        size_limit = int(self.scalar("PRAGMA journal_size_limit"))
        self.conn.execute("PRAGMA journal_size_limit=-1")
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
            self.conn.execute(f"PRAGMA journal_size_limit={size_limit}")

    def writer_waiting(self) -> bool:
        """Inside a bulk write (`yielding_to_waiters`): whether another writer announced that it
        waits for the lock (`waiting.py`), so that the transaction under way ends early."""
        waiting = self._yielding and self._line.someone_waiting()
        if waiting:
            self._saw_waiters()
        return waiting

    def _saw_waiters(self) -> None:
        self._contended_until = time.monotonic() + CONTENDED_S

    @property
    def contended(self) -> bool:
        """A bulk writer met live writers waiting for the lock within `CONTENDED_S`: its transactions
        and merge steps are cut shorter meanwhile (`writes.CONTENDED_TXN_S`, `merging.CONTENDED_MERGE_PAGES`)."""
        return time.monotonic() < self._contended_until

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
