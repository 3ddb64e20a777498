"""Where run summaries are indexed: in `msg_fts` above the messages (a new archive) or in `run_fts`
(an archive created before), the same sessions imported into both, search compared query by query.

Design idea: moving the runs into the messages' index made the import cheaper (one hash, one sort
and one set of merges per transaction instead of two); what it may cost is search, since a message
query now scans doclists that hold run postings above its bound and a run query doclists that hold
message postings below it. So the one realistic archive (`realistic.py`: short and long sessions,
log-normal replies, tool calls) is imported by this code twice, once per layout, and the query mix
of `search_bench.py` (natural-language questions in Chinese and English, hand queries, single
characters, common and rare words) runs on both, content and summary scope, alternating layouts in
one process (CPU time per query, each query's median over passes and rounds). Every query must give
the same hits with the same scores in both layouts: the benchmark stops if one does not.

    python bench/run_index_ab.py --corpus ../shared/corpora --messages 100000 --json bench/results/run-index-ab.json
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import result_header, save_json, table  # noqa: E402
from realistic import SessionWriter, load_pools  # noqa: E402
from search_bench import by_kind, query_mix  # noqa: E402

from pi_memory.archive.api import Archive  # noqa: E402

LAYOUTS = ("msg_fts", "run_fts")  # where the run summaries are: this code's new archive, an older one
SCOPES = ("content", "summary")
# the run summaries' own index as archives created before the move have it
RUN_FTS = """CREATE VIRTUAL TABLE run_fts USING fts5(chars, grams, content = '', contentless_delete = 1,
                                                   tokenize = "ascii tokenchars '_'", detail = 'none')"""


def build(folder: Path, work: Path) -> dict[str, Any]:
    """Import the sessions in `folder` into one archive per layout; their import CPU and size."""
    out = {}
    for layout in LAYOUTS:
        db = work / f"{layout}.db"
        if layout == "run_fts":
            with Archive.open(db) as made:
                with made.store.write():
                    made.store.execute(RUN_FTS)
        cpu = time.process_time()
        with Archive.open(db) as archive:
            added = archive.import_paths([folder]).added
            assert archive.store.runs_in_msg_fts == (layout == "msg_fts")
            archive.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cpu = time.process_time() - cpu
        out[layout] = {
            "messages": added,
            "import_cpu_ms_per_msg": round(cpu / added * 1000, 4),
            "bytes_per_msg": round(db.stat().st_size / added, 1),
        }
        print(f"  {layout}: {out[layout]}", flush=True)
    return out


def answers(archive: Archive, mix: list[tuple[str, str]], scope: str) -> list[list[tuple[int, float]]]:
    out = []
    for q, _ in mix:
        hits = archive.search(q, limit=10, scope=scope)
        out.append([(getattr(h, "msg_id", None) or h.run.id, round(h.score, 9)) for h in hits])  # type: ignore[union-attr]
    return out


def cpu_ms(archive: Archive, mix: list[tuple[str, str]], scope: str, passes: int) -> list[list[float]]:
    runs: list[list[float]] = [[] for _ in mix]
    for _ in range(passes):
        for i, (q, _) in enumerate(mix):
            start = time.process_time()
            archive.search(q, limit=10, scope=scope)
            runs[i].append((time.process_time() - start) * 1000)
    return runs


def compare(work: Path, mix: list[tuple[str, str]], passes: int, rounds: int) -> dict[str, Any]:
    archives = {layout: Archive.open(work / f"{layout}.db") for layout in LAYOUTS}
    for scope in SCOPES:
        same = answers(archives["msg_fts"], mix, scope) == answers(archives["run_fts"], mix, scope)
        if not same:
            raise SystemExit(f"the two layouts gave different {scope} hits: a defect, not a speed figure")
    times = {(layout, scope): [[] for _ in mix] for layout in LAYOUTS for scope in SCOPES}
    for _ in range(rounds):
        for layout, archive in archives.items():
            for scope in SCOPES:
                for i, t in enumerate(cpu_ms(archive, mix, scope, passes)):
                    times[(layout, scope)][i] += t
    for archive in archives.values():
        archive.close()
    return {
        f"{layout}/{scope}": by_kind(mix, [sorted(t)[len(t) // 2] for t in per_query])
        for (layout, scope), per_query in times.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--questions", type=int, default=150)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    result = result_header("run_index_ab", vars(args))
    work = args.work or Path(tempfile.mkdtemp(prefix="pi-memory-run-index-"))
    for layout in LAYOUTS:
        for p in work.glob(f"{layout}.db*"):
            p.unlink()
    folder = work / "sessions"
    shutil.rmtree(folder, ignore_errors=True)
    SessionWriter(load_pools(args.corpus), random.Random(args.seed)).write(folder, args.messages)
    result["builds"] = build(folder, work)
    mix = query_mix(args.corpus, args.questions, args.seed)
    result["queries"] = len(mix)
    result["search_cpu_ms"] = compare(work, mix, args.passes, args.rounds)
    rows = []
    for kind in result["search_cpu_ms"]["msg_fts/content"]:
        row: list[Any] = [kind]
        for scope in SCOPES:
            new, old = (result["search_cpu_ms"][f"{layout}/{scope}"][kind] for layout in LAYOUTS)
            row += [new["p50"], old["p50"], new["p95"], old["p95"], round(new["p95"] / max(old["p95"], 1e-9), 2)]
        rows.append(row)
    head = ["kind"]
    for scope in SCOPES:
        head += [f"{scope} p50 msg_fts", "run_fts", "p95 msg_fts", "run_fts", "p95 ratio"]
    print(table(head, rows))
    save_json(args.json, result)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
