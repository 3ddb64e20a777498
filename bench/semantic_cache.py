"""Embeddings of the benchmarks' texts, cached by text so a rerun embeds nothing again (bench input).

Design idea: embedding is the slow part of a semantic benchmark (tens of texts a second on a
shared core), and the benchmarks' archives are rebuilt every run with new message ids. So the
vectors are cached by what was embedded (the text as `Model.cut` leaves it) and the model's id,
in a small SQLite file under the benchmark's `--work` folder; `CachedModel` answers from it and
embeds only what it has not seen. The archive's own embed job (`Archive.embed`) runs unchanged on
top of it, so a benchmark measures the real path.

    python bench/semantic_cache.py --db ARCHIVE.db --cache WORK/vectors-cache.db   # fill it ahead
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import apsw
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pi_memory.storage.store import (
    Store,  # noqa: E402
    decode_text,  # noqa: E402
)
from pi_memory.vectors import model as vmodel  # noqa: E402
from pi_memory.vectors.codes import dequantize, quantize  # noqa: E402
from pi_memory.vectors.units import UNIT_CONDITION, Unit, pending  # noqa: E402

BATCH = 32


class CachedModel:
    """A `vectors.model.Model` whose vectors come from the cache when it has them."""

    def __init__(self, model: vmodel.Model, cache: Path) -> None:
        self.model = model
        self.id = model.id
        self.threads = model.threads
        self.conn = apsw.Connection(str(cache))
        self.conn.setbusytimeout(30_000)  # two fills may share one cache
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS cached (model TEXT, kind TEXT, hash TEXT, vec BLOB, scale REAL, "
            "PRIMARY KEY (model, kind, hash))"
        )
        self.embedded = 0  # texts this process embedded (not found in the cache)
        self.embed_seconds = 0.0

    def cut(self, text: str) -> str:
        return self.model.cut(text)

    def _lookup(self, kind: str, hashes: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(hashes), 500):
            part = hashes[start : start + 500]
            marks = ",".join("?" * len(part))
            sql = f"SELECT hash, vec, scale FROM cached WHERE model = ? AND kind = ? AND hash IN ({marks})"
            for h, blob, scale in self.conn.execute(sql, [self.id, kind, *part]):
                found[h] = dequantize(np.frombuffer(blob, dtype=np.int8)[None, :], np.array([scale]))[0]
        return found

    def _store(self, kind: str, hashes: list[str], vectors: np.ndarray) -> None:
        codes, scales = quantize(vectors)
        with self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO cached VALUES (?,?,?,?,?)",
                [(self.id, kind, h, codes[i].tobytes(), float(scales[i])) for i, h in enumerate(hashes)],
            )

    def passages(self, texts: list[str]) -> np.ndarray:
        hashes = [vmodel.text_hash(t) for t in texts]
        found = self._lookup("passage", hashes)
        missing = [i for i, h in enumerate(hashes) if h not in found]
        if missing:
            start = time.perf_counter()
            fresh = self.model.passages([texts[i] for i in missing])
            self.embed_seconds += time.perf_counter() - start
            self.embedded += len(missing)
            self._store("passage", [hashes[i] for i in missing], fresh)
            found.update({hashes[i]: fresh[j] for j, i in enumerate(missing)})
        return np.stack([found[h] for h in hashes]) if texts else np.zeros((0, vmodel.DIM), np.float32)

    def query(self, text: str) -> np.ndarray:
        key = vmodel.text_hash(self.model.cut(text))
        found = self._lookup("query", [key])
        if key in found:
            return found[key].astype(np.float32)
        vector = self.model.query(text)
        self._store("query", [key], vector[None, :])
        return vector

    def cached_queries(self, texts: list[str]) -> None:
        """Embed the queries not cached yet (a benchmark does it before timing anything)."""
        for text in texts:
            self.query(text)


def project_units(store: Store, prefix: str) -> list[Unit]:
    """The units of the projects whose folder name starts with `prefix`, oldest first."""
    sql = f"""SELECT m.id, m.session_id, m.ts, m.role, m.text FROM msg m JOIN session s ON s.id = m.session_id
              WHERE {UNIT_CONDITION} AND s.cwd LIKE ? ORDER BY m.id"""
    rows = store.rows(sql, (f"/home/dev/{prefix}%",))
    return [Unit(int(i), str(sid), int(ts), str(role), decode_text(t)) for i, sid, ts, role, t in rows]


def prefill(db: Path, cache: Path, threads: int, projects: list[str]) -> None:
    """Every unit of an archive (or of some projects, in turn) embedded into the cache, with the rate."""
    vmodel.want_threads(threads)
    model = CachedModel(vmodel.load(), cache)
    store = Store.open(db)
    cursor: int | None = None
    done, start = 0, time.perf_counter()
    batches = (project_units(store, p) for p in projects) if projects else None
    while units := (next(batches, []) if batches else pending(store, model.id, 512, until_id=cursor)):
        cursor = units[-1].ref
        texts = [model.cut(u.text) for u in units]
        for i in range(0, len(texts), BATCH):
            model.passages(texts[i : i + BATCH])
        done += len(units)
        took = time.perf_counter() - start
        rate = model.embedded / model.embed_seconds if model.embed_seconds else 0.0
        print(f"{done} units, {model.embedded} embedded ({rate:.1f}/s while embedding), {took:.0f} s", flush=True)
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--projects", default="", help="only these project name prefixes, in this order (comma-separated)")
    args = ap.parse_args()
    prefill(args.db, args.cache, args.threads, [p for p in args.projects.split(",") if p])


if __name__ == "__main__":
    main()
