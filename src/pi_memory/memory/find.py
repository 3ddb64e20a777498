"""Listing, searching and rendering memories (pure functions over projected records).

Design idea: a workspace holds tens or hundreds of memories, bounded by the
policy limits, so search simply scores every visible record in Python with
the archive's own bilingual tokenizer and the scorer message search re-ranks with
(`text.query_tokens`, `scoring.score_documents`): `pnpm` and `使用` both find
`使用 pnpm 而不是 npm`, `movies` finds `a movie`.

The injection text is a pure function of the records and the session: the
same memories always render to the same bytes, so the system prompt (and the
provider's prompt cache) stays stable from turn to turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..core import ranking, scoring
from ..core.stems import variants
from ..core.text import (
    QueryToken,
    normalize,
    normalize_lower,
    query_phrases_for_snippet,
    query_tokens,
    snippet,
    surface_tokens,
    tokenize,
)
from .caches import BoundedCache
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
    """The records holding the query, best first, scored as message search scores its candidates
    (`scoring.score_documents`: the same weights, phrases, other forms of English words and other
    scripts) with document frequencies counted over these records; records holding none of the
    query's terms, or only characters cut out of its words, are dropped. No query: all, in order.

    The previous scorer (BM25 and phrases over the normalized text, no other forms) ranked the
    evidence first for 0.195 of RealTalk-a's questions asked of its turns as notes, against 0.260
    for a stemmed bm25 (bench/memory_recall.py)."""
    if not query.strip():
        return [Found(r, 0.0, body_snippet(r.body, "")) for r in records]
    scores = score_bodies([r.body for r in records], query)
    scored = [Found(r, s, body_snippet(r.body, query)) for r, s in zip(records, scores, strict=True) if s > 0]
    scored.sort(key=lambda f: (-f.score, listing_order(f.record)))
    return scored


def score_bodies(bodies: list[str], query: str) -> list[float]:
    """Each body's score for the query (0: not a match), the collection being these bodies."""
    tokens = query_tokens(query)
    if not tokens or not bodies:
        return [0.0] * len(bodies)
    features = [_body_features(b) for b in bodies]
    columns = [f.columns for f in features]
    n_docs = len(bodies)

    def df_of(token: QueryToken) -> int:
        return sum(1 for c in columns if token.text in c[token.column])

    surface = surface_tokens(query, tokens)
    df = {t.text: df_of(t) for t in tokens + surface}
    forms = {t.text: [df_of(QueryToken(f, "word")) for f in variants(t.text)] for t in tokens if t.kind == "word"}
    shares = ranking.form_shares(df, forms, n_docs)
    weights = ranking.token_weights(tokens + surface, df, n_docs, normalize(query))
    matched, prepared = scoring.prepare_query(query, tokens, df, weights, shares)
    if not matched:
        return [0.0] * len(bodies)
    lengths = [f.length for f in features]
    results = scoring.score_documents([f.lowered for f in features], lengths, sum(lengths) / n_docs, prepared)
    meaningful_only = any(r.meaningful and r.score > 0 for r in results)
    return [r.score if r.score > 0 and (r.meaningful or not meaningful_only) else 0.0 for r in results]


@dataclass(frozen=True)
class _BodyFeatures:
    columns: dict[str, set[str]]  # the index's two channels: CJK characters and words, pairs and words
    length: float  # BM25's length (`ranking.doc_tokens`)
    lowered: str  # what phrases and terms are counted in


# A search scans every memory of the workspace; a long-lived process (the bridge) asks again and
# again, so what a body's text gives is kept, for ~200,000 characters of bodies (1,500 memories:
# 88 -> ~45 ms a search; a Chinese body's tokens take ~270 bytes a character).
_FEATURES: BoundedCache[str, _BodyFeatures] = BoundedCache(200_000, lambda body, _: len(body) + 50)


def _body_features(body: str) -> _BodyFeatures:
    return _FEATURES.remembered(body, _features_of)


def _features_of(body: str) -> _BodyFeatures:
    tokens = tokenize(body)
    return _BodyFeatures(
        {"chars": set(tokens.chars), "grams": set(tokens.grams)}, float(len(tokens.grams)), normalize_lower(body)
    )


def clear_cache() -> None:
    _FEATURES.clear()


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
