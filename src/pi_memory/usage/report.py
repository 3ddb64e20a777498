"""Token usage and cost by day, week, month, session, model or project (`pi-memory usage`).

Design idea: the write path keeps `usage_sum`, the requests summed per quarter hour, session,
provider and model; a view reads those sums (with the session's agent and project) in one
query and groups them in Python by whatever its rows are: a local calendar day, an ISO week, a
month (quarter hours add up to any time zone's days), a session, a model, a project. So the
answer costs the number of quarter hours that saw requests, not the number of messages.

Totals are plain sums of the request rows, exactly; the cost sums only the requests that have a
price, and says how many have none (a model the price table does not know: its tokens count,
its cost is unknown, never $0).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..core.format import short_id
from ..core.prices import source as price_source
from ..core.usage import cache_hit_rate
from ..errors import BadInput
from ..storage.store import Store
from ..storage.usage import BUCKET_MS

VIEWS = ("daily", "weekly", "monthly", "session", "model", "project")
TIME_VIEWS = ("daily", "weekly", "monthly")


@dataclass
class UsageLine:
    """One row of a view: a day, a session, a model... and what its requests used."""

    label: str
    requests: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0  # of the priced requests
    unpriced: int = 0  # requests without a price
    models: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    @property
    def cache_hit_rate(self) -> float | None:
        return cache_hit_rate(self.input, self.cache_read, self.cache_write)

    @property
    def cost_known(self) -> bool:
        return self.unpriced == 0

    def add(self, requests: int, tokens: Sequence[int], cost: float, unpriced: int) -> None:
        self.requests += requests
        self.input += tokens[0]
        self.output += tokens[1]
        self.cache_read += tokens[2]
        self.cache_write += tokens[3]
        self.cost += cost
        self.unpriced += unpriced

    def to_dict(self) -> dict[str, Any]:
        rate = self.cache_hit_rate
        return {
            "label": self.label,
            "requests": self.requests,
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "tokens": self.tokens,
            "cache_hit_rate": round(rate, 4) if rate is not None else None,
            # the priced requests' dollars; null when none has a price, `cost_complete` false when some lack one
            "cost_usd": round(self.cost, 6) if self.requests > self.unpriced else None,
            "cost_complete": self.cost_known,
            "unpriced_requests": self.unpriced,
            "models": self.models,
            **self.extra,
        }


@dataclass
class UsageReport:
    view: str
    since: str | None
    until: str | None
    agent: str | None
    tz: str
    lines: list[UsageLine]
    total: UsageLine
    unknown_models: list[str]  # provider/model with requests the price table could not price
    price_source: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "view": self.view,
            "since": self.since,
            "until": self.until,
            "agent": self.agent,
            "timezone": self.tz,
            "rows": [line.to_dict() for line in self.lines],
            "total": self.total.to_dict(),
            "unknown_models": self.unknown_models,
            "price_source": self.price_source,
        }


# --- time -----------------------------------------------------------------------------------


def zone(name: str | None) -> Any:
    """A time zone by IANA name; None or "local": the machine's (the `TZ` environment variable)."""
    if not name or name == "local":
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadInput(f"unknown time zone {name!r}: use an IANA name such as Asia/Shanghai, or local") from None


def _local(ms: int, tz: Any) -> datetime:
    if tz is None:
        return datetime.fromtimestamp(ms / 1000).astimezone()
    return datetime.fromtimestamp(ms / 1000, tz)


def day_start_ms(value: str | None, tz: Any, end: bool = False) -> int | None:
    """`YYYY-MM-DD` -> the start of that day (or of the next one, `end`) in the zone, unix ms."""
    if not value:
        return None
    try:
        day = date.fromisoformat(value.strip())
    except ValueError:
        raise BadInput(f"bad date {value!r}: use YYYY-MM-DD") from None
    if end:
        day += timedelta(days=1)
    midnight = datetime(day.year, day.month, day.day, tzinfo=tz)  # naive (tz None): local time
    return int(midnight.timestamp() * 1000)


EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
DAY_S = 86_400


def _labeller(view: str) -> Callable[[int], str]:
    """The row label of a local day (days since 1970-01-01 in the zone) in a time view."""
    fmt: Callable[[date], str]
    if view == "daily":
        fmt = lambda d: d.isoformat()  # noqa: E731
    elif view == "weekly":
        fmt = lambda d: "{}-W{:02d}".format(*d.isocalendar()[:2])  # noqa: E731
    else:
        fmt = lambda d: d.strftime("%Y-%m")  # noqa: E731
    return lambda day: fmt(date.fromordinal(EPOCH_ORDINAL + day))


def _offset_s(bucket: int, tz: Any) -> int:
    offset = _local(bucket * BUCKET_MS, tz).utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def offset_stretches(lo: int, hi: int, tz: Any) -> list[tuple[int, int]]:
    """(first quarter hour, UTC offset in seconds) of each stretch of buckets lo..hi the zone keeps
    one offset over (one stretch for UTC or Asia/Shanghai, two a year where clocks change): a day
    is looked at once, and a change found inside it to the quarter hour."""
    out = [(lo, _offset_s(lo, tz))]
    at = lo
    while at < hi:
        nxt = min(at + 96, hi)
        if _offset_s(nxt, tz) != out[-1][1]:
            low, high = at, nxt  # low keeps the old offset, high has the new one
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (mid, high) if _offset_s(mid, tz) == out[-1][1] else (low, mid)
            out.append((high, _offset_s(high, tz)))
        at = nxt
    return out


def local_day_sql(stretches: list[tuple[int, int]]) -> tuple[str, list[Any]]:
    """SQL of a quarter hour's local day number (`u.bucket`), exact across the stretches' offsets."""
    day = f"(u.bucket * {BUCKET_MS // 1000} + CAST(? AS INTEGER)) / {DAY_S}"
    if len(stretches) == 1:
        return day, [stretches[0][1]]
    arms, params = [], []
    for (_start, offset), (nxt, _o) in zip(stretches, stretches[1:], strict=False):
        arms.append(f"WHEN u.bucket < ? THEN {day}")
        params += [nxt, offset]
    return f"CASE {' '.join(arms)} ELSE {day} END", [*params, stretches[-1][1]]


# --- the query ------------------------------------------------------------------------------


def _where(
    since: int | None, until: int | None, agent: str | None, project: str | None, session: str | None
) -> tuple[str, list[Any], bool]:
    """The WHERE clause, its parameters, and whether it needs the session row (agent, project)."""
    conds: list[str] = ["1=1"]
    params: list[Any] = []
    if since is not None:
        conds.append("u.bucket >= ?")
        params.append(since // BUCKET_MS)
    if until is not None:
        conds.append("u.bucket < ?")
        params.append(-(-until // BUCKET_MS))
    if session:
        conds.append("u.session_id = ?")
        params.append(session)
    if agent:
        conds.append("s.agent = ?")
        params.append(agent)
    if project:
        conds.append("(s.project = ? OR s.cwd = ?)")
        params += [project, project]
    return " AND ".join(conds), params, bool(agent or project)


SUMS = """sum(u.requests), sum(u.input), sum(u.output), sum(u.cache_read), sum(u.cache_write), sum(u.cost),
          sum(u.unpriced)"""


def fetch(
    store: Store,
    view: str,
    since: int | None = None,
    until: int | None = None,
    agent: str | None = None,
    project: str | None = None,
    session: str | None = None,
    tz: Any = None,
) -> list[tuple[Any, ...]]:
    """The sums a view groups: its key columns (a time view's: the local day number), then
    provider, model, requests, input, output, cache_read, cache_write, cost, unpriced.

    A time view groups by local day in SQL (`local_day_sql`), so Python sees a row per day and
    model, not per quarter hour; the session table is joined only when a filter or the view needs it."""
    where, params, needs_session = _where(since, until, agent, project, session)
    join = "JOIN session s ON s.id = u.session_id" if needs_session or view in ("session", "project") else ""
    if view in TIME_VIEWS:
        span = store.rows(f"SELECT min(u.bucket), max(u.bucket) FROM usage_sum u {join} WHERE {where}", params)
        if not span or span[0][0] is None:
            return []
        day, day_params = local_day_sql(offset_stretches(int(span[0][0]), int(span[0][1]), tz))
        sql = f"""SELECT {day} AS day, u.provider, u.model, {SUMS} FROM usage_sum u {join}
                  WHERE {where} GROUP BY day, u.provider, u.model"""
        return store.rows(sql, [*day_params, *params])
    if view == "model":
        sql = f"SELECT u.provider, u.model, {SUMS} FROM usage_sum u {join} WHERE {where} GROUP BY u.provider, u.model"
        return store.rows(sql, params)
    keys = "s.project" if view == "project" else "u.session_id, s.project, s.agent, s.name"
    sql = f"SELECT {keys}, u.provider, u.model, {SUMS} FROM usage_sum u {join} WHERE {where} GROUP BY {keys}, u.provider, u.model"
    return store.rows(sql, params)


def report(
    store: Store,
    view: str = "daily",
    since: str | None = None,
    until: str | None = None,
    agent: str | None = None,
    project: str | None = None,
    session: str | None = None,
    tz: str | None = None,
) -> UsageReport:
    if view not in VIEWS:
        raise BadInput(f"no usage view {view!r}: use one of {', '.join(VIEWS)}")
    zone_info = zone(tz)
    start, end = day_start_ms(since, zone_info), day_start_ms(until, zone_info, end=True)
    if start is not None and end is not None and end <= start:
        raise BadInput("--until is before --since")
    rows = fetch(store, view, start, end, agent, project, session, zone_info)
    lines: dict[str, UsageLine] = {}
    total = UsageLine("total")
    unknown: set[str] = set()
    label_of = _row_label(view)
    for row in rows:
        requests, tokens, cost, unpriced = int(row[-7]), [int(v) for v in row[-6:-2]], float(row[-2]), int(row[-1])
        provider, model = str(row[-9]), str(row[-8])
        label, extra = label_of(row)
        line = lines.get(label)
        if line is None:
            line = lines[label] = UsageLine(label, extra=extra)
        line.add(requests, tokens, cost, unpriced)
        name = f"{provider}/{model}" if provider else model
        if name not in line.models:
            line.models.append(name)
        total.add(requests, tokens, cost, unpriced)
        if unpriced:
            unknown.add(name)
    ordered = _order(view, list(lines.values()))
    return UsageReport(view, since, until, agent, tz or "local", ordered, total, sorted(unknown), price_source())


def _row_label(view: str) -> Callable[[tuple[Any, ...]], tuple[str, dict[str, Any]]]:
    if view in TIME_VIEWS:
        label = _labeller(view)
        return lambda row: (label(int(row[0])), {})
    if view == "session":
        return lambda row: (
            short_id(str(row[0])),
            {"session_id": str(row[0]), "project": row[1] or "", "agent": row[2] or "", "name": row[3]},
        )
    if view == "project":
        return lambda row: (str(row[0] or "(none)"), {})
    return lambda row: (f"{row[0]}/{row[1]}" if row[0] else str(row[1]), {"provider": row[0], "model": row[1]})


def _order(view: str, lines: list[UsageLine]) -> list[UsageLine]:
    if view in TIME_VIEWS:
        return sorted(lines, key=lambda line: line.label)
    return sorted(lines, key=lambda line: (-line.cost, -line.tokens, line.label))


def today_line(store: Store, tz: str | None = None, now_ms: int | None = None) -> UsageLine:
    """What today (in the zone) used so far: the statusline's figures."""
    zone_info = zone(tz)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    today = _local(now, zone_info).date().isoformat()
    found = report(store, "daily", since=today, until=today, tz=tz)
    return found.lines[0] if found.lines else UsageLine(today)
