"""Runs planned by a parse worker from a whole session file, written with the session's messages.

Design idea: a bulk import's runs are derived data the parse worker can compute alone
(segments, summaries, their tokens: pure), while the importer's writer, the busier of its two
processes, holds the only write lock. So the worker does everything but the one thing it
cannot know, the ids the messages will get: each run arrives as a `PlannedRun` numbered by
message position, its fields JSON already serialized with a slot wherever a message id goes.
The writer fills the slots, packs the JSON and writes the rows inside the transaction that
wrote the session's messages (`storage.writes.WRITE_PLANNED`), reading nothing back. The rows are
the ones `table.after_write` would build from the archived messages (a test compares them on
every fixture).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..core.summary import RunMessage, RunSummary, segment
from ..storage.store import Store
from ..storage.writes import WRITE_PLANNED
from . import table

# A run's fields JSON cut where message ids go: text, then a message position, then text...
# (`PlannedRun.fields`: the strings at even places, the positions at odd ones).
Template = list[str | int]


@dataclass
class PlannedRun:
    """What writing a planned run needs, by message position (its place in the file, from 0)."""

    positions: list[int]  # its messages, in display order: the first is the run's `first_msg`
    start_ts: int
    end_ts: int
    status: str
    tool_calls: int
    tool_errors: int
    fields: Template  # `json.dumps(summary.to_dict())` with a slot for each message id (`fields_json`)
    files: list[tuple[str, int, str]]  # (path, position, action): the run's `run_file` rows
    search_chars: int  # the length of the summary's search text (`run.indexed_chars`)
    chars: str  # the summary's tokens (`text.index_texts`)
    grams: str

    def fields_json(self, ids: list[int]) -> str:
        """The fields JSON with the message ids in (`ids[p]`: the id of the message at position p)."""
        return "".join(part if isinstance(part, str) else str(ids[part]) for part in self.fields)


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
    return PlannedRun(
        positions=[m.msg_id for m in group],
        start_ts=min(m.ts for m in group),
        end_ts=max(m.ts for m in group),
        status=run.status,
        tool_calls=summary.tool_calls,
        tool_errors=sum(1 for m in group if m.role == "tool_error"),
        fields=fields_template(summary),
        files=[(path, position, action) for path, position, action in table.file_rows(summary)],
        search_chars=len(run.search_text),
        chars=run.chars,
        grams=run.grams,
    )


# What a "msgs" list becomes for one `json.dumps` of a run's fields: a string no summary holds (a
# field's text is never exactly two NULs; if one were, `fields_template` would notice and go slow)
_SLOT = "\x00\x00"
_SLOT_JSON = json.dumps(_SLOT)


def fields_template(summary: RunSummary) -> Template:
    """`json.dumps(summary.to_dict(), ensure_ascii=False, separators=(",", ":"))` with every number
    of a "msgs" list left as a slot (its message position), to be filled with ids later."""
    fields = summary.to_dict()
    lists: list[list[int]] = []
    pieces = json.dumps(_slotted(fields, lists), ensure_ascii=False, separators=(",", ":")).split(_SLOT_JSON)
    if len(pieces) != len(lists) + 1:  # some text was the slot itself: the slow way, value by value
        return _template_by_value(fields)
    out: Template = [pieces[0]]
    for positions, after in zip(lists, pieces[1:], strict=True):
        out.append("[")
        for i, position in enumerate(positions):
            out.extend(["," if i else "", int(position)])
        out.append("]" + after)
    return _merged(out)


def _slotted(value: Any, lists: list[list[int]]) -> Any:
    """The fields with each "msgs" list replaced by `_SLOT` (and kept in `lists`, in JSON order)."""
    if isinstance(value, dict):
        out = {}
        for k, item in value.items():
            if k == "msgs":
                lists.append(list(item))
                out[k] = _SLOT
            else:
                out[k] = _slotted(item, lists)
        return out
    if isinstance(value, list):
        return [_slotted(item, lists) for item in value]
    return value


def _merged(template: Template) -> Template:
    """Adjacent strings joined: a template alternates text and slots."""
    out: Template = []
    for part in template:
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] += part
        else:
            out.append(part)
    return out


def _template_by_value(fields: dict[str, Any]) -> Template:
    """`fields_template` value by value: slower (a dump a value), right whatever the text holds."""
    out: Template = []

    def value(v: Any, msgs: bool = False) -> None:
        if msgs:
            out.append("[")
            for i, position in enumerate(v):
                out.extend(["," if i else "", int(position)])
            out.append("]")
        elif isinstance(v, dict):
            out.append("{")
            for i, (k, item) in enumerate(v.items()):
                out.append(("," if i else "") + json.dumps(k, ensure_ascii=False) + ":")
                value(item, msgs=k == "msgs")
            out.append("}")
        elif isinstance(v, list):
            out.append("[")
            for i, item in enumerate(v):
                out.append("," if i else "")
                value(item)
            out.append("]")
        else:
            out.append(json.dumps(v, ensure_ascii=False))

    value(fields)
    return _merged(out)


def write_planned(
    store: Store, planned: list[tuple[str, list[PlannedRun], list[int]]], totals: dict[str, int]
) -> set[str]:
    """The `WRITE_PLANNED` hook: the planned runs of new sessions written whole (with the ids their
    messages got, in file order), inside the transaction that wrote those messages; the sessions
    whose runs it wrote (those without a run yet: all, but for a race with a live writer).

    New runs of new messages: nothing to replace, so no run file rows to clear and the summary's
    indexed length set with the row; counters go to `totals`, written once for the transaction.
    """
    if table.SUMMARIZER is not None:
        return set()
    with_runs = table.sessions_with_runs(store, [session_id for session_id, _, _ in planned])
    written: set[str] = set()
    for session_id, runs, ids in planned:
        if session_id in with_runs:
            continue
        for run in runs:
            _insert(store, session_id, run, ids, totals)
        written.add(session_id)
    return written


def _insert(store: Store, session_id: str, run: PlannedRun, ids: list[int], totals: dict[str, int]) -> None:
    # OR IGNORE (the session has no run, so nothing is ignored): a plain INSERT ... RETURNING opens a
    # statement journal, and opening one makes FTS5 flush the transaction's index entries so far
    # into a segment of their own (one per run)
    run_id = int(
        store.scalar(
            """INSERT OR IGNORE INTO run(session_id, first_msg, start_ts, end_ts, status, n_msgs, tool_calls,
                                         tool_errors, summary, fields, indexed_chars)
               VALUES (?,?,?,?,?,?,?,?,'',?,?) RETURNING id""",
            (
                session_id,
                ids[run.positions[0]],
                run.start_ts,
                run.end_ts,
                run.status,
                len(run.positions),
                run.tool_calls,
                run.tool_errors,
                store.stored_text(run.fields_json(ids)),
                run.search_chars,
            ),
        )
    )
    store.executemany(table.UPSERT_RUN_MSG, [(ids[p], run_id, k) for k, p in enumerate(run.positions, start=1)])
    store.executemany(table.INSERT_RUN_FILE, [(path, run_id, ids[p], action) for path, p, action in run.files])
    store.index_run_summary(run_id, run.chars, run.grams)
    totals["run_docs"] = totals.get("run_docs", 0) + 1
    totals["run_chars"] = totals.get("run_chars", 0) + run.search_chars


WRITE_PLANNED.append(write_planned)  # a new session's runs, as planned, with its messages
