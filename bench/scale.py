"""Scale benchmark: does search stay fast as the archive grows to a million messages?

Design idea: one archive is grown in batches through the real import path
(`Archive.import_paths` on generated pi session files, the spec's corpus mix,
~625-char messages cut at random offsets, ~40 per session); a copy is kept at
each requested size. Each copy is then searched with a fixed query mix (the
spec's 9 hand queries plus 1-char, 2-char, rare, very common, mixed and
identifier queries) and, in the same run and on the same DB, two baselines:
FTS5 ordered by `bm25()` and a `LIKE` scan (sampled with fewer queries at the
largest size to keep the run bounded). Peak RSS is read after every batch:
if the import streams, it stays flat from the first size to the last.

    python bench/scale.py --corpus ../shared/corpora --sizes 30000,300000,1000000 \
        --work /tmp/pi-memory-scale --json bench/results/scale.json
    python bench/scale.py --work /tmp/pi-memory-scale --reuse      # re-measure search only
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import HAND_QUERIES, Timer, grow_archive, latency_summary, result_header, save_json, table  # noqa: E402
from corpus import MESSAGES_PER_SESSION, corpus_docs, synthetic_texts, write_session  # noqa: E402

from pi_memory.archive.api import Archive  # noqa: E402
from pi_memory.core.text import fts_or, query_tokens  # noqa: E402
from pi_memory.storage.store import decode_text  # noqa: E402

BATCH_SESSIONS = 250  # 10k messages generated, imported, deleted at a time

QUERY_MIX: list[tuple[str, str]] = [(q, "hand") for q in HAND_QUERIES] + [
    ("龙", "1-char"),
    ("的", "1-char common"),
    ("组件", "2-char"),
    ("林黛玉", "3-char"),
    ("Queequeg harpoon", "rare"),
    ("defineEmits", "rare identifier"),
    ("the", "very common"),
    ("我们", "very common"),
    ("Vue 响应式", "mixed"),
    ("nextTick 更新", "mixed"),
    ("v-model 组件", "mixed"),
    ("Elizabeth Darcy letter", "english"),
]


def build(corpus: Path, sizes: list[int], work: Path, seed: int) -> list[dict[str, Any]]:
    """Grow one archive to each size through the import path, keeping a copy at each size."""
    docs = corpus_docs(corpus)
    rng = random.Random(seed)
    session_no = 0

    def write_batch(folder: Path, remaining: int) -> None:
        nonlocal session_no
        n = min(BATCH_SESSIONS * MESSAGES_PER_SESSION, remaining)
        texts = synthetic_texts(docs, rng, n)
        for start in range(0, n, MESSAGES_PER_SESSION):
            chunk = texts[start : start + MESSAGES_PER_SESSION]
            write_session(folder, [t for _, t in chunk], chunk[0][0], session_no, rng)
            session_no += 1

    return grow_archive(work, sizes, write_batch, "scale")


def bm25_query(archive: Archive, query: str) -> list[int]:
    toks = query_tokens(query)
    if not toks:
        return []
    sql = "SELECT rowid FROM msg_fts WHERE msg_fts MATCH ? ORDER BY bm25(msg_fts) LIMIT 10"
    return [int(r[0]) for r in archive.store.conn.execute(sql, (fts_or(toks),))]


def like_query(archive: Archive, query: str) -> list[int]:
    """A scan with LIKE; message text is stored compressed, so the scan decodes each row (as any scan must)."""
    pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    archive.store.conn.create_scalar_function("decode_text", decode_text, 1, deterministic=True)
    sql = "SELECT id FROM msg WHERE indexed AND decode_text(text) LIKE ? ESCAPE '\\' ORDER BY id DESC LIMIT 10"
    return [int(r[0]) for r in archive.store.conn.execute(sql, (pattern,))]


def measure(db: Path, passes: int, baseline_queries: int) -> dict[str, Any]:
    archive = Archive.open(db)
    archive.preload_search()  # NumPy, loaded at a first search otherwise: not a query's cost (the servers load it at start)
    per_query: dict[str, list[float]] = {q: [] for q, _ in QUERY_MIX}
    cold: list[float] = []
    for p in range(passes):
        for q, _kind in QUERY_MIX:
            with Timer() as t:
                archive.search(q, limit=10)
            per_query[q].append(t.ms)
            if p == 0:
                cold.append(t.ms)
    warm = [ms for q in per_query for ms in per_query[q][1:]] or cold
    result: dict[str, Any] = {
        "project_cold": latency_summary(cold),
        "project": latency_summary(warm),
        "per_query_ms": {q: round(max(v), 2) for q, v in per_query.items()},
    }
    sample = QUERY_MIX[:baseline_queries]
    for name, fn in (("fts5_bm25", bm25_query), ("like", like_query)):
        ms = []
        for q, _ in sample:
            with Timer() as t:
                fn(archive, q)
            ms.append(t.ms)
        result[name] = latency_summary(ms)
    archive.close()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--sizes", default="30000,300000,1000000", help="comma-separated message counts")
    ap.add_argument("--work", type=Path, default=Path("/tmp/pi-memory-scale"), help="folder for the archives")
    ap.add_argument("--reuse", action="store_true", help="measure search on archives built by an earlier run")
    ap.add_argument("--passes", type=int, default=3, help="times the query mix is run (first pass is cold)")
    ap.add_argument("--baseline-queries", default="", help="per size, queries for bm25/LIKE, e.g. 21,21,8")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    header = result_header("scale", {k: str(v) for k, v in vars(args).items()})  # the commit being measured
    sizes = [int(s) for s in args.sizes.split(",") if s]
    args.work.mkdir(parents=True, exist_ok=True)
    builds_file = args.work / "builds.json"
    if args.reuse:
        # import figures of the run that built the archives (search is what --reuse re-measures)
        builds = json.loads(builds_file.read_text()) if builds_file.exists() else []
    else:
        builds = build(args.corpus, sizes, args.work, args.seed)
        builds_file.write_text(json.dumps(builds))
    caps = [int(x) for x in args.baseline_queries.split(",") if x] or [
        len(QUERY_MIX) if s < 500_000 else 8 for s in sizes
    ]
    searches = {}
    for size, cap in zip(sizes, caps, strict=False):
        print(f"measuring search at {size} ...", flush=True)
        searches[size] = measure(args.work / f"scale-{size}.db", args.passes, cap)
    rows = []
    for size in sizes:
        s = searches[size]
        b = next((x for x in builds if x["size"] == size), {})
        db_bytes = (args.work / f"scale-{size}.db").stat().st_size
        rows.append(
            [
                size,
                b.get("import_msgs_per_s", "-"),
                b.get("peak_rss_mb", "-"),
                round(db_bytes / size),
                s["project"]["p50"],
                s["project"]["p95"],
                s["project"]["max"],
                s["project_cold"]["max"],
                s["fts5_bm25"]["p95"],
                s["like"]["p95"],
            ]
        )
    print()
    head = ["messages", "import msg/s", "peak RSS MB", "DB B/msg", "p50 ms", "p95 ms", "max ms", "cold max"]
    print(table(head + ["bm25 p95", "LIKE p95"], rows))
    ratio = searches[sizes[-1]]["project"]["p95"] / max(searches[sizes[0]]["project"]["p95"], 1e-9)
    print(f"\np95({sizes[-1]}) / p95({sizes[0]}) = {ratio:.2f}")
    print("\nslowest queries at the largest size (ms, max over passes):")
    worst = sorted(searches[sizes[-1]]["per_query_ms"].items(), key=lambda kv: -kv[1])[:8]
    print(table(["query", "ms"], [[q, v] for q, v in worst]))
    data = header
    data.update({"builds": builds, "search": {str(k): v for k, v in searches.items()}, "p95_ratio": round(ratio, 3)})
    data["queries"] = [{"query": q, "kind": k} for q, k in QUERY_MIX]
    save_json(args.json, data)


if __name__ == "__main__":
    main()
