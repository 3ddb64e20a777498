"""A request's cost in dollars, from the session file or from an offline price table.

Design idea: the session file's own cost wins when it recorded one that is not zero (pi prices
with its model table; zero means it had no price, not that the request was free). Otherwise the
price comes from `genai-prices` (Pydantic's table of provider prices, a snapshot bundled in each
PyPI release, dated per model with the prices' start dates; its `UpdatePrices` would fetch newer
data from the network and is never used here). A model the table does not know has no cost:
`None`, never 0.

Pricing is on every import's path, so it must be cheap: for each (provider, model) and the
stretch of time its prices hold (always, per UTC day, or per quarter hour for time-of-day
prices) the table's price of one token of each kind is worked out once (`genai_prices.calc_price`
of 1,000 tokens of each kind) and a request costs four products and a sum; a request past a
tiered price's first threshold (whose rates apply to the whole request) is priced by
`calc_price` itself. Within float rounding the two agree (tests check it).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from .usage import TokenUsage

SESSION = "session"  # the cost the session file recorded
UNIT = 1000  # tokens priced at once to learn a per-token rate (below every tier's threshold)
QUARTER_HOUR_MS = 900_000
DAY_MS = 86_400_000


@dataclass(frozen=True)
class Rates:
    """Dollars per token of each kind, and per request, for one model over one stretch of time."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    request: float
    tier_start: int | None  # prompt tokens past which a tiered price applies to the whole request


@functools.cache
def table() -> Any:
    """The price table's module, or None when `genai-prices` is not installed."""
    try:
        import genai_prices
    except ImportError:
        return None
    return genai_prices


@functools.cache
def source() -> str | None:
    """What priced the requests the session files did not: `genai-prices 0.2.5`. Read from the
    installed package's metadata: a view that only names it (`usage daily`) does not pay the
    table's import (~0.3 s of pydantic models)."""
    try:
        return f"genai-prices {metadata.version('genai-prices')}"
    except metadata.PackageNotFoundError:
        return None


def price(u: TokenUsage) -> tuple[float | None, str | None]:
    """(dollars, where the figure came from) for one request; (None, None) when unknown."""
    if u.recorded_cost is not None:
        return u.recorded_cost, SESSION
    if not u.model or table() is None:
        return None, None
    found = _rates(u.provider, u.model, _period(u.provider, u.model, u.ts))
    if found is None:
        return None, None
    if found.tier_start is not None and u.prompt > found.tier_start:
        return _exact(u), source()
    cost = (
        found.request
        + u.input * found.input
        + u.output * found.output
        + u.cache_read * found.cache_read
        + u.cache_write * found.cache_write
    )
    return cost, source()


def known(provider: str, model: str) -> bool:
    """Whether the table has a price for this model (at any time)."""
    return table() is not None and _lookup(provider, model) is not None


def _when(ts: int) -> datetime:
    return datetime.fromtimestamp(max(ts, 0) / 1000, timezone.utc)


@functools.lru_cache(maxsize=4096)
def _lookup(provider: str, model: str) -> tuple[str | None, Any] | None:
    """(the table's provider id to ask with, its model info), or None for a model it does not know.
    A provider it does not know (pi's `github-copilot`, `faux`) is looked up by the model alone."""
    snapshot = table().data_snapshot.get_snapshot()
    for provider_id in (provider or None, None):
        try:
            found, model_info = snapshot.find_provider_model(model, None, provider_id, None)
        except LookupError:
            continue
        return found.id, model_info
    return None


def _period(provider: str, model: str, ts: int) -> int:
    """Which stretch of time a request's prices hold for: 0 (always), its UTC day, or its quarter hour."""
    found = _lookup(provider, model)
    if found is None:
        return 0
    prices = found[1].prices
    if not isinstance(prices, list):
        return 0
    kinds = {type(c.constraint).__name__ for c in prices if c.constraint is not None}
    if "TimeOfDateConstraint" in kinds:
        return ts // QUARTER_HOUR_MS * QUARTER_HOUR_MS
    return ts // DAY_MS * DAY_MS


@functools.lru_cache(maxsize=16384)
def _rates(provider: str, model: str, period: int) -> Rates | None:
    found = _lookup(provider, model)
    if found is None:
        return None
    provider_id, _info = found
    usage = table().Usage
    when = _when(period)

    def cost(**tokens: int) -> Any:
        return table().calc_price(usage(**tokens), model, provider_id=provider_id, genai_request_timestamp=when)

    try:
        base = cost(input_tokens=0, output_tokens=0)
        per_request = float(base.total_price)
        one = {
            "input": cost(input_tokens=UNIT),
            "output": cost(output_tokens=UNIT),
            "cache_read": cost(input_tokens=UNIT, cache_read_tokens=UNIT),
            "cache_write": cost(input_tokens=UNIT, cache_write_tokens=UNIT),
        }
    except (LookupError, ValueError, TypeError):
        return None
    per_token = {k: (float(v.total_price) - per_request) / UNIT for k, v in one.items()}
    return Rates(**per_token, request=per_request, tier_start=_tier_start(base.model_price))


def _tier_start(model_price: Any) -> int | None:
    starts = [
        tier.start
        for value in vars(model_price).values()
        if hasattr(value, "tiers")
        for tier in value.tiers
        if isinstance(tier.start, int)
    ]
    return min(starts) if starts else None


def _exact(u: TokenUsage) -> float | None:
    """The table's own price of a whole request (tiered prices past their threshold)."""
    found = _lookup(u.provider, u.model)
    if found is None:
        return None
    usage = table().Usage(
        input_tokens=u.prompt, output_tokens=u.output, cache_read_tokens=u.cache_read, cache_write_tokens=u.cache_write
    )
    result = table().calc_price(usage, u.model, provider_id=found[0], genai_request_timestamp=_when(u.ts))
    return float(result.total_price)


def exact_price(u: TokenUsage) -> float | None:
    """The table's own price of one request, asked directly (what `price` must agree with)."""
    if table() is None or not u.model:
        return None
    return _exact(u)
