"""Navigation summaries of runs, without an LLM (pure functions).

Design idea (spec 004): a model scans dozens of past runs for a few hundred
tokens, so each run gets one line of 50-150 chars: what the user wanted (the
first user text, clipped on a sentence boundary), how it ended (the final
reply's first sentence), which files it changed. Behind the line sit structured
fields (goal, outcome, files read and changed, commands with exit codes,
errors), each carrying the entry ids and msg ids it came from, so a reader can
check any claim against the verbatim record. Everything is read off the
messages themselves: tool call arguments (from the verbatim source line, whose
arguments are never clipped), tool results paired by `toolCallId`, and user
`!` commands. Nothing is guessed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import jsonline
from .render import ASSISTANT, BASH, TOOL_ERROR, TOOL_RESULT, USER

LINE_MAX = 150  # the navigation line, spec 004: "50-150 chars"
GOAL_LINE_MAX = 72
OUTCOME_LINE_MAX = 50
GOAL_FIELD_MAX = 200
OUTCOME_FIELD_MAX = 200
OUTCOME_MIN = 24  # a shorter first sentence ("Done.", "现状：") is joined by the next
COMMAND_MAX = 120
FILES_IN_LINE = 3

READ_TOOLS = {"read", "view", "notebookread"}
CHANGE_TOOLS = {"edit", "write", "multiedit", "notebookedit", "multi_edit", "create", "str_replace"}
SHELL_TOOLS = {"bash", "shell", "exec", "run_command"}
PATH_KEYS = ("path", "file_path", "filePath", "notebook_path")
# Programs whose plain arguments are files they read or change (the "simple bash commands").
READ_PROGRAMS = {"cat", "head", "tail", "less", "more", "wc", "zcat", "grep", "rg", "diff", "stat", "file", "bat", "nl"}
CHANGE_PROGRAMS = {"rm", "touch", "mkdir", "tee", "truncate", "chmod", "mv", "cp"}
PATTERN_FIRST = {"grep", "rg"}  # the first plain argument is a pattern, not a file
# Where a sentence ends: after 。！？!?； anywhere, after . or ; before a blank, and at a line end
# (which belongs to neither side). Written as one character class, with the blank after . and ;
# checked in `_sentences`: the lookbehind pattern it replaces, `(?<=[。！？!?；])|(?<=[.;])(?=\s)|\n`,
# cut the same pieces (a test compares them) but tried three branches at every character, 2-3x
# slower, and a parse worker cuts the sentences of ~3 texts a run.
_SENTENCE_END = re.compile(r"[。！？!?；.;\n]")
_BLANKS = re.compile(r"[ \t]+")
_MARKDOWN_LEAD = re.compile(r"^(?:[-*+>]|\d+[.)]|#+)\s+")
_EXIT_CODE = re.compile(r"exit(?:ed)? (?:with )?code (\d+)", re.IGNORECASE)
_LOOKS_LIKE_PATH = re.compile(r"^[\w.~@+-]*[/.][\w./~@+-]*$")


@dataclass
class RunMessage:
    """What the summarizer needs to know of one archived message."""

    msg_id: int
    entry_id: str | None
    role: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] | None = None  # the agent message from the verbatim line, if kept
    ts: int = 0

    @property
    def sources(self) -> dict[str, list[Any]]:
        return {"entries": [self.entry_id] if self.entry_id else [], "msgs": [self.msg_id]}


@dataclass
class Field:
    """One summary fact and the messages it came from."""

    text: str
    entries: list[str] = field(default_factory=list)
    msgs: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def add_source(self, m: RunMessage) -> None:
        if m.entry_id and m.entry_id not in self.entries:
            self.entries.append(m.entry_id)
        if m.msg_id not in self.msgs:
            self.msgs.append(m.msg_id)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, **self.extra, "entries": self.entries, "msgs": self.msgs}


@dataclass
class RunSummary:
    line: str
    goal: Field | None
    outcome: Field | None
    files_read: list[Field]
    files_changed: list[Field]
    commands: list[Field]
    errors: Field
    tool_calls: int
    line_by: str = "rules"  # or "summarizer", when the optional hook wrote the line

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "line_by": self.line_by,
            "goal": self.goal.to_dict() if self.goal else None,
            "outcome": self.outcome.to_dict() if self.outcome else None,
            "files_read": [f.to_dict() for f in self.files_read],
            "files_changed": [f.to_dict() for f in self.files_changed],
            "commands": [f.to_dict() for f in self.commands],
            "errors": {"count": len(self.errors.msgs), "entries": self.errors.entries, "msgs": self.errors.msgs},
        }

    def search_text(self) -> str:
        return fields_search_text(self.to_dict())


def fields_search_text(fields: dict[str, Any]) -> str:
    """What the summary track indexes and scores: the line and every field's text."""
    parts = [str(fields.get("line", ""))]
    parts += [f["text"] for f in (fields.get("goal"), fields.get("outcome")) if f]
    for key in ("files_read", "files_changed", "commands"):
        parts += [f["text"] for f in fields.get(key) or []]
    return "\n".join(parts)


# --- text helpers -------------------------------------------------------------------


def clip_sentences(text: str, limit: int) -> str:
    """As many whole sentences as fit in `limit` chars; if they fill less than half, a cut with `…`."""
    text = _collapse_blanks(text.replace("[image]", "")).strip()
    if len(text) <= limit and "\n" not in text:
        return text
    out = ""
    for piece in _sentences(text):
        candidate = (out + " " + piece).strip() if out else piece
        if len(candidate) > limit:
            break
        out = candidate
    if len(out) >= limit // 2:
        return out
    cut = text[: limit - 1]  # no sentence end in reach ("Done. <the real news>"): cut on a word
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def first_sentence(text: str, limit: int, at_least: int = OUTCOME_MIN) -> str:
    """The first sentence, joined by the next ones while it is shorter than `at_least` ("Done." says little)."""
    out = ""
    for piece in _sentences(_collapse_blanks(text).strip()):
        candidate = f"{out} {piece}".strip()
        if out and len(candidate) > limit:
            break
        out = candidate
        if len(out) >= at_least:
            break
    return clip_sentences(out, limit) if out else ""


def _collapse_blanks(text: str) -> str:
    """Runs of spaces and tabs as one space. Most text has no run to collapse, and a substitution
    that rewrites every single space as itself costs ~10 us on a 1,000-char reply."""
    return _BLANKS.sub(" ", text) if "  " in text or "\t" in text else text


def _sentences(text: str) -> Iterator[str]:
    """Sentences and lines, without markdown list and heading markers, lazily: a summary field
    takes the first few, so a 6,000-char reply is not cut whole (`re.split`'s pieces, in order)."""
    start = 0
    for end in _SENTENCE_END.finditer(text):
        mark, after = end.group(), end.end()
        if mark == "\n":
            piece = text[start : end.start()]
        elif mark in ".;" and (after == len(text) or not text[after].isspace()):
            continue  # `file.py`, `3.14`: not an end
        else:
            piece = text[start:after]
        start = after
        cleaned = _sentence(piece)
        if cleaned:
            yield cleaned
    cleaned = _sentence(text[start:])
    if cleaned:
        yield cleaned


def _sentence(piece: str) -> str:
    """A piece without its blanks around and a leading markdown marker (the marker's pattern is
    tried only where the piece starts as one can: a parse worker cuts ~10 pieces a message)."""
    cleaned = piece.strip()
    if cleaned and (cleaned[0] in _MARKER_STARTS or cleaned[0].isdigit()):
        cleaned = _MARKDOWN_LEAD.sub("", cleaned)
    return cleaned


_MARKER_STARTS = "-*+>#"  # with a digit: how `_MARKDOWN_LEAD` can start (`isdigit` covers `\d`)


# --- reading agent messages -------------------------------------------------------


def tool_calls_of(m: RunMessage) -> list[dict[str, Any]]:
    """`toolCall` blocks of an assistant message, from the verbatim source (full arguments)."""
    content = (m.source or {}).get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") in ("toolCall", "tool_use")]


def reply_text(m: RunMessage) -> str:
    """The prose of an assistant message, without tool calls and thinking."""
    content = (m.source or {}).get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return "\n".join(line for line in m.text.splitlines() if not line.startswith("→ "))


def is_final_reply(m: RunMessage) -> bool:
    """An assistant message that ends the turn: it asks for no tool."""
    return m.role == ASSISTANT and not m.meta.get("tools") and m.meta.get("stopReason") != "toolUse"


def exit_code(result: RunMessage) -> int | None:
    """A bash tool result's exit code: 0 when it succeeded, the stated code when it failed."""
    if result.role == TOOL_RESULT:
        return 0
    found = _EXIT_CODE.search(result.text)
    return int(found.group(1)) if found else None


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    args = call.get("arguments", call.get("input"))
    if isinstance(args, str):
        try:
            args = jsonline.loads(args)
        except ValueError:
            return {}
    return args if isinstance(args, dict) else {}


def tool_path(call: dict[str, Any]) -> str | None:
    args = _arguments(call)
    for key in PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def shell_command(call: dict[str, Any]) -> str | None:
    value = _arguments(call).get("command")
    if isinstance(value, list):
        value = " ".join(str(v) for v in value)
    return value.strip() if isinstance(value, str) and value.strip() else None


def command_paths(command: str) -> tuple[list[str], list[str]]:
    """(read, changed) paths named by a simple shell command; anything clever is left alone."""
    read: list[str] = []
    changed: list[str] = []
    for part in re.split(r"&&|\|\||[;|]", command):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            continue
        _simple_command_paths(words, read, changed)
    return _unique(read), _unique(changed)


def _simple_command_paths(words: list[str], read: list[str], changed: list[str]) -> None:
    plain: list[str] = []
    for i, word in enumerate(words):
        if word in (">", ">>") and i + 1 < len(words) and _is_path(words[i + 1]):
            changed.append(words[i + 1])
        elif word.startswith(">") and _is_path(word.lstrip(">")):
            changed.append(word.lstrip(">"))
        elif i > 0 and not word.startswith("-") and words[i - 1] not in (">", ">>"):
            plain.append(word)
    program = words[0].rsplit("/", 1)[-1] if words else ""
    if program in PATTERN_FIRST and plain:
        plain = plain[1:]
    paths = [w for w in plain if _is_path(w)]
    if program in READ_PROGRAMS:
        read += paths
    elif program in CHANGE_PROGRAMS:
        changed += paths
    elif program == "sed":
        (changed if "-i" in words else read).extend(paths)


def _is_path(word: str) -> bool:
    return bool(_LOOKS_LIKE_PATH.match(word)) and not word.startswith(("http:", "https:")) and word not in (".", "..")


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- the summary --------------------------------------------------------------------


class _Builder:
    """Walks a run's messages once, collecting the fields."""

    def __init__(self) -> None:
        self.read: dict[str, Field] = {}
        self.changed: dict[str, Field] = {}
        self.commands: list[Field] = []
        self.pending: dict[str, Field] = {}  # bash calls waiting for their result, by toolCallId
        self.errors = Field("")
        self.tool_calls = 0

    def file(self, table: dict[str, Field], path: str, m: RunMessage) -> None:
        table.setdefault(path, Field(path)).add_source(m)

    def call(self, call: dict[str, Any], m: RunMessage) -> None:
        name = str(call.get("name", "")).lower()
        path = tool_path(call)
        if path and name in READ_TOOLS:
            self.file(self.read, path, m)
        elif path and name in CHANGE_TOOLS:
            self.file(self.changed, path, m)
        command = shell_command(call) if name in SHELL_TOOLS else None
        if command:
            self.shell(command, m, pending_id=str(call.get("id", "")))

    def shell(self, command: str, m: RunMessage, pending_id: str = "", code: int | None = None) -> None:
        entry = Field(_clip(command, COMMAND_MAX), extra={"exit": code})
        entry.add_source(m)
        self.commands.append(entry)
        if pending_id:
            self.pending[pending_id] = entry
        read, changed = command_paths(command)
        for path in read:
            self.file(self.read, path, m)
        for path in changed:
            self.file(self.changed, path, m)

    def result(self, m: RunMessage) -> None:
        if m.role == TOOL_ERROR:
            self.errors.add_source(m)
        waiting = self.pending.pop(str(m.meta.get("toolCallId", "")), None)
        if waiting is not None:
            waiting.extra["exit"] = exit_code(m)
            waiting.add_source(m)

    def message(self, m: RunMessage) -> None:
        if m.role == ASSISTANT:
            calls = tool_calls_of(m)
            for call in calls:
                self.call(call, m)
            self.tool_calls += max(len(calls), len(m.meta.get("tools") or []))  # no source line: count from meta
            if m.meta.get("stopReason") == "error":
                self.errors.add_source(m)
        elif m.role in (TOOL_RESULT, TOOL_ERROR):
            self.result(m)
        elif m.role == BASH:
            command = str((m.source or {}).get("command") or m.text.split("\n", 1)[0].removeprefix("$ "))
            code = m.meta.get("exitCode")
            self.shell(command, m, code=code if isinstance(code, int) else None)


def summarize(messages: list[RunMessage], status: str = "ok") -> RunSummary:
    b = _Builder()
    for m in messages:
        b.message(m)
    goal = _goal(messages)
    outcome = _outcome(messages)
    files_changed = list(b.changed.values())
    line = compose_line(goal, outcome, [f.text for f in files_changed], len(b.errors.msgs), status)
    return RunSummary(line, goal, outcome, list(b.read.values()), files_changed, b.commands, b.errors, b.tool_calls)


def _goal(messages: list[RunMessage]) -> Field | None:
    for m in messages:
        if m.role == USER and m.text.strip():
            f = Field(clip_sentences(m.text, GOAL_FIELD_MAX))
            f.add_source(m)
            return f
    return None


def _outcome(messages: list[RunMessage]) -> Field | None:
    for m in reversed(messages):
        if is_final_reply(m):
            text = first_sentence(reply_text(m), OUTCOME_FIELD_MAX)
            if text:
                f = Field(text)
                f.add_source(m)
                return f
    return None


def compose_line(goal: Field | None, outcome: Field | None, changed: list[str], errors: int, status: str) -> str:
    """The 50-150 char navigation line: goal → outcome [files] (errors, status)."""
    parts = [clip_sentences(goal.text, GOAL_LINE_MAX) if goal else "(no user message)"]
    if outcome:
        parts.append("→ " + clip_sentences(outcome.text, OUTCOME_LINE_MAX))
    if changed:
        names = [p.rsplit("/", 1)[-1] for p in changed[:FILES_IN_LINE]]
        parts.append("[" + ", ".join(names) + (" …" if len(changed) > FILES_IN_LINE else "") + "]")
    notes = [f"{errors} error{'s' if errors != 1 else ''}"] if errors else []
    if status != "ok":
        notes.append(status)
    if notes:
        parts.append("(" + ", ".join(notes) + ")")
    line = " ".join(parts)
    return line if len(line) <= LINE_MAX else line[: LINE_MAX - 1] + "…"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- segmentation ---------------------------------------------------------------------

CONTEXT_ROLES = {"summary", "custom", "bash", "other"}


def segment(messages: list[RunMessage]) -> list[list[RunMessage]]:
    """Cut a session's messages (in display order) into runs.

    A user message starts a run. A compaction or branch summary that arrives
    after a run's final reply opens the next run (it is the context the next
    prompt is answered from), and the next user message joins it; one that
    arrives mid-turn stays in the turn. Bash executions (`!cmd`) and injected
    custom messages stay in the run they follow: the user checking an outcome.
    Messages before any user message form a run of their own.
    """
    runs: list[list[RunMessage]] = []
    done = False
    for m in messages:
        current = runs[-1] if runs else None
        if m.role == USER:
            if current is not None and _context_only(current):
                current.append(m)
            else:
                runs.append([m])
            done = False
        elif m.role == "summary" and current is not None and done:
            runs.append([m])
            done = False
        else:
            if current is None:
                runs.append([m])
            else:
                current.append(m)
            if m.role in (ASSISTANT, TOOL_RESULT, TOOL_ERROR):
                done = is_final_reply(m)
    return runs


def _context_only(run: list[RunMessage]) -> bool:
    return all(m.role in CONTEXT_ROLES for m in run) and not any(m.role == USER for m in run)


def run_status(run: list[RunMessage], is_last: bool) -> str:
    """ok, error, aborted (never finished but a later prompt came) or open (may still finish)."""
    last = next((m for m in reversed(run) if m.role in (ASSISTANT, TOOL_RESULT, TOOL_ERROR)), None)
    if last is None or not is_final_reply(last):
        return "open" if is_last else "aborted"
    reason = last.meta.get("stopReason")
    if reason == "error":
        return "error"
    if reason == "aborted":
        return "aborted"
    return "ok"
