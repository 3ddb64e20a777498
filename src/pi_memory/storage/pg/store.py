"""The team archive's connection: migrations, short transactions, the write path, reads.

Design idea: the same rules as the SQLite store, kept by PostgreSQL's own
machinery. Every write is one short transaction of at most `BATCH` messages
holding only SQL (parsing, rendering and tokenizing happen before it starts).
A message is new when its `(session_id, hash)` is; `INSERT ... ON CONFLICT DO
NOTHING` makes any replay harmless. The session row is locked (`FOR UPDATE`,
or the upsert's own lock) before seqs are allocated, so concurrent writers to
one session never share a seq, and writers to different sessions never wait
for each other except on the one-row counter, locked before the messages get
their ids (ids in commit order: the word counts kept up to an id stay exact, m018)
and updated last.

Credentials come from the URL or the standard libpq environment (PGPASSWORD,
~/.pgpass, PGSERVICE ...); error messages pass through `redact` and never show
a password.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ...core.echo import ECHO_TOKEN
from ...core.ranking import DF_EXACT_CAP, DF_STALE_GROWTH, DF_WINDOW, candidate_weight, expected_matches, spread_ids
from ...core.text import QueryToken
from ...errors import ArchiveError, NotFound
from ..echoes import EchoMarks
from ..store import NO_FILTER, RunFilter, SessionRow, SharedSql
from ..usage import UsageStore
from . import redact
from .schema import ADMIN_ROLE, CREATE_VERSION_TABLE, IS_WRITER_OR_ADMIN, MIGRATIONS, SCHEMA_VERSION
from .sql import PermissionDenied, driver, indexable, lexeme, pg_sql, pg_text, tsquery, weighted_matches
from .vectors import PgVectors
from .writes import PgWrites, token_count, token_line

if TYPE_CHECKING:
    import psycopg


__all__ = ["PermissionDenied", "PgStore", "indexable", "lexeme", "pg_sql", "tsquery"]

CONNECT_TIMEOUT_S = 10

MIGRATION_LOCK = "pi_memory_migrate"
# Run counts as SQLite makes them (`runindex.RUN_DF_WINDOW`, the searcher's cap): exact up to the cap,
# above it the density among the newest 10,000 runs, so both backends weigh a token alike
RUN_DF_WINDOW = 10_000  # newest run ids a more common token's count is estimated from
RUN_WINDOW = 200_000  # the newest run ids searched for the other tokens (SQLite's FTS5 walks them all)
RUN_WALK_FROM_EXPECTED = 4  # x limit: expected matches in the window above which the search walks the ids
# A token ANALYZE found in more than this many times the exact cap's share of rows is past the cap
# for certain: its exact count (a heap page a posting, thousands) is skipped, its estimate is made
# as for any token past the cap. Closer to the cap, the sample's error could put it on either side.
SURELY_PAST_CAP = 2.0
# The idle word count (`count_words`) runs once this many messages were added since the last: a
# search brings a kept count up to date by walking the rows after it, one walk for all its words
COUNT_WORDS_EVERY = 5_000
# A search's settings, the counters and the newest message id, in one statement (`searching`): token
# lookups go through the GIN indexes (a planner without fresh statistics may otherwise scan the table,
# whose cost grows with the archive); no parallel workers (starting two cost more than the few
# thousand postings a query reads, and the machine's other cores serve other queries).
# `jit` off: with `enable_seqscan` off, a plan with no index to use (the one-row `counter`) is
# priced past `jit_above_cost`, and compiling it costs more than any of a search's statements
# (cold searches at 300k, 48 alternated: 2 ms less at the median)
SEARCH_SNAPSHOT = """SELECT set_config('enable_seqscan', 'off', true),
                            set_config('max_parallel_workers_per_gather', '0', true),
                            set_config('jit', 'off', true),
                            c.indexed_docs, c.indexed_chars, c.run_docs, c.run_chars,
                            (SELECT coalesce(max(id), 0) FROM msg), (SELECT coalesce(max(id), 0) FROM run)
                     FROM counter c"""
TOKEN_TABLES = ("msg", "run")  # the tables with a `tokens` tsvector under a GIN index
COUNTERS = ("indexed_docs", "indexed_chars", "run_docs", "run_chars")
TABLES = ("session", "msg", "entry", "source_file", "counter", "run", "run_msg", "run_file", "compact_window")


COUNT_WORDS = "SELECT pi_memory_count_words(%s, %s, %s, %s, %s)"
COUNT_WORDS_ARGS = (
    DF_EXACT_CAP,
    DF_WINDOW,
    DF_EXACT_CAP + 1,
    DF_STALE_GROWTH,
)  # the searchers' cap, window, floor, staleness


class IdleWordCount:
    """`PgStore.count_words` from idle moments, on a thread and a connection of its own: the caller
    never waits (a first count of a large archive takes tens of seconds on the server), and it is
    tried at most every `RECHECK_S`. A failure is kept in `error` and never raised: searches then
    count as they did before (nothing kept is ever wrong, only missing)."""

    RECHECK_S = 60.0

    def __init__(self, url: str) -> None:
        self.url = url
        self.words: int | None = None  # the last count's answer (`count_words`)
        self.error: str | None = None
        self._thread: threading.Thread | None = None
        self.started_at = float("-inf")  # time.monotonic() when the last count started

    def poke(self, now: float | None = None) -> bool:
        """Start a count unless one is running or one started within `RECHECK_S`; whether one started."""
        now = time.monotonic() if now is None else now
        busy = self._thread is not None and self._thread.is_alive()
        if busy or self._stopping or now - self.started_at < self.RECHECK_S:
            return False
        self.started_at = now
        self._thread = threading.Thread(target=self._run, name="pi-memory-count", daemon=True)
        self._thread.start()
        return True

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def stop(self) -> None:
        """Cancel a count under way (it is one transaction: nothing of it is kept) and wait for its
        thread: closing the archive never waits for the server to finish counting."""
        self._stopping = True
        while self._thread is not None and self._thread.is_alive():
            conn = self._conn
            if conn is not None:
                try:
                    conn.cancel()
                except Exception:  # already finished, or the server gone: the thread ends either way
                    pass
            self._thread.join(0.05)

    _conn: Any = None  # the counting connection while a count runs
    _stopping = False

    def _run(self) -> None:
        try:
            with driver().connect(self.url, autocommit=True, application_name="pi-memory count") as conn:
                self._conn = conn
                if self._stopping:
                    return
                row = conn.execute(COUNT_WORDS, (*COUNT_WORDS_ARGS, COUNT_WORDS_EVERY)).fetchone()
            self.words, self.error = (int(row[0]) if row else None), None
        except Exception as exc:  # a server gone, a role without rights, a cancel: nothing kept, nothing wrong
            self.error = redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        finally:
            self._conn = None


class PgStore(PgWrites, PgVectors, EchoMarks, UsageStore, SharedSql):
    """One psycopg connection (autocommit; explicit short transactions) and the SQL the archive needs."""

    def __init__(self, conn: psycopg.Connection[Any], url: str) -> None:
        self.conn = conn
        self.url = url
        self.path = redact(url)  # what Stats and messages show
        self.author = os.environ.get("PI_MEMORY_USER") or None
        self.host = socket.gethostname()
        # summary search: run counts of this search's tokens, and the common tokens' shares
        # from ANALYZE's statistics (reloaded when the number of runs moved by more than 2%)
        self._run_df: dict[str, int] = {}
        self._run_shares: tuple[int, dict[str, float]] = (-1, {})
        self.idle_count = IdleWordCount(url)

    # --- opening ------------------------------------------------------------------

    @classmethod
    def connect(cls, url: str) -> PgStore:
        psycopg = driver()
        try:
            conn = psycopg.connect(
                url, autocommit=True, application_name="pi-memory", connect_timeout=CONNECT_TIMEOUT_S
            )
        except psycopg.Error as exc:
            raise ArchiveError(f"cannot connect to {redact(url)}: {_first_line(exc, url)}") from None
        # Every statement is prepared at its first use (psycopg's default waits for the fifth): a
        # search runs the same few statement texts again and again, and their parse and plan were
        # a quarter of its time (bench: 548 -> 404 ms for the 24 queries at 30k, warm)
        conn.prepare_threshold = 0
        store = cls(conn, url)
        with store.errors():
            # every query here is small: compiling one (JIT) costs more than it saves
            conn.execute("SET jit = off")
            # what the identity trigger writes into every row's author and host (pg/schema.py)
            conn.execute(
                "SELECT set_config('pi_memory.author', %s, false), set_config('pi_memory.host', %s, false)",
                (store.author or "", store.host),
            )
            store.migrate()
        return store

    def close(self) -> None:
        self.idle_count.stop()
        self.conn.close()

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Driver errors become one clear line, with any password redacted."""
        psycopg = driver()
        try:
            yield
        except psycopg.errors.InsufficientPrivilege as exc:
            raise PermissionDenied(
                f"permission denied: role {self.current_user_safe()!r} cannot do this on {self.path} "
                f"({_first_line(exc, self.url)})"
            ) from None
        except psycopg.Error as exc:
            raise ArchiveError(f"PostgreSQL archive {self.path}: {_first_line(exc, self.url)}") from None

    def current_user_safe(self) -> str:
        try:
            return str(self.scalar("SELECT current_user"))
        except Exception:  # the connection may be the thing that failed
            return "?"

    @property
    def current_user(self) -> str:
        return str(self.scalar("SELECT current_user"))

    def schema_version(self) -> int:
        if self.scalar("SELECT to_regclass('schema_version')") is None:
            return 0
        return int(self.scalar("SELECT coalesce(max(version), 0) FROM schema_version") or 0)

    def migrate(self) -> None:
        """Apply pending migrations in one transaction, under an advisory lock (concurrent opens wait)."""
        current = self.schema_version()
        if current > SCHEMA_VERSION:
            raise ArchiveError(
                f"{self.path} has schema version {current}, newer than this pi-memory ({SCHEMA_VERSION}); upgrade pi-memory"
            )
        if current == SCHEMA_VERSION:
            return
        with self.write():
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (MIGRATION_LOCK,))
            self.conn.execute(CREATE_VERSION_TABLE)
            current = self.schema_version()
            applied = []
            for version, (name, sql) in enumerate(MIGRATIONS, start=1):
                if version <= current:
                    continue
                self.conn.execute(sql.encode(), prepare=False)  # several statements: never prepared
                self.conn.execute("INSERT INTO schema_version(version, name) VALUES (%s, %s)", (version, name))
                applied.append(name)
        if "m008_usage" in applied:
            self.backfill_usage()  # the requests of sessions archived before (idempotent, short transactions)

    # --- transactions and plain queries --------------------------------------------

    @contextmanager
    def write(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    @contextmanager
    def read(self) -> Iterator[None]:
        """A transaction around multi-statement reads (nested calls join the outer one)."""
        with self.conn.transaction():
            yield

    # The library's shared SQL is written once, with `?` placeholders (SQLite's style); these
    # four methods take it as it is. `self.conn` is psycopg's own and takes `%s`.

    # Their driver errors become `ArchiveError`s (see `errors`), except the deadlock and
    # serialization failures `_retry` runs a transaction again for.

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._statement_errors():
            row = self.conn.execute(pg_sql(sql), params).fetchone()
        return row[0] if row else None

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._statement_errors():
            return list(self.conn.execute(pg_sql(sql), params).fetchall())

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the rows it changed."""
        with self._statement_errors():
            return int(self.conn.execute(pg_sql(sql), params).rowcount)

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> None:
        params = list(seq)
        if params:
            with self._statement_errors(), self.conn.cursor() as cur:
                cur.executemany(pg_sql(sql), params)

    @contextmanager
    def _statement_errors(self) -> Iterator[None]:
        psycopg = driver()
        try:
            yield
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
            raise
        except psycopg.Error:
            with self.errors():
                raise

    # --- the few places where the two dialects differ, named (the SQLite Store has the same) ---

    @staticmethod
    def text_param(value: str) -> str:
        return pg_text(value)

    def sql_in_list(self, expr: str) -> str:
        """`expr` is one of the values of the parameter `list_param` made."""
        return f"{expr} = ANY(?)"

    @staticmethod
    def list_param(values: Iterable[Any]) -> Any:
        return list(values)

    @staticmethod
    def sql_json_has(column: str, key: str) -> str:
        return f"(({column})::jsonb -> '{key}') IS NOT NULL"

    # --- what the importer asks before writing (the rest: `SharedSql`) --------------------

    def source_file_state(self, path: str) -> tuple[int, int] | None:
        rows = self.rows("SELECT size, mtime_ns FROM source_file WHERE host=%s AND path=%s", (self.host, path))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    # --- live capture (the rest of its store calls: `SharedSql`) ----------------------------

    # driver errors (a read-only role, a lost connection) become one clear line, as in `rows`
    def ensure_session(self, row: SessionRow) -> None:
        with self.errors():
            self._ensure_session(row)

    # `merging_in_steps` (the token indexes' pending lists merged after a bulk write): `PgWrites`

    def merge_steps(self, whole: set[str] | frozenset[str] = frozenset()) -> int:
        return 0

    @contextmanager
    def yielding_to_waiters(self) -> Iterator[None]:
        """Nothing to do: PostgreSQL queues its row locks itself (see the SQLite store)."""
        yield

    text_dict_id = 0  # message text is stored plain here (`codec.PACK_TEXT` is SQLite's): no dictionary

    packs_lines = False  # a verbatim line is stored alone here (`raw_blob`), from the line itself
    seals_memory = False  # a team archive is many users': its memory log relies on PostgreSQL's roles

    def dictionary_due(self) -> bool:
        return False

    def text_codec(self, train: bool = True) -> int:
        """The dictionary message text is packed with: none on PostgreSQL (the importer asks before
        handing its parse workers one)."""
        return 0

    @contextmanager
    def checkpointing(self, pages: int = 1000, aside: bool = False) -> Iterator[None]:
        """A bulk write needs no checkpoint policy here: the server checkpoints on its own schedule."""
        yield

    def lock_workspace(self, workspace: str) -> None:
        """Serialize memory-log appends to one workspace until the transaction ends (other workspaces go on)."""
        self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (workspace,))

    # --- forgetting -------------------------------------------------------------------

    def check_may_forget(self, session_id: str) -> None:
        """Raise unless this role wrote the session or is a member of `pi_memory_admin`.

        Row-level security would make the DELETEs of someone else's rows change nothing,
        silently; asking first turns that into one clear error before anything is touched.
        """
        row = self.rows(
            f"SELECT written_by, {IS_WRITER_OR_ADMIN} FROM session WHERE id=?",
            (session_id,),
        )
        if not row:
            raise NotFound(f"no session {session_id!r}")
        writer, allowed = row[0]
        if not allowed:
            raise PermissionDenied(
                f"permission denied: session {session_id} was written by {writer!r}; only that role or a "
                f"member of {ADMIN_ROLE} can forget it"
            )

    def _rewrite_echo_entries(self, changed: list[tuple[int, bool, int, Any]]) -> None:
        """`EchoMarks`: the flags, and the echo lexeme added to or taken from each indexed row's tokens."""
        for msg_id, echo, _indexed, _text in changed:
            self.conn.execute(
                """UPDATE msg SET echo = %s, tokens = CASE WHEN NOT indexed THEN tokens
                     WHEN %s THEN tokens || array_to_tsvector(ARRAY[%s]) ELSE ts_delete(tokens, %s) END
                   WHERE id = %s""",
                (int(echo), echo, ECHO_TOKEN, ECHO_TOKEN, msg_id),
            )

    def unindex_messages(self, msg_ids: list[int]) -> None:
        """Nothing to do: a message's tokens are a column of its row, deleted with it."""

    # --- what `watch` remembers of a followed file: per host, like all of `source_file` -------------

    def file_state(self, path: str) -> tuple[Any, ...] | None:
        rows = self.rows(
            """SELECT session_id, read_offset, line_no, inode, head_hash, size, mtime_ns FROM source_file
               WHERE host = ? AND path = ?""",
            (self.host, path),
        )
        return rows[0] if rows else None

    def remember_file(self, path: str, session_id: str | None, state: Sequence[Any], agent: str | None) -> None:
        size, mtime_ns, offset, line_no, inode, head = state
        self.execute(
            """INSERT INTO source_file(host, path, session_id, size, mtime_ns, imported_at, read_offset, line_no,
                                       inode, head_hash, agent, author)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
               ON CONFLICT(host, path) DO UPDATE SET session_id = coalesce(excluded.session_id, source_file.session_id),
                 size = excluded.size, mtime_ns = excluded.mtime_ns, imported_at = excluded.imported_at,
                 read_offset = excluded.read_offset, line_no = excluded.line_no, inode = excluded.inode,
                 head_hash = excluded.head_hash, agent = coalesce(excluded.agent, source_file.agent)""",
            (self.host, pg_text(path), session_id, size, mtime_ns, int(time.time() * 1000), offset, line_no)
            + (inode, head, agent, self.author),
        )

    def forget_file_offsets(self, path: str) -> None:
        self.execute(
            """UPDATE source_file SET read_offset = 0, line_no = 0, inode = NULL, head_hash = NULL
               WHERE host = ? AND path = ?""",
            (self.host, path),
        )

    def consistency_problems(self) -> list[str]:
        """The schema version, and every counter against a recount (a full scan: `check` only)."""
        problems = []
        if self.schema_version() != SCHEMA_VERSION:
            problems.append(f"schema version {self.schema_version()}, expected {SCHEMA_VERSION}")
        if self.scalar("SELECT count(*) FROM counter") != 1:
            return [*problems, "the counter row is missing"]
        with self.read():
            stored = self.counters()
            docs, chars = self.rows(
                "SELECT count(*), coalesce(sum(nchars), 0) FROM msg WHERE indexed",
            )[0]
            runs, run_chars = self.rows(
                "SELECT count(*), coalesce(sum(indexed_chars), 0) FROM run WHERE indexed_chars >= 0",
            )[0]
        actual = {"indexed_docs": docs, "indexed_chars": chars, "run_docs": runs, "run_chars": run_chars}
        problems += [
            f"counter {name} is {stored[name]}, the rows say {int(value)}"
            for name, value in actual.items()
            if stored[name] != int(value)
        ]
        return problems

    # --- reads ------------------------------------------------------------------------

    def counters(self) -> dict[str, int]:
        if self._snapshot is not None:
            return dict(self._snapshot[0])
        row = self.conn.execute(f"SELECT {', '.join(COUNTERS)} FROM counter").fetchone()
        return {name: int(value) for name, value in zip(COUNTERS, row, strict=True)} if row else {}

    # (counters, newest message id, newest run id) read once by the search under way (`searching`)
    _snapshot: tuple[dict[str, int], int, int] | None = None

    @contextmanager
    def searching(self) -> Iterator[None]:
        """A search's read transaction: its settings, the counters and the newest ids in one round trip
        (each round trip waits for the server: on a busy machine, for a core), kept until it ends."""
        with self.read():
            if self._snapshot is not None:  # nested: the outer search's
                yield
                return
            row = self.conn.execute(SEARCH_SNAPSHOT).fetchone()
            assert row is not None  # the counter row is always there (m001)
            self._snapshot = ({n: int(v) for n, v in zip(COUNTERS, row[3:7], strict=True)}, int(row[7]), int(row[8]))
            try:
                yield
            finally:
                self._snapshot = None

    def max_msg_id(self) -> int:
        if self._snapshot is not None:
            return self._snapshot[1]
        return int(self.scalar("SELECT coalesce(max(id), 0) FROM msg") or 0)

    def max_run_id(self) -> int:
        if self._snapshot is not None:
            return self._snapshot[2]
        return int(self.scalar("SELECT coalesce(max(id), 0) FROM run") or 0)

    def capped_counts(self, table: str, tokens: Sequence[QueryToken], cap: int) -> list[int]:
        """Rows of `table` holding each token, counted up to `cap` + 1, all in one statement: by the
        server's `pi_memory_capped_counts`, which answers from what it keeps and counts (and keeps)
        the rest: a message count kept up to an id is brought up to date from the rows after it
        (m018); a run count is taken while the archive is within `DF_STALE_GROWTH` of its size (m016)."""
        assert table in TOKEN_TABLES
        if not tokens:
            return []
        sql = "SELECT pi_memory_capped_counts(%s, %s::text[], %s, %s)"
        row = self.rows(sql, (table, [tsquery([t]) for t in tokens], cap, DF_STALE_GROWTH))[0]
        return [int(n) for n in row[0]]

    def kept_dfs(self, table: str, tokens: Sequence[QueryToken], cap: int, window: int, floor: int) -> list[int | None]:
        """Each token's document frequency as the server keeps it: its count when within `cap` (of
        messages: brought up to date from the rows added since it was made, m018), else its estimate
        from the newest `window` ids (m016); None where the server keeps neither. One round trip, no
        statistics; no count of a token's postings but those after its kept count."""
        assert table in TOKEN_TABLES
        if not tokens:
            return []
        sql = "SELECT pi_memory_kept_dfs(%s, %s::text[], %s, %s, %s, %s)"
        row = self.rows(sql, (table, [tsquery([t]) for t in tokens], cap, window, floor, DF_STALE_GROWTH))[0]
        return [None if n is None else int(n) for n in row[0]]

    def count_words(self, min_rows: int = COUNT_WORDS_EVERY) -> int:
        """Count every word of the messages added since the last count, in one statement on the
        server (`pi_memory_count_words`, m018): the first time (or after a `forget`), every message.
        Afterwards a search finds each word's count kept and brings it up to date from the rows
        after it. Nothing is done until `min_rows` messages were added; -1 when another connection
        is counting or a search is keeping a count (try again later); else the words counted."""
        with self.errors():
            return int(self.scalar(COUNT_WORDS, (*COUNT_WORDS_ARGS, min_rows)))

    def mean_length(self, table: str, n: int) -> float | None:
        """The mean `ntokens` of `n` rows spread over the ids, sampled as the searchers sample it
        (`Searcher._sampled_length`, `run_token_sample`), by the server, which keeps it for every searcher
        while the archive stays within `DF_STALE_GROWTH` of its size (m016); None when a sampled
        message is older than its kept length (the searcher counts its text)."""
        assert table in TOKEN_TABLES
        value = self.scalar("SELECT pi_memory_mean_length(%s, %s, %s)", (table, n, DF_STALE_GROWTH))
        return None if value is None else float(value)

    def add_to_counters(self, deltas: dict[str, int]) -> None:
        """One UPDATE of the one counter row (inside a write transaction; its lock lasts until commit)."""
        # the scan index's generation (SQLite's `vec_generation`, bumped by forget): pgvector scans
        # the table itself, there is no index file to make stale
        deltas = {name: n for name, n in deltas.items() if name != "vec_generation"}
        if not deltas:
            return
        unknown = set(deltas) - set(COUNTERS)
        if unknown:
            raise ValueError(f"no counter {sorted(unknown)[0]!r}")
        sets = ", ".join(f"{name} = {name} + %s" for name in deltas)
        self.conn.execute(f"UPDATE counter SET {sets}".encode(), list(deltas.values()))

    # --- run summaries: a tsvector column of `run` (the SQLite store has an FTS5 table) -------

    def index_run_summary(self, run_id: int, chars: str | bytes, grams: str | bytes) -> None:
        self.conn.execute(
            "UPDATE run SET tokens = array_to_tsvector(string_to_array(%s, ' ')), ntokens = %s WHERE id=%s",
            (token_line(chars, grams), token_count(grams), run_id),
        )

    def unindex_run_summary(self, run_id: int) -> None:
        self.conn.execute("UPDATE run SET tokens = ''::tsvector, ntokens = NULL WHERE id=%s", (run_id,))

    # Bounded like message search (search/pg.py): a posting costs a heap page here, so counts are
    # batched, a token ANALYZE's statistics put far past the cap is not counted, and the recent
    # track walks back along the run ids when the tokens are frequent.

    def run_summary_df(self, token: QueryToken, cap: int) -> int:
        return self.run_summary_dfs([token], cap)[token.text]

    def run_summary_dfs(self, tokens: Sequence[QueryToken], cap: int) -> dict[str, int]:
        """Runs whose summary holds each token, as SQLite counts them (`RunSummaryIndex.run_summary_df`):
        exact up to `cap`, above it the density among the newest `RUN_DF_WINDOW` runs; the exact
        counts in one statement, skipped for the tokens ANALYZE says are far past the cap; first,
        what other searchers left with the server (`kept_dfs`)."""
        runs = self.counters().get("run_docs", 0)
        out: dict[str, int] = {t.text: 0 for t in tokens if not indexable(t.text)}
        usable = [t for t in tokens if indexable(t.text)]
        kept = self.kept_dfs("run", usable, cap, RUN_DF_WINDOW, cap + 1)
        out.update({t.text: n for t, n in zip(usable, kept, strict=True) if n is not None})
        usable = [t for t in usable if t.text not in out]
        if not usable:
            self._run_df.update(out)
            return out
        shares = self._run_token_shares(runs)
        surely_past = {t.text for t in usable if shares.get(t.text, 0.0) * runs > SURELY_PAST_CAP * cap}
        to_count = [t for t in usable if t.text not in surely_past]
        out.update({t.text: n for t, n in zip(to_count, self.capped_counts("run", to_count, cap), strict=True)})
        past = [t for t in usable if out.get(t.text, cap + 1) > cap]
        estimates = self.estimate_dfs_from_window("run", past, RUN_DF_WINDOW, floor=cap + 1)
        out.update({t.text: n for t, n in zip(past, estimates, strict=True)})
        self._run_df.update(out)
        return out

    def _run_token_shares(self, runs: int) -> dict[str, float]:
        at, shares = self._run_shares
        if at < 0 or abs(runs - at) > DF_STALE_GROWTH * max(at, 1):
            shares = self.analyzed_token_shares("run")
            self._run_shares = (runs, shares)
        return shares

    # --- document frequencies without counting every posting (msg and run tokens alike) ------

    def analyzed_token_shares(self, table: str) -> dict[str, float]:
        """token -> share of rows, for the tokens ANALYZE found most common in `table`.tokens."""
        assert table in TOKEN_TABLES
        row = self.conn.execute(
            """SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats
               WHERE schemaname = current_schema() AND tablename = %s AND attname = 'tokens'""",
            (table,),
        ).fetchone()
        elems, freqs = (row[0] or [], row[1] or []) if row else ([], [])
        return {str(e): float(f) for e, f in zip(elems, freqs, strict=False)}

    def estimate_dfs_from_window(self, table: str, tokens: Sequence[QueryToken], window: int, floor: int) -> list[int]:
        """Rows holding each frequent token: its density among the newest `window` ids, scaled to
        the archive's size (SQLite's estimate, `Searcher._estimate_df`; the size is the counter row's,
        read by the server). The window's rows are read once along
        the primary key and every token tested on each (`count(*) FILTER`), so the cost is the
        window's, whatever the archive's size and however many tokens: a token's GIN bitmap ANDed
        with the range read the token's whole posting list, which grows with the archive (30k
        messages, the 7 frequent tokens of one query: 106 ms that way, 23 ms walking; the tokens are
        kept in the row, m012, so a row's are decompressed in place)."""
        assert table in TOKEN_TABLES
        if not tokens:
            return []
        # the server's `pi_memory_window_dfs` (m016) walks the window as above, for the tokens no
        # searcher estimated while the archive was within `DF_STALE_GROWTH` of its size now
        sql = "SELECT pi_memory_window_dfs(%s, %s::text[], %s, %s, %s)"
        row = self.rows(sql, (table, [tsquery([t]) for t in tokens], window, floor, DF_STALE_GROWTH))[0]
        return [int(n) for n in row[0]]

    def run_summary_rare(
        self,
        weighted: Sequence[tuple[QueryToken, float]],
        limit: int,
        where: RunFilter = NO_FILTER,
        echoes: bool = False,
    ) -> list[int]:
        """The `limit` runs holding the most weight of these (rare) tokens, summed in SQL (as on SQLite)."""
        usable = [(t, w) for t, w in weighted if indexable(t.text)]
        if not usable:
            return []
        params: list[Any] = [[tsquery([t]) for t, _ in usable], [candidate_weight(w) for _, w in usable]]
        sql = f"SELECT c.id FROM ({weighted_matches('run', 'TRUE' if echoes else 'NOT echo')}) c"
        if where[0] != NO_FILTER[0]:
            sql += f" JOIN run r ON r.id = c.id JOIN session s ON s.id = r.session_id WHERE {where[0]}"
            params += list(where[1])
        return [int(r[0]) for r in self.rows(sql + " ORDER BY c.s DESC, c.id DESC LIMIT %s", [*params, limit])]

    def run_summary_recent(
        self,
        tokens: Sequence[QueryToken],
        limit: int,
        where: RunFilter = NO_FILTER,
        echoes: bool = False,
        all_of: bool = False,
    ) -> list[int]:
        """The newest runs holding any (`all_of`: every one) of the tokens, among the newest `RUN_WINDOW`."""
        usable = [t for t in tokens if indexable(t.text)]
        if not usable:
            return []
        low = max(0, self.max_run_id() - RUN_WINDOW)
        # `IS TRUE` hides the match from the GIN index: the plan walks back along the primary key
        # and stops at `limit` matches, instead of reading every match of the window first
        walk = self._expected_in_window(usable, all_of) >= RUN_WALK_FROM_EXPECTED * limit
        match = "(r.tokens @@ %s::tsquery) IS TRUE" if walk else "r.tokens @@ %s::tsquery"
        query = tsquery(usable, "&" if all_of else "|")
        if not echoes:  # by the row's flag (m017): the tsquery stays positive, no recheck
            match += " AND NOT r.echo"
        return self._runs_matching(match, query, low, limit, where)

    # --- lengths for BM25 (`ranking.doc_tokens`), kept at write time as SQLite's FTS5 docsize keeps
    # them: `ntokens` (m012), the number of tokens in the `grams` channel; NULL on rows written
    # before it, which the searchers count from the text as they did

    def msg_token_counts(self, msg_ids: Sequence[int]) -> dict[int, int]:
        if not msg_ids:
            return {}
        sql = "SELECT id, ntokens FROM msg WHERE id = ANY(%s) AND ntokens IS NOT NULL"
        return {int(i): int(n) for i, n in self.rows(sql, (list(msg_ids),))}

    def run_token_counts(self, run_ids: Sequence[int]) -> dict[int, int]:
        if not run_ids:
            return {}
        sql = "SELECT id, ntokens FROM run WHERE id = ANY(%s) AND ntokens IS NOT NULL"
        return {int(i): int(n) for i, n in self.rows(sql, (list(run_ids),))}

    def run_token_sample(self, n: int) -> list[int]:
        """The summary lengths of up to `n` indexed runs spread evenly over their ids, as SQLite's
        `RunSummaryIndex.run_token_sample` reads them (the same runs: the same mean, the same scores)."""
        sql = "SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM run WHERE ntokens IS NOT NULL"
        low, high = self.rows(sql)[0]
        wanted = spread_ids(int(low), int(high), n)
        sql = "SELECT ntokens FROM run WHERE id = ANY(%s) AND ntokens IS NOT NULL"
        return [int(r[0]) for r in self.rows(sql, (wanted,))]

    def _runs_matching(self, match: str, query: str, low: int, limit: int, where: RunFilter) -> list[int]:
        join = " JOIN session s ON s.id = r.session_id" if where[0] != NO_FILTER[0] else ""
        sql = f"SELECT r.id FROM run r{join} WHERE {match} AND r.id > %s AND {where[0]} ORDER BY r.id DESC LIMIT %s"
        return [int(r[0]) for r in self.rows(sql, [query, low, *where[1], limit])]

    def _expected_in_window(self, tokens: list[QueryToken], all_of: bool = False) -> float:
        """Runs of the window expected to hold any (every) of the tokens (`ranking.expected_matches`)."""
        runs = self.counters().get("run_docs", 0)
        return expected_matches(tokens, self._run_df, runs, min(max(runs, 1), RUN_WINDOW), all_of)

    # --- after-write hooks (runs), as on the SQLite store ------------------------------------

    # session id -> new msg ids whose after-write hooks wait for an idle moment; None: run at once
    deferred_hooks: dict[str, list[int]] | None = None

    def defer_hooks(self) -> None:
        """Put off the after-write hooks of live writes (the bridge runs them when idle)."""
        self.deferred_hooks = {}

    def defer_checkpoints(self) -> None:
        """PostgreSQL checkpoints on its own schedule: nothing to put off."""

    def checkpoint(self) -> None:
        """An idle moment (a bridge's, `watch`'s): the server's word counts brought up to date on a
        thread and a connection of their own (`IdleWordCount`); there is no WAL to checkpoint here
        (see `defer_checkpoints`)."""
        self.idle_count.poke()

    @property
    def user_version(self) -> int:
        return self.schema_version()

    def db_bytes(self) -> int:
        return int(
            self.scalar("SELECT sum(pg_total_relation_size(to_regclass(t))) FROM unnest(%s::text[]) t", (list(TABLES),))
            or 0
        )


def _first_line(exc: BaseException, url: str) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return redact(line, _password_of(url))


def _password_of(url: str) -> str | None:
    try:
        from psycopg.conninfo import conninfo_to_dict

        value = conninfo_to_dict(url).get("password")
    except Exception:
        return None
    return str(value) if value else None
