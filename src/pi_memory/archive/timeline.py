"""Activity across all time: messages per day by agent, for one project or all; a day's runs.

Design idea: the timeline answers "when did I work on what" over the archive's whole life, so it
reads the runs (one row per user turn, with its message count and start time) grouped by day and
agent, never the message table: every run once, ~1 s at 1M messages (250k runs) on a loaded
machine, which is why the viewer keeps it as it keeps the overview; a day picked on it lists that
day's runs, an index range. Days are UTC days, as the overview's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..errors import BadInput
from ..runs.table import RUN_COLUMNS, RunInfo, run_from_row
from ..storage.store import Store

DAY_MS = 86_400_000
PROJECTS_LISTED = 60  # projects offered as filters, most active first
DAY_RUNS_MAX = 500


@dataclass
class Timeline:
    days: list[
        tuple[int, dict[str, int]]
    ]  # every day from the first activity to the last: (day start ms, messages per agent)
    agents: list[str]  # agents with activity, most first
    projects: list[tuple[str, int]]  # (project, messages) to filter by, most first
    project: str | None = None
    agent: str | None = None
    day: int | None = None  # the day picked (start, unix ms)
    runs: list[RunInfo] = field(default_factory=list)  # its runs, in order

    @property
    def total(self) -> int:
        return sum(sum(per.values()) for _d, per in self.days)

    def to_dict(self) -> dict[str, Any]:
        return {
            "days": [{"day": d, "messages": per} for d, per in self.days if per],
            "agents": self.agents,
            "projects": self.projects,
            "project": self.project,
            "agent": self.agent,
            "day": self.day,
            "runs": [r.to_dict() for r in self.runs],
        }


def parse_day(value: str | None) -> int | None:
    """`YYYY-MM-DD` -> the UTC day's start in unix ms."""
    if not value:
        return None
    try:
        day = datetime.strptime(value.strip(), "%Y-%m-%d").replace(tzinfo=timezone.utc)
    except ValueError:
        raise BadInput(f"bad day {value!r}: use YYYY-MM-DD") from None
    return int(day.timestamp() * 1000)


def _where(project: str | None, agent: str | None) -> tuple[str, list[Any]]:
    clauses, params = ["TRUE"], []
    if project:
        clauses.append("(s.project = ? OR s.cwd = ?)")
        params += [project, project]
    if agent:
        clauses.append("s.agent = ?")
        params.append(agent)
    return " AND ".join(clauses), params


def timeline(store: Store, project: str | None = None, agent: str | None = None, day: str | None = None) -> Timeline:
    where, params = _where(project, agent)
    rows = store.rows(
        f"""SELECT r.start_ts / ? AS d, s.agent, sum(r.n_msgs) FROM run r JOIN session s ON s.id = r.session_id
            WHERE {where} GROUP BY 1, 2""",
        [DAY_MS, *params],
    )
    per_day: dict[int, dict[str, int]] = {}
    by_agent: dict[str, int] = {}
    for d, who, n in rows:
        per_day.setdefault(int(d), {})[str(who)] = int(n)
        by_agent[str(who)] = by_agent.get(str(who), 0) + int(n)
    days = [((d * DAY_MS), per_day.get(d, {})) for d in range(min(per_day), max(per_day) + 1)] if per_day else []
    projects = store.rows(
        """SELECT s.project, sum(r.n_msgs) FROM run r JOIN session s ON s.id = r.session_id
           GROUP BY s.project ORDER BY 2 DESC LIMIT ?""",
        (PROJECTS_LISTED,),
    )
    agents = sorted(by_agent, key=lambda a: (-by_agent[a], a))
    out = Timeline(days, agents, [(str(p or "?"), int(n)) for p, n in projects], project, agent)
    start = parse_day(day)
    if start is not None:
        out.day, out.runs = start, day_runs(store, start, project, agent)
    return out


def day_runs(store: Store, start: int, project: str | None = None, agent: str | None = None) -> list[RunInfo]:
    """The runs started on the UTC day beginning at `start` (an index range: cheap at any size)."""
    where, params = _where(project, agent)
    rows = store.rows(
        f"""SELECT {RUN_COLUMNS} FROM run r JOIN session s ON s.id = r.session_id
            WHERE r.start_ts >= ? AND r.start_ts < ? AND {where} ORDER BY r.start_ts, r.id LIMIT ?""",
        [start, start + DAY_MS, *params, DAY_RUNS_MAX],
    )
    return [run_from_row(r) for r in rows]
