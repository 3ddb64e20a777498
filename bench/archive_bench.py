"""Archive benchmark (issue 2): import rate, live write latency, search latency, sizes.

Design idea: measure the paths a user hits, through the library's own entry
points: the corpus mix as pi session files imported with `Archive.import_paths`;
live capture as `ingest.write_messages` with one message per call (what the pi
extension does after each turn); search as `Archive.search` over a query mix
that includes the spec's 9 hand queries. Sizes come from the DB itself: total
bytes per message, FTS index bytes per indexed message (SQLite's `dbstat`
virtual table), verbatim store bytes against the source files' bytes.

    python bench/archive_bench.py --corpus ../shared/corpora --json bench/results/archive.json
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import HAND_QUERIES, Timer, latency_summary, result_header, save_json, table  # noqa: E402
from corpus import corpus_docs, write_docs_as_sessions  # noqa: E402

from pi_memory.archive.api import Archive  # noqa: E402
from pi_memory.core.render import message_hash  # noqa: E402
from pi_memory.storage.store import NewMessage, SessionRow  # noqa: E402
from pi_memory.storage.writes import run_deferred_hooks, write_messages  # noqa: E402

EXTRA_QUERIES = ["龙", "组件", "Vue 响应式", "defineEmits", "Elizabeth Darcy", "nextTick 更新", "the", "我们"]


def table_bytes(archive: Archive) -> dict[str, int] | None:
    """Bytes per table (indexes and FTS shadow tables included), from `dbstat` when compiled in."""
    try:
        rows = archive.store.rows("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
    except Exception:  # noqa: BLE001 - dbstat is an optional SQLite feature
        return None
    return {str(n): int(b) for n, b in rows}


def live_writes(archive: Archive, docs: list[str], n: int) -> list[float]:
    """`n` single-message writes into one live session, as the bridge makes them for the extension.

    Like `pi-memory bridge`, the connection puts run summaries and WAL checkpoints off until an
    idle moment; every 40 messages (a turn's worth) that idle work runs, untimed.
    """
    store = archive.store
    store.defer_checkpoints()
    store.defer_hooks()
    sid = "live-bench-session"
    with store.write():
        store.ensure_session(SessionRow(sid, "pi", "/home/dev/live", "live", 1, 1))
    ms = []
    for i in range(n):
        text = docs[i % len(docs)]
        m = NewMessage(
            sid, 1_800_000_000_000 + i, "user" if i % 2 == 0 else "assistant", text, True, None, None, {}, ""
        )
        m.hash = message_hash(m.role, m.ts, text)
        with Timer() as t:
            m.prepare()
            write_messages(store, sid, [m])
        ms.append(t.ms)
        if i % 40 == 39:
            run_deferred_hooks(store)
            store.checkpoint()
    run_deferred_hooks(store)
    return ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--live", type=int, default=500, help="single-message writes to time")
    ap.add_argument("--passes", type=int, default=5, help="times the query mix is run")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    header = result_header("archive", {k: str(v) for k, v in vars(args).items()})  # the commit being measured
    work = Path(tempfile.mkdtemp(prefix="pi-memory-bench-"))
    try:
        docs = corpus_docs(args.corpus)
        sessions = work / "sessions"
        write_docs_as_sessions(docs, sessions)
        source_bytes = sum(p.stat().st_size for p in sessions.rglob("*.jsonl"))
        archive = Archive.open(work / "bench.db")
        with Timer() as t_import:
            report = archive.import_paths([sessions])
        import_rate = report.added / (t_import.ms / 1000)
        rng = random.Random(5)
        live = live_writes(archive, [d.text for d in rng.sample(docs, 200)], args.live)
        queries = HAND_QUERIES + EXTRA_QUERIES
        search_ms: list[float] = []
        per_query: dict[str, float] = {}
        for _ in range(args.passes):
            for q in queries:
                with Timer() as t:
                    archive.search(q, limit=10)
                search_ms.append(t.ms)
                per_query[q] = max(per_query.get(q, 0.0), t.ms)
        archive.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        stats = archive.stats()
        sizes = table_bytes(archive)
        fts_bytes = sum(b for n, b in (sizes or {}).items() if n.startswith("msg_fts"))
        entry_bytes = sum(b for n, b in (sizes or {}).items() if n.startswith("entry"))
        archive.close()
        data = header
        data.update(
            {
                "messages": stats.messages,
                "import_messages": report.added,
                "import_msgs_per_s": round(import_rate, 1),
                "live_write_ms": latency_summary(live),
                "search_ms": latency_summary(search_ms),
                "search_max_per_query_ms": {q: round(v, 2) for q, v in per_query.items()},
                "db_bytes": stats.db_bytes,
                "db_bytes_per_msg": round(stats.db_bytes / max(stats.messages, 1), 1),
                "index_bytes_per_indexed_msg": round(fts_bytes / max(stats.indexed, 1), 1) if sizes else None,
                "verbatim_store_bytes": entry_bytes if sizes else None,
                "source_bytes": source_bytes,
                "table_bytes": sizes,
            }
        )
        rows = [
            ["messages imported", report.added],
            ["import msg/s", round(import_rate)],
            ["live write p50 / p99 ms", f"{data['live_write_ms']['p50']} / {data['live_write_ms']['p99']}"],
            [
                "search p50 / p95 / max ms",
                f"{data['search_ms']['p50']} / {data['search_ms']['p95']} / {data['search_ms']['max']}",
            ],
            ["DB bytes per message", data["db_bytes_per_msg"]],
            ["FTS index bytes per indexed message", data["index_bytes_per_indexed_msg"]],
            ["verbatim store bytes / source bytes", f"{entry_bytes} / {source_bytes}" if sizes else "dbstat missing"],
        ]
        print(table(["measure", "value"], rows))
        print()
        print(table(["query", "max ms"], [[q, round(v, 2)] for q, v in per_query.items()]))
        save_json(args.json, data)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
