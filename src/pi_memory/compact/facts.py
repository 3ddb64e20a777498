"""Facts that need no interpretation, pulled from compacted messages by rule (pure).

Design idea: the checkpoint and the derived memories report only what the
session states literally: the user's own requests, paths in tool arguments
(read / edit / write, and paths in simple bash commands), commands with exit
codes, test count lines ("12 passed, 1 failed"), errors. Each fact carries the
entry ids it came from, so a reader can check it against the original. Nothing
here guesses what an assistant meant or whether work is done.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .boundary import Message

EXCERPT_CHARS = 240
READ_TOOLS = frozenset({"read", "grep", "find", "ls"})
WRITE_TOOLS = frozenset({"edit", "write"})
READ_COMMANDS = frozenset({"cat", "head", "tail", "less", "more", "wc", "nl", "grep", "rg", "diff", "stat", "ls"})
WRITE_COMMANDS = frozenset({"touch", "rm", "mkdir", "tee", "truncate"})
SHELL_OPERATORS = frozenset("|&;<>()")
EXIT_RE = re.compile(r"(?:Command )?exited with code (-?\d+)")
TEST_WORDS = (
    "passed",
    "failed",
    "failures",
    "errors",
    "error",
    "skipped",
    "xfailed",
    "xpassed",
    "pending",
    "todo",
    "total",
)
TEST_PAIR_RE = re.compile(r"\b(\d+) (" + "|".join(TEST_WORDS) + r")\b")


@dataclass
class FileTouch:
    path: str
    action: str  # read | edit | write | bash-read | bash-change
    entry_id: str
    ok: bool | None = None  # None until the result is seen
    result_entry_id: str = ""


@dataclass
class Command:
    command: str
    entry_id: str
    exit_code: int | None
    result_entry_id: str = ""


@dataclass
class Facts:
    requests: list[tuple[str, str]] = field(default_factory=list)  # (entry id, user text)
    files: list[FileTouch] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    tests: list[tuple[str, str]] = field(default_factory=list)  # (entry id, "12 passed, 1 failed")
    errors: list[tuple[str, str]] = field(default_factory=list)  # (entry id, excerpt)

    def changed_paths(self) -> list[str]:
        return _unique(t.path for t in self.files if t.action in ("edit", "write", "bash-change"))

    def read_paths(self) -> list[str]:
        return _unique(t.path for t in self.files if t.action in ("read", "bash-read"))


def _unique(values: Any) -> list[str]:
    return list(dict.fromkeys(values))


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """One line, whitespace collapsed, cut at `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def text_of(content: Any) -> str:
    """The text blocks of a message content (string or block list); images and thinking left out."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")


def command_paths(command: str) -> tuple[str, list[str]]:
    """('bash-read' | 'bash-change' | '', paths) for a simple command; pipes and redirects are not simple."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return "", []
    if not tokens or any(t and set(t) <= SHELL_OPERATORS for t in tokens):
        return "", []
    program, args = tokens[0].rsplit("/", 1)[-1], [t for t in tokens[1:] if not t.startswith("-")]
    if program in ("grep", "rg") and args:
        args = args[1:]  # the pattern
    if program == "sed" and any(t.startswith("-i") for t in tokens[1:]):
        return "bash-change", [a for a in args[1:] if _looks_like_path(a)]
    if program in READ_COMMANDS:
        return "bash-read", [a for a in args if _looks_like_path(a)]
    if program in WRITE_COMMANDS:
        return "bash-change", [a for a in args if _looks_like_path(a)]
    return "", []


def _looks_like_path(token: str) -> bool:
    return bool(token) and ("/" in token or "." in token.strip(".")) and "=" not in token and len(token) < 300


def parse_test_counts(output: str) -> str:
    """The last summary line with test counts ("12 passed, 1 failed"), normalised; '' if none."""
    found = ""
    for line in output.splitlines():
        pairs = TEST_PAIR_RE.findall(line)
        if any(word in ("passed", "failed") for _, word in pairs):
            found = ", ".join(f"{n} {w}" for n, w in pairs)
    return found


class _Collector:
    """Walks messages once, pairing tool calls with their results by call id."""

    def __init__(self) -> None:
        self.facts = Facts()
        self.calls: dict[str, tuple[str, str, dict[str, Any]]] = {}  # call id -> (entry id, tool, args)
        # open (result not yet seen) touches and commands by the entry id of their call: O(1) pairing
        self.open_touches: dict[str, list[FileTouch]] = {}
        self.open_commands: dict[str, list[Command]] = {}

    def add(self, entry_id: str, msg: Message) -> None:
        role = msg.get("role")
        if role == "user":
            text = text_of(msg.get("content")).strip()
            if text:
                self.facts.requests.append((entry_id, text))
        elif role == "assistant":
            self._assistant(entry_id, msg)
        elif role == "toolResult":
            self._result(entry_id, msg)
        elif role == "bashExecution":
            self._bash_execution(entry_id, msg)

    def _assistant(self, entry_id: str, msg: Message) -> None:
        if msg.get("stopReason") in ("error", "aborted") and msg.get("errorMessage"):
            self.facts.errors.append((entry_id, excerpt(f"assistant turn {msg['stopReason']}: {msg['errorMessage']}")))
        for block in msg.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                raw_args = block.get("arguments")
                args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
                self.calls[str(block.get("id"))] = (entry_id, str(block.get("name")), args)
                self._call(entry_id, str(block.get("name")), args)

    def _call(self, entry_id: str, tool: str, args: dict[str, Any]) -> None:
        path = args.get("path")
        if tool in READ_TOOLS | WRITE_TOOLS and isinstance(path, str) and path:
            action = tool if tool in WRITE_TOOLS else "read"
            self._touch(FileTouch(path, action, entry_id))
        elif tool == "bash" and isinstance(args.get("command"), str):
            command = Command(args["command"], entry_id, None)
            self.facts.commands.append(command)
            self.open_commands.setdefault(entry_id, []).append(command)
            action, paths = command_paths(command.command)
            for p in paths:
                self._touch(FileTouch(p, action, entry_id))

    def _touch(self, touch: FileTouch) -> None:
        self.facts.files.append(touch)
        self.open_touches.setdefault(touch.entry_id, []).append(touch)

    def _result(self, entry_id: str, msg: Message) -> None:
        call = self.calls.get(str(msg.get("toolCallId")))
        output, is_error = text_of(msg.get("content")), bool(msg.get("isError"))
        if call is not None:
            for touch in self.open_touches.get(call[0], []):
                if touch.ok is None and call[1] != "bash" and touch.path == call[2].get("path"):
                    touch.ok, touch.result_entry_id = not is_error, entry_id
            if call[1] == "bash":
                self._bash_result(call[0], call[2], entry_id, output, is_error)
        if is_error:
            self.facts.errors.append((entry_id, excerpt(f"{msg.get('toolName', 'tool')} error: {output}")))
        counts = parse_test_counts(output)
        if counts:
            self.facts.tests.append((entry_id, counts))

    def _bash_result(self, call_entry: str, args: dict[str, Any], entry_id: str, output: str, is_error: bool) -> None:
        match = EXIT_RE.search(output[-200:])
        code = int(match.group(1)) if match else (1 if is_error else 0)
        for cmd in self.open_commands.get(call_entry, []):
            if cmd.command == args.get("command") and not cmd.result_entry_id:
                cmd.exit_code, cmd.result_entry_id = code, entry_id
                break
        for touch in self.open_touches.get(call_entry, []):
            if touch.action.startswith("bash") and touch.ok is None:
                touch.ok, touch.result_entry_id = code == 0, entry_id

    def _bash_execution(self, entry_id: str, msg: Message) -> None:
        command = str(msg.get("command") or "")
        code = msg.get("exitCode") if isinstance(msg.get("exitCode"), int) else None
        self.facts.commands.append(Command(command, entry_id, code, entry_id))
        action, paths = command_paths(command)
        self.facts.files.extend(FileTouch(p, action, entry_id, code == 0, entry_id) for p in paths)
        output = str(msg.get("output") or "")
        counts = parse_test_counts(output)
        if counts:
            self.facts.tests.append((entry_id, counts))


def collect_facts(messages: Sequence[tuple[str, Message]]) -> Facts:
    """Facts from (entry id, message) pairs in session order."""
    collector = _Collector()
    for entry_id, msg in messages:
        collector.add(entry_id, msg)
    return collector.facts


def latest_file_states(facts: Facts) -> list[tuple[str, FileTouch]]:
    """Per touched path, its last touch (a change outranks nothing; the latest wins), in path order of first touch."""
    latest: dict[str, FileTouch] = {}
    for touch in facts.files:
        latest[touch.path] = touch
    return list(latest.items())
