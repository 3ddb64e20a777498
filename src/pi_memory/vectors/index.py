"""The scan index: the archive's message vectors as sign bits, memory-mapped from beside the file.

Design idea: the vectors are durable in the archive (`vec`); this is only a way to scan them fast,
rebuilt from there whenever it is missing or out of date, so losing it loses nothing. It lives in
`<archive>.vectors/` as flat arrays, one file each, row i of every file being the same unit: its
sign bits (`codes.sign_bits`, 48 bytes), its `vec` row id, message id, session number, time and
role. A search memory-maps them (a one-shot CLI search reads nothing it does not scan) and masks
rows by session, time and role before the Hamming pass.

The files only grow: the embed job appends what it wrote (under `embed.lock`, the one writer) and
then replaces `msg.json`, the manifest that says how many rows are valid, so a reader never sees
half a row. Vectors embedded after the manifest (another process's, not appended yet) are read
from the archive and scored exactly by the caller. A rebuild writes a new set of files under a new
tag and switches the manifest; `forget` bumps the archive's `vec_generation`, which tells every
reader the index is stale, and removes the files at once (`drop`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..storage.store import Store
from .codes import bit_columns, dequantize, sign_bits
from .model import DIM
from .units import KIND_MESSAGE

# 2: each unit's int8 vector and scale kept too, for the exact rescoring (1,000 rows read from the
# archive by id took ~4 ms a search at 106k units; from the mapped files ~0.3 ms)
FORMAT = 2
CODE_BYTES = DIM // 8
MEAN_SAMPLE = 20_000  # vectors the mean is estimated from
REBUILD_GROWTH = 2.0  # the mean is estimated again when the index has grown this much since
MEAN_FLOOR = 1_000  # ... counted from at least this many rows: a small index is not rebuilt at each pass
READ_CHUNK = 20_000  # vec rows read per query when building
# name -> dtype and values per row of the index's files
COLUMNS: dict[str, tuple[str, int]] = {
    "codes": ("u1", CODE_BYTES),
    "ids": ("<i8", 1),
    "refs": ("<i8", 1),
    "sess": ("<i4", 1),
    "ts": ("<i8", 1),
    "role": ("i1", 1),
    "vecs": ("i1", DIM),
    "scales": ("<f4", 1),
}


def folder_of(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".vectors")


def generation(store: Store) -> int:
    return int(store.scalar("SELECT value FROM counter WHERE name = 'vec_generation'") or 0)


def drop(db_path: Path) -> None:
    """Remove the index (after a forget: nothing of a forgotten unit stays on disk)."""
    shutil.rmtree(folder_of(db_path), ignore_errors=True)


@dataclass
class Rows:
    """A block of index rows, as arrays (what the files hold)."""

    codes: np.ndarray
    ids: np.ndarray
    refs: np.ndarray
    sess: np.ndarray
    ts: np.ndarray
    role: np.ndarray
    vecs: np.ndarray
    scales: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


def read_vectors(store: Store, model: str, after_id: int, limit: int) -> tuple[Rows, np.ndarray]:
    """`vec` rows of messages of `model` with id > after_id, in id order: index columns and vectors."""
    rows = store.rows(
        """SELECT id, ref, sess, ts, role, vec, scale FROM vec WHERE kind = ? AND model = ? AND id > ?
           ORDER BY id LIMIT ?""",
        (KIND_MESSAGE, model, after_id, limit),
    )
    ints = np.frombuffer(b"".join(r[5] for r in rows), dtype=np.int8).reshape(len(rows), DIM)
    scales = np.array([r[6] for r in rows], dtype=np.float32)
    vectors = dequantize(ints, scales)
    columns: list[tuple[Any, ...]] = list(zip(*[r[:5] for r in rows], strict=True)) if rows else [()] * 5
    block = Rows(
        codes=np.zeros((0, CODE_BYTES), np.uint8),
        ids=np.array(columns[0], dtype=np.int64),
        refs=np.array(columns[1], dtype=np.int64),
        sess=np.array(columns[2], dtype=np.int32),
        ts=np.array(columns[3], dtype=np.int64),
        role=np.array(columns[4], dtype=np.int8),
        vecs=ints,
        scales=scales,
    )
    return block, vectors


class ScanIndex:
    """One archive's index of message vectors under one model (see the module docstring)."""

    def __init__(self, folder: Path, manifest: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.folder = folder
        self.manifest = manifest
        self.arrays = arrays
        self.mean = np.array(manifest["mean"], dtype=np.float32)
        self._columns: np.ndarray | None = None

    @property
    def columns(self) -> np.ndarray:
        """The codes in the scan's layout (`codes.bit_columns`), made on first use: one copy of the
        codes in memory (48 MB at 1M units) for a scan ~5x as fast as over the mapped rows."""
        if self._columns is None:
            self._columns = bit_columns(self.arrays["codes"])
        return self._columns

    @property
    def count(self) -> int:
        return int(self.manifest["count"])

    @property
    def max_id(self) -> int:
        return int(self.manifest["max_id"])

    def fits(self, model: str, current_generation: int) -> bool:
        m = self.manifest
        return m.get("format") == FORMAT and m.get("model") == model and m.get("generation") == current_generation

    @classmethod
    def load(cls, folder: Path) -> ScanIndex | None:
        """The index as its manifest describes it, memory-mapped; None when missing or damaged."""
        try:
            manifest = json.loads((folder / "msg.json").read_text(encoding="utf-8"))
            count, tag = int(manifest["count"]), str(manifest["tag"])
            arrays = {
                name: _map(folder / f"msg-{tag}.{name}", dtype, width, count)
                for name, (dtype, width) in COLUMNS.items()
            }
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return cls(folder, manifest, arrays)

    # --- writing (the one writer holds `writer_lock`) ---------------------------------------

    @classmethod
    def build(cls, store: Store, db_path: Path, model: str) -> ScanIndex:
        """A new index from every message vector of `model` in the archive."""
        folder = folder_of(db_path)
        folder.mkdir(mode=0o700, exist_ok=True)
        gen = generation(store)
        mean = _estimate_mean(store, model)
        tag = f"{int(time.time() * 1000):x}"
        manifest: dict[str, Any] = {"format": FORMAT, "model": model, "generation": gen, "tag": tag, "count": 0}
        manifest.update({"max_id": 0, "mean": [float(x) for x in mean], "mean_count": 0})
        for name in COLUMNS:
            (folder / f"msg-{tag}.{name}").write_bytes(b"")
        index = cls(folder, manifest, {})
        index.catch_up(store)
        index.manifest["mean_count"] = index.count
        index._save_manifest()
        _remove_other_tags(folder, tag)
        return cls.load(folder) or index

    def catch_up(self, store: Store) -> int:
        """Append the vectors written since the manifest; returns how many."""
        added = 0
        while True:
            block, vectors = read_vectors(store, self.manifest["model"], self.max_id, READ_CHUNK)
            if not len(block):
                break
            block.codes = sign_bits(vectors, self.mean)
            self._append(block)
            added += len(block)
        if added:
            self._save_manifest()
        return added

    def needs_new_mean(self) -> bool:
        return self.count > REBUILD_GROWTH * max(int(self.manifest.get("mean_count", 0)), MEAN_FLOOR)

    def _append(self, block: Rows) -> None:
        tag = self.manifest["tag"]
        for name, (dtype, width) in COLUMNS.items():
            path = self.folder / f"msg-{tag}.{name}"
            item = np.dtype(dtype).itemsize * width
            with open(path, "r+b") as f:
                f.truncate(self.count * item)  # what a crashed append left past the manifest goes
                f.seek(0, os.SEEK_END)
                f.write(np.ascontiguousarray(getattr(block, name), dtype=dtype).tobytes())
        self.manifest["count"] = self.count + len(block)
        self.manifest["max_id"] = int(block.ids[-1])

    def _save_manifest(self) -> None:
        path = self.folder / "msg.json"
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.manifest), encoding="utf-8")
        os.replace(tmp, path)


def _map(path: Path, dtype: str, width: int, count: int) -> np.ndarray:
    """The first `count` rows of a column file, memory-mapped (an empty index maps nothing)."""
    shape = (count, width) if width > 1 else (count,)
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    if path.stat().st_size < count * np.dtype(dtype).itemsize * width:
        raise ValueError(f"{path.name} is shorter than its manifest says")
    return np.memmap(path, dtype=dtype, mode="r", shape=shape)


def _estimate_mean(store: Store, model: str) -> np.ndarray:
    """The mean of (up to `MEAN_SAMPLE` of) the archive's vectors, spread over its whole id range."""
    total = int(store.scalar("SELECT count(*) FROM vec WHERE kind = ? AND model = ?", (KIND_MESSAGE, model)) or 0)
    if total == 0:
        return np.zeros(DIM, dtype=np.float32)
    step = max(1, total // MEAN_SAMPLE)
    rows = store.rows(
        """SELECT vec, scale FROM (SELECT vec, scale, row_number() OVER (ORDER BY id) AS n FROM vec
           WHERE kind = ? AND model = ?) WHERE n % ? = 0 OR ? = 1""",
        (KIND_MESSAGE, model, step, step),
    )
    vectors = dequantize(
        np.frombuffer(b"".join(r[0] for r in rows), dtype=np.int8).reshape(len(rows), DIM),
        np.array([r[1] for r in rows], dtype=np.float32),
    )
    return np.asarray(vectors.mean(axis=0), dtype=np.float32)


def _remove_other_tags(folder: Path, keep: str) -> None:
    for path in folder.glob("msg-*"):
        if not path.name.startswith(f"msg-{keep}."):
            path.unlink(missing_ok=True)


@contextmanager
def writer_lock(db_path: Path, wait: bool) -> Iterator[bool]:
    """The one embedder of an archive at a time (it also writes the index); yields whether it got it."""
    folder = folder_of(db_path)
    folder.mkdir(mode=0o700, exist_ok=True)
    with open(folder / "embed.lock", "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
