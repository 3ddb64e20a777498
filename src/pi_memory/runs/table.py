"""Runs: one user message through every step up to the final reply, kept as rows with summaries.

Design idea: runs are derived data, computed from the archived messages by
`summary.segment` and `summary.summarize` (pure), and written here. They are
built on the one write path: `after_write` is a `storage.writes.AFTER_WRITE` hook, so
import and live capture both keep them current as messages arrive. Only the
session's tail is re-segmented (from the start of its last run, or from the
earliest new message if one landed earlier), and each run is written in its own
short transaction. A run's id (`r<N>`) is keyed on its session and first
message, so re-segmenting a tail keeps the ids of runs whose start did not move;
`AUTOINCREMENT` means a forgotten run's id is never handed out again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import ids, jsonline
from ..core.echo import is_recall_run, with_echo_token
from ..core.summary import LINE_MAX, RunMessage, RunSummary, is_final_reply, run_status, segment, summarize
from ..core.text import index_texts
from ..errors import NotFound
from ..storage.store import Store, decode_text, decompress
from ..storage.writes import AFTER_WRITE

# An optional summarizer (an LLM, say): (a closed run's messages, its rule-based summary) -> a
# better navigation line, or None to keep the rule-based one. Off by default and never needed;
# it is called outside any transaction, and a failure keeps the rule-based line.
Summarizer = Callable[[list[RunMessage], RunSummary], "str | None"]
SUMMARIZER: Summarizer | None = None
RUNS_PER_WRITE = 100  # runs written per transaction: a few ms, like an import batch
CONTENDED_RUNS_PER_WRITE = 10  # ... while live writers wait for the lock (`Store.contended`)
UPSERT_RUN_MSG = """INSERT INTO run_msg(msg_id, run_id, pos) VALUES (?,?,?)
                    ON CONFLICT(msg_id) DO UPDATE SET run_id=excluded.run_id, pos=excluded.pos"""
INSERT_RUN_FILE = "INSERT INTO run_file(path, run_id, msg_id, action) VALUES (?,?,?,?) ON CONFLICT DO NOTHING"


@dataclass
class RunInfo:
    id: int
    session_id: str
    cwd: str
    project: str
    start_ts: int
    end_ts: int
    status: str
    messages: int
    tool_calls: int
    tool_errors: int
    summary: str
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"r{self.id}"

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.address, **self.__dict__}


RUN_COLUMNS = """r.id, r.session_id, s.cwd, s.project, r.start_ts, r.end_ts, r.status, r.n_msgs,
                 r.tool_calls, r.tool_errors, r.summary, r.fields, r.first_msg"""
# A run's fields JSON whose message ids are counted from its first message (`"rel": 1`, first key):
# what a parse worker writes for a run it planned before the messages had ids (`planned.py`).
RELATIVE_IDS = "rel"


def run_from_row(row: tuple[Any, ...]) -> RunInfo:
    rid, sid, cwd, project, start, end, status, n_msgs, calls, errors, column, fields, first_msg = row
    loaded = load_fields(fields, int(first_msg))
    # the line lives in `fields` (see `write_run`); rows written before that have it in the column
    summary = column or str(loaded.get("line") or "")
    return RunInfo(rid, sid, cwd, project, start, end, status, n_msgs, calls, errors, summary, loaded)


def load_fields(value: str | bytes | None, first_msg: int) -> dict[str, Any]:
    """A run's fields as stored (`run.fields`, packed or not), with message ids as ids: those written
    counted from the run's first message (`RELATIVE_IDS`) have its id added back."""
    loaded = jsonline.loads(decode_text(value)) if value else {}
    if not isinstance(loaded, dict):
        return {}
    if loaded.pop(RELATIVE_IDS, None) == 1:
        _add_to_msgs(loaded, first_msg)
    return loaded


def _add_to_msgs(fields: dict[str, Any], base: int) -> None:
    """`base` added to every "msgs" list of the fields (in a field, or in a list of fields)."""
    for value in fields.values():
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, dict) and isinstance(item.get("msgs"), list):
                item["msgs"] = [base + int(d) for d in item["msgs"]]


# --- loading messages --------------------------------------------------------------


def _source_message(raw: bytes | None, text: str) -> dict[str, Any] | None:
    """The agent message inside a stored verbatim line."""
    if raw is None:
        return None
    try:
        return source_message(decompress(raw, text))
    except (ValueError, OSError):
        return None


def source_message(line: bytes | None) -> dict[str, Any] | None:
    """The agent message inside a verbatim line (a `message` entry, or the message itself)."""
    if line is None:
        return None
    try:
        data = jsonline.loads(line)
    except ValueError:
        return None
    return message_of(data)


def message_of(data: Any) -> dict[str, Any] | None:
    """The agent message inside a parsed verbatim line (`source_message` once parsed)."""
    if not isinstance(data, dict):
        return None
    inner = data.get("message")
    return inner if isinstance(inner, dict) else data


def load_messages(store: Store, session_id: str, after: tuple[int, int] | None = None) -> list[RunMessage]:
    """A session's messages in display order (ts, seq), from position `after` on (inclusive)."""
    sql = """SELECT m.id, m.entry_id, m.role, m.text, m.meta, e.raw, m.ts, m.seq
             FROM msg m LEFT JOIN entry e ON e.msg_id = m.id WHERE m.session_id = ?"""
    params: list[Any] = [session_id]
    if after is not None:
        sql += " AND (m.ts > ? OR (m.ts = ? AND m.seq >= ?))"
        params += [after[0], after[0], after[1]]
    sql += " ORDER BY m.ts, m.seq"
    out = []
    for msg_id, entry_id, role, text, meta, raw, ts, _seq in store.rows(sql, params):
        loaded = jsonline.loads(meta) if meta else {}
        words = decode_text(text)
        out.append(RunMessage(msg_id, entry_id, role, words, loaded, _source_message(raw, words), int(ts)))
    return out


# --- segmentation, incremental ----------------------------------------------------


def after_write(store: Store, added: dict[str, list[int]]) -> None:
    """The `AFTER_WRITE` hook (session id -> new msg ids): extend each open run, or re-segment
    the tail the new messages touch; the runs of all these sessions share write transactions.
    (A new session written whole by an import got the runs its parse worker planned, with its
    messages: `planned.write_planned`.)
    """
    with_runs = sessions_with_runs(store, list(added))
    tails = {
        session_id: _tail_start(store, session_id, new_ids)
        for session_id, new_ids in added.items()
        if session_id in with_runs and not _extend_open_run(store, session_id, new_ids)
    }
    # a session without runs yet is segmented from its beginning
    fresh = {session_id: None for session_id in added if session_id not in with_runs}
    if tails or fresh:
        segment_sessions(store, {**tails, **fresh}, set(fresh))


def sessions_with_runs(store: Store, session_ids: list[str]) -> set[str]:
    """The sessions among these that have a run already (one query for a whole write)."""
    sql = f"SELECT DISTINCT session_id FROM run WHERE {store.sql_in_list('session_id')}"
    return {str(r[0]) for r in store.rows(sql, (store.list_param(session_ids),))}


def _extend_open_run(store: Store, session_id: str, new_ids: list[int]) -> bool:
    """Live capture's common case in O(new messages): steps appended to a run that stays open.

    The summary of an open run (its goal) is refreshed when the run closes, so a
    500-step tool loop does not re-summarize its whole run at every step.
    """
    with store.read():
        tail = _open_run_tail(store, session_id)
        steps = _new_steps(store, new_ids)
    if tail is None or not steps:
        return False
    run_id, count, end = tail
    if (steps[0].ts, steps[0].seq) <= end:
        return False  # an earlier message arrived late: the full path puts it in its place
    if any(m.role in ("user", "summary") or is_final_reply(m) for m in steps):
        return False  # a new run, or this one closes: the full path segments and summarizes
    with store.write():
        _append_steps(store, run_id, count, steps)
    return True


@dataclass
class _Step(RunMessage):
    seq: int = 0


def _open_run_tail(store: Store, session_id: str) -> tuple[int, int, tuple[int, int]] | None:
    """(run id, message count, position of its last message) of the session's last run, if open."""
    rows = store.rows(
        """SELECT r.id, r.n_msgs, m.ts, m.seq FROM run r
           JOIN run_msg rm ON rm.run_id = r.id AND rm.pos = r.n_msgs JOIN msg m ON m.id = rm.msg_id
           WHERE r.status = 'open' AND r.id = (
             SELECT r2.id FROM run r2 JOIN msg m2 ON m2.id = r2.first_msg WHERE r2.session_id=?
             ORDER BY m2.ts DESC, m2.seq DESC LIMIT 1)""",
        (session_id,),
    )
    if not rows:
        return None
    run_id, count, ts, seq = (int(v) for v in rows[0])
    return run_id, count, (ts, seq)


def _new_steps(store: Store, new_ids: list[int]) -> list[_Step]:
    rows = store.rows(
        f"SELECT id, role, meta, ts, seq FROM msg WHERE {store.sql_in_list('id')} ORDER BY ts, seq",
        (store.list_param(new_ids),),
    )
    return [
        _Step(int(i), None, str(role), "", jsonline.loads(meta) if meta else {}, None, int(ts), int(seq))
        for i, role, meta, ts, seq in rows
    ]


def _append_steps(store: Store, run_id: int, count: int, steps: list[_Step]) -> None:
    store.executemany(UPSERT_RUN_MSG, [(m.msg_id, run_id, count + k) for k, m in enumerate(steps, start=1)])
    last_ts = max(m.ts for m in steps)
    store.execute(
        """UPDATE run SET n_msgs = n_msgs + ?, end_ts = CASE WHEN end_ts > ? THEN end_ts ELSE ? END,
             tool_calls = tool_calls + ?, tool_errors = tool_errors + ? WHERE id=?""",
        (
            len(steps),
            last_ts,
            last_ts,
            sum(len(m.meta.get("tools") or []) for m in steps),
            sum(1 for m in steps if m.role == "tool_error"),
            run_id,
        ),
    )


def _tail_start(store: Store, session_id: str, new_ids: list[int]) -> tuple[int, int] | None:
    """Where re-segmenting must begin: the start of the run holding the earliest changed position."""
    earliest = _earliest(store, new_ids) if new_ids else None
    last_run = store.rows(
        """SELECT m.ts, m.seq FROM run r JOIN msg m ON m.id = r.first_msg
           WHERE r.session_id=? ORDER BY m.ts DESC, m.seq DESC LIMIT 1""",
        (session_id,),
    )
    if not last_run:
        return None
    start = (int(last_run[0][0]), int(last_run[0][1]))
    if earliest is None or earliest >= start:
        return start
    holding = store.rows(
        """SELECT m.ts, m.seq FROM run r JOIN msg m ON m.id = r.first_msg
           WHERE r.session_id=? AND (m.ts < ? OR (m.ts = ? AND m.seq <= ?))
           ORDER BY m.ts DESC, m.seq DESC LIMIT 1""",
        (session_id, earliest[0], earliest[0], earliest[1]),
    )
    return (int(holding[0][0]), int(holding[0][1])) if holding else None


def _earliest(store: Store, msg_ids: list[int]) -> tuple[int, int] | None:
    rows = store.rows(
        f"SELECT ts, seq FROM msg WHERE {store.sql_in_list('id')} ORDER BY ts, seq LIMIT 1",
        (store.list_param(msg_ids),),
    )
    return (int(rows[0][0]), int(rows[0][1])) if rows else None


@dataclass
class PreparedRun:
    """A run computed outside any transaction, ready to write."""

    group: list[RunMessage]
    status: str
    summary: RunSummary
    search_text: str
    chars: str
    grams: str


def prepare_run(group: list[RunMessage], is_last: bool) -> PreparedRun:
    status = run_status(group, is_last)
    summary = summarize(group, status)
    if SUMMARIZER is not None and status != "open":
        _apply_summarizer(SUMMARIZER, group, summary)
    text = summary.search_text()
    chars, grams = index_texts(text)
    # a run that only asked the archive is an echo (`core.echo`): its summary carries the echo token
    echo = bool(chars or grams) and is_recall_run([(m.role, m.meta) for m in group])
    return PreparedRun(group, status, summary, text, str(with_echo_token(chars, echo)), grams)


def segment_from(store: Store, session_id: str, start: tuple[int, int] | None) -> list[int]:
    """Re-segment a session from `start` (None: from its beginning); returns the run ids written."""
    return segment_sessions(store, {session_id: start})


def segment_sessions(
    store: Store, starts: dict[str, tuple[int, int] | None], without_runs: set[str] | None = None
) -> list[int]:
    """Re-segment sessions, each from its start (None: from its beginning); returns the run ids written.

    `without_runs`: sessions known to have had no run before (nothing stale to look for).

    Everything is computed first, outside any transaction; then the runs of all the sessions are
    written `RUNS_PER_WRITE` to a short transaction. A bulk import's flush covers many sessions,
    and one transaction per session would cost a commit (and a new FTS5 segment) each.
    """
    plans: list[tuple[str, PreparedRun]] = []
    firsts: dict[str, set[int]] = {}
    for session_id, start in starts.items():
        with store.read():
            messages = load_messages(store, session_id, start)
        groups = segment(messages)
        plans += [(session_id, prepare_run(g, is_last=i == len(groups) - 1)) for i, g in enumerate(groups)]
        firsts[session_id] = {g[0].msg_id for g in groups}
    written = _write_plans(store, plans)
    stale = [session_id for session_id in starts if session_id not in (without_runs or ())]
    if stale:
        with store.write():
            for session_id in stale:
                _drop_stale_runs(store, session_id, starts[session_id], firsts[session_id])
    return written


def _write_plans(store: Store, plans: list[tuple[str, PreparedRun]]) -> list[int]:
    written: list[int] = []
    per_write = CONTENDED_RUNS_PER_WRITE if getattr(store, "contended", False) else RUNS_PER_WRITE
    for begin in range(0, len(plans), per_write):
        batch = plans[begin : begin + per_write]
        with store.write():
            rows = [write_run(store, session_id, p) for session_id, p in batch]
            # summaries are indexed after every upsert of the transaction: an upsert opens a
            # statement journal, which would make FTS5 flush a one-run segment each time
            for (run_id, was_indexed), (_sid, p) in zip(rows, batch, strict=True):
                if was_indexed:
                    _unindex_summary(store, run_id)
                _index_summary(store, run_id, p)
            written += [run_id for run_id, _ in rows]
    return written


def _apply_summarizer(summarizer: Summarizer, group: list[RunMessage], summary: RunSummary) -> None:
    try:
        line = summarizer(group, summary)
    except Exception:  # noqa: BLE001 - an accessory must never break the write path
        return
    if line and line.strip():
        text = " ".join(line.split())
        summary.line = text if len(text) <= LINE_MAX else text[: LINE_MAX - 1] + "…"
        summary.line_by = "summarizer"


def _drop_stale_runs(store: Store, session_id: str, start: tuple[int, int] | None, keep_firsts: set[int]) -> None:
    """Runs in the re-segmented tail whose first message no longer starts a run."""
    sql = "SELECT r.id, r.first_msg FROM run r LEFT JOIN msg m ON m.id = r.first_msg WHERE r.session_id=?"
    params: list[Any] = [session_id]
    if start is not None:
        sql += " AND (m.id IS NULL OR m.ts > ? OR (m.ts = ? AND m.seq >= ?))"
        params += [start[0], start[0], start[1]]
    for run_id, first in store.rows(sql, params):
        if first not in keep_firsts:
            delete_run_rows(store, int(run_id))


def write_run(store: Store, session_id: str, run: PreparedRun) -> tuple[int, bool]:
    """Insert or update one run (inside a write transaction); its summary is indexed by the caller.

    Returns the run id and whether an older summary of it is in the index.
    """
    group, summary = run.group, run.summary
    fields = json.dumps(summary.to_dict(), ensure_ascii=False, separators=(",", ":"))
    tool_errors = sum(1 for m in group if m.role == "tool_error")
    times = [m.ts for m in group]
    row = store.rows(
        """INSERT INTO run(session_id, first_msg, start_ts, end_ts, status, n_msgs, tool_calls, tool_errors, summary, fields)
           VALUES (?,?,?,?,?,?,?,?,?,?)
           ON CONFLICT(session_id, first_msg) DO UPDATE SET start_ts=excluded.start_ts, end_ts=excluded.end_ts,
             status=excluded.status, n_msgs=excluded.n_msgs, tool_calls=excluded.tool_calls,
             tool_errors=excluded.tool_errors, summary=excluded.summary, fields=excluded.fields
           RETURNING id, indexed_chars""",
        (
            session_id,
            group[0].msg_id,
            min(times),
            max(times),
            run.status,
            len(group),
            summary.tool_calls,
            tool_errors,
            # the navigation line is kept once, in the packed `fields` ("line"): the plain column
            # would cost ~90 B a message; it stays (NOT NULL, empty) and `run_from_row` reads either
            "",
            store.stored_text(fields),
        ),
    )[0]
    run_id = int(row[0])
    store.executemany(UPSERT_RUN_MSG, [(m.msg_id, run_id, k) for k, m in enumerate(group, start=1)])
    _write_files(store, run_id, summary)
    return run_id, int(row[1]) >= 0


def _write_files(store: Store, run_id: int, summary: RunSummary) -> None:
    store.execute("DELETE FROM run_file WHERE run_id=?", (run_id,))
    store.executemany(INSERT_RUN_FILE, [(path, run_id, msg_id, action) for path, msg_id, action in file_rows(summary)])


def file_rows(summary: RunSummary) -> list[tuple[str, int, str]]:
    """(path, msg id, action) of every file the run read or changed, per message that did."""
    rows = []
    for action, files in (("read", summary.files_read), ("changed", summary.files_changed)):
        for f in files:
            rows += [(f.text, msg_id, action) for msg_id in f.msgs]
    return rows


def _index_summary(store: Store, run_id: int, run: PreparedRun) -> None:
    store.index_run_summary(run_id, run.chars, run.grams)
    store.execute("UPDATE run SET indexed_chars=? WHERE id=?", (len(run.search_text), run_id))
    store.add_to_counters({"run_docs": 1, "run_chars": len(run.search_text)})


def _unindex_summary(store: Store, run_id: int) -> None:
    chars = store.scalar("SELECT indexed_chars FROM run WHERE id=?", (run_id,))
    if chars is None or int(chars) < 0:
        return
    store.unindex_run_summary(run_id)
    store.add_to_counters({"run_docs": -1, "run_chars": -int(chars)})
    store.execute("UPDATE run SET indexed_chars=-1 WHERE id=?", (run_id,))


def delete_run_rows(store: Store, run_id: int) -> None:
    """A run and everything derived from it (its messages stay; inside a write transaction)."""
    _unindex_summary(store, run_id)
    store.execute("DELETE FROM vec WHERE kind = 2 AND ref = ?", (run_id,))  # its summary's embedding (`vectors.keyed`)
    store.execute("DELETE FROM run_file WHERE run_id=?", (run_id,))
    store.execute("DELETE FROM run_msg WHERE run_id=?", (run_id,))
    store.execute("DELETE FROM run WHERE id=?", (run_id,))


def rebuild(store: Store, session_id: str | None = None) -> int:
    """Re-segment and re-summarize every session (or one); returns how many runs there are now."""
    ids = [session_id] if session_id else [str(r[0]) for r in store.rows("SELECT id FROM session ORDER BY started_at")]
    for sid in ids:
        segment_from(store, sid, None)
    return int(store.scalar("SELECT count(*) FROM run") or 0)


# --- reading runs ------------------------------------------------------------------


def parse_run_id(value: str) -> int:
    """`r12` -> 12 (the one id parser's: `core.ids`)."""
    return ids.run_id(value)


def get_run(store: Store, run_id: int) -> RunInfo:
    rows = store.rows(f"SELECT {RUN_COLUMNS} FROM run r JOIN session s ON s.id = r.session_id WHERE r.id=?", (run_id,))
    if not rows:
        raise NotFound(f"no run r{run_id}")
    return run_from_row(rows[0])


def run_filters(project: str | None, since_ms: int | None, session_id: str | None) -> tuple[list[str], list[Any]]:
    """SQL clauses (over `run r JOIN session s`) for the filters every run listing shares."""
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    if project:
        clauses.append("(s.project = ? OR s.cwd = ?)")
        params += [project, project]
    if since_ms:
        clauses.append("r.start_ts >= ?")
        params.append(since_ms)
    if session_id:
        clauses.append("r.session_id = ?")
        params.append(session_id)
    return clauses, params


def list_runs(
    store: Store,
    project: str | None = None,
    since_ms: int | None = None,
    session_id: str | None = None,
    limit: int = 20,
) -> list[RunInfo]:
    """Newest runs first."""
    clauses, params = run_filters(project, since_ms, session_id)
    sql = f"""SELECT {RUN_COLUMNS} FROM run r JOIN session s ON s.id = r.session_id
              WHERE {" AND ".join(clauses)} ORDER BY r.start_ts DESC, r.id DESC LIMIT ?"""
    return [run_from_row(row) for row in store.rows(sql, params + [max(1, min(int(limit), 1000))])]


def run_message_ids(store: Store, run_id: int) -> list[int]:
    return [int(r[0]) for r in store.rows("SELECT msg_id FROM run_msg WHERE run_id=? ORDER BY pos", (run_id,))]


def address_of(store: Store, msg_id: int) -> str | None:
    rows = store.rows("SELECT run_id, pos FROM run_msg WHERE msg_id=?", (msg_id,))
    return f"r{rows[0][0]}/m{rows[0][1]}" if rows else None


AFTER_WRITE.append(after_write)  # runs are built as messages are written
