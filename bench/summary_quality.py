"""Recall of the summary track (run summaries, the model's first recall step), keyword vs hybrid vs semantic.

Design idea: the conversation sets of `bench/quality.py` already say which turn holds each turn
question's evidence; the run that holds that turn is the summary track's answer. So the histories
archive a `quality.py --keep` run left behind is reused: the run summaries of the chosen projects
are embedded (through the vector cache of `semantic_cache.py`, so a second run costs no model time),
and every turn question of the chosen sets is asked inside its project with `scope="summary"` in
each mode. R@1 and MRR@10 per set, each half apart; the time of each search beside them (the
questions' embeddings are made ahead, as in quality.py: the model's own time is not in them).

    python bench/quality.py --corpus ../shared/corpora --only project,hybrid --embed-parts histories \\
        --embed-projects realtalk --sets conv-realtalk --keep /tmp/keep --work /tmp/vcache
    python bench/summary_quality.py --keep /tmp/keep --work /tmp/vcache --projects realtalk \\
        --sets conv-realtalk --json bench/results/summary-quality.json
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality  # noqa: E402
from common import latency_summary, result_header, save_json, table  # noqa: E402
from qsets import Query, entry_id  # noqa: E402
from semantic_cache import CachedModel  # noqa: E402

from pi_memory import Archive  # noqa: E402
from pi_memory.vectors import keyed  # noqa: E402
from pi_memory.vectors import model as vmodel  # noqa: E402
from pi_memory.vectors.embed import embed_keyed  # noqa: E402

MODES = ("lexical", "hybrid", "semantic")


def target_runs(archive: Archive, queries: list[Query], turn_of_entry: dict[str, int]) -> list[set[int]]:
    """Per question, the runs holding its evidence turns."""
    msg_of = {}
    for msg_id, eid in archive.store.rows("SELECT id, entry_id FROM msg"):
        if eid in turn_of_entry:
            msg_of[turn_of_entry[eid]] = int(msg_id)
    run_of = {int(m): int(r) for m, r in archive.store.rows("SELECT msg_id, run_id FROM run_msg")}
    return [{run_of[msg_of[k]] for k in q.targets if k in msg_of and msg_of[k] in run_of} for q in queries]


def embed_summaries(archive: Archive, model: CachedModel, prefixes: tuple[str, ...]) -> tuple[int, float]:
    """The run summaries of the projects under `/home/dev/<prefix>`, embedded; (units, seconds)."""
    cwd = {str(s): str(c) for s, c in archive.store.rows("SELECT id, cwd FROM session")}
    folders = tuple(f"/home/dev/{p}" for p in prefixes)
    units = [u for u in keyed.run_units(archive.store) if cwd.get(u.session_id or "", "").startswith(folders)]
    start = time.perf_counter()
    for i in range(0, len(units), 64):
        embed_keyed(archive.store, model, units[i : i + 64])
    return len(units), time.perf_counter() - start


def ask(
    archive: Archive, queries: list[Query], targets: list[set[int]], mode: str
) -> tuple[dict[str, Any], list[float]]:
    """Each question in its project, one mode: metrics per set and each search's ms."""
    ranks: dict[str, list[int | None]] = {}
    ms: list[float] = []
    for q, wanted in zip(queries, targets, strict=True):
        start = time.perf_counter()
        hits = archive.search(q.text, limit=quality.K, project=q.project, scope="summary", mode=mode)
        ms.append((time.perf_counter() - start) * 1000)
        rank = next((i for i, h in enumerate(hits) if h.run.id in wanted), None)  # type: ignore[union-attr]
        ranks.setdefault(q.set, []).append(rank)
    return {s: quality.metrics(r) for s, r in ranks.items()}, ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", type=Path, required=True, help="the folder a `quality.py --keep` run left")
    ap.add_argument("--qsets", type=Path, default=Path("bench/data"), help="the public question sets")
    ap.add_argument("--work", type=Path, required=True, help="the vector cache's folder (quality.py --work)")
    ap.add_argument("--projects", default="realtalk", help="project prefixes whose run summaries are embedded")
    ap.add_argument("--sets", default="conv-realtalk", help="question set prefixes (turn questions only)")
    ap.add_argument("--seed", type=int, default=2018, help="quality.py's seed (the same questions)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    header = result_header("summary_quality", {k: str(v) for k, v in vars(args).items()})
    prefixes = tuple(p for p in args.projects.split(",") if p)
    qs = quality.load_qsets(args.qsets, 0, [], False, random.Random(args.seed))
    queries = [
        q
        for q in qs.queries
        if q.set.startswith(tuple(args.sets.split(",")))
        and q.level == "message"
        and (q.project or "").startswith(prefixes)
    ]
    turn_of_entry = {entry_id(t.key): t.key for s in qs.sessions for t in s.turns}
    archive = Archive.open(args.keep / "histories" / "quality.db")
    model = CachedModel(vmodel.load(), args.work / "vectors-cache.db")
    archive.use_embedder(model)
    units, seconds = embed_summaries(archive, model, prefixes)
    print(f"{units} run summaries embedded ({model.embedded} not cached) in {seconds:.0f} s", flush=True)
    model.cached_queries([q.text for q in queries])
    targets = target_runs(archive, queries, turn_of_entry)
    results, latency = {}, {}
    for mode in MODES:
        results[mode], ms = ask(archive, queries, targets, mode)
        latency[mode] = latency_summary(ms)
    archive.close()
    rows = [
        [s, quality.split_of(s), mode, m["n"], m["R@1"], m["R@5"], m["R@10"], m["MRR@10"]]
        for s in sorted(results["lexical"])
        for mode in MODES
        if (m := results[mode][s])
    ]
    print(table(["query set", "half", "summary track", "n", "R@1", "R@5", "R@10", "MRR@10"], rows))
    print(
        table(
            ["mode", "p50 ms", "p95 ms", "max ms"],
            [[m, *[latency[m][k] for k in ("p50", "p95", "max")]] for m in MODES],
        )
    )
    header.update({"run_summaries": units, "questions": len(queries), "results": results, "latency_ms": latency})
    save_json(args.json, header)


if __name__ == "__main__":
    main()
