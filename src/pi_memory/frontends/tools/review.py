"""`/review` and `/dream` in pi: the command's words parsed, the report or the model's request made.

Design idea: the pi extension forwards `/review ARGS` and `/dream ARGS` as they
were typed, with pi's cwd; everything else is decided here. In pi the review
looks at this workspace's last `PI_DAYS` days by default (`project:all`,
`since:all` or a date widen it), so it answers in a moment inside a session.
`/review` shows the report to the user; `/dream` returns the text the
extension sends to the model: the report under the evidence header, with the
request to propose rules through `memory_propose` (provisional until the user
confirms them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import BadInput
from ...review.report import dream_prompt, format_report

if TYPE_CHECKING:
    from ...archive.api import Archive

PI_DAYS = 30
DAY_MS = 24 * 3600 * 1000
KEYS = ("since", "until", "project", "agent", "min")
USAGE = "usage: /{name} [since:YYYY-MM-DD|all] [until:YYYY-MM-DD] [project:P|all] [agent:pi|claude|codex] [min:K]"


def parse_args(name: str, args: str, cwd: str, now_ms: int) -> dict[str, Any]:
    """`since:D until:D project:P agent:A min:K` -> keyword arguments of `Archive.review`."""
    given: dict[str, str] = {}
    for word in args.split():
        key, sep, value = word.partition(":")
        if not sep or key not in KEYS or not value:
            raise BadInput(f"{word!r} is not understood; " + USAGE.format(name=name))
        given[key] = value
    options: dict[str, Any] = {
        "since": None if given.get("since") == "all" else given.get("since", now_ms - PI_DAYS * DAY_MS),
        "until": given.get("until"),
        "project": None if given.get("project") == "all" else given.get("project", cwd),
        "agent": given.get("agent"),
        "cwd": cwd,
    }
    if "min" in given:
        if not given["min"].isdigit() or int(given["min"]) < 1:
            raise BadInput("min must be a whole number of 1 or more")
        options["min_count"] = int(given["min"])
    return options


def _run(name: str, archive: Archive, params: dict[str, Any], now: Callable[[], float]) -> Any:
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        raise BadInput("cwd is required (the workspace pi was started in)")
    args = params.get("args") or ""
    if not isinstance(args, str):
        raise BadInput("args must be a string")
    return archive.review(**parse_args(name, args, cwd, int(now() * 1000)))


def bridge_review(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """`{"args", "cwd"}` -> `{"text", "report"}`: the report for the user (no model turn)."""
    report = _run("review", archive, params, time.time)
    return {"text": format_report(report), "report": report.to_dict()}


def bridge_dream(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """`{"args", "cwd"}` -> `{"text", "findings"}`: what to send the model; `findings` 0 means say so instead."""
    report = _run("dream", archive, params, time.time)
    findings = len(report.failures) + len(report.corrections)
    return {"text": dream_prompt(report), "findings": findings, "summary": format_report(report).split("\n", 1)[0]}


COMMAND_DESCRIPTIONS = {
    "review": "Review this workspace's recent runs: recurring failures, corrections, costs, draft rules, "
    "the memory ledger (no model turn): " + USAGE.format(name="review").removeprefix("usage: "),
    "dream": "Hand the review to the model as evidence and ask it to propose rules (memory_propose, "
    "provisional until /remember confirm:ID): " + USAGE.format(name="dream").removeprefix("usage: "),
}

BRIDGE_METHODS: dict[str, Callable[[Archive, dict[str, Any]], dict[str, Any]]] = {
    "review": bridge_review,
    "review_dream": bridge_dream,
}
