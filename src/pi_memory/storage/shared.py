"""The store calls whose SQL is the same on SQLite and PostgreSQL, written once (`SharedSql`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .codec import compress, decode_text

# a condition over `run r JOIN session s` and its parameters (runsearch's filters)
RunFilter = tuple[str, Sequence[Any]]
NO_FILTER: RunFilter = ("TRUE", ())


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

    def stored_text(self, value: str) -> str | bytes:
        """Long derived text (a run's fields JSON) as this backend keeps it: PostgreSQL plain, SQLite packed.

        Read back with `decode_text`, which takes either.
        """
        return value

    def msg_token_counts(self, msg_ids: Sequence[int]) -> dict[int, int]:
        """msg id -> `ranking.doc_tokens` counted at write time, where the backend keeps it (else {})."""
        return {}

    index_deferred = False  # live writes leave indexing to `index_pending` (SQLite's `Store.defer_hooks`)

    def index_pending(self) -> int:
        """Index the messages whose index entry waited (`INDEX_PENDING`); how many. None on this backend."""
        return 0

    def index_own_pending(self) -> int:
        """`index_pending` for this connection's own live writes; none on this backend either."""
        return 0

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

    def message_counts(self, session_ids: list[str]) -> dict[str, int]:
        """How many messages each of these sessions has (one query for a whole write)."""
        sql = f"SELECT session_id, count(*) FROM msg WHERE {self.sql_in_list('session_id')} GROUP BY session_id"
        return {str(s): int(n) for s, n in self.rows(sql, (self.list_param(session_ids),))}

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
