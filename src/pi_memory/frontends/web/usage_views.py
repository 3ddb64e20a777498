"""The usage page's plots: tokens and dollars per day, by model, by project, cache hits over time.

Drawn as inline SVG by the template from these numbers (no script, no external assets), like the
overview's plots (`views.day_plot`, `views.group_plot`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .views import Plot, group_plot


@dataclass
class Series:
    """Vertical bars per day (tokens or dollars) and a polyline (cache-hit rate, 0-100%)."""

    bars: list[dict[str, Any]]
    width: int
    height: int
    peak: float
    labels: list[tuple[float, str]] = field(default_factory=list)
    points: str = ""  # the polyline's "x,y x,y ..."


def day_series(lines: list[Any], value: str, width: int = 640, height: int = 120) -> Series:
    """One bar per day of the report's lines: `value` is tokens, cost or cache (the hit rate)."""
    values = [_value(line, value) for line in lines]
    peak = max(values, default=0) or 1
    step = width / max(1, len(lines))
    bars, labels, points = [], [], []
    for i, (line, v) in enumerate(zip(lines, values, strict=True)):
        h = round(height * v / peak, 1)
        x = round(i * step, 1)
        bars.append(
            {
                "label": line.label,
                "value": _shown(line, value),
                "x": x,
                "y": round(height - h, 1),
                "width": round(max(step - 1, 1), 1),
                "height": h,
            }
        )
        points.append(f"{round(x + step / 2, 1)},{round(height - h, 1)}")
        if i % max(1, len(lines) // 8) == 0:
            labels.append((x, line.label[5:] if len(line.label) == 10 else line.label))
    return Series(bars, width, height, peak, labels, " ".join(points))


def _value(line: Any, value: str) -> float:
    if value == "cost":
        return float(line.cost)
    if value == "cache":
        return float((line.cache_hit_rate or 0) * 100)
    return float(line.tokens)


def _shown(line: Any, value: str) -> str:
    if value == "cost":
        return f"${line.cost:,.4f}" + ("+?" if line.unpriced else "") if line.requests > line.unpriced else "?"
    if value == "cache":
        rate = line.cache_hit_rate
        return f"{rate * 100:.0f}%" if rate is not None else "-"
    return f"{line.tokens:,} tokens"


def share_plot(lines: list[Any]) -> Plot:
    """Horizontal bars of tokens per group (model or project)."""
    return group_plot([(line.label, line.tokens) for line in lines[:15]])


@dataclass
class LedgerPlot:
    """A session's requests as bars of prompt tokens (the cached part apart) and its folds and
    compactions as marks between the request before and the one after."""

    bars: list[dict[str, Any]]
    marks: list[dict[str, Any]]
    width: int
    height: int
    peak: int


def ledger_plot(ledger: Any, width: int = 640, height: int = 140) -> LedgerPlot:
    requests = ledger.series
    peak = max((r.prompt for r in requests), default=0) or 1
    step = width / max(1, len(requests))
    bars = []
    for i, r in enumerate(requests):
        h, cached = height * r.prompt / peak, height * r.cache_read / peak
        bars.append(
            {
                "x": round(i * step, 1),
                "width": round(max(step - 1, 1), 1),
                "y": round(height - h, 1),
                "height": round(h - cached, 1),
                "cached_y": round(height - cached, 1),
                "cached": round(cached, 1),
                "title": f"request {i + 1}: {r.prompt:,} prompt tokens, {r.cache_read:,} read from the cache",
            }
        )
    marks = []
    for e in ledger.events:
        if e.kind in ("fold", "compaction"):
            at = sum(1 for r in requests if r.ts <= e.ts)
            marks.append(
                {"x": round(at * step, 1), "kind": e.kind, "title": f"{e.what}: {e.tokens:,} tokens a request"}
            )
    return LedgerPlot(bars, marks, width, height, peak)
