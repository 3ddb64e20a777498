"""`/fold status` and `pi-memory status`: what the folds of one session did, from its records alone.

Records nest (a merge replaces earlier blocks and stubs), and each one's `before_chars` (and
`before_tokens`) is the context as it was just before it, so what was saved adds up over all
records without double counting. Records older than the session's last compaction went away with it and are counted
apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .records import FoldRecord


@dataclass
class FoldStatus:
    records: int = 0
    stubs: int = 0  # tool outputs replaced by a pointer stub
    blocks: dict[int, int] = field(default_factory=dict)  # level -> live blocks (not merged further)
    saved_chars: int = 0
    saved_tokens: int = 0  # the records' own token counts (`core.tokens`); chars / 4 for older records
    compacted: int = 0  # records before the last compaction
    last: str = ""  # the newest record: "f7 merge level 2 (budget)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "stubs": self.stubs,
            "blocks": {str(k): v for k, v in sorted(self.blocks.items())},
            "levels": max(self.blocks, default=0),
            "saved_chars": self.saved_chars,
            "saved_tokens": self.saved_tokens,
            "compacted": self.compacted,
            "last": self.last,
        }


def fold_status(records: Sequence[FoldRecord], compacted: int = 0) -> FoldStatus:
    """`compacted`: how many of the records (the oldest) lie before the last compaction."""
    live = list(records[compacted:])
    merged = {c for r in live if r.kind == "merge" for c in r.covers}
    st = FoldStatus(records=len(records), compacted=compacted)
    levels: Counter[int] = Counter(r.level for r in live if r.is_span and r.id not in merged)
    st.blocks = dict(levels)
    st.stubs = sum(len(r.stubs) for r in live if r.kind == "stubs" and r.id not in merged)
    st.saved_chars = sum(r.saved_chars for r in live)
    st.saved_tokens = sum(r.saved_tokens for r in live)
    if records:
        r = records[-1]
        st.last = f"{r.id} {r.kind} level {r.level}" + (f" ({r.trigger})" if r.trigger else "")
    return st


def format_fold_status(st: FoldStatus, enabled: bool = True, auto: bool = True) -> str:
    if not st.records:
        return f"folding: {'on' if enabled else 'off'} (auto {'on' if auto else 'off'}); no folds in this session yet"
    levels = ", ".join(f"level {k}: {v}" for k, v in sorted(st.blocks.items())) or "none"
    gone = f"; {st.compacted} before the last compaction" if st.compacted else ""
    return (
        f"folding: {'on' if enabled else 'off'} (auto {'on' if auto else 'off'}); {st.records} folds{gone}; "
        f"{st.stubs} stubs, blocks {levels}; ~{st.saved_tokens:,} tokens saved per request "
        f"({st.saved_chars:,} chars); last {st.last}"
    )
