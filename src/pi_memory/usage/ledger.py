"""The context ledger: what pi-memory itself added to a session's requests and what it removed.

Design idea: only pi-memory knows what it put into the context (the long-term memories appended
to the system prompt at each run start: `context_ledger` rows the bridge writes; the results of
its recall tools: archived tool results) and what it took out (its folds: the `pi-memory-fold`
records the session archived; its compactions: the compaction entries). Each is an event with a
size in characters and tokens (`core.tokens`, right for CJK and code; a fold record made by
this version carries its own token counts). An event's effect lasts over the requests that
followed it, until a compaction rebuilt the context (a memory block: until the next run's), so its
tokens are counted once per such request and priced at that request's own mix of uncached,
cache-read and cache-written prompt tokens for its model (`core.prices`); a model without a
price leaves the dollars unknown. Around each fold and compaction the ledger shows the share of
the prompt the provider read from its cache in the request just before and just after: what
the change of prefix cost the cache.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..compact.fold.records import CUSTOM_TYPE, record_from_dict
from ..core.prices import price
from ..core.tokens import estimate_tokens, family_of
from ..core.usage import TokenUsage, cache_hit_rate
from ..storage.codec import decompress
from ..storage.store import Store

# tools whose results are the archive's own text handed to the model
RECALL_TOOLS = frozenset({"session_search", "session_read", "memory_search", "memory_read", "recall", "session_recall"})


@dataclass
class Request:
    ts: int
    provider: str
    model: str
    input: int
    output: int
    cache_read: int
    cache_write: int
    cost: float | None

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    @property
    def cache_share(self) -> float | None:
        return cache_hit_rate(self.input, self.cache_read, self.cache_write)

    def price_of(self, tokens: int) -> float | None:
        """What `tokens` more prompt tokens cost in this request, at its own cache mix and model."""
        if not self.prompt:
            return None
        share = tokens / self.prompt
        extra = TokenUsage(
            "",
            self.ts,
            self.provider,
            self.model,
            round(self.input * share),
            0,
            round(self.cache_read * share),
            round(self.cache_write * share),
        )
        zero = TokenUsage("", self.ts, self.provider, self.model, 0, 0, 0, 0)
        with_extra, _ = price(extra)
        base, _ = price(zero)
        return None if with_extra is None or base is None else with_extra - base


@dataclass
class LedgerEvent:
    ts: int
    kind: str  # memory | recall | fold | compaction
    what: str
    chars: int
    tokens: int  # positive: added to each later request; negative: removed from each
    requests: int = 0  # requests it lasted over
    token_requests: int = 0  # tokens x those requests
    cost: float | None = None  # USD over those requests (negative: saved); None: unknown
    cache_before: float | None = None  # prefix-cache share of the request just before
    cache_after: float | None = None  # ... and just after
    prompt_before: int | None = None
    prompt_after: int | None = None
    context_before: int | None = None  # pi's compaction: its `tokensBefore`, settled against the next request

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out.pop("context_before")
        return out


@dataclass
class Ledger:
    session_id: str
    requests: int
    prompt_tokens: int
    cost: float | None
    events: list[LedgerEvent] = field(default_factory=list)
    series: list[Request] = field(default_factory=list, repr=False)  # the requests, in order (for a plot)

    def totals(self) -> dict[str, Any]:
        added = [e for e in self.events if e.tokens > 0]
        removed = [e for e in self.events if e.tokens < 0]
        return {
            "added_token_requests": sum(e.token_requests for e in added),
            "removed_token_requests": -sum(e.token_requests for e in removed),
            "added_cost_usd": _sum_known(e.cost for e in added),
            "saved_cost_usd": _negate(_sum_known(e.cost for e in removed)),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "cost_usd": self.cost,
            "events": [e.to_dict() for e in self.events],
            "totals": self.totals(),
        }


def _sum_known(values: Any) -> float | None:
    found = [v for v in values if v is not None]
    return sum(found) if found else None


def _negate(value: float | None) -> float | None:
    return -value if value is not None else None


# --- reading the session ------------------------------------------------------------------


def requests_of(store: Store, session_id: str) -> list[Request]:
    rows = store.rows(
        """SELECT ts, provider, model, input, output, cache_read, cache_write, cost FROM usage
           WHERE session_id = ? ORDER BY ts, key""",
        (session_id,),
    )
    return [Request(int(r[0]), str(r[1]), str(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6]), r[7]) for r in rows]


def _family(requests: list[Request]) -> str:
    return family_of(requests[-1].model, requests[-1].provider) if requests else "openai"


def memory_events(store: Store, session_id: str) -> list[LedgerEvent]:
    rows = store.rows(
        "SELECT ts, kind, chars, tokens, detail FROM context_ledger WHERE session_id = ? ORDER BY ts, id",
        (session_id,),
    )
    return [LedgerEvent(int(r[0]), str(r[1]), str(r[4] or r[1]), int(r[2]), int(r[3])) for r in rows]


def fold_events(store: Store, session_id: str, family: str) -> list[LedgerEvent]:
    """The session's fold records: the tokens each took out of every later request (its own count;
    a record made before records kept one: characters / 4)."""
    out = []
    for ts, data in _custom_entries(store, session_id):
        rec = record_from_dict(data)
        if rec is None:
            continue
        what = f"{rec.id} {rec.kind} (level {rec.level}, {rec.trigger or 'auto'})"
        out.append(LedgerEvent(ts or rec.ts, "fold", what, -rec.saved_chars, -rec.saved_tokens))
    return out


def _custom_entries(store: Store, session_id: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for ts, raw in store.rows(
        "SELECT ts, raw FROM entry WHERE session_id = ? AND type = 'custom' ORDER BY id", (session_id,)
    ):
        try:
            entry = json.loads(decompress(bytes(raw)))
        except (ValueError, TypeError):
            continue
        if isinstance(entry, dict) and entry.get("customType") == CUSTOM_TYPE and isinstance(entry.get("data"), dict):
            out.append((int(ts), entry["data"]))
    return out


def compaction_events(store: Store, session_id: str, family: str) -> list[LedgerEvent]:
    """Compactions: the context before down to the checkpoint and the kept tail. pi-memory's
    checkpoint records both in tokens (`contextTokensBefore/After`); for pi's own summary the
    ledger takes pi's `tokensBefore` (the provider's count) down to what the next request really
    sent (`_apply`), or to the summary's estimate when no request followed."""
    out = []
    for ts, raw, stored in store.rows(
        """SELECT m.ts, e.raw, m.text FROM msg m JOIN entry e ON e.msg_id = m.id
           WHERE m.session_id = ? AND m.role = 'summary' AND e.type = 'compaction' ORDER BY m.ts""",
        (session_id,),
    ):
        try:
            entry = json.loads(decompress(bytes(raw), stored))
        except (ValueError, TypeError):
            continue
        summary = str(entry.get("summary") or "")
        details = entry.get("details") if isinstance(entry.get("details"), dict) else {}
        before, after = details.get("contextTokensBefore"), details.get("contextTokensAfter")
        what = "compaction" + (" (pi-memory)" if entry.get("fromHook") else " (pi)")
        if isinstance(before, int) and isinstance(after, int):
            out.append(LedgerEvent(int(ts), "compaction", what, -len(summary), -max(0, before - after)))
            continue
        pi_before = entry.get("tokensBefore") if isinstance(entry.get("tokensBefore"), int) else 0
        removed = max(0, pi_before - estimate_tokens(summary, family))
        out.append(LedgerEvent(int(ts), "compaction", what, -len(summary), -removed, context_before=pi_before))
    return out


def recall_events(store: Store, session_id: str, family: str) -> list[LedgerEvent]:
    """Results of the archive's own tools: text pi-memory put into the context."""
    out = []
    for ts, meta, raw, stored in store.rows(
        """SELECT m.ts, m.meta, e.raw, m.text FROM msg m JOIN entry e ON e.msg_id = m.id
           WHERE m.session_id = ? AND m.role IN ('tool_result', 'tool_error') ORDER BY m.ts""",
        (session_id,),
    ):
        tool = _tool_of(meta)
        if tool not in RECALL_TOOLS:
            continue
        text = _result_text(raw, stored)
        out.append(LedgerEvent(int(ts), "recall", tool, len(text), estimate_tokens(text, family)))
    return out


def _tool_of(meta: Any) -> str:
    try:
        value = json.loads(meta) if meta else {}
    except ValueError:
        return ""
    return str(value.get("tool") or "") if isinstance(value, dict) else ""


def _result_text(raw: Any, stored: Any) -> str:
    try:
        entry = json.loads(decompress(bytes(raw), stored))
    except (ValueError, TypeError):
        return ""
    msg = entry.get("message") if isinstance(entry, dict) else None
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


# --- putting it together --------------------------------------------------------------------


def _span_end(event: LedgerEvent, later: list[LedgerEvent]) -> int | None:
    """When an event's effect ends: the next compaction (a memory block: also the next one's)."""
    for other in later:
        if other.kind == "compaction" or (event.kind == "memory" and other.kind == "memory"):
            return other.ts
    return None


def _apply(event: LedgerEvent, requests: list[Request], end: int | None) -> None:
    # an event changes the context of the requests made from then on: one stamped in the same
    # millisecond as the event came after it (a fold is written before the request it shrinks)
    after = [r for r in requests if r.ts >= event.ts and (end is None or r.ts < end)]
    before = [r for r in requests if r.ts < event.ts]
    if event.context_before is not None and after:  # pi's summary: what the next request really sent
        event.tokens = -max(0, event.context_before - after[0].prompt)
    event.requests = len(after)
    event.token_requests = event.tokens * len(after)
    costs = [r.price_of(abs(event.tokens)) for r in after]
    if after and all(c is not None for c in costs):
        total = sum(c for c in costs if c is not None)
        event.cost = total if event.tokens >= 0 else -total
    if event.kind in ("fold", "compaction"):
        if before:
            event.cache_before, event.prompt_before = before[-1].cache_share, before[-1].prompt
        if after:
            event.cache_after, event.prompt_after = after[0].cache_share, after[0].prompt


def session_ledger(store: Store, session_id: str) -> Ledger:
    requests = requests_of(store, session_id)
    family = _family(requests)
    events = (
        memory_events(store, session_id)
        + recall_events(store, session_id, family)
        + fold_events(store, session_id, family)
        + compaction_events(store, session_id, family)
    )
    events.sort(key=lambda e: e.ts)
    for i, event in enumerate(events):
        _apply(event, requests, _span_end(event, events[i + 1 :]))
    costs = [r.cost for r in requests]
    cost = sum(c for c in costs if c is not None) if costs and all(c is not None for c in costs) else None
    return Ledger(session_id, len(requests), sum(r.prompt for r in requests), cost, events, requests)
