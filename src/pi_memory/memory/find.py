"""Listing, searching and rendering memories (pure functions over projected records).

Design idea: a workspace holds tens or hundreds of memories, bounded by the
policy limits, so search simply scores every visible record in Python with
the archive's own bilingual tokenizer and BM25 (`text.query_tokens`,
`ranking.score_text`): `pnpm` and `使用` both find `使用 pnpm 而不是 npm`.

The injection text is a pure function of the records and the session: the
same memories always render to the same bytes, so the system prompt (and the
provider's prompt cache) stays stable from turn to turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..core import ranking
from ..core.text import normalize, query_phrases_for_snippet, query_tokens, snippet
from .model import MemoryRecord
from .policy import matches_status, visible_to

SNIPPET_CHARS = 600  # per body, in search results (the spec's figure)
INJECTION_BUDGET = 4000  # chars, the spec's `memory.hintMaxChars` default
INJECTION_HEADER = (
    "<long-term-memory>\n"
    "The user asked you to remember the following for this workspace. They are the user's own standing "
    "instructions and facts; follow them unless the user says otherwise in this conversation.\n"
)
INJECTION_FOOTER = "</long-term-memory>"


def listing_order(record: MemoryRecord) -> tuple[bool, int, int]:
    """Pinned first, then higher priority, then oldest first (stable: creation order)."""
    return (not record.pinned, -record.priority, record.created_seq)


def select(
    records: Iterable[MemoryRecord],
    *,
    session_id: str | None,
    status: str | None,
    kind: str | None,
    now_ms: int,
) -> list[MemoryRecord]:
    """Records this session may see that match the filters, in listing order."""
    chosen = [
        r
        for r in records
        if visible_to(r, session_id) and matches_status(r, status, now_ms) and (kind is None or r.kind == kind)
    ]
    return sorted(chosen, key=listing_order)


@dataclass(frozen=True)
class Found:
    record: MemoryRecord
    score: float
    snippet: str


def body_snippet(body: str, query: str, limit: int = SNIPPET_CHARS) -> str:
    """The whole body when short; else up to `limit` chars around the first query hit."""
    if len(body) <= limit:
        return body
    tokens = [t.text for t in query_tokens(query)] if query.strip() else []
    needles = [query_phrases_for_snippet(query), tokens] if tokens else [[""]]
    text = snippet(body, needles, radius=(limit - 40) // 2)
    return text[:limit]


def search(records: list[MemoryRecord], query: str) -> list[Found]:
    """BM25 over the given records; records without any query token are dropped. No query: all, in order."""
    if not query.strip():
        return [Found(r, 0.0, body_snippet(r.body, "")) for r in records]
    tokens = query_tokens(query)
    if not tokens:
        return []
    bodies = [normalize(r.body) for r in records]
    n_docs = len(records)
    df = {t.text: sum(1 for b in bodies if ranking.term_frequency(b, t) > 0) for t in tokens}
    weights = {t.text: ranking.token_weight(t, df[t.text], n_docs) for t in tokens}
    phrases = ranking.query_phrases(normalize(query), weights)
    avg_len = sum(len(b) for b in bodies) / n_docs if n_docs else 1.0
    scored: list[Found] = []
    for record, body in zip(records, bodies, strict=True):
        score = ranking.score_text(body, tokens, weights, phrases, avg_len)
        if score > 0:
            scored.append(Found(record, score, body_snippet(record.body, query)))
    scored.sort(key=lambda f: (-f.score, listing_order(f.record)))
    return scored


# --- injection -------------------------------------------------------------------------


def injected(records: Iterable[MemoryRecord], session_id: str | None) -> list[MemoryRecord]:
    """Only what the user wrote or confirmed, active, visible to this session: never a proposal."""
    chosen = [r for r in records if r.status == "active" and r.authoritative and visible_to(r, session_id)]
    return sorted(chosen, key=listing_order)


def injection_line(record: MemoryRecord) -> str:
    tags = ", ".join(
        t
        for t in ("pinned" if record.pinned else "", record.kind, record.scope if record.scope == "session" else "")
        if t
    )
    body = "\n  ".join(line.rstrip() for line in record.body.strip().splitlines())
    return f"- [{tags}] {body} ({record.id})\n"


def render_injection(records: Iterable[MemoryRecord], session_id: str | None, budget: int = INJECTION_BUDGET) -> str:
    """The system-prompt block, at most `budget` chars; '' when there is nothing to inject.

    Records go in listing order; one that does not fit is left out (a smaller
    later one may still fit) and the count of left-out records closes the block.
    """
    chosen = injected(records, session_id)
    if not chosen:
        return ""
    fixed = len(INJECTION_HEADER) + len(INJECTION_FOOTER)
    reserve = len(_omitted_line(len(chosen)))
    lines: list[str] = []
    used = fixed
    for record in chosen:
        line = injection_line(record)
        if used + len(line) + reserve <= budget:
            lines.append(line)
            used += len(line)
    if not lines:
        return ""
    omitted = len(chosen) - len(lines)
    tail = _omitted_line(omitted) if omitted else ""
    return INJECTION_HEADER + "".join(lines) + tail + INJECTION_FOOTER


def _omitted_line(n: int) -> str:
    return f"- ({n} more not shown for lack of room; the user can list them with /memories)\n"
