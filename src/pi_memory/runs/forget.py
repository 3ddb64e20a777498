"""Forget: delete a session, a run or a message for real, and keep it forgotten.

Design idea: forgetting must leave nothing findable. The message rows, their
verbatim source lines (`entry`), their full-text entries (`msg_fts`, a
contentless table with `contentless_delete`, so a row can be removed by rowid),
their embeddings (`vec`: the messages', and those of the summaries of the runs they were in; the
facade then removes the scan index beside the file)
and everything derived from them (runs, summaries, the summary index, file
paths, the session's first-user preview, the model requests the messages
recorded and their usage sums) go, and the index counters are corrected. A
tombstone per forgotten message (session id + content hash, the same key that
makes writes idempotent; `*` for a whole session; a forgotten request's usage
key) is kept, and the importer consults it, so re-importing the source file,
which pi may still have on disk, does not bring the text back unless
`--include-forgotten` is given.
Deletion runs in short transactions of `CHUNK` messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import ids
from ..core.format import plural
from ..errors import BadInput, NotFound
from ..storage.store import Store
from . import table as runs

CHUNK = 500
MIN_PREFIX = 8  # a session prefix this long may be all digits
WHOLE_SESSION = "*"


@dataclass
class ForgetPlan:
    """What a target names, counted before anything is deleted (for the confirmation)."""

    target: str
    kind: str  # session, run, message
    session_id: str
    msg_ids: list[int] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)

    def describe(self) -> str:
        what = {"session": f"session {self.session_id}", "run": f"run r{self.run_ids[0]}" if self.run_ids else "run"}
        label = what.get(self.kind, f"message {self.msg_ids[0]}" if self.msg_ids else "message")
        return f"{label}: {plural(len(self.msg_ids), 'message')}, {plural(len(self.run_ids), 'run')}"

    def after_note(self) -> str:
        """What happens to it afterwards, for the confirmation line."""
        return "a re-import will not bring it back (unless --include-forgotten)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "kind": self.kind,
            "session_id": self.session_id,
            "messages": len(self.msg_ids),
            "runs": len(self.run_ids),
        }


def plan_target(store: Store, target: str, resolve_session: Callable[[str], str]) -> ForgetPlan:
    """`rN` is a run, digits a msg id (unless they are also a session prefix), anything else a session."""
    target = ids.reference(target, "what to forget")
    if ids.is_address(target) and "/" not in target:
        return plan_run(store, ids.run_id(target))
    if target.isascii() and target.isdigit():
        msg_id = ids.number(target, "message id")
        is_message = store.scalar("SELECT 1 FROM msg WHERE id=?", (msg_id,)) is not None
        # digits only: LIKE needs no escaping; a session's short id (its last 8 characters) may be all digits
        prefix_of = store.scalar(
            "SELECT 1 FROM session WHERE id LIKE ? OR id LIKE ? LIMIT 1", (target + "%", "%" + target)
        )
        if is_message and prefix_of and len(target) >= MIN_PREFIX:
            raise BadInput(f"{target!r} is both a msg id and part of a session id: give the whole session id")
        if is_message or not prefix_of or len(target) < MIN_PREFIX:
            return plan_message(store, msg_id)
    return plan_session(store, resolve_session(target))


def plan_session(store: Store, session_id: str) -> ForgetPlan:
    msg_ids = [int(r[0]) for r in store.rows("SELECT id FROM msg WHERE session_id=?", (session_id,))]
    run_ids = [int(r[0]) for r in store.rows("SELECT id FROM run WHERE session_id=?", (session_id,))]
    return ForgetPlan(session_id, "session", session_id, msg_ids, run_ids)


def plan_run(store: Store, run_id: int) -> ForgetPlan:
    run = runs.get_run(store, run_id)
    return ForgetPlan(run.address, "run", run.session_id, runs.run_message_ids(store, run_id), [run_id])


def plan_message(store: Store, msg_id: int) -> ForgetPlan:
    rows = store.rows("SELECT session_id FROM msg WHERE id=?", (msg_id,))
    if not rows:
        raise NotFound(f"no message {msg_id}")
    run_ids = [int(r[0]) for r in store.rows("SELECT run_id FROM run_msg WHERE msg_id=?", (msg_id,))]
    return ForgetPlan(str(msg_id), "message", str(rows[0][0]), [msg_id], run_ids)


def execute(store: Store, plan: ForgetPlan) -> ForgetPlan:
    """Delete what the plan names; the tombstones go in with the rows, in the same transactions."""
    resegment_from = _run_start(store, plan.run_ids[0]) if plan.kind == "message" and plan.run_ids else None
    requests = [] if plan.kind == "session" else store.usage_keys_of(plan.session_id, plan.msg_ids)
    for start in range(0, len(plan.msg_ids), CHUNK):
        with store.write():
            delete_messages(store, plan.session_id, plan.msg_ids[start : start + CHUNK])
    with store.write():
        if plan.kind == "session":
            _delete_session(store, plan.session_id)
            store.forget_usage([plan.session_id])
        else:
            _forget_requests(store, plan.session_id, requests)
        if plan.kind == "run":
            for run_id in plan.run_ids:
                runs.delete_run_rows(store, run_id)
        elif plan.kind == "message" and plan.run_ids:
            # the run's summary may quote the message: its embedding goes now, made again from the new one
            store.execute(
                f"DELETE FROM vec WHERE kind = 2 AND {store.sql_in_list('ref')}", (store.list_param(plan.run_ids),)
            )
        store.update_first_user(plan.session_id)
    if plan.kind == "message" and plan.run_ids:
        runs.segment_from(store, plan.session_id, resegment_from)  # the run's summary may quote the message
    return plan


def _forget_requests(store: Store, session_id: str, keys: list[str]) -> None:
    """The model requests the forgotten messages recorded leave the usage views too; their keys
    are kept as tombstones (never a content hash), so a re-import does not bill them again."""
    store.remove_usage(keys)
    now = int(time.time() * 1000)
    for key in keys:
        store.execute(
            "INSERT INTO forgotten(session_id, hash, forgotten_at) VALUES (?,?,?) ON CONFLICT DO NOTHING",
            (session_id, key, now),
        )


def _run_start(store: Store, run_id: int) -> tuple[int, int] | None:
    rows = store.rows("SELECT m.ts, m.seq FROM run r JOIN msg m ON m.id = r.first_msg WHERE r.id=?", (run_id,))
    return (int(rows[0][0]), int(rows[0][1])) if rows else None


def delete_messages(store: Store, session_id: str, msg_ids: list[int]) -> None:
    """Rows, verbatim copies, index entries and run membership of some messages (in a transaction)."""
    ids = store.list_param(msg_ids)
    indexed = store.rows(f"SELECT id, nchars FROM msg WHERE indexed = TRUE AND {store.sql_in_list('id')}", (ids,))
    if indexed:
        store.unindex_messages([int(msg_id) for msg_id, _ in indexed])
        store.add_to_counters({"indexed_docs": -len(indexed), "indexed_chars": -sum(int(n) for _, n in indexed)})
    now = int(time.time() * 1000)
    store.execute(
        f"""INSERT INTO forgotten(session_id, hash, forgotten_at)
            SELECT session_id, hash, ? FROM msg WHERE {store.sql_in_list("id")} ON CONFLICT DO NOTHING""",
        (now, ids),
    )
    # the edits these messages made, and what pi saw of them (the files as they were): gone with them
    store.execute(
        f"""DELETE FROM edit_observed WHERE session_id = ? AND call_id IN (SELECT call_id FROM edit
              WHERE session_id = ? AND call_hash IN (SELECT hash FROM msg WHERE {store.sql_in_list("id")}))""",
        (session_id, session_id, ids),
    )
    store.execute(
        f"""DELETE FROM edit WHERE session_id = ? AND (call_hash IN (SELECT hash FROM msg WHERE {store.sql_in_list("id")})
              OR result_hash IN (SELECT hash FROM msg WHERE {store.sql_in_list("id")}))""",
        (session_id, ids, ids),
    )
    # their embeddings (semantic recall, kind 1: a message); the scan index is stale from then on
    if store.execute(f"DELETE FROM vec WHERE kind = 1 AND {store.sql_in_list('ref')}", (ids,)):
        store.add_to_counters({"vec_generation": 1})
    for table, column in (("entry", "msg_id"), ("run_msg", "msg_id"), ("run_file", "msg_id"), ("msg", "id")):
        store.execute(f"DELETE FROM {table} WHERE {store.sql_in_list(column)}", (ids,))


def _delete_session(store: Store, session_id: str) -> None:
    for (run_id,) in store.rows("SELECT id FROM run WHERE session_id=?", (session_id,)):
        runs.delete_run_rows(store, int(run_id))
    store.execute("DELETE FROM entry WHERE session_id=?", (session_id,))
    store.execute("DELETE FROM edit WHERE session_id=?", (session_id,))
    store.execute("DELETE FROM edit_observed WHERE session_id=?", (session_id,))
    store.execute("DELETE FROM source_file WHERE session_id=?", (session_id,))
    store.execute("DELETE FROM session WHERE id=?", (session_id,))
    store.execute(
        """INSERT INTO forgotten(session_id, hash, forgotten_at) VALUES (?,?,?)
           ON CONFLICT(session_id, hash) DO UPDATE SET forgotten_at = excluded.forgotten_at""",
        (session_id, WHOLE_SESSION, int(time.time() * 1000)),
    )


# --- what the importer asks ------------------------------------------------------------


def forgotten_hashes(store: Store, session_id: str) -> set[str]:
    """Content hashes forgotten in a session; contains `*` when the whole session was forgotten."""
    return {str(r[0]) for r in store.rows("SELECT hash FROM forgotten WHERE session_id=?", (session_id,))}


def forgotten_anywhere(store: Store, hash_: str) -> bool:
    """A fork or copy of a forgotten message carries the same content hash: it stays forgotten too."""
    return store.scalar("SELECT 1 FROM forgotten WHERE hash=? LIMIT 1", (hash_,)) is not None


def clear_tombstones(store: Store, session_id: str) -> None:
    """`import --include-forgotten`: the user wants the session back (inside a transaction)."""
    store.execute("DELETE FROM forgotten WHERE session_id=?", (session_id,))
