"""The `edit` rows: planned with a file's import, read back after live and incremental writes,
backfilled once for older archives; and what pi's extension observed as an edit ran.

Design idea: edits are derived data, like runs, kept current on the one write path. A session
file imported whole had its edits planned by the parse worker (`extract.plan_file`); they are
written before its messages, in a transaction of their own, keyed by the messages' content
hashes, so a kill between the two leaves rows that simply wait for their messages (the next
import brings them, and the rows are there). Everything else (live capture, `watch`, new
messages of a session the archive had) passes the `AFTER_WRITE` hook, which reads the few new
messages that can hold an edit call or result (by role and stored meta) and pairs them, looking
back in the session for a result's call. Writes are idempotent (`ON CONFLICT DO NOTHING` on the
call and the change), so any path may see an edit twice.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from typing import Any

from ..storage.store import Store, decode_text, decompress
from ..storage.writes import AFTER_WRITE
from .extract import EDIT_TOOLS, SHELL_TOOLS, MessageLines, pair_edits, source_lines

INSERT_EDIT = """INSERT INTO edit(session_id, call_hash, result_hash, call_id, part, tool, kind, path, from_path, ts,
                                  old_hash, new_hash, old_lines, new_lines, line)
                 VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING"""
LOOK_BACK = 200  # messages before a tool result searched for its call (a run's tool loop is shorter)
BACKFILL_BATCH = 2000  # messages read per step of the backfill
SNAPSHOT_MAX = 512 * 1024  # a file larger than this is observed by its hashes only
PlannedEdits = list[tuple[Any, ...]]  # `extract.plan_file`'s rows: INSERT_EDIT's values after the session id


def write_planned(store: Store, planned: list[tuple[str, PlannedEdits]]) -> int:
    """The planned edits of imported files, in one transaction (before their messages)."""
    rows = [(session_id, *row) for session_id, edits in planned for row in edits]
    if rows:
        with store.write():
            store.executemany(INSERT_EDIT, rows)
    return len(rows)


# --- reading back new messages ----------------------------------------------------------------


def after_write(store: Store, added: dict[str, list[int]]) -> None:
    """The `AFTER_WRITE` hook: the edits among new messages (session id -> their ids)."""
    for session_id, msg_ids in added.items():
        record_messages(store, session_id, msg_ids)


def _names(meta: dict[str, Any]) -> set[str]:
    return {str(t).lower() for t in [meta.get("tool"), *(meta.get("tools") or ())] if t}


def _candidate(role: str, meta_json: str | None, text: Any) -> bool:
    """`extract.may_edit` from stored values, decoding the text only where it decides."""
    if role not in ("assistant", "tool_result", "tool_error") or not meta_json:
        return False
    names = _names(json.loads(meta_json))
    if names & EDIT_TOOLS or (role != "assistant" and names == {"tool"}):
        return True
    if not names & SHELL_TOOLS:
        return False
    words = decode_text(text)
    return "apply_patch" in words or (role != "assistant" and "Updated the following files" in words)


_COLUMNS = "m.id, m.hash, m.role, m.ts, m.seq, m.meta, m.text"


def record_messages(store: Store, session_id: str, msg_ids: list[int]) -> int:
    """Pair the edit calls and results among these messages of one session (and the calls their
    results answer, looked up before them) and write the edits; returns how many rows were new."""
    with store.read():
        rows = store.rows(
            f"SELECT {_COLUMNS} FROM msg m WHERE {store.sql_in_list('m.id')}", (store.list_param(msg_ids),)
        )
        found = [r for r in rows if _candidate(str(r[2]), r[5], r[6])]
        if not found:
            return 0
        messages = _with_lines(store, found)
        earlier = _calls_before(store, session_id, messages, found)
    hashes = {int(r[0]): str(r[1]) for r in found + earlier[1]}
    return _write(store, session_id, earlier[0] + messages, hashes)


def _with_lines(store: Store, rows: list[tuple[Any, ...]]) -> list[MessageLines]:
    """Each message with its source lines (its verbatim copy), in display order."""
    ids = [int(r[0]) for r in rows]
    raws = {
        int(mid): (raw, text)
        for mid, raw, text in store.rows(
            f"""SELECT m.id, e.raw, m.text FROM msg m JOIN entry e ON e.msg_id = m.id
                WHERE {store.sql_in_list("m.id")}""",
            (store.list_param(ids),),
        )
    }
    out = []
    for r in sorted(rows, key=lambda r: (int(r[3]), int(r[4]))):
        raw, text = raws.get(int(r[0]), (None, None))
        lines = list(source_lines(decompress(raw, text))) if raw is not None else []
        out.append(MessageLines(int(r[0]), int(r[3]), lines))
    return out


def _calls_before(
    store: Store, session_id: str, messages: list[MessageLines], rows: list[tuple[Any, ...]]
) -> tuple[list[MessageLines], list[tuple[Any, ...]]]:
    """The messages that made the calls these results answer, when they are not among them (and
    their rows)."""
    from .extract import tool_calls, tool_outcomes

    have = {c.call_id for m in messages for line in m.lines for c in tool_calls(line)}
    waiting = [
        m for m in messages for line in m.lines for o in tool_outcomes(line) if o.call_id and o.call_id not in have
    ]
    if not waiting:
        return [], []
    first = min((int(r[3]), int(r[4])) for r in rows if int(r[0]) in {m.key for m in waiting})
    before = store.rows(
        f"""SELECT {_COLUMNS} FROM msg m WHERE m.session_id = ? AND m.role = 'assistant'
            AND (m.ts < ? OR (m.ts = ? AND m.seq < ?)) ORDER BY m.ts DESC, m.seq DESC LIMIT ?""",
        (session_id, first[0], first[0], first[1], LOOK_BACK),
    )
    calls = [r for r in before if _candidate(str(r[2]), r[5], r[6])]
    return _with_lines(store, calls), calls


def _write(store: Store, session_id: str, messages: list[MessageLines], hashes: dict[int, str]) -> int:
    """Pair the messages (msg id -> hash in `hashes`) and write the edits they made."""
    records = pair_edits(messages, _session_cwd(store, session_id))
    rows = [
        (session_id, hashes[r.call_key], hashes.get(r.result_key) if r.result_key is not None else None, *r.row())
        for r in records
    ]
    if not rows:
        return 0
    with store.write():
        before = _count(store, session_id)
        store.executemany(INSERT_EDIT, rows)
        return _count(store, session_id) - before


def _count(store: Store, session_id: str) -> int:
    return int(store.scalar("SELECT count(*) FROM edit WHERE session_id = ?", (session_id,)) or 0)


def _session_cwd(store: Store, session_id: str) -> str:
    return str(store.scalar("SELECT cwd FROM session WHERE id = ?", (session_id,)) or "")


# --- older archives -------------------------------------------------------------------------------


def backfilled(store: Store) -> bool:
    return bool(store.scalar("SELECT value FROM provenance_state WHERE name = 'backfilled'"))


def backfill(store: Store, progress: Callable[[int, int], None] | None = None) -> int:
    """The edits of every archived message (an archive from before m010, or `rebuild`): each
    session's candidates read in batches, in short transactions; idempotent. Returns new rows."""
    sessions = [str(r[0]) for r in store.rows("SELECT id FROM session ORDER BY started_at, id")]
    added = 0
    for done, session_id in enumerate(sessions, start=1):
        added += _backfill_session(store, session_id)
        if progress is not None:
            progress(done, len(sessions))
    with store.write():
        store.execute("UPDATE provenance_state SET value = 1 WHERE name = 'backfilled'")
    return added


def _backfill_session(store: Store, session_id: str) -> int:
    with store.read():
        rows = store.rows(
            f"""SELECT {_COLUMNS} FROM msg m WHERE m.session_id = ?
                AND m.role IN ('assistant', 'tool_result', 'tool_error') ORDER BY m.ts, m.seq""",
            (session_id,),
        )
        found = [r for r in rows if _candidate(str(r[2]), r[5], r[6])]
        if not found:
            return 0
        messages = _with_lines(store, found)
    return _write(store, session_id, messages, {int(r[0]): str(r[1]) for r in found})


# --- what pi's extension saw ---------------------------------------------------------------------


def observe(
    store: Store,
    session_id: str,
    call_id: str,
    path: str,
    before_hash: str | None,
    after_hash: str | None,
    git_commit: str | None,
    observed_at: int,
    before_text: str | None,
) -> bool:
    """Keep what the extension saw of one change as it ran; the file as it was before the change
    only when it differs from what the archive last saw of it (or it never saw it): the changes
    something else made in between, which blame must not give to a session. True: kept a snapshot."""
    with store.write():
        last = store.rows(
            "SELECT after_hash FROM edit_observed WHERE path = ? AND observed_at <= ? ORDER BY observed_at DESC LIMIT 1",
            (path, observed_at),
        )
        known = bool(last) and last[0][0] is not None and last[0][0] == before_hash
        keep = (
            before_text is not None and not known and len(before_text.encode("utf-8", "surrogatepass")) <= SNAPSHOT_MAX
        )
        snapshot = (
            zlib.compress(before_text.encode("utf-8", "surrogatepass")) if keep and before_text is not None else None
        )
        store.execute(
            """INSERT INTO edit_observed(session_id, call_id, path, before_hash, after_hash, git_commit, observed_at, before_text)
               VALUES (?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING""",
            (session_id, call_id, path, before_hash, after_hash, git_commit, observed_at, snapshot),
        )
    return snapshot is not None


AFTER_WRITE.append(after_write)  # edits are read back as messages are written
