"""Session-level fusion replayed from recorded sides: how far the fusion's constants can move recall.

Design idea: a session-level hybrid question costs a search with the model's vectors, and a sweep
of the fusion's two constants (`fuse.LEXICAL_WEIGHT`, `fuse.SESSION_VECTOR_SPREAD`) would repeat
every search for each point. But the fusion only combines two numbers per candidate session, its
keyword score and its meaning score, which do not depend on those constants. `bench/quality.py
--session-sides FILE` records them once per question (`HybridSearcher.session_sides`); this script
fuses them through the searcher's own `hybrid.fuse_sessions` at every point of a grid and prints,
per half of the sets, how many questions have their session first, beside keywords alone, meaning
alone and the either-side oracle (a question either side alone puts first). With the constants in
use it reproduces the bench's hybrid figures; "keywords" here is the keyword side among the
hybrid's candidate sessions, equal scores in no particular order, so it can differ from the bench's
lexical figure by a question.

    python bench/quality.py --corpus ../shared/corpora --qsets bench/data --sets conv-,long-,mix- \\
        --only hybrid --work /tmp/vcache --embed-parts histories \\
        --embed-projects realtalk,memdaily,longrep,mixa,mixb --session-sides /tmp/sides.jsonl
    python bench/session_fusion.py /tmp/sides.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from common import result_header, save_json, table  # noqa: E402

from pi_memory.vectors import fuse  # noqa: E402
from pi_memory.vectors.hybrid import fuse_sessions  # noqa: E402

Ranker = Callable[[dict[str, Any]], list[str]]
WEIGHTS = (0.2, 0.3, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8)
SPREADS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5)


def by_keywords(row: dict[str, Any]) -> list[str]:
    """Sessions by keyword score alone (those the keyword side found)."""
    kw = row["keywords"]
    return sorted((k for k in kw if kw[k] > 0), key=lambda k: -kw[k])


def by_meaning(row: dict[str, Any]) -> list[str]:
    mean = row["meaning"]
    return sorted(mean, key=lambda k: -mean[k])


def fused(weight: float, spread: float) -> Ranker:
    """Sessions as `HybridSearcher.session_scores` ranks them, at these constants."""

    def rank(row: dict[str, Any]) -> list[str]:
        return list(fuse_sessions(row["keywords"], row["meaning"], weight, spread))

    return rank


def either(row: dict[str, Any]) -> list[str]:
    """The oracle: keywords' order when its first is right, else meaning's."""
    first = by_keywords(row)
    return first if first and int(first[0]) in row["targets"] else by_meaning(row)


def firsts(rows: Iterable[dict[str, Any]], rank: Ranker) -> dict[str, tuple[int, int]]:
    """set -> (questions whose session `rank` puts first, questions)."""
    out: dict[str, tuple[int, int]] = {}
    for row in rows:
        order = rank(row)
        hit = int(bool(order) and int(order[0]) in row["targets"])
        got, n = out.get(row["set"], (0, 0))
        out[row["set"]] = (got + hit, n + 1)
    return out


def halves(per_set: dict[str, tuple[int, int]], half_of: dict[str, str]) -> dict[str, int]:
    """half -> questions first, summed over its sets."""
    out: dict[str, int] = {}
    for name, (got, _) in per_set.items():
        out[half_of[name]] = out.get(half_of[name], 0) + got
    return out


def worst_against(per_set: dict[str, tuple[int, int]], base: dict[str, tuple[int, int]], sets: list[str]) -> str:
    """The set furthest under `base` among `sets`, as 'name -N' (questions), or '' when none is under."""
    gap, name = min((per_set[s][0] - base[s][0], s) for s in sets)
    return f"{name} {gap:+d}" if gap < 0 else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sides", type=Path, help="the JSON lines of bench/quality.py --session-sides")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    data = result_header("session_fusion", {k: str(v) for k, v in vars(args).items()})
    rows = [json.loads(line) for line in args.sides.open()]
    if not rows:
        sys.exit("session_fusion: no session-level question in that file")
    half_of = {r["set"]: r["half"] for r in rows}
    report_sets = sorted(s for s, h in half_of.items() if h == "report")
    keywords = firsts(rows, by_keywords)
    named: dict[str, Ranker] = {
        "keywords": by_keywords,
        "meaning": by_meaning,
        f"in use ({fuse.LEXICAL_WEIGHT}, {fuse.SESSION_VECTOR_SPREAD})": fused(
            fuse.LEXICAL_WEIGHT, fuse.SESSION_VECTOR_SPREAD
        ),
        "either side first (oracle)": either,
    }
    measured = {label: firsts(rows, rank) for label, rank in named.items()}
    grid = {(w, s): firsts(rows, fused(w, s)) for w in WEIGHTS for s in SPREADS}
    for half in ("fit", "report"):
        w, s = max(grid, key=lambda ws: (halves(grid[ws], half_of).get(half, 0), -abs(ws[0] - fuse.LEXICAL_WEIGHT)))
        measured[f"best of the grid on the {half} half ({w}, {s})"] = grid[(w, s)]
    rows_out = [
        [label, halves(per_set, half_of).get("fit", 0), halves(per_set, half_of).get("report", 0)]
        + [worst_against(per_set, keywords, report_sets)]
        for label, per_set in measured.items()
    ]
    print(table(["session fusion", "fit: first", "report: first", "worst report set vs keywords"], rows_out))
    print()
    set_names = sorted(half_of)
    print(
        table(
            ["session R@1", *[s.removesuffix("-session") for s in set_names]],
            [[label, *[per_set[s][0] / per_set[s][1] for s in set_names]] for label, per_set in measured.items()],
        )
    )
    grid_out = {f"{w},{s}": {k: v[0] for k, v in per_set.items()} for (w, s), per_set in grid.items()}
    data.update({"questions": {s: n for s, (_, n) in keywords.items()}, "half": half_of})
    data.update({"first": {label: {k: v[0] for k, v in ps.items()} for label, ps in measured.items()}})
    data["grid"] = grid_out
    save_json(args.json, data)


if __name__ == "__main__":
    main()
