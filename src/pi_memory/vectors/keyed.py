"""Run summaries and memories as units: texts that change, embedded again when they do.

Design idea: a message never changes, so a message unit is embedded once. A run's navigation
summary is rewritten as the run goes on (`runs.table.write_run` keeps its id), and a memory is
edited, superseded or resolved. So these units carry the hash of the text they were embedded
from (`vec.hash`: here of the text before the model's cut, white space squeezed, so staleness
is judged without loading the model), and a pass embeds every unit whose current text has no
vector with that hash. They are few (a run per user message, tens of memories a workspace), so
which are due is worked out in Python over all of them, once a pass (a background job reads again
only the runs that went on since their vector was made, and only when something changed).

- A run summary (kind `KIND_RUN`, `ref` = run id): the text the summary track scores
  (`core.summary.fields_search_text`: the navigation line, goal, outcome, files, commands; the
  cut keeps its start). A run that goes away (`runs.table.delete_run_rows`, forget, a
  re-segmentation) takes its vector with it; `sweep` removes any left behind.
- A memory (kind `KIND_MEMORY`, `ref` = its text's hash as a number, as `vec`'s schema says): each
  live memory (active or provisional) of every workspace. Keyed by the text, two memories saying
  the same share a vector, and an edit makes a new unit; the text no live memory holds any more
  (resolved, superseded, edited away) loses its vector at once (`Memories` calls `sweep_memories`)
  and at every pass.

This module needs no NumPy: a sweep on forget and the counts of `status` run without the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.summary import fields_search_text
from ..memory.log import MemoryLog
from ..runs.table import load_fields
from ..storage.store import Store
from .model import squeeze, text_hash

KIND_RUN = 2
KIND_MEMORY = 3
LIVE_MEMORY = ("active", "provisional")
REF_HEX = 15  # hex digits of the text hash a memory's `ref` keeps: 60 bits, a positive int64


@dataclass
class KeyedUnit:
    """One run summary or memory to embed: its kind, key, session (None: none), time and text."""

    kind: int
    ref: int
    session_id: str | None
    ts: int
    text: str  # squeezed, not yet cut

    @property
    def hash(self) -> str:
        return text_hash(self.text)


def memory_ref(body: str) -> int:
    """The `vec.ref` of a memory's text."""
    return int(text_hash(squeeze(body))[:REF_HEX], 16)


def run_text(column: str | None, fields: dict[str, Any]) -> str:
    """What a run summary unit embeds: the summary track's text (the line from the old column when
    the fields lack it)."""
    text = fields_search_text(fields)
    return text if fields.get("line") or not column else f"{column}\n{text}"


def run_units(store: Store, since_ms: int | None = None, moved_for: str | None = None) -> list[KeyedUnit]:
    """Every run's summary (that went on from `since_ms`), newest first. `moved_for`: only the runs
    without a vector of that model or that went on since theirs was made (its `ts` is the run's end
    then): a background job's quick look, which misses only a summary rewritten in place (a
    `runs rebuild`), left to the next `pi-memory embed`."""
    sql = "SELECT r.id, r.session_id, r.end_ts, r.summary, r.fields, r.first_msg FROM run r"
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    if moved_for is not None:
        sql += f" LEFT JOIN vec v ON v.kind = {KIND_RUN} AND v.ref = r.id AND v.model = ?"
        clauses.append("(v.id IS NULL OR v.ts != r.end_ts)")
        params.append(moved_for)
    if since_ms is not None:
        clauses.append("r.end_ts >= ?")
        params.append(since_ms)
    sql += f" WHERE {' AND '.join(clauses)} ORDER BY r.start_ts DESC, r.id DESC"
    units = []
    for rid, sid, end_ts, column, fields, first_msg in store.rows(sql, params):
        text = squeeze(run_text(column, load_fields(fields, int(first_msg))))
        if text:
            units.append(KeyedUnit(KIND_RUN, int(rid), str(sid), int(end_ts), text))
    return units


def memory_units(store: Store, since_ms: int | None = None) -> list[KeyedUnit]:
    """One unit per distinct text of the live memories of every workspace (changed from `since_ms`),
    newest first."""
    log = MemoryLog(store)
    by_ref: dict[int, KeyedUnit] = {}
    for workspace in log.workspaces():
        state, _report = log.state(workspace)
        for record in state.records.values():
            text = squeeze(record.body)
            if record.status not in LIVE_MEMORY or not text:
                continue
            if since_ms is not None and record.updated_ts < since_ms:
                continue
            unit = KeyedUnit(KIND_MEMORY, memory_ref(text), None, record.updated_ts, text)
            if unit.ref not in by_ref or by_ref[unit.ref].ts < unit.ts:
                by_ref[unit.ref] = unit
    return sorted(by_ref.values(), key=lambda u: (-u.ts, u.ref))


def embedded_hashes(store: Store, kind: int, model: str) -> dict[int, str]:
    """ref -> hash of the text embedded, for the vectors of one kind under `model`."""
    return {
        int(r): str(h) for r, h in store.rows("SELECT ref, hash FROM vec WHERE kind = ? AND model = ?", (kind, model))
    }


def due(store: Store, model: str, since_ms: int | None = None, quick: bool = False) -> list[KeyedUnit]:
    """The memories, then the run summaries, whose current text has no vector of `model`, each
    newest first (memories first: a handful, and each one a person wrote down to be found).
    `quick`: only the runs that moved (`run_units`), not every run's summary read again."""
    runs = run_units(store, since_ms, moved_for=model if quick else None)
    out: list[KeyedUnit] = []
    for kind, units in ((KIND_MEMORY, memory_units(store, since_ms)), (KIND_RUN, runs)):
        done = embedded_hashes(store, kind, model)
        out += [u for u in units if done.get(u.ref) != u.hash]
    return out


def signature(store: Store) -> tuple[Any, ...]:
    """Changes when a run is added, goes or goes on, a memory changes, or one of their vectors does:
    what a background job's quick look (`due(quick=True)`) would find, checked cheaply first."""
    runs = store.rows("SELECT count(*), coalesce(max(id), 0), coalesce(sum(end_ts), 0) FROM run")[0]
    events = store.rows("SELECT count(*), coalesce(max(chain), 0) FROM memory_event")[0]  # append-only
    vectors = store.rows("SELECT count(*), coalesce(max(id), 0) FROM vec WHERE kind IN (?, ?)", (KIND_RUN, KIND_MEMORY))
    return (*runs, *events, *vectors[0])


def sweep_runs(store: Store) -> int:
    """Delete run vectors whose run is gone (a safety net: `delete_run_rows` removes them); returns how many."""
    with store.write():
        return int(store.execute("DELETE FROM vec WHERE kind = ? AND ref NOT IN (SELECT id FROM run)", (KIND_RUN,)))


def sweep_memories(store: Store) -> int:
    """Delete the vectors of texts no live memory holds (resolved, superseded, edited away)."""
    if not store.scalar("SELECT EXISTS (SELECT 1 FROM vec WHERE kind = ?)", (KIND_MEMORY,)):
        return 0
    live = [u.ref for u in memory_units(store)]
    with store.write():
        sql = f"DELETE FROM vec WHERE kind = ? AND NOT ({store.sql_in_list('ref')})"
        return int(store.execute(sql, (KIND_MEMORY, store.list_param(live))))


def counts(store: Store, model: str | None) -> dict[str, tuple[int, int]]:
    """Run summaries and memories: (units, of them with a vector of `model`) each (`status`). A run
    whose summary changed since it was embedded counts as embedded until the next pass."""
    runs = int(store.scalar("SELECT count(*) FROM run") or 0)
    runs_done = int(
        store.scalar(
            "SELECT count(*) FROM vec v JOIN run r ON r.id = v.ref WHERE v.kind = ? AND v.model = ?",
            (KIND_RUN, model or ""),
        )
        or 0
    )
    memories = memory_units(store)
    done = embedded_hashes(store, KIND_MEMORY, model or "")
    memories_done = sum(1 for u in memories if done.get(u.ref) == u.hash)
    return {"run summaries": (runs, runs_done), "memories": (len(memories), memories_done)}
