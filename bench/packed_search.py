"""What packing `msg.text` costs a search: the same archive with its texts plain and packed, in one process.

Design idea: the only difference measured is the storage of the candidates' texts. The archive
given (e.g. `search_bench.py`'s 30k one) is copied twice: one copy keeps its rows packed (zstd with
the archive's dictionary, `storage/codec.py`), the other gets every `msg.text` written back as plain
TEXT (what main stored), so both hold the same messages, indexes and row ids. The query mix of
`search_bench.py` then runs on both, query by query, interleaved (a burst of load on the shared
machine hits all variants alike), timing each search's CPU: plain, packed with the searcher's text
cache emptied before every query (a query whose candidates were never seen), and packed with the
cache kept (a long-lived bridge, MCP server or web viewer).

    python bench/packed_search.py --db /tmp/pi-memory-search/search-30000.db --json bench/results/packed-search.json
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import latency_summary, result_header, save_json, table  # noqa: E402
from search_bench import query_mix  # noqa: E402

from pi_memory.archive.api import Archive  # noqa: E402
from pi_memory.storage.store import decode_text  # noqa: E402

VARIANTS = ("plain", "packed, cold cache", "packed, warm cache")


def copies(db: Path, work: Path) -> tuple[Path, Path]:
    """The archive as it is (packed) and a copy whose texts are plain TEXT again."""
    packed, plain = work / "packed.db", work / "plain.db"
    for target in (packed, plain):
        shutil.copyfile(db, target)
    with Archive.open(plain) as a:
        last = 0
        while rows := a.store.rows("SELECT id, text FROM msg WHERE id > ? ORDER BY id LIMIT 2000", (last,)):
            last = int(rows[-1][0])
            with a.store.write():
                for msg_id, text in rows:
                    a.store.execute("UPDATE msg SET text = ? WHERE id = ?", (decode_text(text), msg_id))
        kinds = a.store.rows("SELECT typeof(text), count(*) FROM msg GROUP BY 1")
    assert [k for k, _ in kinds] == ["text"], kinds
    return packed, plain


def measure(packed: Path, plain: Path, mix: list[tuple[str, str]], passes: int) -> dict[str, list[float]]:
    archives = {VARIANTS[0]: Archive.open(plain), VARIANTS[1]: Archive.open(packed), VARIANTS[2]: Archive.open(packed)}
    for a in archives.values():  # warm: df caches, page cache
        for q, _ in mix:
            a.search(q, limit=10)
    runs: dict[str, list[list[float]]] = {v: [[] for _ in mix] for v in VARIANTS}
    for _ in range(passes):
        for i, (q, _) in enumerate(mix):
            for variant, a in archives.items():
                if variant != VARIANTS[2]:
                    a.searcher._texts.clear()
                start = time.process_time()
                a.search(q, limit=10)
                runs[variant][i].append((time.process_time() - start) * 1000)
    for a in archives.values():
        a.close()
    return {v: [sorted(r)[len(r) // 2] for r in per_query] for v, per_query in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, required=True, help="an archive written by this code (packed texts)")
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--questions", type=int, default=150, help="questions per language")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    mix = query_mix(args.corpus, args.questions, args.seed)
    with tempfile.TemporaryDirectory(prefix="pi-memory-packed-") as tmp:
        packed, plain = copies(args.db, Path(tmp))
        medians = measure(packed, plain, mix, args.passes)
    kinds = sorted({k for _, k in mix}) + ["all"]
    summary: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        summary[kind] = {
            v: latency_summary([ms for ms, (_, k) in zip(medians[v], mix, strict=True) if kind in ("all", k)])
            for v in VARIANTS
        }
    rows = []
    for kind in kinds:
        s = summary[kind]
        base = s[VARIANTS[0]]
        rows.append(
            [kind, base["n"]]
            + [f"{s[v]['p50']:.2f} / {s[v]['p95']:.2f}" for v in VARIANTS]
            + [f"x{s[v]['p50'] / base['p50']:.2f} / x{s[v]['p95'] / base['p95']:.2f}" for v in VARIANTS[1:]]
        )
    print("search CPU ms per query, p50 / p95 (median of the passes per query)")
    print(table(["kind", "n", *VARIANTS, "cold / plain", "warm / plain"], rows))
    data = result_header("packed_search", {k: str(v) for k, v in vars(args).items()})
    data.update({"summary": summary})
    save_json(args.json, data)


if __name__ == "__main__":
    main()
