"""The ledger: did a rule work? Counts of a finding before and after a memory was written (pure).

Design idea: self-improvement becomes checkable because the runs before and
after a memory are both in the archive. For a memory written at time T and a
finding (a failure signature or a correction subject), the runs of the
reviewed window are split at T; the rate is the share of runs in which the
finding happened, per 100 runs, on each side, with the counts and the window
sizes shown so a small sample reads as one. Which findings a memory is about is
said by the user (`review link`), or suggested by the words they share.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SUGGEST_MIN_SHARED = 2  # distinct words a memory and a finding must share to be suggested
SUGGEST_MIN_SCORE = 0.3  # shared words / the smaller side's words
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}|[\u4e00-\u9fff]{2,}")
STOPWORDS = {
    "the", "and", "for", "with", "that", "this", "from", "are", "was", "not", "but", "you", "your",
    "run", "runs", "use", "when", "then", "than", "before", "after", "into", "onto", "its", "only",
    "bash", "tool", "command", "error", "failed", "correction", "none", "all", "any", "can", "cannot",
    "always", "never", "should", "must", "has", "have", "had", "does", "did", "will", "would",
    "cd", "py", "json", "md", "txt", "src", "tests", "test",
}  # fmt: skip


@dataclass
class Side:
    """One side of the split: runs in it, runs where the finding happened, and the time span."""

    runs: int
    hits: int
    start: int | None
    end: int | None

    @property
    def rate(self) -> float | None:
        """Runs with the finding per 100 runs; None for an empty side (no runs: nothing to say)."""
        return round(100.0 * self.hits / self.runs, 1) if self.runs else None

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "hits": self.hits, "rate": self.rate, "from": self.start, "to": self.end}


def split(created: int, run_times: Sequence[int], hit_times: Sequence[int]) -> tuple[Side, Side]:
    """(before, after) the memory's creation time; both lists sorted ascending (run start times).

    A run that starts at or after `created` is after: the memory existed when it began.
    """
    r = bisect_left(run_times, created)
    h = bisect_left(hit_times, created)
    before = Side(r, h, run_times[0] if r else None, run_times[r - 1] if r else None)
    after = Side(len(run_times) - r, len(hit_times) - h, run_times[r] if r < len(run_times) else None,
                 run_times[-1] if r < len(run_times) else None)  # fmt: skip
    return before, after


def verdict(before: Side, after: Side) -> str:
    """One word for people, from the two rates (the counts stay next to it)."""
    if before.rate is None or after.rate is None:
        return "no runs before" if before.rate is None else "no runs after"
    if before.hits and not after.hits:
        return "stopped"
    if after.rate < before.rate:
        return "fewer"
    if after.rate > before.rate:
        return "more"
    return "same"


def words(text: str) -> set[str]:
    """Content words: ASCII identifiers (3+ chars, `test_cart` stays one word) and CJK runs."""
    out = set()
    for w in _WORD.findall(text.lower()):
        if w not in STOPWORDS:
            out.add(w)
    return out


def overlap(memory_text: str, finding_text: str) -> tuple[int, float]:
    """(shared words, shared / the smaller set): how much a memory and a finding talk about the same."""
    a, b = words(memory_text), words(finding_text)
    if not a or not b:
        return 0, 0.0
    shared = len(a & b)
    return shared, shared / min(len(a), len(b))


def suggested(memory_text: str, finding_text: str) -> bool:
    shared, score = overlap(memory_text, finding_text)
    return shared >= SUGGEST_MIN_SHARED and score >= SUGGEST_MIN_SCORE
