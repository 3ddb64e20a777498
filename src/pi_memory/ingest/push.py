"""`push`: copy a local SQLite archive to the team archive, idempotently and resumably.

Design idea: nothing new is needed to make a copy safe to repeat, because
every message already carries its content hash and the team archive refuses a
second `(session_id, hash)`. A push walks the local sessions and compares a
per-session watermark, (message count, digest of the sorted hashes, entry
count), computed on both sides; a session whose watermark matches is skipped
without reading its text. Any other session sends only the messages whose
hashes the team archive lacks, through the same write path as an import, in
short transactions of at most `BATCH` messages. A push cut off halfway has
committed whole transactions only, so the next run sends exactly the rest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core import jsonline
from ..storage.pg.store import PgStore
from ..storage.store import NewEntry, NewMessage, SessionRow, Store, compress, decode_text, decompress
from ..storage.usage import COLUMNS as USAGE_COLUMNS
from ..storage.writes import BATCH, SessionWrite

SESSIONS_PER_ROUND = 200  # sessions whose watermarks are compared in one query
FLUSH_MESSAGES = 5 * BATCH  # messages gathered before they are written


@dataclass
class PushReport:
    sessions: int = 0  # local sessions looked at
    unchanged: int = 0  # already complete on the team archive
    added: int = 0  # messages added to the team archive
    skipped: int = 0  # messages the team archive already had
    words_counted: int = 0  # words the team server counted for search after it (m018), if it added any

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Watermark:
    messages: int
    digest: str
    entries: int


def digest(hashes: list[str]) -> str:
    """md5 of the sorted hashes joined by commas: the same on both sides (PostgreSQL computes it itself)."""
    return hashlib.md5(",".join(sorted(hashes)).encode(), usedforsecurity=False).hexdigest()


def local_watermarks(local: Store, session_ids: list[str]) -> dict[str, Watermark]:
    marks: dict[str, Watermark] = {}
    for sid in session_ids:
        hashes = [str(r[0]) for r in local.rows("SELECT hash FROM msg WHERE session_id=?", (sid,))]
        entries = int(local.scalar("SELECT count(*) FROM entry WHERE session_id=? AND msg_id IS NULL", (sid,)) or 0)
        marks[sid] = Watermark(len(hashes), digest(hashes), entries)
    return marks


def team_watermarks(team: PgStore, session_ids: list[str]) -> dict[str, Watermark]:
    rows = team.rows(
        """SELECT s.id,
                  (SELECT count(*) FROM msg WHERE session_id = s.id),
                  (SELECT md5(coalesce(string_agg(hash, ',' ORDER BY hash COLLATE "C"), '')) FROM msg
                    WHERE session_id = s.id),
                  (SELECT count(*) FROM entry WHERE session_id = s.id AND msg_id IS NULL)
           FROM session s WHERE s.id = ANY(%s)""",
        (session_ids,),
    )
    return {str(r[0]): Watermark(int(r[1]), str(r[2]), int(r[3])) for r in rows}


def plan_session(local: Store, team: PgStore, row: SessionRow) -> SessionWrite:
    """The session's messages and entries the team archive lacks, tokenized and ready to write."""
    have = set(team.existing_hashes(row.id))
    messages: list[NewMessage] = []
    for r in local.rows(
        """SELECT m.ts, m.role, m.text, m.indexed, m.entry_id, m.parent_id, m.meta, m.hash, e.raw, e.type
           FROM msg m LEFT JOIN entry e ON e.msg_id = m.id WHERE m.session_id=? ORDER BY m.id""",
        (row.id,),
    ):
        if r[7] in have:
            continue
        meta = jsonline.loads(r[6]) if r[6] else {}
        text = decode_text(r[2])
        m = NewMessage(row.id, r[0], r[1], text, bool(r[3]), r[4], r[5], meta if isinstance(meta, dict) else {}, r[7])
        if r[8] is not None:
            m.raw, m.entry_type = decompress(r[8], text), str(r[9])
            m.packed_raw = compress(m.raw)  # as the team archive keeps it, outside the transaction
        m.prepare()
        messages.append(m)
    entries = [
        NewEntry(row.id, str(k), eid, str(t), int(ts), decompress(raw))
        for k, eid, t, ts, raw in local.rows(
            "SELECT entry_key, entry_id, type, ts, raw FROM entry WHERE session_id=? AND msg_id IS NULL", (row.id,)
        )
    ]
    unit = SessionWrite(row.id, messages, entries, row)
    # its model requests as priced here (the team archive ignores those it has: keyed by request)
    unit.usage = [tuple(r) for r in local.rows(f"SELECT {USAGE_COLUMNS} FROM usage WHERE session_id=?", (row.id,))]
    return unit


def push(local: Store, team: PgStore, progress: Callable[[PushReport], None] | None = None) -> PushReport:
    """Copy every local session the team archive does not fully hold yet."""
    report = PushReport()
    rows = [
        SessionRow(*r)
        for r in local.rows(
            """SELECT id, agent, cwd, project, started_at, last_at, name, parent_session, source_path
               FROM session ORDER BY id"""
        )
    ]
    with team.merging_in_steps():  # the token indexes' pending lists merged once, at the end
        for start in range(0, len(rows), SESSIONS_PER_ROUND):
            _push_round(local, team, rows[start : start + SESSIONS_PER_ROUND], report)
            if progress:
                progress(report)
    if report.added:  # the words the push brought counted now, not at some member's idle moment
        report.words_counted = max(team.count_words(), 0)
    return report


def _push_round(local: Store, team: PgStore, rows: list[SessionRow], report: PushReport) -> None:
    ids = [r.id for r in rows]
    mine, theirs = local_watermarks(local, ids), team_watermarks(team, ids)
    pending: list[SessionWrite] = []
    size = 0
    for row in rows:
        report.sessions += 1
        if theirs.get(row.id) == mine[row.id]:
            report.unchanged += 1
            report.skipped += mine[row.id].messages
            continue
        unit = plan_session(local, team, row)
        report.skipped += mine[row.id].messages - len(unit.messages)
        pending.append(unit)
        size += len(unit.messages)
        if size >= FLUSH_MESSAGES:
            _flush(team, pending, report)
            pending, size = [], 0
    _flush(team, pending, report)


def _flush(team: PgStore, pending: list[SessionWrite], report: PushReport) -> None:
    if pending:
        added, skipped = team.write_sessions(pending)
        report.added += added
        report.skipped += skipped
