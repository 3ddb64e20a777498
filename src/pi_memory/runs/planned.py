"""Runs planned by a parse worker from a whole session file, written with the session's messages.

Design idea: a bulk import's runs are derived data the parse worker can compute alone
(segments, summaries, their tokens: pure), while the importer's writer, the busier of its two
processes, holds the only write lock. So the worker does everything but the one thing it
cannot know, the ids the messages will get: each run arrives as a `PlannedRun` numbered by
message position, its fields JSON already written (and packed, once the worker has the
archive's dictionary) with message ids counted from the run's first message (`table.RELATIVE_IDS`,
which the readers add back: `table.load_fields`). That holds because a session written whole
gets consecutive ids, which the writer checks before it writes the rows inside the transaction
that wrote the session's messages (`storage.writes.WRITE_PLANNED`), reading nothing back. The rows
are the ones `table.after_write` would build from the archived messages (a test compares them on
every fixture, as the readers see them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..core.summary import RunMessage, RunSummary, segment
from ..storage.codec import decode_text, packed_with
from ..storage.store import Store
from ..storage.writes import WRITE_PLANNED
from . import table


@dataclass
class PlannedRun:
    """What writing a planned run needs, by message position (its place in the file, from 0)."""

    positions: list[int]  # its messages, in display order: the first is the run's `first_msg`
    start_ts: int
    end_ts: int
    status: str
    tool_calls: int
    tool_errors: int
    fields: str | bytes  # the fields JSON, message ids counted from `first_msg`; packed if bytes
    files: list[tuple[str, int, str]]  # (path, position, action): the run's `run_file` rows
    search_chars: int  # the length of the summary's search text (`run.indexed_chars`)
    chars: bytes  # the summary's tokens (`text.index_texts`), UTF-8 (see `ingest.prepare.MessageLine`)
    grams: bytes


def plan_file_runs(messages: list[RunMessage]) -> list[PlannedRun] | None:
    """The runs of a whole session read from its file (pure; in the parse worker).

    `messages` are in display order and numbered by position (their `msg_id` is the message's place
    in the file, 0, 1, 2...). None when an optional summarizer is set: it runs in the writing
    process, on runs built from the archived messages.
    """
    if table.SUMMARIZER is not None:
        return None
    groups = segment(messages)
    return [_planned(table.prepare_run(g, is_last=i == len(groups) - 1)) for i, g in enumerate(groups)]


def _planned(run: table.PreparedRun) -> PlannedRun:
    group, summary = run.group, run.summary
    first = group[0].msg_id
    return PlannedRun(
        positions=[m.msg_id for m in group],
        start_ts=min(m.ts for m in group),
        end_ts=max(m.ts for m in group),
        status=run.status,
        tool_calls=summary.tool_calls,
        tool_errors=sum(1 for m in group if m.role == "tool_error"),
        fields=relative_fields(summary, first),
        files=table.file_rows(summary),
        search_chars=len(run.search_text),
        chars=run.chars.encode(),
        grams=run.grams.encode(),
    )


def relative_fields(summary: RunSummary, first: int) -> str:
    """The summary's fields JSON as `table.write_run` writes it, but with every message reference
    counted from the run's first message (`first`: its position) and marked so (`table.RELATIVE_IDS`)."""
    fields = {table.RELATIVE_IDS: 1, **summary.to_dict()}
    _count_from(fields, first)
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def _count_from(fields: dict[str, Any], first: int) -> None:
    """Every "msgs" list of the fields (in a field, or in a list of fields: `RunSummary.to_dict`)
    counted from `first`."""
    for value in fields.values():
        for field in value if isinstance(value, list) else (value,):
            if isinstance(field, dict) and isinstance(field.get("msgs"), list):
                field["msgs"] = [p - first for p in field["msgs"]]


def write_planned(
    store: Store, planned: list[tuple[str, list[PlannedRun], list[int]]], totals: dict[str, int]
) -> set[str]:
    """The `WRITE_PLANNED` hook: the planned runs of new sessions written whole (with the ids their
    messages got, in file order), inside the transaction that wrote those messages; the sessions
    whose runs it wrote: those without a run yet whose messages got consecutive ids (all, but for a
    race with a live writer; the others are read back by `table.after_write`).

    New runs of new messages: nothing to replace, so no run file rows to clear and the summary's
    indexed length set with the row; counters go to `totals`, written once for the transaction.
    """
    if table.SUMMARIZER is not None:
        return set()
    with_runs = table.sessions_with_runs(store, [session_id for session_id, _, _ in planned])
    written: set[str] = set()
    for session_id, runs, ids in planned:
        if session_id in with_runs or ids[-1] - ids[0] != len(ids) - 1:
            continue  # not consecutive: the relative ids of the fields would not hold
        _insert(store, session_id, runs, ids, totals)
        written.add(session_id)
    return written


# OR IGNORE (the session has no run, so nothing is ignored): a plain INSERT ... RETURNING opens a
# statement journal, and opening one makes FTS5 flush the transaction's index entries so far into a
# segment of their own (one per run)
_INSERT_RUN = """INSERT OR IGNORE INTO run(session_id, first_msg, start_ts, end_ts, status, n_msgs, tool_calls,
                                             tool_errors, summary, fields, indexed_chars)
                 VALUES (?,?,?,?,?,?,?,?,'',?,?) RETURNING first_msg, id"""


def _insert(store: Store, session_id: str, runs: list[PlannedRun], ids: list[int], totals: dict[str, int]) -> None:
    """A session's planned runs, one statement a table for all of them."""
    rows = [
        (
            session_id,
            ids[run.positions[0]],
            run.start_ts,
            run.end_ts,
            run.status,
            len(run.positions),
            run.tool_calls,
            run.tool_errors,
            _stored_fields(store, run),
            run.search_chars,
        )
        for run in runs
    ]
    run_ids = {int(first): int(run_id) for first, run_id in store.executemany_returning(_INSERT_RUN, rows)}
    placed = [(run_ids[ids[run.positions[0]]], run) for run in runs if ids[run.positions[0]] in run_ids]
    store.executemany(
        table.UPSERT_RUN_MSG,
        [(ids[p], run_id, k) for run_id, run in placed for k, p in enumerate(run.positions, start=1)],
    )
    store.executemany(
        table.INSERT_RUN_FILE,
        [(path, run_id, ids[p], action) for run_id, run in placed for path, p, action in run.files],
    )
    store.index_run_summaries([(run_id, run.chars, run.grams) for run_id, run in placed])
    totals["run_docs"] = totals.get("run_docs", 0) + len(placed)
    totals["run_chars"] = totals.get("run_chars", 0) + sum(run.search_chars for _, run in placed)


def _stored_fields(store: Store, run: PlannedRun) -> str | bytes:
    """The run's fields as the worker packed them, or packed here (it had no dictionary, or another one)."""
    if isinstance(run.fields, bytes) and packed_with(run.fields, store.text_dict_id):
        return run.fields
    return store.stored_text(decode_text(run.fields))


WRITE_PLANNED.append(write_planned)  # a new session's runs, as planned, with its messages
