"""Draft rules: a finding seen often enough, turned into one short sentence to remember (pure).

Design idea: a draft is a starting point for the user (or, with `/dream`, for
the model's `memory_propose`), never a memory by itself. It says what to do
differently, what it rests on (count, sessions) and where to look (the run in
which the same command passed again), in one line that fits a memory.
"""

from __future__ import annotations

from .collect import Finding

RULE_MAX = 300
# what to do before retrying a failed tool, by tool name
TOOL_ADVICE = {
    "edit": "read the file again right before editing it, and copy the old text from that read",
    "read": "check that the path exists (ls) before reading it",
    "write": "check the folder exists and the path is the intended one before writing",
}
DEFAULT_ADVICE = "check its arguments against the current state before calling it again"


def _times(n: int, sessions: int) -> str:
    return f"{n} time{'s' if n != 1 else ''} in {sessions} session{'s' if sessions != 1 else ''}"


def _clip(text: str) -> str:
    return text if len(text) <= RULE_MAX else text[: RULE_MAX - 1] + "…"


def draft_rule(finding: Finding) -> str:
    """The one-line draft for a recurring failure or a correction subject."""
    seen = _times(finding.count, len(finding.sessions))
    if finding.kind == "command":
        command = finding.signature.removeprefix("bash: ")
        why = f" ({finding.detail})" if finding.detail else ""
        fix = (
            f"; it passed again in r{finding.fixed_in[-1]}: do what that run did first"
            if finding.fixed_in
            else "; find the cause before running it again"
        )
        return _clip(f"`{command}` failed {seen}{why}{fix}. Do not re-run it unchanged after a failure.")
    if finding.kind == "tool_error":
        advice = TOOL_ADVICE.get(finding.tool, DEFAULT_ADVICE)
        return _clip(f'{finding.tool} failed {seen} with "{finding.detail}": {advice}.')
    about = finding.signature.removeprefix("correction: ")
    cues = ", ".join(c for c, _n in finding.cues.most_common(3))
    return _clip(
        f"The user corrected work on {about} {seen} ({cues}): ask before changing {about}, and keep to what was asked."
    )
