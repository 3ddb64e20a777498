"""An import's full-text merges: in bounded steps, wider levels while it runs, put back after.

A mixin of `Store` (its connection, `write`, `scalar`, `rows`, `counters`). Design idea: FTS5's
automerge merges in bursts inside ordinary commits, which a live writer beside an import would
wait out; so an import turns it off, merges itself in steps of `MERGE_STEP_PAGES` pages, one
transaction each, with levels of `IMPORT_MERGE_RULE` segments while it writes, and at its end
merges each index as its own rule keeps it, or into one segment when the import wrote most of it.
Every setting it changes is recorded in `counter` first, so a killed import's next opening gives
it back (`restore_automerge`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from .presence import ImportPresence

if TYPE_CHECKING:
    import apsw

# The full-text indexes, and the pages of merging one step does in its own transaction while an
# import merges them in steps (`merging_in_steps`): p99 ~18 ms here, below an import's own writes
# (p99 ~30 ms), so a live writer waits no longer for them. 50 pages: p99 ~10 ms, but 1,002
# transactions instead of 887 on 20k messages and a 4% slower import.
FTS_INDEXES = ("msg_fts", "run_fts", "msg_typed")
MERGE_STEP_PAGES = 100
CONTENDED_MERGE_PAGES = 16  # ... while live writers wait for the lock (`Store.contended`): a step of ~3 ms
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


def _merge_rule(automerge: int) -> int:
    """The automerge an index had (-1: FTS5's default, 4); 0 (an import's own) counts as the default."""
    return automerge if automerge > 0 else 4


def merge_step(conn: apsw.Connection, table: str, pages: int) -> bool:
    """One FTS5 merge of up to `pages` pages of `table` (negative: toward one segment of them all),
    inside the caller's transaction; whether it did any work."""
    before = conn.total_changes()
    conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', {pages})")
    return conn.total_changes() - before >= 2  # FTS5's sign that a merge did work


class ImportMerging:
    """`merging_in_steps`, `merge_steps`, `shrink` and `restore_automerge`."""

    conn: apsw.Connection
    presence: ImportPresence

    if TYPE_CHECKING:

        def write(self) -> AbstractContextManager[None]: ...

        def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

        def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def counters(self) -> dict[str, int]: ...

        @property
        def contended(self) -> bool: ...

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
        try:
            with self.presence.importing():  # before its record: an opening then leaves the settings alone
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
                yield
                with self.write():
                    for table in FTS_INDEXES:
                        self._set_merge_rule(table, self._rule_before_import(table))
                self.merge_steps(whole=self._mostly_new(before))  # in steps still
                self.shrink()  # the pages those merges freed
        finally:
            self.restore_automerge()  # unless another import is still under way: then at its end

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
        was = self.scalar("SELECT value FROM counter WHERE name = ?", (_AUTOMERGE_WAS + table,))
        return _merge_rule(-1 if was is None else int(was))  # None: a store without the presence lock gave it back

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
            while True:
                size = CONTENDED_MERGE_PAGES if self.contended else MERGE_STEP_PAGES
                pages = -size if table in whole else size
                with self.write():
                    worked = merge_step(self.conn, table, pages)
                steps += 1
                if not worked:
                    break
        return steps

    def restore_automerge(self) -> None:
        """Give the full-text indexes back the automerge an import turned off (see `merging_in_steps`),
        unless an import is under way (`presence.py`): it was not killed, it gives them back at its end."""
        rows = self.rows(
            "SELECT name, value FROM counter WHERE name >= ? AND name < ?", (_AUTOMERGE_WAS, _AUTOMERGE_WAS + "\uffff")
        )
        if not rows:
            return
        with self.presence.none_importing() as alone:
            if alone:
                self._give_back_automerge()

    def _give_back_automerge(self) -> None:
        rows = self.rows(
            "SELECT name, value FROM counter WHERE name >= ? AND name < ?", (_AUTOMERGE_WAS, _AUTOMERGE_WAS + "\uffff")
        )
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
