"""The review's accumulator: runs go in one at a time, in time order; findings come out (pure).

Design idea: everything the review says is read off the runs' summary fields
(commands with exit codes, files read and changed, errors, the user's goal; see
`summary.py`), which already cite the messages they came from. The archive
layer feeds runs page by page and forgets each page; what is kept is one entry
per distinct failure signature, correction subject and file, capped lists of
evidence, and one integer per run (its start time, for the ledger), so memory
stays flat however many messages the runs hold.
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .corrections import correction_cues, mentioned
from .signature import command_signature, correction_signature, error_line, finding_key, tool_error_signature

EVIDENCE_MAX = 12  # addresses kept per finding (the first ones, then the latest replace the middle)
FIXED_MAX = 5
TOP_RUNS = 5
TOP_FILES = 10
TOP_RETRIES = 10
# What a correction may be about is kept for the last run of the `SESSIONS_KEPT` most recently
# active sessions, `SUBJECTS_KEPT` files and commands each: memory stays flat however many
# sessions the window holds (a session silent while 5,000 others ran loses that one check).
SESSIONS_KEPT = 5_000
SUBJECTS_KEPT = 20


@dataclass
class RunRow:
    """What the review reads of one run (from `run`, its session, and its error messages)."""

    id: int
    session_id: str
    cwd: str
    project: str
    agent: str
    start_ts: int
    end_ts: int
    messages: int
    tool_calls: int
    tool_errors: int
    fields: dict[str, Any]
    # tool_error messages of the run: msg id -> (tool name, the error's text)
    errors: dict[int, tuple[str, str]] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        return str(self.fields.get("line") or "")


class SessionSet:
    """Distinct sessions by number, as a bitmap: one bit per session of the window, not a set entry."""

    def __init__(self) -> None:
        self.bits = bytearray()
        self.count = 0

    def add(self, number: int) -> None:
        byte, bit = divmod(number, 8)
        if byte >= len(self.bits):
            self.bits.extend(bytes(byte + 1 - len(self.bits)))
        if not self.bits[byte] & (1 << bit):
            self.bits[byte] |= 1 << bit
            self.count += 1

    def __len__(self) -> int:
        return self.count


@dataclass
class Evidence:
    """Capped citations: the first `EVIDENCE_MAX - 2` kept, then the two latest."""

    items: list[tuple[int, int]] = field(default_factory=list)  # (run id, msg id)
    total: int = 0

    def add(self, run_id: int, msg_id: int) -> None:
        self.total += 1
        if len(self.items) >= EVIDENCE_MAX:
            self.items.pop(EVIDENCE_MAX - 2)
        self.items.append((run_id, msg_id))

    def msg_ids(self) -> list[int]:
        return [m for _r, m in self.items]


@dataclass
class Finding:
    """One recurring failure or one correction subject, with where and when it happened."""

    signature: str
    kind: str  # "command", "tool_error" or "correction"
    tool: str
    example: str  # the raw command, error or correction text of the first occurrence
    detail: str = ""  # the error's telling line (failures) or the cues seen (corrections)
    count: int = 0
    sessions: SessionSet = field(default_factory=SessionSet)
    runs: int = 0  # distinct runs it happened in
    last_run: int = 0
    hit_times: array[int] = field(default_factory=lambda: array("q"))  # those runs' start times, for the ledger
    first_ts: int = 0
    last_ts: int = 0
    evidence: Evidence = field(default_factory=Evidence)
    fixed_in: list[int] = field(default_factory=list)  # runs where the same command passed after failing
    last_ok: bool = False
    cues: Counter[str] = field(default_factory=Counter)
    corrects: dict[int, int] = field(default_factory=dict)  # correction msg id -> the run it corrects

    @property
    def key(self) -> str:
        return finding_key(self.signature)

    def hit(self, run: RunRow, session_no: int, msg_id: int, ts: int) -> None:
        self.count += 1
        self.sessions.add(session_no)
        if self.last_run != run.id:
            self.runs += 1
            self.last_run = run.id
            self.hit_times.append(run.start_ts)
        self.first_ts = self.first_ts or ts
        self.last_ts = max(self.last_ts, ts)
        self.evidence.add(run.id, msg_id)


@dataclass
class RunCost:
    run_id: int
    messages: int
    tool_calls: int
    wall_ms: int
    summary: str


@dataclass
class Retry:
    run_id: int
    call: str
    times: int
    msg_ids: list[int]


@dataclass
class FileUse:
    runs: int = 0
    changed: int = 0
    read: int = 0


@dataclass
class _Previous:
    """What a correction may be about: the previous run of the same session."""

    run_id: int
    changed: list[str]
    read: list[str]
    commands: list[str]


def relative(path: str, cwd: str) -> str:
    """A path as the user thinks of it: relative to the session's folder when inside it."""
    root = cwd.rstrip("/") + "/"
    return path[len(root) :] if cwd and path.startswith(root) else path


class Collector:
    """Feed `add(run)` in time order; read the findings, costs and totals after."""

    def __init__(self) -> None:
        self.failures: dict[str, Finding] = {}
        self.corrections: dict[str, Finding] = {}
        self.files: dict[str, FileUse] = {}
        self.retries: list[tuple[int, int, int, Retry]] = []  # a min-heap on (times, run id, order)
        self.longest: dict[str, list[tuple[int, int, RunCost]]] = {"messages": [], "tool_calls": [], "wall_ms": []}
        self.previous: dict[str, _Previous] = {}
        self.run_times: array[int] = array("q")  # every run's start time: 8 bytes a run
        self.sessions: dict[str, int] = {}  # session id -> its number in this review (SessionSet bits)
        self.session_no = 0  # the current run's
        self.totals: Counter[str] = Counter(
            dict.fromkeys(("runs", "messages", "tool_calls", "tool_errors", "corrections", "retries"), 0)
        )
        self.first_ts = 0
        self.last_ts = 0

    # --- one run ------------------------------------------------------------------

    def add(self, run: RunRow) -> None:
        self.run_times.append(run.start_ts)
        self.session_no = self.sessions.setdefault(run.session_id, len(self.sessions))
        self.first_ts = self.first_ts or run.start_ts
        self.last_ts = max(self.last_ts, run.end_ts)
        self._count(run)
        covered = self._commands(run)
        self._tool_errors(run, covered)
        self._files(run)
        self._correction(run)
        self._cost(run)

    def _count(self, run: RunRow) -> None:
        totals = self.totals
        totals["runs"] += 1
        totals["messages"] += run.messages
        totals["tool_calls"] += run.tool_calls
        totals["tool_errors"] += run.tool_errors

    def _commands(self, run: RunRow) -> set[int]:
        """Failing commands grouped by signature, later passes of them, repeated commands."""
        covered: set[int] = set()
        repeats: dict[str, list[int]] = {}
        for command in run.fields.get("commands") or []:
            text, code, msgs = str(command.get("text") or ""), command.get("exit"), command.get("msgs") or [0]
            signature = command_signature(text)
            repeats.setdefault(signature, []).append(int(msgs[0]))
            # failed: a non-zero exit, or a result that is a tool error without one (a timeout, a kill)
            if (isinstance(code, int) and code != 0) or (len(msgs) > 1 and int(msgs[-1]) in run.errors):
                covered.add(int(msgs[-1]))
                self._failed_command(run, signature, text, int(msgs[-1]), code)
            elif code == 0 and signature in self.failures:
                self._passed(run, self.failures[signature])
        for signature, ids in repeats.items():
            if len(ids) > 1:
                self._retry(Retry(run.id, signature, len(ids), ids))
        return covered

    def _failed_command(self, run: RunRow, signature: str, text: str, msg_id: int, code: Any) -> None:
        found = self.failures.get(signature)
        if found is None:
            error = error_line(run.errors.get(msg_id, ("", ""))[1])
            found = Finding(signature, "command", "bash", text, detail=error or f"exit code {code}")
            self.failures[signature] = found
        found.hit(run, self.session_no, msg_id, run.start_ts)
        found.last_ok = False

    def _passed(self, run: RunRow, found: Finding) -> None:
        if not found.last_ok and run.id not in found.fixed_in:
            if len(found.fixed_in) >= FIXED_MAX:
                found.fixed_in.pop()
            found.fixed_in.append(run.id)
        found.last_ok = True

    def _tool_errors(self, run: RunRow, covered: set[int]) -> None:
        for msg_id, (tool, text) in sorted(run.errors.items()):
            if msg_id in covered or tool in ("bash", ""):
                continue  # failing commands are grouped by their command, above
            signature = tool_error_signature(tool, text)
            found = self.failures.get(signature)
            if found is None:
                found = Finding(signature, "tool_error", tool, error_line(text), detail=error_line(text))
                self.failures[signature] = found
            found.hit(run, self.session_no, msg_id, run.start_ts)

    def _files(self, run: RunRow) -> None:
        seen: set[str] = set()
        for key in ("files_changed", "files_read"):
            for item in run.fields.get(key) or []:
                path = relative(str(item.get("text") or ""), run.cwd)
                use = self.files.setdefault(path, FileUse())
                if path not in seen:
                    seen.add(path)
                    use.runs += 1
                msgs = item.get("msgs") or []
                if key == "files_changed":
                    use.changed += len(msgs)
                else:
                    use.read += len(msgs)
                    if len(msgs) > 1:
                        self._retry(Retry(run.id, f"read: {path}", len(msgs), [int(m) for m in msgs]))

    def _retry(self, retry: Retry) -> None:
        self.totals["retries"] += 1
        entry = (retry.times, -retry.run_id, -self.totals["retries"], retry)  # the count breaks ties: first kept
        if len(self.retries) < TOP_RETRIES:
            heapq.heappush(self.retries, entry)
        elif entry[:3] > self.retries[0][:3]:
            heapq.heapreplace(self.retries, entry)

    def _correction(self, run: RunRow) -> None:
        goal = run.fields.get("goal") or {}
        before = self.previous.pop(run.session_id, None)
        fields = run.fields
        self.previous[run.session_id] = _Previous(
            run.id,
            [relative(str(f.get("text")), run.cwd) for f in (fields.get("files_changed") or [])[-SUBJECTS_KEPT:]],
            [relative(str(f.get("text")), run.cwd) for f in (fields.get("files_read") or [])[-SUBJECTS_KEPT:]],
            [command_signature(str(c.get("text") or "")) for c in (fields.get("commands") or [])[-SUBJECTS_KEPT:]],
        )
        if len(self.previous) > SESSIONS_KEPT:  # the least recently active session goes (dicts keep order)
            del self.previous[next(iter(self.previous))]
        text, msgs = str(goal.get("text") or ""), goal.get("msgs") or []
        cues = correction_cues(text) if before is not None and msgs else []
        if not cues:
            return
        assert before is not None
        signature = correction_signature(correction_subject(text, before))
        found = self.corrections.get(signature)
        if found is None:
            found = Finding(signature, "correction", "", text)
            self.corrections[signature] = found
        found.hit(run, self.session_no, int(msgs[0]), run.start_ts)
        found.cues.update(cues)
        found.corrects[int(msgs[0])] = before.run_id
        self.totals["corrections"] += 1

    def _cost(self, run: RunRow) -> None:
        cost = RunCost(run.id, run.messages, run.tool_calls, max(0, run.end_ts - run.start_ts), run.summary)
        for metric, heap in self.longest.items():
            entry = (int(getattr(cost, metric)), -run.id, cost)
            if len(heap) < TOP_RUNS:
                heapq.heappush(heap, entry)
            elif entry[:2] > heap[0][:2]:
                heapq.heapreplace(heap, entry)

    # --- reading the result ----------------------------------------------------------

    def recurring(self, at_least: int = 2) -> list[Finding]:
        """Failures seen at least `at_least` times, most frequent first."""
        found = [f for f in self.failures.values() if f.count >= at_least]
        return sorted(found, key=lambda f: (-f.count, -len(f.sessions), f.first_ts))

    def correction_groups(self) -> list[Finding]:
        return sorted(self.corrections.values(), key=lambda f: (-f.count, f.first_ts))

    def top_runs(self, metric: str) -> list[RunCost]:
        return [c for _v, _r, c in sorted(self.longest[metric], key=lambda e: (-e[0], -e[1]))]

    def top_retries(self) -> list[Retry]:
        return [r for _t, _r, _n, r in sorted(self.retries, key=lambda e: (-e[0], -e[1], -e[2]))]

    def top_files(self) -> list[tuple[str, FileUse]]:
        ranked = sorted(self.files.items(), key=lambda kv: (-kv[1].runs, -kv[1].changed, kv[0]))
        return ranked[:TOP_FILES]


def correction_subject(text: str, before: _Previous) -> str:
    """What a correction is about: a file or command of the previous run it names, else that run's
    last changed file, else its last command, else the run itself."""
    named = mentioned(text, before.changed + before.read)
    if named:
        return named[0]
    if before.changed:
        return before.changed[-1]
    if before.commands:
        return before.commands[-1].removeprefix("bash: ")
    return "(no files or commands)"
