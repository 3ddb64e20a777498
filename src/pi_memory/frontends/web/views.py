"""Pure helpers of the web viewer: query parameters, highlighting, plots, links.

They take values and return values (no request, no archive), so they are tested
without a server. The templates do the HTML; everything archived reaches them as
plain strings and is escaped there (autoescape), never marked safe here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from ...archive import page
from ...core.calls import readable_call_line, readable_snippet
from ...core.format import short_id
from ...core.text import HIT_CLOSE, HIT_OPEN, normalize_fast, query_phrases_for_snippet, query_tokens
from ...errors import BadInput

__all__ = ["short_id"]  # the one short-id rule (the CLI's: a session id's last 8 characters), for the templates

TRACKS = ("messages", "runs", "sessions")
KINDS = ("user", "assistant", "tool_call", "tool_error", "summary")
AGENTS = ("pi", "claude", "codex")
MODES = ("lexical", "hybrid", "semantic")  # semantic recall's search modes (empty: the archive's default)
DEFAULT_LIMIT, MAX_LIMIT = 20, 100
SEARCH_FETCH = 100  # hits a search asks for: the count shown, and the pages cut from them
MAX_PAGE = SEARCH_FETCH
TEXT_PARAMS = ("q", "project", "path", "since", "until")
QUERY_MAX = 500  # a search box holds a query, not a document


@dataclass
class SearchParams:
    """What the search page was asked, checked; `to_query` puts it back in a URL."""

    q: str = ""
    track: str = "messages"
    project: str = ""
    agent: str = ""
    kind: str = ""
    path: str = ""
    since: str = ""
    until: str = ""
    limit: int = DEFAULT_LIMIT
    echoes: str = ""  # "1": include what the archive's own tools put into sessions (left out by default)
    mode: str = ""  # lexical, hybrid or semantic; "": hybrid when the archive has vectors, else lexical
    page: int = 1  # of `limit` results each, cut from the `SEARCH_FETCH` the search gave

    def to_query(self, **changes: Any) -> str:
        values = {**self.__dict__, **changes}
        defaults = {"limit": DEFAULT_LIMIT, "page": 1}
        kept = {k: v for k, v in values.items() if v not in ("", None) and defaults.get(k) != v}
        if kept.get("track") == "messages":
            del kept["track"]
        return urlencode(kept)

    @property
    def filtered(self) -> bool:
        return any((self.project, self.agent, self.kind, self.path, self.since, self.until))


def parse_search(query: Mapping[str, str]) -> SearchParams:
    """Search parameters from a query string; anything unknown is one clear `BadInput`."""
    values = {k: (query.get(k) or "").strip() for k in TEXT_PARAMS}
    if len(values["q"]) > QUERY_MAX:
        raise BadInput(f"the query is too long ({len(values['q'])} chars, at most {QUERY_MAX})")
    track = query.get("track") or "messages"
    _one_of("track", track, TRACKS)
    agent, kind = query.get("agent") or "", query.get("kind") or ""
    if agent:
        _one_of("agent", agent, AGENTS)
    if kind:
        _one_of("kind", kind, KINDS)
    mode = query.get("mode") or ""
    if mode:
        _one_of("mode", mode, MODES)
    limit, at = parse_int(query, "limit", DEFAULT_LIMIT), parse_int(query, "page", 1, 1, MAX_PAGE)
    echoes = "1" if (query.get("echoes") or "") in ("1", "on", "true") else ""
    return SearchParams(track=track, agent=agent, kind=kind, limit=limit, page=at, echoes=echoes, mode=mode, **values)


@dataclass
class ResultPage:
    """One page of a search's results: which of how many, and the pages around it."""

    items: list[Any]
    total: int  # results the search gave (at most `SEARCH_FETCH`: `capped` says there may be more)
    first: int  # 1-based number of the page's first result (0: none)
    last: int
    page: int
    pages: int
    capped: bool


def result_page(found: list[Any], p: SearchParams) -> ResultPage:
    pages = max(1, -(-len(found) // p.limit))
    at = min(p.page, pages)
    start = (at - 1) * p.limit
    items = found[start : start + p.limit]
    first = start + 1 if items else 0
    return ResultPage(items, len(found), first, start + len(items), at, pages, len(found) >= SEARCH_FETCH)


def group_by_session(hits: list[Any]) -> list[tuple[Any, list[Any]]]:
    """Hits grouped by session, sessions in the order of their best hit, hits in rank order:
    [(the session's first hit, [its hits])]."""
    groups: dict[str, tuple[Any, list[Any]]] = {}
    for hit in hits:
        groups.setdefault(hit.session_id, (hit, []))[1].append(hit)
    return list(groups.values())


def readable_tool_text(text: str) -> str:
    """A tool call message as a person reads it: `→ name` and its arguments one per line, with the
    JSON escapes of the stored text decoded (no literal `\\n`)."""
    return "\n".join(readable_call_line(line) for line in text.split("\n"))


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise BadInput(f"unknown {name} {value!r}: use one of {', '.join(allowed)}")


def parse_int(query: Mapping[str, str], name: str, default: int, low: int = 1, high: int = MAX_LIMIT) -> int:
    raw = query.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(str(raw))
    except ValueError:
        raise BadInput(f"{name} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise BadInput(f"{name} must be between {low} and {high}, not {value}")
    return value


# --- highlighting -------------------------------------------------------------------


def needles(query: str) -> list[str]:
    """What to mark in a snippet: the query's own phrases, then its words and two-char grams."""
    words = [t.text for t in query_tokens(query) if t.kind in ("word", "gram", "part")]
    out = query_phrases_for_snippet(query) + words
    return [n for n in dict.fromkeys(out) if n]


def _spans(norm: str, needle: str) -> list[tuple[int, int]]:
    if needle.isascii():
        # a word is not marked inside a longer word
        pattern = rf"(?<![a-z0-9]){re.escape(needle)}(?![a-z0-9])"
        return [(m.start(), m.end()) for m in re.finditer(pattern, norm)]
    return [(m.start(), m.end()) for m in re.finditer(re.escape(needle), norm)]


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def strip_hit_marks(snippet: str) -> str:
    """The search snippet without its hit markers (the page marks every hit itself), a tool call's
    JSON escapes decoded."""
    return readable_snippet(snippet.replace(HIT_OPEN, "").replace(HIT_CLOSE, ""))


def highlight(text: str, query: str) -> list[tuple[str, bool]]:
    """`text` cut into (piece, is_a_query_token) segments, matched case- and script-insensitively."""
    norm = normalize_fast(text)
    if len(norm) != len(text) or not query.strip():
        return [(text, False)] if text else []
    spans = _merge([s for n in needles(query) for s in _spans(norm, n)])
    out: list[tuple[str, bool]] = []
    at = 0
    for start, end in spans:
        if start > at:
            out.append((text[at:start], False))
        out.append((text[start:end], True))
        at = end
    if at < len(text):
        out.append((text[at:], False))
    return out


# --- plots (inline SVG, drawn by the template from these numbers) ---------------------


@dataclass
class Bar:
    label: str
    value: int
    x: float
    y: float
    width: float
    height: float


@dataclass
class Plot:
    bars: list[Bar]
    width: int
    height: int
    peak: int
    labels: list[tuple[float, str]] = field(default_factory=list)  # (x, text) under the axis


def day_plot(per_day: list[tuple[int, int]], width: int = 640, height: int = 120) -> Plot:
    """Vertical bars, one per day, scaled to the busiest day; a date label every week."""
    peak = max((n for _d, n in per_day), default=0) or 1
    step = width / max(1, len(per_day))
    bars, labels = [], []
    for i, (day_ms, n) in enumerate(per_day):
        h = round(height * n / peak, 1)
        label = day_label(day_ms)
        bars.append(Bar(label, n, round(i * step, 1), round(height - h, 1), round(max(step - 1, 1), 1), h))
        if i % 7 == 0:
            labels.append((round(i * step, 1), label))
    return Plot(bars, width, height, peak, labels)


def group_plot(groups: list[tuple[str, int]], width: int = 420, row: int = 18) -> Plot:
    """Horizontal bars, one per group, scaled to the largest."""
    peak = max((n for _g, n in groups), default=0) or 1
    bars = [Bar(name, n, 0, i * row, round(width * n / peak, 1), row - 4) for i, (name, n) in enumerate(groups)]
    return Plot(bars, width, max(row, row * len(groups)), peak)


# --- formatting -----------------------------------------------------------------------


def day_label(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%m-%d")


def when(ms: int | None) -> str:
    """A unix-ms time as `YYYY-MM-DD HH:MM` (UTC), empty for none."""
    if not ms:
        return ""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M")


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def first_page(text: str, limit: int) -> tuple[str, int | None]:
    """The first `limit` UTF-8 bytes of a message and where the next page starts (None: it all fits).

    The common case (a message well under a page) costs one length check, not a walk per character.
    """
    if len(text) * 4 <= limit or len(text.encode("utf-8", "surrogatepass")) <= limit:
        return text, None
    return page(text, 0, limit)


def is_tool_message(role: str, meta: Mapping[str, Any]) -> bool:
    """Tool calls and their output are folded on the session page; people read the conversation."""
    return role in ("tool_result", "tool_error", "bash") or (role == "assistant" and bool(meta.get("tools")))


def fold_title(role: str, meta: Mapping[str, Any], text: str) -> str:
    """The one line shown for a folded tool message."""
    if role == "assistant":
        return "→ " + ", ".join(str(t) for t in meta.get("tools") or ["tool"])
    if role == "bash":
        return text.split("\n", 1)[0][:120]
    mark = "✗" if role == "tool_error" else "✓"
    chars = meta.get("output_chars")
    return f"{mark} {meta.get('tool') or 'tool'}" + (f" ({chars} chars)" if isinstance(chars, int) else "")


# --- the review page ------------------------------------------------------------------

REVIEW_TEXT_PARAMS = ("since", "until", "project", "ws")
MIN_COUNT_MAX = 1000


@dataclass
class ReviewParams:
    """What the review page was asked; `ws` is the workspace whose memories the ledger counts."""

    since: str = ""
    until: str = ""
    project: str = ""
    agent: str = ""
    ws: str = ""
    min_count: int = 2

    @property
    def workspace(self) -> str | None:
        """The ledger's workspace: as given, else the project reviewed, else the server's own directory."""
        return self.ws or self.project or None


def parse_review(query: Mapping[str, str], default_min_count: int = 2) -> ReviewParams:
    """Review parameters; dates are checked by the archive (one `BadInput` either way)."""
    values = {k: (query.get(k) or "").strip() for k in REVIEW_TEXT_PARAMS}
    agent = (query.get("agent") or "").strip()
    if agent:
        _one_of("agent", agent, AGENTS)
    min_count = parse_int(query, "min_count", default_min_count, 1, MIN_COUNT_MAX)
    return ReviewParams(agent=agent, min_count=min_count, **values)


@dataclass
class LedgerBar:
    label: str  # "before" / "after"
    rate: float | None
    hits: int
    runs: int
    y: float
    width: float


def ledger_plot(row: Mapping[str, Any], width: int = 300, bar: int = 18) -> list[LedgerBar]:
    """Two horizontal bars, the rate per 100 runs before and after the memory, on one scale.

    The scale is the larger of the two rates (at least 1), so a drop reads at a glance; the
    counts and the window sizes are printed next to the bars, a small sample reads as one.
    """
    sides = [("before", row["before"]), ("after", row["after"])]
    peak = max((float(s["rate"] or 0) for _n, s in sides), default=0.0) or 1.0
    return [
        LedgerBar(name, s["rate"], int(s["hits"]), int(s["runs"]), i * (bar + 6),
                  round(width * float(s["rate"] or 0) / peak, 1))
        for i, (name, s) in enumerate(sides)
    ]  # fmt: skip


# --- the timeline ---------------------------------------------------------------------------


@dataclass
class DayBar:
    day: str  # YYYY-MM-DD (UTC), the link's parameter
    x: float
    total: int
    parts: list[tuple[str, float, float, int]]  # (agent, y, height, messages), stacked from the axis


@dataclass
class TimelinePlot:
    bars: list[DayBar]
    width: int
    height: int
    peak: int
    step: float
    labels: list[tuple[float, str]]  # (x, month) at each month's first day


def timeline_plot(days: list[tuple[int, dict[str, int]]], agents: list[str], height: int = 140) -> TimelinePlot:
    """One column per day over all time, stacked by agent; at least 3 px a day (the plot scrolls).

    A column's height grows with the square root of the day's messages (at least 3 px): beside a
    day of 2,000 messages a day of 20 still shows; the agents share it in proportion."""
    peak = max((sum(per.values()) for _d, per in days), default=0) or 1
    step = max(3.0, 900 / max(1, len(days)))
    bars, labels = [], []
    for i, (day_ms, per) in enumerate(days):
        date = datetime.fromtimestamp(day_ms / 1000, timezone.utc)
        if date.day == 1 or i == 0:
            labels.append((round(i * step, 1), date.strftime("%Y-%m")))
        total = sum(per.values())
        column = max(3.0, height * (total / peak) ** 0.5) if total else 0.0
        y = float(height)
        parts = []
        for agent in agents:
            n = per.get(agent, 0)
            if n:
                h = round(column * n / total, 1)
                y = round(y - h, 1)
                parts.append((agent, y, h, n))
        bars.append(DayBar(date.strftime("%Y-%m-%d"), round(i * step, 1), sum(per.values()), parts))
    return TimelinePlot(bars, int(step * max(1, len(days))) + 1, height, peak, step, labels)


def day_start(day: str) -> int:
    """`YYYY-MM-DD` -> the UTC day's start, unix ms (checked: one clear `BadInput`)."""
    try:
        return int(datetime.strptime(day.strip(), "%Y-%m-%d").replace(tzinfo=timezone.utc).timestamp() * 1000)
    except ValueError:
        raise BadInput(f"bad day {day!r}: use YYYY-MM-DD") from None


# --- the file view -----------------------------------------------------------------------------


@dataclass
class BlameRow:
    number: int
    text: str
    edit: Any  # the change that wrote the line, or None
    shade: int  # which run's colour band (0: no session's line)
    first_of_run: bool  # the first line of a block written by the same change: its label shows


SHADES = 6


def blame_rows(lines: list[Any]) -> list[BlameRow]:
    """A file's lines for the table: each run gets a colour band (in the order runs first appear),
    and a block of lines from the same change is labelled once."""
    shades: dict[tuple[str, Any], int] = {}
    rows, previous = [], None
    for line in lines:
        e = line.edit
        key = (e.session_id, e.run_id) if e is not None else None
        if key is not None and key not in shades:
            shades[key] = len(shades) % SHADES + 1
        ident = e.id if e is not None else None
        rows.append(BlameRow(line.number, line.text, e, shades.get(key, 0) if key else 0, ident != previous))
        previous = ident
    return rows
