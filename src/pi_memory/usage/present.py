"""The usage views, the statusline and the ledger as text for people."""

from __future__ import annotations

from ..core.format import plural
from .ledger import Ledger
from .report import UsageLine, UsageReport


def tokens(n: int) -> str:
    """1234 -> 1.2K, 1234567 -> 1.23M: a column stays readable."""
    if n >= 1_000_000_000:
        return f"{n / 1e9:.2f}B"
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if n >= 10_000:
        return f"{n / 1e3:.1f}K"
    return f"{n:,}"


def dollars(line: UsageLine) -> str:
    """The cost, never $0 for what has no price: `?` (none priced), `$1.20+?` (some not)."""
    if line.requests and line.unpriced == line.requests:
        return "?"
    text = f"${line.cost:,.2f}" if line.cost >= 0.01 or not line.cost else f"${line.cost:.4f}"
    return text + ("+?" if line.unpriced else "")


def rate(line: UsageLine) -> str:
    value = line.cache_hit_rate
    return f"{value * 100:.0f}%" if value is not None else "-"


HEADERS = ("", "requests", "input", "output", "cache read", "cache write", "total", "cache hit", "cost")


def _cells(line: UsageLine) -> list[str]:
    return [
        line.label,
        f"{line.requests:,}",
        tokens(line.input),
        tokens(line.output),
        tokens(line.cache_read),
        tokens(line.cache_write),
        tokens(line.tokens),
        rate(line),
        dollars(line),
    ]


def format_usage(r: UsageReport) -> str:
    if not r.lines:
        window = " in this window" if r.since or r.until else ""
        return f"no model requests recorded{window}: import sessions first (pi-memory import)"
    rows = [_cells(line) for line in r.lines]
    rows.append(_cells(r.total))
    widths = [max(len(row[i]) for row in [list(HEADERS), *rows]) for i in range(len(HEADERS))]
    heading = list(HEADERS)
    heading[0] = {"session": "session", "model": "model", "project": "project"}.get(r.view, "period")
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(heading, widths, strict=True)))
    ]
    for k, row in enumerate(rows):
        if k == len(rows) - 1:
            lines.append("-" * len(lines[0]))
        lines.append(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        )
    if r.unknown_models:
        lines.append(
            f"cost unknown for {plural(r.total.unpriced, 'request')} of {', '.join(r.unknown_models)}: "
            "not in the price table; their tokens are counted, their cost is not"
        )
    source = r.price_source or "no price table installed (pip install genai-prices)"
    lines.append(f"prices: the session files' own costs, else {source}; days in time zone {r.tz}")
    return "\n".join(lines)


def format_statusline(line: UsageLine) -> str:
    return f"{tokens(line.tokens)} tok · {dollars(line)} · cache {rate(line)}"


def _signed(n: int) -> str:
    return f"+{tokens(n)}" if n >= 0 else f"-{tokens(-n)}"


def _money(value: float | None) -> str:
    if value is None:
        return "cost unknown"
    sign = "-" if value < 0 else "+"
    return f"{sign}${abs(value):,.4f}"


def _share(value: float | None) -> str:
    return f"{value * 100:.0f}%" if value is not None else "-"


def format_ledger(led: Ledger) -> str:
    cost = f"${led.cost:,.4f}" if led.cost is not None else "cost unknown"
    out = [
        f"session {led.session_id[:8]}: {plural(led.requests, 'request')}, {tokens(led.prompt_tokens)} prompt tokens, {cost}"
    ]
    if not led.events:
        out.append("pi-memory added nothing to this session's requests and removed nothing")
        return "\n".join(out)
    for e in led.events:
        line = (
            f"  {e.kind:10} {e.what[:40]:40} {_signed(e.tokens):>8} tok x {e.requests} requests "
            f"= {_signed(e.token_requests):>8}  {_money(e.cost)}"
        )
        if e.kind in ("fold", "compaction"):
            line += f"  cache {_share(e.cache_before)} -> {_share(e.cache_after)}"
        out.append(line)
    t = led.totals()
    out.append(
        f"added {tokens(t['added_token_requests'])} token-requests ({_money(t['added_cost_usd'])}), "
        f"removed {tokens(t['removed_token_requests'])} ({_saved(t['saved_cost_usd'])})"
    )
    out.append("tokens are estimates (core.tokens); costs at each request's own cache mix and model price")
    return "\n".join(out)


def _saved(value: float | None) -> str:
    if value is None:
        return "savings unknown"
    return f"${value:,.4f} saved" if value >= 0 else f"${-value:,.4f} more"
