"""Realistic agent sessions and natural-language questions (benchmark input).

Design idea: a benchmark that flatters is a defect. Real agent archives are not
625-char novel lines: users type short requests (~250 chars), assistants answer
at length (log-normal, mean ~1,000 chars, a tail to ~6,000), tool calls carry
arguments, failed tools leave error output (indexed), successful tool output is
stored but not indexed, and a long session now and then holds a compaction
summary of several thousand characters. Sessions come in two shapes: many
short ones (1-3 messages: a quick question) and long working sessions (~40
messages). The words come from the corpus mix (traditional Chinese classics,
English novels, the Vue docs in Chinese, the CMRC paragraphs), cut at random
offsets, so every length holds real text.

Queries are what people type: natural-language questions in Chinese (the CMRC
trial questions) and English (questions built from the novels' sentences and
a hand-written set about code), the spec's hand queries, single characters,
very common words, rare words and mixed Chinese/English.

    python bench/realistic.py --corpus ../shared/corpora --out /tmp/sessions --messages 2000
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from corpus import BASE_TS_MS, CLASSICS, NOVELS, _iso, gutenberg_chunks, vue_chunks

USER_MEAN = 250
ASSISTANT_MEAN = 1_000
ASSISTANT_SIGMA = 0.8  # log-normal spread: median ~730, p99 ~4,700
ASSISTANT_MAX = 6_000
TOOL_CALL_SHARE = 0.45  # runs whose reply uses a tool first
TOOL_ERROR_SHARE = 0.15  # of tool calls
SUMMARY_SHARE = 0.01  # messages that are a compaction summary (3k-15k chars)
SHORT_SESSION_SHARE = 0.3  # sessions of 1-3 messages
PROJECTS = [
    "web-shop",
    "vue-admin",
    "api-server",
    "notes",
    "infra",
    "ml-pipeline",
    "blog",
    "cli-tools",
    "docs-site",
    "mobile-app",
    "data-etl",
    "game",
]


@dataclass
class Pools:
    """One long text stream per source, cut at random offsets for each message."""

    streams: dict[str, str]

    def cut(self, rng: random.Random, n: int) -> tuple[str, str]:
        source = rng.choice(list(self.streams))
        stream = self.streams[source]
        start = rng.randrange(0, max(1, len(stream) - n))
        return source, stream[start : start + n].strip()


def load_pools(corpus: Path) -> Pools:
    streams: dict[str, list[str]] = {"classics": [], "novels": [], "vue-docs": [], "cmrc": []}
    for book in CLASSICS + NOVELS:
        for doc in gutenberg_chunks(corpus, book):
            streams[doc.source].append(doc.text)
    streams["vue-docs"] = [d.text for d in vue_chunks(corpus)]
    cmrc = json.loads((corpus / "cmrc2018-trial" / "cmrc2018_trial.json").read_text(encoding="utf-8"))
    streams["cmrc"] = [p["context"] for a in cmrc["data"] for p in a["paragraphs"]]
    return Pools({k: "\n".join(v) for k, v in streams.items() if v})


def lognormal_length(rng: random.Random, mean: float, sigma: float, cap: int) -> int:
    mu = math.log(mean) - sigma * sigma / 2  # so the mean, not the median, is `mean`
    return max(20, min(cap, int(rng.lognormvariate(mu, sigma))))


def _message_entry(entry_id: str, parent: str | None, ts: int, message: dict[str, object]) -> dict[str, object]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": _iso(ts), "message": message}


class SessionWriter:
    """Writes pi v3 session files of realistic runs until a message budget is spent."""

    def __init__(self, pools: Pools, rng: random.Random) -> None:
        self.pools = pools
        self.rng = rng
        self.session_no = 0

    def _ids(self) -> Iterator[str]:
        n = 0
        while True:
            yield f"{self.session_no:05x}{n:03x}"[-8:]
            n += 1

    def session_entries(self, n_messages: int) -> tuple[str, list[dict[str, object]]]:
        """One session's header project and its entries, about `n_messages` messages."""
        rng = self.rng
        ids = self._ids()
        ts = BASE_TS_MS + self.session_no * 3_600_000
        project = rng.choice(PROJECTS)
        entries: list[dict[str, object]] = []
        parent: str | None = None
        written = 0

        def add(message: dict[str, object]) -> None:
            nonlocal parent, ts, written
            ts += rng.randrange(2_000, 40_000)
            message["timestamp"] = ts
            eid = next(ids)
            entries.append(_message_entry(eid, parent, ts, message))
            parent = eid
            written += 1

        while written < n_messages:
            if rng.random() < SUMMARY_SHARE and written > 0:
                _, text = self.pools.cut(rng, rng.randrange(3_000, 15_000))
                ts += 1000
                eid = next(ids)
                entries.append(
                    {
                        "type": "compaction",
                        "id": eid,
                        "parentId": parent,
                        "timestamp": _iso(ts),
                        "summary": text,
                        "firstKeptEntryId": eid,
                        "tokensBefore": 50_000,
                    }
                )
                parent = eid
                written += 1
                continue
            _, user = self.pools.cut(rng, lognormal_length(rng, USER_MEAN, 0.5, 2_000))
            add({"role": "user", "content": [{"type": "text", "text": user}]})
            if written >= n_messages:
                break
            if rng.random() < TOOL_CALL_SHARE and written + 3 <= n_messages:
                self._tool_round(add)
            _, reply = self.pools.cut(rng, lognormal_length(rng, ASSISTANT_MEAN, ASSISTANT_SIGMA, ASSISTANT_MAX))
            add(self._assistant([{"type": "text", "text": reply}]))
        return project, entries

    def _assistant(self, content: list[dict[str, object]]) -> dict[str, object]:
        stop = "toolUse" if any(c.get("type") == "toolCall" for c in content) else "stop"
        return {"role": "assistant", "content": content, "provider": "bench", "model": "bench-1", "stopReason": stop}

    def _tool_round(self, add: object) -> None:
        rng = self.rng
        call_id = f"call_{rng.getrandbits(48):012x}"
        if rng.random() < 0.5:
            name, args = "read", {"path": f"src/{rng.choice(['api', 'store', 'view', 'util'])}/{rng.randrange(99)}.ts"}
        else:
            name, args = "bash", {"command": rng.choice(["npm test", "pytest -q", "git status", "make build"])}
        _, lead = self.pools.cut(rng, rng.randrange(40, 300))
        call = {"type": "toolCall", "id": call_id, "name": name, "arguments": args}
        add(self._assistant([{"type": "text", "text": lead}, call]))  # type: ignore[operator]
        is_error = rng.random() < TOOL_ERROR_SHARE
        _, output = self.pools.cut(rng, rng.randrange(300, 2_000) if is_error else rng.randrange(500, 12_000))
        result = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [{"type": "text", "text": output}],
            "isError": is_error,
        }
        add(result)  # type: ignore[operator]

    def write(self, folder: Path, n_messages: int) -> int:
        """Sessions of both shapes until `n_messages` messages are written; returns the count."""
        done = 0
        while done < n_messages:
            short = self.rng.random() < SHORT_SESSION_SHARE
            want = self.rng.randint(1, 3) if short else self.rng.randint(30, 50)
            want = min(want, n_messages - done)
            project, entries = self.session_entries(want)
            self._write_file(folder, project, entries)
            done += sum(1 for e in entries if e["type"] in ("message", "compaction"))
            self.session_no += 1
        return done

    def _write_file(self, folder: Path, project: str, entries: list[dict[str, object]]) -> None:
        slug = re.sub(r"\W+", "-", project).strip("-")[:12] or "p"
        sid = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        header = {
            "type": "session",
            "version": 3,
            "id": sid,
            "timestamp": entries[0]["timestamp"] if entries else "",
            "cwd": f"/home/dev/{slug}",
        }
        path = folder / slug / f"s{self.session_no:07d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(header, ensure_ascii=False)] + [json.dumps(e, ensure_ascii=False) for e in entries]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --- queries -----------------------------------------------------------------------------

# Questions about code a user of a coding agent asks of its history.
CODE_QUESTIONS = [
    "how does the reactive system work",
    "why did the build fail after the upgrade",
    "where did we decide to put the cache invalidation",
    "what was the fix for the flaky login test",
    "how do I register a global component",
    "what does nextTick do in the update cycle",
    "which command did we use to run the migrations",
    "why is the computed property not updating",
    "how to pass props from parent to child component",
    "what went wrong with the server side rendering",
    "how do watchers differ from computed properties",
    "where is the router configured for lazy loading",
    "what did the error message say about the missing module",
    "how can I make a ref reactive inside a template",
    "what was the conclusion about the state management library",
]

_STOP = set(
    "the a an and or of to in on at for with by from was were is are be been had has have he she it they "
    "his her their its this that these those as not but so if then than which who whom what when where why "
    "how all any some no my your our me him them i you we do did does said would could should will shall "
    "upon into out up down over very there here one more most such only own same too can just".split()
)
_EN_SENTENCE = re.compile(r"[A-Z][^.!?]{40,200}[.!?]")


def english_questions(pools: Pools, rng: random.Random, n: int) -> list[str]:
    """Questions built from the novels: a question word and 3-6 content words of one sentence."""
    text = pools.streams.get("novels", "")
    sentences = _EN_SENTENCE.findall(text)
    out: list[str] = []
    starts = ["what did", "why did", "when did", "who said", "how did", "what happened when"]
    while len(out) < n and sentences:
        words = [w for w in re.findall(r"[A-Za-z]+", rng.choice(sentences)) if w.lower() not in _STOP and len(w) > 2]
        if len(words) < 4:
            continue
        k = rng.randint(3, min(6, len(words)))
        picked = sorted(rng.sample(range(len(words)), k))
        out.append(f"{rng.choice(starts)} {' '.join(words[i].lower() for i in picked)}")
    return out


def chinese_questions(corpus: Path) -> list[str]:
    cmrc = json.loads((corpus / "cmrc2018-trial" / "cmrc2018_trial.json").read_text(encoding="utf-8"))
    return [qa["question"] for a in cmrc["data"] for p in a["paragraphs"] for qa in p["qas"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    writer = SessionWriter(load_pools(args.corpus), random.Random(args.seed))
    n = writer.write(args.out, args.messages)
    print(f"{n} messages in {writer.session_no} sessions under {args.out}")


if __name__ == "__main__":
    main()
