"""The vector scan's two steps, timed and checked: the sign-bit pass and the exact rescoring.

Design idea: a hybrid search's vector side is a Hamming pass over every unit's 48-byte sign bits
(`vectors.codes`), then the exact cosine of the best `k * RESCORE_PER_HIT` by bits. This measures,
on an archive that has vectors (`pi-memory embed`, or `semantic_speed.py`'s archive):
- the pass in the rows' layout (`hamming` + `argpartition`, as first shipped) against the scan's
  layout (`bit_columns`, `hamming_columns` + `smallest`), at the archive's size and with its codes
  repeated to `--scale` units (1M by default: the issue's other target);
- the share of the exact top `k` (by int8 cosine over every unit) that the best `k * r` by bits
  hold, for several `r`: what RESCORE_PER_HIT buys. The queries are units of the archive itself
  (their own row left out), so this needs no model; on `semantic_speed.py`'s archive most vectors
  are mixes of real ones, so its share is indicative, `quality.py`'s recall figures are the real ones.

    python bench/semantic_scan.py --db /tmp/pi-memory-semantic/semantic.db --json bench/results/semantic_scan.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import latency_summary, result_header, save_json, table  # noqa: E402

from pi_memory.archive.api import Archive  # noqa: E402
from pi_memory.vectors import model as vmodel  # noqa: E402
from pi_memory.vectors.codes import bit_columns, hamming, hamming_columns, sign_bits, smallest  # noqa: E402
from pi_memory.vectors.hybrid import FUSE_DEPTH, RESCORE_PER_HIT  # noqa: E402
from pi_memory.vectors.index import ScanIndex, folder_of  # noqa: E402
from pi_memory.vectors.units import KIND_MESSAGE  # noqa: E402


def load(db: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The archive's index codes, their mean, and every unit's vector (float32, row i = index row i)."""
    with Archive.open(db) as archive:
        index = ScanIndex.load(folder_of(db))
        if index is None or index.count == 0:
            raise SystemExit(f"{db}: no vector index (run `pi-memory --db {db} embed` first)")
        codes = np.array(index.arrays["codes"])
        ids = np.array(index.arrays["ids"])
        rows = archive.store.rows("SELECT id, vec, scale FROM vec WHERE kind = ?", (KIND_MESSAGE,))
    by_id = {int(r[0]): (r[1], r[2]) for r in rows}
    blobs = [by_id[int(i)] for i in ids]
    ints = np.frombuffer(b"".join(b for b, _ in blobs), dtype=np.int8).reshape(len(blobs), vmodel.DIM)
    vectors = ints.astype(np.float32) * np.array([s for _, s in blobs], dtype=np.float32)[:, None]
    return codes, index.mean, vectors, ids


def timed(step, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    step()
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        out.append((time.perf_counter() - start) * 1000)
    return out


def pass_times(codes: np.ndarray, query_bits: np.ndarray, k: int, repeat: int) -> dict[str, dict[str, float]]:
    columns = bit_columns(codes)
    rows_way = lambda: np.argpartition(hamming(query_bits, codes), k)[:k]  # noqa: E731
    columns_way = lambda: smallest(hamming_columns(query_bits, columns), k)  # noqa: E731
    return {"rows": latency_summary(timed(rows_way, repeat)), "columns": latency_summary(timed(columns_way, repeat))}


def recall(
    vectors: np.ndarray, codes: np.ndarray, mean: np.ndarray, queries: np.ndarray, k: int, ratios: list[int]
) -> dict[int, float]:
    """Per ratio r: the mean share of the exact top k found among the best k * r by bits."""
    columns = bit_columns(codes)
    found = {r: 0.0 for r in ratios}
    for q in queries:
        query = vectors[q]
        exact = np.argsort(-(vectors @ query))
        exact = set(exact[exact != q][:k].tolist())
        distances = hamming_columns(sign_bits(query, mean)[0], columns)
        distances[q] = np.iinfo(distances.dtype).max  # the query's own unit is not its neighbour
        for r in ratios:
            found[r] += len(exact & set(smallest(distances, k * r).tolist())) / k
    return {r: round(v / len(queries), 4) for r, v in found.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, required=True, help="an archive with vectors and their index")
    ap.add_argument("--scale", type=int, default=1_000_000, help="units the codes are repeated to for timing")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    result = result_header("semantic_scan", {k: str(v) for k, v in vars(args).items()})
    codes, mean, vectors, _ = load(args.db)
    k = FUSE_DEPTH
    rng = np.random.default_rng(args.seed)
    query_bits = sign_bits(vectors[int(rng.integers(len(vectors)))], mean)[0]
    scaled = np.tile(codes, (max(1, args.scale // len(codes)), 1))
    times = {len(codes): pass_times(codes, query_bits, k * RESCORE_PER_HIT, args.repeat)}
    times[len(scaled)] = pass_times(scaled, query_bits, k * RESCORE_PER_HIT, max(5, args.repeat // 5))
    print(
        table(
            ["units", "layout", "p50 ms", "p95 ms", "max ms"],
            [[n, way, t["p50"], t["p95"], t["max"]] for n, both in times.items() for way, t in both.items()],
        )
    )
    ratios = [1, 2, 5, 10, 20]
    queries = rng.choice(len(vectors), size=min(args.queries, len(vectors)), replace=False)
    shares = {size: recall(vectors, codes, mean, queries, size, ratios) for size in (10, k)}
    print(
        table(
            ["exact top", *[f"in best {r}x by bits" for r in ratios]],
            [[size, *[s[r] for r in ratios]] for size, s in shares.items()],
        )
    )
    result.update(units=len(codes), rescore_per_hit=RESCORE_PER_HIT, k=k, pass_ms=times, recall=shares)
    save_json(args.json, result)


if __name__ == "__main__":
    main()
