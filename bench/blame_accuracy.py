"""How exact blame is, per source: random histories told as each agent's transcript, line by line.

Each trial is a git repository with a random history (`tests/provenance_world.py`'s World): runs of an
agent that write files, edit blocks of lines, insert and delete lines and rewrite whole files; between
runs a person edits lines by hand, adds and deletes lines, moves blocks, and commits. Every line
written carries the marker of its writer (`«r7»`, `«hand»`), so the truth is read off the files; a
quarter of the lines are the common ones every file repeats (blank, `pass`, `return None`), unmarked
and not counted, there to make lining versions up as ambiguous as in code. The
same history is then imported as pi's session (with what pi's extension observes live, and from the
transcript alone), as Claude Code's transcript (with the file before each change in its results, as
Claude Code writes them, and without) and as Codex's (apply_patch), and every line of every file is
blamed: the share of the agent's lines given to the right run, to another run, to nobody, and of the
hand-written lines given to a session.

    python bench/blame_accuracy.py --trials 40 --json bench/results/blame-accuracy.json
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests"))

from common import result_header, save_json, table  # noqa: E402

from pi_memory import Archive  # noqa: E402
from provenance_world import (  # noqa: E402
    World,
    claude_session,
    codex_session,
    observations,
    pi_session,
    score,
)

WORDS = "alpha beta gamma delta load parse merge cache index retry token stream flush build scan".split()
# lines every file has many of: they carry no marker (not counted) but make the alignment as hard as in code
COMMON = ["", "    pass", "    return None", "    }", "    # ---"]
COMMON_SHARE = 0.25


class Trial:
    """One random history: `files` files, `runs` runs, hand edits and commits in between."""

    def __init__(self, root: Path, rng: random.Random, files: int, runs: int) -> None:
        self.world = World(root)
        self.rng = rng
        self.serial = 0
        self.paths = [f"src/mod{k}.py" for k in range(files)]
        for number in range(1, runs + 1):
            run = self.world.run(f"Run {number}: change the modules")
            for _ in range(rng.randint(1, 4)):
                self.change(run, number)
            if rng.random() < 0.6:
                self.by_hand()
            if rng.random() < 0.5:
                self.world.commit(f"after run {number}")

    def line(self, who: str) -> str:
        """A new line by `who`: a marked one, or one of the common lines (unmarked, not counted)."""
        if self.rng.random() < COMMON_SHARE:
            return self.rng.choice(COMMON)
        self.serial += 1
        return f"    value_{self.serial} = {self.rng.choice(WORDS)}({self.serial})  # «{who}»"

    def lines(self, path: str) -> list[str]:
        target = self.world.root / path
        return target.read_text(encoding="utf-8").splitlines() if target.exists() else []

    def change(self, run: Any, number: int) -> None:
        who = f"r{number}"
        path = self.rng.choice(self.paths)
        current = self.lines(path)
        if not current:
            body = [f"def {path.split('/')[-1][:-3]}():  # «{who}»"] + [
                self.line(who) for _ in range(self.rng.randint(5, 25))
            ]
            self.world.write(run, path, "\n".join(body) + "\n")
            return
        kind = self.rng.choice(["replace", "insert", "delete", "replace", "rewrite"])
        old = self.unique_block(current)
        if kind == "rewrite" or old is None:
            kept = [x for x in current if self.rng.random() < 0.75]
            for _ in range(self.rng.randint(1, 4)):
                kept.insert(self.rng.randint(0, len(kept)), self.line(who))
            self.world.write(run, path, "\n".join(kept) + "\n")
            return
        if kind == "insert":
            new = old + "".join(self.line(who) + "\n" for _ in range(self.rng.randint(1, 3)))
        elif kind == "delete" and len(current) > 4:
            new = ""
        else:
            new = "".join(self.line(who) + "\n" for _ in range(self.rng.randint(1, 4)))
        self.world.edit(run, path, old, new)

    def unique_block(self, current: list[str]) -> str | None:
        """One to three lines in a row whose text is in the file once (an edit's old text must be)."""
        text = "".join(x + "\n" for x in current)
        for _ in range(50):
            at = self.rng.randrange(len(current))
            size = min(self.rng.randint(1, 3), len(current) - at)
            old = "".join(x + "\n" for x in current[at : at + size])
            if text.count(old) == 1 and "«" in old:
                return old
        return None

    def by_hand(self) -> None:
        path = self.rng.choice([p for p in self.paths if self.lines(p)] or self.paths)
        current = self.lines(path)
        if len(current) < 3:
            return
        kind = self.rng.choice(["add", "change", "delete", "move"])
        at = self.rng.randrange(len(current))
        if kind == "add":
            current.insert(at, self.line("hand"))
        elif kind == "change":
            current[at] = self.line("hand")
        elif kind == "delete":
            del current[at]
        else:
            block = current[at : at + 3]
            del current[at : at + 3]
            spot = self.rng.randint(0, len(current))
            current[spot:spot] = block
        (self.world.root / path).write_text("\n".join(current) + "\n", encoding="utf-8")


def _import(
    agent: str, write: Callable[[World, Path], Path], live: bool = False
) -> Callable[[Archive, World, Path], None]:
    def load(archive: Archive, world: World, out: Path) -> None:
        archive.import_paths([write(world, out)], agent=agent)
        if live:
            sid = archive.sessions()[0].id
            for seen in observations(world):
                archive.observe_edit(sid, **seen)

    return load


SOURCES: dict[str, Callable[[Archive, World, Path], None]] = {
    "pi, live (extension)": _import("pi", pi_session, live=True),
    "pi, transcript only": _import("pi", pi_session),
    "claude (originalFile in results)": _import("claude", claude_session),
    "claude, without originalFile": _import("claude", lambda w, o: claude_session(w, o, with_original=False)),
    "codex (apply_patch)": _import("codex", codex_session),
}


def blame_trial(trial: Trial, load: Callable[[Archive, World, Path], None], work: Path) -> dict[str, int]:
    world = trial.world
    asks = {run.ask: f"r{run.number}" for run in world.runs}
    totals: dict[str, int] = {}
    with Archive.open(work / "archive.db") as archive:
        load(archive, world, work)
        for path in trial.paths:
            if not (world.root / path).exists():
                continue
            found = archive.blame(str(world.root / path))
            said = [asks.get(line.edit.ask) if line.edit else None for line in found.lines]
            for key, n in score(world, path, said).items():
                totals[key] = totals.get(key, 0) + n
    return totals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--files", type=int, default=3)
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    header = result_header("blame_accuracy", {k: str(v) for k, v in vars(args).items()})
    sums: dict[str, dict[str, int]] = {name: {} for name in SOURCES}
    with tempfile.TemporaryDirectory(prefix="pi-memory-blame-accuracy-") as tmp:
        for t in range(args.trials):
            trial = Trial(Path(tmp) / f"t{t}" / "repo", random.Random(args.seed * 1000 + t), args.files, args.runs)
            for k, (name, load) in enumerate(SOURCES.items()):
                work = Path(tmp) / f"t{t}" / f"s{k}"
                work.mkdir(parents=True)
                for key, n in blame_trial(trial, load, work).items():
                    sums[name][key] = sums[name].get(key, 0) + n
    rows, results = [], {}
    for name, s in sums.items():
        agent, hand = max(1, s.get("agent_lines", 0)), max(1, s.get("hand_lines", 0))
        shares = {
            "agent_lines": s.get("agent_lines", 0),
            "right": round(100 * s.get("right", 0) / agent, 2),
            "wrong_run": round(100 * s.get("wrong_run", 0) / agent, 2),
            "missed": round(100 * s.get("missed", 0) / agent, 2),
            "hand_lines": s.get("hand_lines", 0),
            "hand_given_to_a_session": round(100 * s.get("hand_attributed", 0) / hand, 2),
        }
        results[name] = {"counts": s, "percent": shares}
        rows.append([name, shares["agent_lines"], shares["right"], shares["wrong_run"], shares["missed"],
                     shares["hand_lines"], shares["hand_given_to_a_session"]])  # fmt: skip
    print(table(["source", "agent lines", "right %", "other run %", "nobody %", "hand lines", "hand given %"], rows))
    save_json(args.json, {**header, "results": results})


if __name__ == "__main__":
    main()
