"""What one model request cost, as the session file says: tokens, model, provider (pure functions).

Design idea: every agent records its provider's usage numbers, each in its own shape; here they
become one `TokenUsage` with four disjoint token counts (input not read from or written to the
cache, output, cache read, cache write), so totals are plain sums over requests and the
cache-hit rate is `cache_read / (input + cache_read + cache_write)`.

- pi: the assistant message's `usage {input, output, cacheRead, cacheWrite, cost.total}` is
  already disjoint; its `cost.total` is kept when it is there and not zero (pi prices with its
  own model table; a faux or unpriced model records 0, which means "unknown", not free).
- Claude Code: `message.usage {input_tokens, output_tokens, cache_read_input_tokens,
  cache_creation_input_tokens}` (disjoint too), once per API message: streamed lines repeat it,
  so one request is keyed by `message.id` + `requestId` and its last line's numbers count.
- Codex: `token_count` events with the thread's running `total_token_usage` (input includes the
  cached part; output includes reasoning). A request's usage is what the total grew by since the
  last event (a repeated event adds nothing; a total that went down starts a new count), so the
  sum over a file is its last total, exactly.

Each request has a key unique across the archive (a fork that copies a request's line does not
bill it twice): pi's message hash, Claude's message and request ids, Codex's line hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenUsage:
    """One model request's usage, as the session file recorded it."""

    key: str
    ts: int  # unix ms
    provider: str
    model: str
    input: int  # not read from or written to the prompt cache
    output: int  # reasoning included
    cache_read: int
    cache_write: int
    reasoning: int = 0  # the part of `output` the provider reports as reasoning (informational)
    recorded_cost: float | None = None  # USD, the session file's own figure (None: absent or zero)

    @property
    def prompt(self) -> int:
        """Everything the request sent: uncached input, cache reads and cache writes."""
        return self.input + self.cache_read + self.cache_write

    @property
    def total(self) -> int:
        return self.prompt + self.output


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def from_pi(msg: dict[str, Any], ts: int, key: str) -> TokenUsage | None:
    """A pi assistant message's usage (None: not an assistant message, or no usage object)."""
    usage = msg.get("usage")
    if msg.get("role") != "assistant" or not isinstance(usage, dict):
        return None
    cost = usage.get("cost")
    total = _num(cost.get("total")) if isinstance(cost, dict) else 0.0
    return TokenUsage(
        key=f"pi:{key}",
        ts=ts,
        provider=str(msg.get("provider") or ""),
        model=str(msg.get("model") or ""),
        input=_int(usage.get("input")),
        output=_int(usage.get("output")),
        cache_read=_int(usage.get("cacheRead")),
        cache_write=_int(usage.get("cacheWrite")),
        recorded_cost=total if total > 0 else None,
    )


def from_claude(message: dict[str, Any], request_id: Any, ts: int, fallback_key: str) -> TokenUsage | None:
    """A Claude Code API message's usage (its last streamed line's); None without a usage object.
    `<synthetic>` messages (made locally, never sent) carry zeros and are left out."""
    usage = message.get("usage")
    model = str(message.get("model") or "")
    if not isinstance(usage, dict) or model == "<synthetic>":
        return None
    mid = message.get("id")
    key = f"claude:{mid}:{request_id or ''}" if isinstance(mid, str) and mid else f"claude:{fallback_key}"
    return TokenUsage(
        key=key,
        ts=ts,
        provider="anthropic",
        model=model,
        input=_int(usage.get("input_tokens")),
        output=_int(usage.get("output_tokens")),
        cache_read=_int(usage.get("cache_read_input_tokens")),
        cache_write=_int(usage.get("cache_creation_input_tokens")),
    )


CODEX_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")
CodexTotal = tuple[int, int, int, int]


def codex_total(info: Any) -> CodexTotal | None:
    """A `token_count` event's running total (input, cached, output, reasoning), if it has one."""
    if not isinstance(info, dict):
        return None
    total = info.get("total_token_usage")
    if isinstance(total, dict):
        return (
            _int(total.get("input_tokens")),
            _int(total.get("cached_input_tokens")),
            _int(total.get("output_tokens")),
            _int(total.get("reasoning_output_tokens")),
        )
    return None


def codex_request(
    info: Any, previous: CodexTotal | None, key: str, ts: int, provider: str, model: str
) -> tuple[TokenUsage | None, CodexTotal | None]:
    """One `token_count` event -> (the request's usage, the running total after it).

    The request is what the running total grew by; an event without a total counts its
    `last_token_usage`; a repeated total adds nothing (None)."""
    total = codex_total(info)
    if total is not None:
        if previous is not None and total == previous:
            return None, previous
        grew = previous is not None and all(t >= p for t, p in zip(total, previous, strict=True))
        delta = tuple(t - p for t, p in zip(total, previous, strict=True)) if grew and previous else total
        return _codex_usage(delta, key, ts, provider, model), total
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    if isinstance(last, dict):
        delta = tuple(_int(last.get(f)) for f in CODEX_FIELDS)
        return _codex_usage(delta, key, ts, provider, model), previous
    return None, previous


def _codex_usage(delta: tuple[int, ...], key: str, ts: int, provider: str, model: str) -> TokenUsage | None:
    input_tokens, cached, output, reasoning = delta
    if not any(delta):
        return None
    cached = min(cached, input_tokens)
    return TokenUsage(
        key=f"codex:{key}",
        ts=ts,
        provider=provider or "openai",
        model=model,
        input=input_tokens - cached,
        output=output,
        cache_read=cached,
        cache_write=0,
        reasoning=reasoning,
    )


def cache_hit_rate(input_tokens: int, cache_read: int, cache_write: int) -> float | None:
    """The share of prompt tokens read from the cache (None when nothing was sent)."""
    prompt = input_tokens + cache_read + cache_write
    return cache_read / prompt if prompt else None
