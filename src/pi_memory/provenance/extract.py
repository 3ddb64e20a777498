"""Edits as data: the file changes a session's tool calls made, read off its archived lines (pure).

Design idea: an agent's edit is already in its transcript, in the agent's own words: pi's
`edit {path, edits: [{oldText, newText}]}` (older models send one `{oldText, newText}`, or
`edits` as a JSON string, which pi accepts too) and `write {path, content}`; Claude Code's
`Edit {file_path, old_string, new_string, replace_all}`, `MultiEdit {file_path, edits}` and
`Write {file_path, content}`; Codex's `apply_patch` (a patch in Codex's own format, as a custom
tool or inside a shell command). A call is paired with its result by call id: only a change
whose result says it succeeded happened. Each change becomes an `EditRecord`: the path resolved
against the session's cwd, the messages of the call and the result, hashes and line counts of
the text before and after, and the first changed line when the tool reported it (pi's
`firstChangedLine` or patch, Claude's `structuredPatch`).

Everything here is a function of the lines alone, so the importer's parse worker plans the
edits of a whole file (`plan_edits`) and the archive reads them back from stored lines for
live capture, `watch` and old archives, and both get the same records.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core.sources.codex import output_text

WRITE, EDIT, DELETE, MOVE = "write", "edit", "delete", "move"
# Tool names (lower case) whose calls change files: pi, Claude Code, Codex.
EDIT_TOOLS = frozenset({"edit", "write", "multiedit", "apply_patch"})
SHELL_TOOLS = frozenset({"shell", "exec_command", "local_shell", "bash", "container.exec"})
PATCH_BEGIN, PATCH_END = "*** Begin Patch", "*** End Patch"
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", re.M)
_ERROR_OUTPUT = ("<tool_use_error>", "Error:", "error:")


@dataclass(frozen=True)
class Change:
    """One change a tool call asked for, with the path as the agent gave it."""

    kind: str  # WRITE (the whole content), EDIT (old -> new), DELETE, MOVE (to `path` from `from_path`)
    path: str
    old: str | None = None
    new: str | None = None
    replace_all: bool = False
    from_path: str | None = None
    lines: bool = False  # a patch hunk: `old` and `new` are whole lines (Codex), matched line by line


@dataclass(frozen=True)
class Call:
    call_id: str
    tool: str
    arguments: Any


@dataclass(frozen=True)
class Outcome:
    """What a tool result says about its call: whether it succeeded, and what it reported."""

    call_id: str
    ok: bool
    line: int | None = None  # the first changed line of the file after the change
    before: str | None = None  # the whole file before the change (Claude's `originalFile`)


@dataclass
class EditRecord:
    """One change that happened: a row of the `edit` table (`record.py`)."""

    call_key: int  # the message that made the call (a msg id, or a position in a file)
    result_key: int | None  # its result's
    call_id: str
    part: int  # the change's place among its call's `changes` (the same whoever reads the call)
    tool: str
    kind: str
    path: str  # absolute, resolved against the session's cwd
    from_path: str | None
    ts: int  # when the tool ran (its result's time)
    old_hash: str | None
    new_hash: str | None
    old_lines: int
    new_lines: int
    line: int | None  # first changed line, when the tool reported it (the call's first change only)

    def row(self) -> tuple[Any, ...]:
        return (
            self.call_id,
            self.part,
            self.tool,
            self.kind,
            self.path,
            self.from_path,
            self.ts,
            self.old_hash,
            self.new_hash,
            self.old_lines,
            self.new_lines,
            self.line,
        )


@dataclass
class MessageLines:
    """An archived message as pairing needs it: its key, time, and its source line(s) parsed."""

    key: int
    ts: int
    lines: list[dict[str, Any]] = field(default_factory=list)


# --- texts -------------------------------------------------------------------------------


def text_hash(text: str | None) -> str | None:
    """A change's text, hashed as `edit.old_hash`/`new_hash` store it (16 hex of SHA-1)."""
    if text is None:
        return None
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def line_count(text: str | None) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def resolve_path(path: str, cwd: str) -> str:
    """An agent's path as the file system saw it: `~` expanded, pi's `@` prefix and `file://`
    dropped, a relative one joined to the session's cwd, `..` folded."""
    given = path.strip()
    if given.startswith("@"):
        given = given[1:]
    if given.startswith("file://"):
        given = given[len("file://") :]
    if given == "~" or given.startswith("~/"):
        given = os.path.expanduser(given)
    if not posixpath.isabs(given) and cwd:
        given = posixpath.join(cwd, given)
    return posixpath.normpath(given) if given else given


# --- calls ---------------------------------------------------------------------------------


def tool_calls(line: dict[str, Any]) -> list[Call]:
    """The tool calls in one source line: pi's `toolCall` and Claude's `tool_use` blocks of an
    assistant message, or a Codex call item (`function_call`, `custom_tool_call`, `local_shell_call`)."""
    payload = _codex_item(line)
    if payload is not None:
        call = _codex_call(payload)
        return [call] if call is not None else []
    message = line.get("message") if isinstance(line.get("message"), dict) else line
    content = message.get("content") if isinstance(message, dict) else None
    calls = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") in ("toolCall", "tool_use"):
            args = block.get("arguments", block.get("input"))
            calls.append(Call(str(block.get("id") or ""), str(block.get("name") or ""), args))
    return calls


def _codex_item(line: dict[str, Any]) -> dict[str, Any] | None:
    """The Responses item of a Codex line (wrapped, or a bare legacy item)."""
    if line.get("type") == "response_item" and isinstance(line.get("payload"), dict):
        return dict(line["payload"])
    if line.get("type") in ("function_call", "custom_tool_call", "local_shell_call", "function_call_output",
                            "custom_tool_call_output") and "payload" not in line:  # fmt: skip
        return line
    return None


def _codex_call(item: dict[str, Any]) -> Call | None:
    kind = item.get("type")
    call_id = str(item.get("call_id") or item.get("id") or "")
    if kind == "custom_tool_call":
        return Call(call_id, str(item.get("name") or ""), item.get("input"))
    if kind == "function_call":
        raw = item.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            args = raw
        return Call(call_id, str(item.get("name") or ""), args)
    if kind == "local_shell_call":
        action = item.get("action")
        return Call(call_id, "local_shell", {"command": action.get("command") if isinstance(action, dict) else None})
    return None


def is_edit_call(call: Call) -> bool:
    name = call.tool.lower()
    return name in EDIT_TOOLS or (name in SHELL_TOOLS and _shell_patch(call.arguments) is not None)


# --- what a call changes --------------------------------------------------------------------


def changes(call: Call) -> list[Change]:
    """The file changes a call asks for, in order (empty for a call that changes no file)."""
    name = call.tool.lower()
    args = call.arguments
    if name == "apply_patch":
        patch = (args.get("input") or args.get("patch")) if isinstance(args, dict) else args
        return parse_patch(patch) if isinstance(patch, str) else []
    if name in SHELL_TOOLS:
        patch = _shell_patch(args)
        return parse_patch(patch) if patch is not None else []
    if not isinstance(args, dict):
        return []
    path = args.get("path", args.get("file_path"))
    if not isinstance(path, str) or not path.strip():
        return []
    if name == "write":
        content = args.get("content")
        return [Change(WRITE, path, new=content)] if isinstance(content, str) else []
    if name in ("edit", "multiedit"):
        return [Change(EDIT, path, old, new, replace_all) for old, new, replace_all in _replacements(args)]
    return []


def _replacements(args: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(old, new, replace all) of an edit call, in each shape pi and Claude Code accept."""
    edits: Any = args.get("edits")
    if isinstance(edits, str):  # some models send the list as a JSON string (pi takes it)
        try:
            edits = json.loads(edits)
        except ValueError:
            edits = None
    if isinstance(edits, dict):
        edits = [edits]
    items = list(edits) if isinstance(edits, list) else []
    if isinstance(args.get("oldText"), str) or isinstance(args.get("old_string"), str):
        items.append(args)  # pi's older single edit, or Claude's Edit
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        old = item.get("oldText", item.get("old_string"))
        new = item.get("newText", item.get("new_string"))
        if isinstance(old, str) and isinstance(new, str):
            out.append((old, new, bool(item.get("replace_all") or args.get("replace_all"))))
    return out


def _shell_patch(args: Any) -> str | None:
    """The patch of a shell call that runs `apply_patch` (Codex before its apply_patch tool)."""
    command = args.get("command", args.get("cmd")) if isinstance(args, dict) else args
    if isinstance(command, list):
        words = [str(w) for w in command]
        if len(words) >= 2 and words[0] in ("apply_patch", "applypatch"):
            return words[1]
        command = " ".join(words)
    if not isinstance(command, str) or "apply_patch" not in command or PATCH_BEGIN not in command:
        return None
    start = command.index(PATCH_BEGIN)
    end = command.find(PATCH_END, start)
    return command[start : end + len(PATCH_END)] if end >= 0 else command[start:]


def parse_patch(patch: str) -> list[Change]:
    """Codex's patch format -> changes: `*** Add File` (a write), `*** Delete File`,
    `*** Update File` (with `*** Move to`) and its `@@` hunks of ` `/`-`/`+` lines."""
    reader = _PatchReader()
    for raw in patch.splitlines():
        if raw.startswith("*** "):
            reader.header(raw[4:])
        elif reader.adding:
            reader.added_line(raw)
        else:
            reader.hunk_line(raw)
    reader.flush()
    return reader.out


class _PatchReader:
    """The state of `parse_patch`: the file being read and the hunk being gathered."""

    def __init__(self) -> None:
        self.out: list[Change] = []
        self.path: str | None = None
        self.adding = False
        self.old: list[str] = []
        self.new: list[str] = []

    def flush(self) -> None:
        if self.path is not None and (self.old or self.new) and not self.adding:
            self.out.append(Change(EDIT, self.path, "".join(self.old), "".join(self.new), lines=True))
        self.old, self.new = [], []

    def header(self, head: str) -> None:
        self.flush()
        name, _sep, value = head.partition(": ")
        value = value.strip()
        if name == "Add File":
            self.path, self.adding = value, True
            self.out.append(Change(WRITE, value, new=""))
        elif name == "Delete File":
            self.path, self.adding = None, False
            self.out.append(Change(DELETE, value))
        elif name == "Update File":
            self.path, self.adding = value, False
        elif name == "Move to" and self.path is not None:
            self.out.append(Change(MOVE, value, from_path=self.path))
            self.path = value

    def added_line(self, raw: str) -> None:
        if raw.startswith("+") and self.path is not None:
            last = self.out[-1]
            self.out[-1] = Change(WRITE, self.path, new=(last.new or "") + raw[1:] + "\n")

    def hunk_line(self, raw: str) -> None:
        if self.path is None:
            return
        if raw.startswith("@@"):
            self.flush()
        elif raw.startswith("-"):
            self.old.append(raw[1:] + "\n")
        elif raw.startswith("+"):
            self.new.append(raw[1:] + "\n")
        elif raw.startswith(" ") or raw == "":
            self.old.append(raw[1:] + "\n")
            self.new.append(raw[1:] + "\n")


# --- results ---------------------------------------------------------------------------------


def tool_outcomes(line: dict[str, Any]) -> list[Outcome]:
    """The tool results in one source line: pi's `toolResult` message, Claude's `tool_result`
    blocks (with the line's `toolUseResult`), a Codex call output."""
    payload = _codex_item(line)
    if payload is not None:
        if payload.get("type") in ("function_call_output", "custom_tool_call_output"):
            _text, failed = output_text(payload.get("output"))
            return [Outcome(str(payload.get("call_id") or ""), not failed)]
        return []
    message = line.get("message") if isinstance(line.get("message"), dict) else line
    if not isinstance(message, dict):
        return []
    if message.get("role") == "toolResult":
        found = message.get("details")
        details: dict[str, Any] = found if isinstance(found, dict) else {}
        ok = not message.get("isError")
        return [Outcome(str(message.get("toolCallId") or ""), ok, _pi_first_line(details))]
    return _claude_outcomes(message, line.get("toolUseResult"))


def _pi_first_line(details: dict[str, Any]) -> int | None:
    first = details.get("firstChangedLine")
    if isinstance(first, int) and first > 0:
        return first
    patch = details.get("patch")
    found = _HUNK.search(patch) if isinstance(patch, str) else None
    return int(found.group(1)) if found else None


def _claude_outcomes(message: dict[str, Any], result: Any) -> list[Outcome]:
    content = message.get("content")
    blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(
        content, list
    ) else []  # fmt: skip
    line, before = _claude_result_facts(result) if len(blocks) == 1 else (None, None)
    out = []
    for block in blocks:
        ok = not block.get("is_error") and not _says_error(block.get("content"))
        out.append(Outcome(str(block.get("tool_use_id") or ""), ok, line, before))
    return out


def _claude_result_facts(result: Any) -> tuple[int | None, str | None]:
    """Claude Code's structured result of an Edit/Write: the first changed line, the file before."""
    if not isinstance(result, dict):
        return None, None
    patch = result.get("structuredPatch")
    first = patch[0].get("newStart") if isinstance(patch, list) and patch and isinstance(patch[0], dict) else None
    before = result.get("originalFile")
    return (first if isinstance(first, int) and first > 0 else None), (before if isinstance(before, str) else None)


def _says_error(content: Any) -> bool:
    text = content if isinstance(content, str) else ""
    if isinstance(content, list):
        text = " ".join(str(b.get("text") or "") for b in content if isinstance(b, dict))
    return text.lstrip().startswith(_ERROR_OUTPUT)


# --- pairing -----------------------------------------------------------------------------------


def may_edit(role: str, meta: dict[str, Any], text: str) -> bool:
    """Whether an archived message can hold an edit call or its result (read from what is stored
    beside it, so the archive parses only these messages' source lines)."""
    if role == "assistant":
        names = {str(t).lower() for t in meta.get("tools") or ()}
        return bool(names & EDIT_TOOLS) or (bool(names & SHELL_TOOLS) and "apply_patch" in text)
    if role in ("tool_result", "tool_error"):
        names = {str(t).lower() for t in [meta.get("tool"), *(meta.get("tools") or ())] if t}
        patched = "Updated the following files" in text or "apply_patch" in text
        return bool(names & EDIT_TOOLS) or names == {"tool"} or (bool(names & SHELL_TOOLS) and patched)
    return False


def pair_edits(messages: Iterable[MessageLines], cwd: str) -> list[EditRecord]:
    """The changes that happened in these messages (in order): each edit call whose result says
    it succeeded, one record per change; a call without a result here is left out."""
    calls: dict[str, tuple[int, Call]] = {}
    records: list[EditRecord] = []
    for message in messages:
        for line in message.lines:
            for call in tool_calls(line):
                if call.call_id and is_edit_call(call):
                    calls[call.call_id] = (message.key, call)
            for outcome in tool_outcomes(line):
                found = calls.pop(outcome.call_id, None)
                if found is not None and outcome.ok:
                    records += records_of(found[1], found[0], message.key, message.ts, outcome, cwd)
    return records


def records_of(
    call: Call, call_key: int, result_key: int | None, ts: int, outcome: Outcome, cwd: str
) -> list[EditRecord]:
    out = []
    for part, change in enumerate(changes(call)):
        out.append(
            EditRecord(
                call_key=call_key,
                result_key=result_key,
                call_id=call.call_id,
                part=part,
                tool=call.tool,
                kind=change.kind,
                path=resolve_path(change.path, cwd),
                from_path=resolve_path(change.from_path, cwd) if change.from_path else None,
                ts=ts,
                old_hash=text_hash(change.old),
                new_hash=text_hash(change.new),
                old_lines=line_count(change.old),
                new_lines=line_count(change.new),
                line=outcome.line if part == 0 else None,
            )
        )
    return out


def source_lines(raw: bytes) -> Iterator[dict[str, Any]]:
    """The parsed source lines of a stored verbatim copy (Claude's merged messages keep several)."""
    for piece in raw.split(b"\n"):
        try:
            value = json.loads(piece)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


# --- a whole file (the importer's parse worker) -----------------------------------------------


def plan_file(
    messages: Iterable[tuple[str, str, dict[str, Any], str, int, dict[str, Any]]], cwd: str
) -> list[tuple[Any, ...]]:
    """The edits of a session file, planned by the parse worker from its parsed messages, each
    given as (hash, role, meta, text, ts, line): `record.INSERT_EDIT`'s values after the session
    id, the call and result named by their messages' hashes (known before they have ids)."""
    hashes: list[str] = []
    candidates: list[MessageLines] = []
    for message_hash, role, meta, text, ts, line in messages:
        if may_edit(role, meta, text):
            candidates.append(MessageLines(len(hashes), ts, [line]))
            hashes.append(message_hash)
    if not candidates:
        return []
    return [
        (hashes[r.call_key], hashes[r.result_key] if r.result_key is not None else None, *r.row())
        for r in pair_edits(candidates, cwd)
    ]
