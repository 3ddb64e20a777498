"""The vector rows: writing a batch, counting them, dropping another model's.

Design idea: a batch is written in one short transaction after the model has run (never inside
one): a live writer waits for a few inserts, not for an embedding. A unit forgotten while its
vector was being computed is simply not written (the insert joins on `msg`).

On a team archive with pgvector (`storage.pg.vectors`) the same rows carry the float vector too, for
the server's nearest-unit scan; the SQL is the store's (`PgVectors.write_vec_rows`).
"""

from __future__ import annotations

import numpy as np

from ..storage.pg.vectors import PgVectors
from ..storage.store import Store
from .codes import quantize
from .keyed import KIND_MEMORY, KIND_RUN, KeyedUnit
from .model import text_hash
from .units import KIND_MESSAGE, ROLE_CODES, Unit

DROP_CHUNK = 5_000  # another model's rows deleted per transaction


def session_numbers(store: Store, session_ids: set[str]) -> dict[str, int]:
    """`vec_session` numbers of these sessions, made for the new ones (inside a write transaction)."""
    store.executemany("INSERT OR IGNORE INTO vec_session(session_id) VALUES (?)", [(s,) for s in sorted(session_ids)])
    sql = f"SELECT session_id, ord FROM vec_session WHERE {store.sql_in_list('session_id')}"
    return {str(s): int(o) for s, o in store.rows(sql, (store.list_param(sorted(session_ids)),))}


def write_vectors(store: Store, model: str, units: list[Unit], texts: list[str], vectors: np.ndarray) -> int:
    """One batch of message vectors (texts as embedded); returns how many rows were written."""
    codes, scales = quantize(vectors)
    if isinstance(store, PgVectors):
        with store.write():
            numbers = store.vec_session_numbers(sorted({u.session_id for u in units}))
            pg_rows = [
                (KIND_MESSAGE, u.ref, numbers[u.session_id], u.ts, ROLE_CODES.get(u.role, 0), text_hash(t))
                + (codes[i].tobytes(), float(scales[i]), vectors[i])
                for i, (u, t) in enumerate(zip(units, texts, strict=True))
            ]
            return store.write_vec_rows(model, pg_rows, "msg")
    with store.write():
        numbers = session_numbers(store, {u.session_id for u in units})
        rows = [
            (KIND_MESSAGE, u.ref, numbers[u.session_id], u.ts, ROLE_CODES.get(u.role, 0), text_hash(t), model)
            + (codes[i].tobytes(), float(scales[i]), u.ref)
            for i, (u, t) in enumerate(zip(units, texts, strict=True))
        ]
        before = store.conn.total_changes()
        store.executemany(
            """INSERT OR REPLACE INTO vec(kind, ref, sess, ts, role, hash, model, vec, scale)
               SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM msg WHERE id = ?)""",
            rows,
        )
        return int(store.conn.total_changes() - before)


def write_keyed(store: Store, model: str, units: list[KeyedUnit], vectors: np.ndarray) -> int:
    """One batch of run summary or memory vectors, replacing the older text's; returns how many rows
    were written. A run gone while its vector was computed is not written; a memory retired
    meanwhile is, and goes at the next sweep (a search only ever looks up live memories' texts)."""
    codes, scales = quantize(vectors)
    if isinstance(store, PgVectors):
        return _write_keyed_pg(store, store, model, units, vectors, codes, scales)
    with store.write():
        sessions = {u.session_id for u in units if u.session_id is not None}
        numbers = session_numbers(store, sessions) if sessions else {}
        rows = [
            (u.kind, u.ref, numbers.get(u.session_id or "", 0), u.ts, 0, u.hash, model, codes[i].tobytes())
            + (float(scales[i]), u.kind, u.ref)
            for i, u in enumerate(units)
        ]
        before = store.conn.total_changes()
        store.executemany(
            f"""INSERT OR REPLACE INTO vec(kind, ref, sess, ts, role, hash, model, vec, scale)
                SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?
                WHERE ? != {KIND_RUN} OR EXISTS (SELECT 1 FROM run WHERE id = ?)""",
            rows,
        )
        return int(store.conn.total_changes() - before)


def _write_keyed_pg(
    store: Store,
    pg: PgVectors,
    model: str,
    units: list[KeyedUnit],
    vectors: np.ndarray,
    codes: np.ndarray,
    scales: np.ndarray,
) -> int:
    """`write_keyed` on a team archive: a run's vector only while its run is there."""
    with store.write():
        sessions = sorted({u.session_id for u in units if u.session_id is not None})
        numbers = pg.vec_session_numbers(sessions) if sessions else {}
        written = 0
        for kind, table in ((KIND_RUN, "run"), (KIND_MEMORY, None)):
            rows = [
                (u.kind, u.ref, numbers.get(u.session_id or "", 0), u.ts, 0, u.hash)
                + (codes[i].tobytes(), float(scales[i]), vectors[i])
                for i, u in enumerate(units)
                if u.kind == kind
            ]
            written += pg.write_vec_rows(model, rows, table)
        return written


def counts(store: Store, model: str | None) -> tuple[int, int]:
    """(message vectors of `model`, message vectors of any other model)."""
    rows = store.rows("SELECT model = ?, count(*) FROM vec WHERE kind = ? GROUP BY 1", (model or "", KIND_MESSAGE))
    found = {bool(same): int(n) for same, n in rows}
    return found.get(True, 0), found.get(False, 0)


def has_other_models(store: Store, model: str) -> bool:
    """Whether any vector (of any kind) was made by another model than `model`."""
    return bool(store.scalar("SELECT EXISTS (SELECT 1 FROM vec WHERE model != ?)", (model,)))


def drop_other_models(store: Store, model: str) -> int:
    """Delete the vectors another model made (they cannot be compared with this one's); returns how many."""
    dropped = 0
    while True:
        with store.write():
            n = store.execute(
                "DELETE FROM vec WHERE id IN (SELECT id FROM vec WHERE model != ? LIMIT ?)", (model, DROP_CHUNK)
            )
            if n:  # the scan index is stale (a team archive's store ignores this counter: no index there)
                store.add_to_counters({"vec_generation": 1})
        dropped += n
        if n < DROP_CHUNK:
            return dropped
