"""The archive at a glance: totals, messages per day, per project and per agent, the last imports.

Design idea: an overview must cost the same at 10k and at 1M messages, so it never
counts the message table. The activity figures are read from the runs (one row per
user turn, with its message count, indexed by start time) within a window of the
last `days` days of the archive's own activity (ending at its newest message, not
at today, so an archive of last year's work still shows a picture); and sessions per agent
over all time, from the session table alone (Claude Code work older than the window still
shows: counting its messages would read every run, seconds at 1M messages). The totals
count index entries, never table rows: `Archive.stats` counts messages per role,
which reads every message row (1.4 s at 300k messages, where the count of the
order index takes 60 ms), so the overview leaves the roles to `pi-memory stats`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..storage.store import Store

if TYPE_CHECKING:
    from .model import Stats

OVERVIEW_DAYS = 30  # the activity window of the plots
DAY_MS = 86_400_000
TOP_GROUPS = 12  # projects shown by name; the rest are summed as "other"
LAST_IMPORTS = 8


@dataclass
class Overview:
    stats: Stats
    days: int
    window_end: int  # unix ms: the newest activity (or now, for an empty archive)
    per_day: list[tuple[int, int]]  # (day start, unix ms; messages of runs started that day), every day of the window
    per_project: list[tuple[str, int]]  # (project, messages in the window), most first
    per_agent: list[tuple[str, int]]
    sessions_per_agent: list[tuple[str, int]] = field(default_factory=list)  # (agent, sessions), all time
    last_imports: list[dict[str, Any]] = field(default_factory=list)  # path, session_id, size, imported_at

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["stats"] = self.stats.to_dict()
        return out


def day_series(counts: dict[int, int], first_day: int, days: int) -> list[tuple[int, int]]:
    """Every day of the window (day numbers since the epoch) with its count, zero where none."""
    return [((first_day + i) * DAY_MS, counts.get(first_day + i, 0)) for i in range(days)]


def top_groups(rows: list[tuple[str, int]], keep: int = TOP_GROUPS) -> list[tuple[str, int]]:
    """The `keep` largest groups, most first, and the rest summed as `other`."""
    ordered = sorted(((name or "?", int(n)) for name, n in rows), key=lambda r: (-r[1], r[0]))
    head, tail = ordered[:keep], ordered[keep:]
    return head + ([("other", sum(n for _name, n in tail))] if tail else [])


def totals(store: Store) -> Stats:
    """`Archive.stats` without the per-role counts (an empty `roles`), from indexes and counters only."""
    from .model import Stats

    messages = int(store.scalar("SELECT count(*) FROM msg") or 0)
    sessions, projects = store.rows("SELECT count(*), count(DISTINCT project) FROM session")[0]
    oldest, newest = store.rows("SELECT min(started_at), max(last_at) FROM session")[0]
    indexed = store.counters().get("indexed_docs", 0)
    return Stats(messages, indexed, int(sessions), int(projects), store.db_bytes(), oldest, newest, {}, str(store.path))


def overview(store: Store, stats: Stats, days: int = OVERVIEW_DAYS, now_ms: int | None = None) -> Overview:
    days = max(1, min(int(days), 366))
    end = int(stats.newest or now_ms or time.time() * 1000)
    last_day = end // DAY_MS
    first_day = last_day - days + 1
    since = first_day * DAY_MS
    per_day = store.rows(
        "SELECT r.start_ts / ? AS day, sum(r.n_msgs) FROM run r WHERE r.start_ts >= ? GROUP BY 1",
        (DAY_MS, since),
    )
    groups: dict[str, list[tuple[Any, ...]]] = {}
    for column in ("project", "agent"):
        groups[column] = store.rows(
            f"""SELECT s.{column}, sum(r.n_msgs) FROM run r JOIN session s ON s.id = r.session_id
                WHERE r.start_ts >= ? GROUP BY s.{column}""",
            (since,),
        )
    agents = store.rows("SELECT agent, count(*) FROM session GROUP BY agent")
    imports = store.rows(
        "SELECT path, session_id, size, imported_at FROM source_file ORDER BY imported_at DESC LIMIT ?",
        (LAST_IMPORTS,),
    )
    return Overview(
        stats=stats,
        days=days,
        window_end=end,
        per_day=day_series({int(d): int(n) for d, n in per_day}, first_day, days),
        per_project=top_groups([(str(p), int(n)) for p, n in groups["project"]]),
        per_agent=top_groups([(str(a), int(n)) for a, n in groups["agent"]]),
        sessions_per_agent=top_groups([(str(a), int(n)) for a, n in agents]),
        last_imports=[
            {"path": str(p), "session_id": sid, "size": int(size), "imported_at": int(at)}
            for p, sid, size, at in imports
        ],
    )
