"""The memory log on PostgreSQL: the same chains, projection and policy, PostgreSQL's locking.

Design idea: `MemoryLog` (pi_memory.memory.log) holds every rule: reading a
chain's tail, replaying it, judging and sealing the next event, verifying,
importing, repairing. Only its SQL primitives differ here. Every write runs in
one transaction that first takes `pg_advisory_xact_lock(hashtext(workspace))`,
so two writers to one workspace append one after the other (seq N+1 always
follows the hash of seq N) while writers to other workspaces do not wait; the
`(chain, seq)` primary key would refuse a second seq N even without the lock.
Triggers refuse UPDATE, DELETE and TRUNCATE (migration m002_memory_log).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from ..memory.chain import ChainRow
from ..memory.log import Appended, Builder, ImportResult, MemoryLog, RepairResult, now_ms
from ..store import Store
from .store import PgStore


class PgMemoryLog(MemoryLog):
    """`MemoryLog` whose writes are serialized per workspace by an advisory transaction lock."""

    def __init__(self, pg: PgStore) -> None:
        super().__init__(cast(Store, pg))  # the inherited code calls only read(), write(), rows(), scalar()
        self.pg = pg

    # --- writes: one outer transaction holding the workspace's lock -------------------

    def append(self, workspace: str, build: Builder) -> Appended:
        with self.pg.errors(), self.pg.write():
            self.pg.lock_workspace(workspace)
            return super().append(workspace, build)

    def import_rows(self, workspace: str, rows: Sequence[ChainRow], torn: bool = False) -> ImportResult:
        with self.pg.errors(), self.pg.write():
            self.pg.lock_workspace(workspace)
            return super().import_rows(workspace, rows, torn)

    def repair(self, workspace: str, source: Sequence[ChainRow] | None = None) -> RepairResult:
        with self.pg.errors(), self.pg.write():
            self.pg.lock_workspace(workspace)
            return super().repair(workspace, source)

    # --- SQL primitives -----------------------------------------------------------------

    def active_chain(self, workspace: str) -> int | None:
        value = self.pg.scalar("SELECT max(id) FROM memory_chain WHERE workspace=%s", (workspace,))
        return int(value) if value is not None else None

    def chain_rows(self, chain: int | None) -> list[ChainRow]:
        if chain is None:
            return []
        rows = self.pg.rows(
            "SELECT seq, prev_hash, hash, event FROM memory_event WHERE chain=%s ORDER BY seq", (chain,)
        )
        return [ChainRow(int(s), str(p), str(h), str(e)) for s, p, h, e in rows]

    def workspaces(self) -> list[str]:
        return [str(r[0]) for r in self.pg.rows("SELECT DISTINCT workspace FROM memory_chain ORDER BY workspace")]

    def workspaces_holding(self, memory_id: str) -> list[str]:
        if not memory_id.startswith("mem_") or not memory_id[4:].isalnum():
            return []
        sql = """SELECT DISTINCT c.workspace FROM memory_event e JOIN memory_chain c ON c.id = e.chain
                 WHERE strpos(e.event, %s) > 0
                   AND c.id = (SELECT max(id) FROM memory_chain WHERE workspace = c.workspace)"""
        return sorted(str(r[0]) for r in self.pg.rows(sql, (f'"id":"{memory_id}"',)))

    def _new_chain(self, workspace: str, note: str) -> int:
        row = self.pg.conn.execute(
            "INSERT INTO memory_chain(workspace, created_at, note, author, host) VALUES (%s,%s,%s,%s,%s) RETURNING id",
            (workspace, now_ms(), note, self.pg.author, self.pg.host),
        ).fetchone()
        assert row is not None
        return int(row[0])

    def _insert(self, chain: int, row: ChainRow) -> None:
        self.pg.conn.execute(
            """INSERT INTO memory_event(chain, seq, prev_hash, hash, event, author, host)
               VALUES (%s,%s,%s,%s,%s,%s,%s)""",
            (chain, row.seq, row.prev_hash, row.hash, row.event, self.pg.author, self.pg.host),
        )
