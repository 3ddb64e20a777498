"""Memory recall: questions asked of a workspace's remembered notes (`memory list QUERY`, the
model's `memory_search`), against FTS5 bm25 and a stemmed bm25 over the same notes.

Usage:
    python bench/memory_recall.py [--qsets bench/data] [--sets memdaily,realtalk] [--group 1] [--semantic --work DIR]
                                  [--json bench/results/memory-recall.json]

What a memory store holds is what a user told the agent to remember: short statements of fact.
The public sets of bench/quality.py have them (`bench/qsets_build.py` builds `bench/data`):

- `memdaily` (Chinese): a user's daily statements ("my boss's phone number is ..."), and a question
  whose evidence is one or more of them; each user's ~9 notes one workspace, as a user's memories
  are (`--group N`: N users in one workspace, a harder and partly unanswerable case: "my boss's
  phone number" then matches N bosses; at 20, every system's R@1 was ~0.52).
- `realtalk` (English): each conversation of two people one workspace, every turn remembered as a
  note; the set's questions with their evidence turns.

Each note is remembered by the user (`Archive.memory_remember`: authoritative); identical notes in
one workspace are one memory. A question is asked inside its workspace (`Archive.memory_list`) and
scored R@1 / R@5 / R@10 / MRR@10 on its first evidence note. The baselines index the same notes in
FTS5 (the project's query tokens OR'ed, as bench/quality.py's `bm25`; and its `stem`, a
Lucene-like analyzer with Snowball stems), one workspace at a time, so that their document
frequencies are the workspace's, as the project's are. With `--semantic`
(the `semantic` extra) the notes are embedded through the archive's own path (vectors cached by
text under --work) and `hybrid` and `semantic` are asked as well. No constant is fitted here:
workspaces alternate between halves `a` and `b` and both are reported.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Timer, result_header, save_json, table  # noqa: E402
from qsets import read_set, snowball, stem_channels, stemmed_query  # noqa: E402
from quality import K, bm25_or, first_rank, metrics  # noqa: E402

from pi_memory.archive.api import Archive  # noqa: E402
from pi_memory.core.text import query_tokens, tokenize  # noqa: E402


@dataclass
class Workspace:
    name: str  # the set and half: memdaily-a, realtalk-b ...
    cwd: str
    notes: list[str]  # distinct, in the order remembered
    questions: list[tuple[str, frozenset[int]]]  # text, indexes of its evidence notes


def memdaily_workspaces(rows: list[dict[str, Any]], group: int) -> list[Workspace]:
    out = []
    for w, start in enumerate(range(0, len(rows), group)):
        ws = Workspace(f"memdaily-{'ab'[w % 2]}", f"/home/dev/memdaily-{w}", [], [])
        index: dict[str, int] = {}
        for row in rows[start : start + group]:
            at = {str(m["mid"]): _note(ws, index, m["text"]) for m in row["messages"]}
            targets = frozenset(at[str(t)] for t in row["targets"] if str(t) in at)
            if targets and row["q"].strip():
                ws.questions.append((row["q"], targets))
        out.append(ws)
    return out


def realtalk_workspaces(rows: list[dict[str, Any]]) -> list[Workspace]:
    out = []
    for w, row in enumerate(rows):
        ws = Workspace(f"realtalk-{'ab'[w % 2]}", f"/home/dev/realtalk-{w}", [], [])
        index: dict[str, int] = {}
        at = {t["id"]: _note(ws, index, t["text"]) for s in row["sessions"] for t in s["turns"]}
        for qa in row["qa"]:
            targets = frozenset(at[e] for e in qa["evidence"] if e in at)
            if targets and qa["q"].strip():
                ws.questions.append((qa["q"], targets))
        out.append(ws)
    return out


def _note(ws: Workspace, index: dict[str, int], text: str) -> int:
    text = " ".join(text.split())
    if text not in index:
        index[text] = len(ws.notes)
        ws.notes.append(text)
    return index[text]


class Baselines:
    """FTS5 bm25 over the notes, plain (the project's tokens) and stemmed, asked per workspace.

    Each workspace is its own collection, as the project's memory search counts document
    frequencies over the workspace's memories: one table for every workspace would give the
    baselines frequencies that depend on which other sets are in the run."""

    def __init__(self, stem: bool) -> None:
        import apsw

        self.conn = apsw.Connection(":memory:")
        self.stemmer = snowball() if stem else None
        self.current: str | None = None

    def _use(self, ws: Workspace) -> None:
        if ws.cwd == self.current:
            return
        with self.conn:
            for name in ("bl", "st"):
                self.conn.execute(f"DROP TABLE IF EXISTS {name}")
                self.conn.execute(
                    f"""CREATE VIRTUAL TABLE {name} USING fts5(note UNINDEXED, chars, grams,
                        tokenize="ascii tokenchars '_'", detail=full)"""
                )
            for i, text in enumerate(ws.notes):
                toks = tokenize(text)
                self.conn.execute("INSERT INTO bl VALUES (?,?,?)", (i, toks.chars_text(), toks.grams_text()))
                if self.stemmer is not None:
                    chars, grams = stem_channels(text, self.stemmer)
                    self.conn.execute("INSERT INTO st VALUES (?,?,?)", (i, " ".join(chars), " ".join(grams)))
        self.current = ws.cwd

    def _ask(self, table_name: str, expr: str, ws: Workspace) -> list[int]:
        if not expr:
            return []
        self._use(ws)
        sql = f"SELECT note FROM {table_name} WHERE {table_name} MATCH ? ORDER BY bm25({table_name}) LIMIT ?"
        return [int(r[0]) for r in self.conn.execute(sql, (expr, K))]

    def bm25(self, ws: Workspace, question: str) -> list[int]:
        return self._ask("bl", bm25_or(query_tokens(question)), ws)

    def stem(self, ws: Workspace, question: str) -> list[int]:
        assert self.stemmer is not None
        return self._ask("st", stemmed_query(question, self.stemmer), ws)


def remember_all(archive: Archive, workspaces: list[Workspace]) -> dict[str, int]:
    """Every note remembered by the user; memory id -> note index (per workspace ids are unique)."""
    note_of: dict[str, int] = {}
    for ws in workspaces:
        for i, text in enumerate(ws.notes):
            note_of[archive.memory_remember(ws.cwd, text).record.id] = i
    return note_of


def ask_project(archive: Archive, note_of: dict[str, int], mode: str) -> Any:
    def run(ws: Workspace, question: str) -> list[int]:
        found = archive.memory_list(ws.cwd, question, mode=mode).found[:K]
        return [note_of.get(f.record.id, -1) for f in found]

    return run


def rounded(figures: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in figures.items()}


def embed(archive: Archive, work: Path, workspaces: list[Workspace]) -> None:
    """The notes embedded through the archive's own path (`pi-memory embed`), vectors cached by text."""
    from semantic_cache import CachedModel

    from pi_memory.vectors import model as vmodel

    work.mkdir(parents=True, exist_ok=True)
    model = CachedModel(vmodel.load(), work / "vectors-cache.db")
    archive.use_embedder(model)
    with Timer() as t:
        report = archive.embed()
        model.cached_queries([q for ws in workspaces for q, _ in ws.questions])
    print(f"  embedded {report.embedded} units ({model.embedded} not cached) in {t.ms / 1000:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qsets", type=Path, default=Path("bench/data"), help="the public sets (bench/qsets_build.py)")
    ap.add_argument("--group", type=int, default=1, help="MemDaily users sharing one workspace")
    ap.add_argument("--semantic", action="store_true", help="also hybrid and semantic (the `semantic` extra)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/pi-memory-quality-work"), help="the vector cache")
    ap.add_argument("--sets", default="memdaily,realtalk", help="which of the two sets (comma-separated)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    header = result_header("memory-recall", {k: str(v) for k, v in vars(args).items()})
    missing = [n for n in ("memdaily", "realtalk") if not (args.qsets / n / f"{n}.jsonl.gz").exists()]
    if missing:
        sys.exit(f"memory_recall: no {', '.join(missing)} under {args.qsets}: build them with bench/qsets_build.py")
    wanted = args.sets.split(",")
    workspaces = memdaily_workspaces(read_set(args.qsets, "memdaily"), args.group) if "memdaily" in wanted else []
    workspaces += realtalk_workspaces(read_set(args.qsets, "realtalk")) if "realtalk" in wanted else []
    notes = sum(len(ws.notes) for ws in workspaces)
    questions = sum(len(ws.questions) for ws in workspaces)
    print(f"{len(workspaces)} workspaces, {notes} notes, {questions} questions", flush=True)
    with tempfile.TemporaryDirectory(prefix="pi-memory-memrecall-") as tmp:
        # the memory log's key and pinned heads go to a folder of the run's own, not the user's
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")
        run_all(Path(tmp) / "m.db", workspaces, args, header, notes, questions)


def run_all(
    db: Path, workspaces: list[Workspace], args: argparse.Namespace, header: dict[str, Any], notes: int, questions: int
) -> None:
    with Archive.open(db) as archive:
        with Timer() as t:
            note_of = remember_all(archive, workspaces)
        print(f"  remembered in {t.ms / 1000:.0f} s", flush=True)
        base = Baselines(stem=True)
        systems = {"project": ask_project(archive, note_of, "lexical"), "bm25": base.bm25, "stem": base.stem}
        if args.semantic:
            embed(archive, args.work, workspaces)
            systems["hybrid"] = ask_project(archive, note_of, "hybrid")
            systems["semantic"] = ask_project(archive, note_of, "semantic")
        ranks: dict[str, dict[str, list[int | None]]] = {}
        for ws in workspaces:
            for question, targets in ws.questions:
                for name, run in systems.items():
                    ranks.setdefault(ws.name, {}).setdefault(name, []).append(first_rank(run(ws, question), targets))
    results = {s: {name: rounded(metrics(r)) for name, r in by.items()} for s, by in sorted(ranks.items())}
    rows = [
        [s, name, m["n"], m["R@1"], m["R@5"], m["R@10"], m["MRR@10"]]
        for s, by in results.items()
        for name, m in by.items()
    ]
    print(table(["set", "system", "n", "R@1", "R@5", "R@10", "MRR@10"], rows))
    header.update({"workspaces": len(workspaces), "notes": notes, "questions": questions, "results": results})
    save_json(args.json, header)


if __name__ == "__main__":
    main()
