"""Cut the public question sets `quality.py` reads into compact gzipped JSON lines.

Design idea: the bench must be re-runnable from the original files, and the
subsets must say where every line came from. This script reads the original
files (paths are arguments: a checkout, or files taken out of a snapshot with
`git show COMMIT:PATH`), keeps only what the bench needs (question, target
text or turns, dates, evidence ids) and writes `OUT/<set>/<set>.jsonl.gz` with
a README stating the source repository, commit, path, license and the cut.
Nothing is sampled here: every question of the source files is kept; the bench
samples (`--quick`) when it runs.

Sets (why each, and what was rejected: bench/README.md, "Question sets"):

  boolq     BoolQ dev: 3,270 yes/no questions people typed into Google, each
            with the Wikipedia paragraph an annotator found the answer in.
  pubmedqa  PubMedQA labeled: 1,000 questions (paper titles asked as
            questions) with their abstract (the conclusion is not in it).
  realtalk  REALTALK: 10 real 21-day chats between two people (messaging
            app), dated sessions, 728 memory questions with evidence turns.
  memdaily  MemDaily (MemSim): 2,954 Chinese questions about a user's own
            dated messages, each with its target message ids.

    python bench/qsets_build.py --boolq boolq.jsonl --pubmedqa pubmed_qa_labeled.jsonl \\
        --realtalk REALTALK/data --memdaily MemSim/data_generation/final_dataset/messages_and_QAs \\
        --out bench/data
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

SOURCES: dict[str, dict[str, str]] = {
    "boolq": {
        "repo": "mosaicml/llm-foundry",
        "commit": "8c8dd48f72168c5d51e2f7b151595892a8fba43d",
        "path": "scripts/eval/local_data/reading_comprehension/boolq.jsonl",
        "license": "CC BY-SA 3.0 (BoolQ, Clark et al. 2019, google-research-datasets/boolean-questions); "
        "the llm-foundry copy is under Apache-2.0",
        "origin": "BoolQ dev split, as llm-foundry's eval gauntlet ships it (passage and question in one "
        "`query` field, a `?` appended to the question)",
    },
    "pubmedqa": {
        "repo": "mosaicml/llm-foundry",
        "commit": "8c8dd48f72168c5d51e2f7b151595892a8fba43d",
        "path": "scripts/eval/local_data/reading_comprehension/pubmed_qa_labeled.jsonl",
        "license": "MIT (PubMedQA, Jin et al. 2019, pubmedqa/pubmedqa); the llm-foundry copy is under Apache-2.0",
        "origin": "PubMedQA PQA-L (1,000 expert-labeled questions) as llm-foundry ships it",
    },
    "realtalk": {
        "repo": "danny911kr/REALTALK",
        "commit": "b903e06a9770bf4e5fe9018c3e132889666d3b4a",
        "path": "data/Chat_*.json (only the ten top-level REALTALK files; data/locomo/ is LoCoMo and is NOT read)",
        "license": "no license file in the repository; released with the paper (Lee et al. 2025, "
        "arXiv:2502.13270) for research use. Not redistributed here",
        "origin": "REALTALK: 21 days of real messaging-app chats between two participants",
    },
    "memdaily": {
        "repo": "nuster1128/MemSim",
        "commit": "db9d5d552d6cb1d859f692eb7e6c0fd6d61d3815",
        "path": "data_generation/final_dataset/messages_and_QAs/*.json",
        "license": "no license file in the repository; released with the paper (Zhang et al. 2024, "
        "arXiv:2409.20163) 'to benefit the research community'. Not redistributed here",
        "origin": "MemDaily: LLM-generated Chinese daily-life user messages with dated, placed messages "
        "and one question per trajectory",
    },
}


def boolq(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """{"q": question, "passage": paragraph} from llm-foundry's `Passage: ...\\nQuestion: ...?` lines."""
    for line in lines:
        row = json.loads(line)
        passage, _, question = row["query"].partition("\nQuestion: ")
        yield {"q": question.strip(), "passage": passage.removeprefix("Passage: ").strip()}


def pubmedqa(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """{"q": question, "passage": abstract} from llm-foundry's `Context: ...\\nQuestion: ...\\nA. yes` lines."""
    for line in lines:
        row = json.loads(line)
        context, _, rest = row["context"].partition("\nQuestion: ")
        question = rest.split("\nA. ", 1)[0]
        yield {"q": question.strip(), "passage": context.removeprefix("Context: ").strip()}


def _realtalk_time(value: str) -> str:
    return datetime.strptime(value.strip(), "%d.%m.%Y, %H:%M:%S").isoformat()


def realtalk(files: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """One line a conversation: its two speakers, dated sessions of turns, and its questions."""
    for path in sorted(files, key=lambda p: int(re.findall(r"\d+", p.name)[0])):
        raw = json.loads(path.read_text(encoding="utf-8"))
        numbers = sorted(int(k.split("_")[1]) for k in raw if re.fullmatch(r"session_\d+", k))
        sessions = []
        for n in numbers:
            turns = [
                {
                    "id": t["dia_id"],
                    "speaker": t["speaker"],
                    "text": t["clean_text"],
                    "ts": _realtalk_time(t["date_time"]),
                }
                for t in raw[f"session_{n}"]
                if t.get("clean_text", "").strip()
            ]
            if turns:
                sessions.append({"date": _realtalk_time(raw[f"session_{n}_date_time"]), "turns": turns})
        qa = [{"q": q["question"], "evidence": q["evidence"], "category": q.get("category")} for q in raw["qa"]]
        yield {
            "id": path.stem,
            "speakers": [raw["name"]["speaker_1"], raw["name"]["speaker_2"]],
            "sessions": sessions,
            "qa": qa,
        }


_CN_TIME = re.compile(r"(\d{4})年(\d{2})月(\d{2})日\s*\S*\s*(\d{2}):(\d{2})")


def cn_time(value: str) -> str:
    """`2024年04月01日 周一 08:39` -> ISO time."""
    m = _CN_TIME.match(value.strip())
    if not m:
        raise ValueError(f"unknown time {value!r}")
    y, mo, d, h, mi = (int(x) for x in m.groups())
    return datetime(y, mo, d, h, mi).isoformat()


FAILED_QUESTION = "[ERRORQ]"


def memdaily(files: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """One line a question: its trajectory's dated messages and the ids of the messages it asks about."""
    for path in sorted(files):
        for traj in json.loads(path.read_text(encoding="utf-8")):
            messages = [{"mid": m["mid"], "text": m["message"], "ts": cn_time(m["time"])} for m in traj["message_list"]]
            for q in traj["question_list"]:
                if q["question"].strip() in ("", FAILED_QUESTION):
                    continue  # the generator's failures (46 of 3,000): MemSim's own memdaily.json leaves them out
                yield {
                    "id": f"{path.stem}-{traj['tid']}-{q['qid']}",
                    "messages": messages,
                    "q": q["question"],
                    "targets": sorted(set(q["target_step_id"])),
                    "q_ts": cn_time(q["time"]),
                }


def write_set(out: Path, name: str, rows: Iterable[dict[str, Any]], cut: str) -> int:
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    with gzip.open(folder / f"{name}.jsonl.gz", "wt", encoding="utf-8", compresslevel=9) as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
            n += 1
    src = SOURCES[name]
    (folder / "README.md").write_text(
        f"# {name}\n\n{src['origin']}.\n\n"
        f"- source: github.com/{src['repo']} at commit {src['commit']}, {src['path']}\n"
        f"- license: {src['license']}\n"
        f"- lines: {n}\n- cut: {cut}\n- built by: bench/qsets_build.py (re-run it on the source files)\n",
        encoding="utf-8",
    )
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--boolq", type=Path, help="llm-foundry's boolq.jsonl")
    ap.add_argument("--pubmedqa", type=Path, help="llm-foundry's pubmed_qa_labeled.jsonl")
    ap.add_argument("--realtalk", type=Path, help="REALTALK's data/ folder (Chat_*.json)")
    ap.add_argument("--memdaily", type=Path, help="MemSim's final_dataset/messages_and_QAs folder")
    ap.add_argument("--out", type=Path, default=Path("bench/data"))
    args = ap.parse_args()
    if args.boolq:
        lines = args.boolq.read_text(encoding="utf-8").splitlines()
        n = write_set(args.out, "boolq", boolq(lines), "every line; question and passage split apart")
        print(f"boolq: {n} questions")
    if args.pubmedqa:
        lines = args.pubmedqa.read_text(encoding="utf-8").splitlines()
        n = write_set(args.out, "pubmedqa", pubmedqa(lines), "every line; question and abstract split apart")
        print(f"pubmedqa: {n} questions")
    if args.realtalk:
        files = [p for p in args.realtalk.glob("Chat_*.json") if p.parent == args.realtalk]
        n = write_set(
            args.out,
            "realtalk",
            realtalk(files),
            "every conversation, session and question; image fields, events and persona data dropped; "
            "empty turns dropped",
        )
        print(f"realtalk: {n} conversations")
    if args.memdaily:
        n = write_set(
            args.out,
            "memdaily",
            memdaily(args.memdaily.glob("*.json")),
            "every trajectory of the 26 per-type files but the 46 whose question is the generator's failure mark [ERRORQ] (2,954 left, the count MemSim's README gives); answers, choices and places dropped",
        )
        print(f"memdaily: {n} questions")


if __name__ == "__main__":
    main()
