"""A scripted coding history for the provenance tests and `bench/blame_accuracy.py`: runs of an agent
that write and edit files in a git repository, commits in between, and edits a person makes by hand.

Every line written carries a marker of who wrote it (`«r3»`, `«hand»`), so the truth of each line
of a file is read off the file itself. The world applies each change to the real files as the agent
would, and keeps the calls; `pi_session`, `claude_session` and `codex_session` write the same
history as each agent's transcript (their real shapes: pi's `edit`/`write` with results and
details, Claude Code's `Edit`/`MultiEdit`/`Write` with `toolUseResult`, Codex's `apply_patch`).
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MARK = re.compile(r"«(r\d+|hand)»")
START_MS = 1_796_300_000_000


@dataclass
class Change:
    tool: str  # write | edit
    path: str  # relative to the repository
    old: str = ""
    new: str = ""
    content: str = ""
    before: str | None = None  # the file just before (what Claude Code's results carry)
    after: str | None = None  # the file just after (what pi's extension hashes)
    first_line: int | None = None
    ok: bool = True


@dataclass
class Run:
    number: int
    ask: str
    changes: list[Change] = field(default_factory=list)


class World:
    """A git repository and the history made in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q")
        self.git("config", "user.email", "dev@example.com")
        self.git("config", "user.name", "Dev")
        self.runs: list[Run] = []

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True, text=True).stdout

    def read(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")

    def run(self, ask: str) -> Run:
        self.runs.append(Run(len(self.runs) + 1, ask))
        return self.runs[-1]

    def write(self, run: Run, path: str, content: str) -> None:
        target = self.root / path
        before = target.read_text(encoding="utf-8") if target.exists() else None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        run.changes.append(Change("write", path, content=content, before=before, after=content))

    def edit(self, run: Run, path: str, old: str, new: str) -> None:
        text = self.read(path)
        assert text.count(old) == 1, f"{old!r} must be unique in {path}"
        at = text.index(old)
        (self.root / path).write_text(text.replace(old, new), encoding="utf-8")
        first = text[:at].count("\n") + 1
        run.changes.append(Change("edit", path, old, new, before=text, after=self.read(path), first_line=first))

    def failed_edit(self, run: Run, path: str, old: str, new: str) -> None:
        """An edit the tool refused (its old text is not in the file): nothing changes."""
        run.changes.append(Change("edit", path, old, new, before=self.read(path), ok=False))

    def hand(self, path: str, old: str, new: str) -> None:
        """A person's edit in their editor: no session sees it."""
        text = self.read(path)
        assert text.count(old) == 1
        (self.root / path).write_text(text.replace(old, new), encoding="utf-8")

    def commit(self, message: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)

    def truth(self, path: str) -> list[str | None]:
        """Who wrote each line now, from its marker: `r3`, `hand`, or None for an unmarked line."""
        out = []
        for line in self.read(path).splitlines():
            found = MARK.search(line)
            out.append(found.group(1) if found else None)
        return out


def scenario(world: World) -> None:
    """The history every agent's transcript tells: four runs over two files, two commits, hand edits
    between and after them, a failed edit, a rewrite of a file a person had edited, a moved block."""
    r1 = world.run("Write the config loader and its defaults")
    world.write(
        r1, "app/config.py", _block("r1", ["def load(path):", "    text = open(path).read()", "    return parse(text)"])
    )
    world.write(r1, "app/defaults.py", _block("r1", ["TIMEOUT = 30", "RETRIES = 3", "BACKOFF = 1.5"]))
    r2 = world.run("Parse TOML instead of JSON in the loader")
    world.edit(
        r2,
        "app/config.py",
        "    return parse(text)  # «r1»\n",
        _block("r2", ["    import tomllib", "    return tomllib.loads(text)"]),
    )
    world.failed_edit(r2, "app/config.py", "no such text\n", "never written  # «r2»\n")
    world.commit("config loader")
    world.hand("app/defaults.py", "RETRIES = 3  # «r1»\n", "RETRIES = 5  # «hand» tuned in production\n")
    world.hand(
        "app/config.py",
        "def load(path):  # «r1»\n",
        "# loader of the app settings  # «hand»\ndef load(path):  # «r1»\n",
    )
    r3 = world.run("Add validation after loading and log the path")
    world.edit(
        r3,
        "app/config.py",
        "    import tomllib  # «r2»\n",
        _block("r3", ["    log.info('loading %s', path)"]) + "    import tomllib  # «r2»\n",
    )
    world.edit(
        r3,
        "app/config.py",
        "    return tomllib.loads(text)  # «r2»\n",
        _block("r3", ["    data = tomllib.loads(text)", "    validate(data)", "    return data"]),
    )
    world.commit("validation")
    r4 = world.run("Rewrite the defaults module with a dataclass, keep the tuned values")
    current = world.read("app/defaults.py")
    keep = [line for line in current.splitlines(keepends=True) if "«hand»" in line]
    world.write(
        r4,
        "app/defaults.py",
        _block("r4", ["from dataclasses import dataclass", "@dataclass", "class Defaults:"])
        + "".join(keep)
        + _block("r4", ["    JITTER = 0.1"]),
    )
    world.edit(
        r4,
        "app/config.py",
        "# loader of the app settings  # «hand»\n",
        "# loader of the app settings  # «hand»\n" + _block("r4", ["from .validate import validate"]),
    )
    world.hand(
        "app/config.py",
        "    validate(data)  # «r3»\n",
        "    validate(data)  # «r3»\n    assert data, 'empty config'  # «hand»\n",
    )
    world.commit("defaults")
    # a person moves the import block to the end of the file (a reorder, text unchanged)
    text = world.read("app/config.py")
    moved = "from .validate import validate  # «r4»\n"
    (world.root / "app/config.py").write_text(text.replace(moved, "") + moved, encoding="utf-8")
    world.commit("move import")


def _block(who: str, lines: list[str]) -> str:
    return "".join(f"{line}  # «{who}»\n" for line in lines)


# --- transcripts ---------------------------------------------------------------------------------


def _iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


class _Clock:
    def __init__(self, start: int) -> None:
        self.ms = start

    def tick(self) -> int:
        self.ms += 1000
        return self.ms


def pi_session(world: World, out: Path, session_id: str | None = None) -> Path:
    """The history as one pi v3 session file (pi 1.x result details: diff, patch, firstChangedLine)."""
    sid = session_id or str(uuid.UUID(int=0x01A2364C000070008000000000000001))
    clock = _Clock(START_MS)
    lines: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": sid, "timestamp": _iso(clock.ms), "cwd": str(world.root)}
    ]
    parent: list[str | None] = [None]

    def entry(message: dict[str, Any]) -> None:
        ts = clock.tick()
        eid = f"{len(lines):08x}"
        message["timestamp"] = ts
        lines.append({"type": "message", "id": eid, "parentId": parent[0], "timestamp": _iso(ts), "message": message})
        parent[0] = eid

    for run in world.runs:
        entry({"role": "user", "content": [{"type": "text", "text": run.ask}]})
        for k, change in enumerate(run.changes):
            call_id = f"call_{run.number}_{k}"
            args = {"path": change.path, "content": change.content} if change.tool == "write" else {
                "path": change.path, "edits": [{"oldText": change.old, "newText": change.new}]}  # fmt: skip
            entry({"role": "assistant", "content": [{"type": "toolCall", "id": call_id, "name": change.tool, "arguments": args}],
                   "stopReason": "toolUse"})  # fmt: skip
            result: dict[str, Any] = {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": change.tool,
                "isError": not change.ok,
            }
            if change.ok:
                result["content"] = [{"type": "text", "text": f"Successfully changed {change.path}."}]
                if change.first_line:
                    result["details"] = {"diff": "", "firstChangedLine": change.first_line}
            else:
                result["content"] = [{"type": "text", "text": f"Could not find the exact text in {change.path}."}]
            entry(result)
        entry(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"Done: {run.ask.lower()}."}],
                "stopReason": "stop",
            }
        )
    path = out / f"pi-{sid}.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def claude_session(world: World, out: Path, with_original: bool = True) -> Path:
    """The history as a Claude Code transcript: Edit/Write tool_use, results with `toolUseResult`
    (`originalFile` and `structuredPatch` as Claude Code records them; `with_original=False`: without)."""
    sid = "c1a0de00-0000-4000-8000-000000000001"
    clock = _Clock(START_MS)
    lines: list[dict[str, Any]] = []
    parent: list[str | None] = [None]

    def line(kind: str, message: dict[str, Any], **extra: Any) -> None:
        uid = f"u{len(lines):04d}"
        lines.append({"type": kind, "uuid": uid, "parentUuid": parent[0], "sessionId": sid, "cwd": str(world.root),
                      "timestamp": _iso(clock.tick()), "version": "2.1.0", "isSidechain": False, "userType": "external",
                      "message": message, **extra})  # fmt: skip
        parent[0] = uid

    for run in world.runs:
        line("user", {"role": "user", "content": run.ask})
        for k, change in enumerate(run.changes):
            tool_id = f"toolu_{run.number:02d}{k:02d}"
            path = str(world.root / change.path)
            if change.tool == "write":
                name, args = "Write", {"file_path": path, "content": change.content}
                result: dict[str, Any] = {"type": "update" if change.before is not None else "create", "filePath": path,
                                          "content": change.content, "structuredPatch": []}  # fmt: skip
            else:
                name, args = "Edit", {"file_path": path, "old_string": change.old, "new_string": change.new}
                result = {"filePath": path, "oldString": change.old, "newString": change.new, "replaceAll": False,
                          "structuredPatch": [{"oldStart": change.first_line or 1, "oldLines": 1,
                                               "newStart": change.first_line or 1, "newLines": 1, "lines": []}]}  # fmt: skip
            if with_original and change.before is not None:
                result["originalFile"] = change.before
            msg = {"id": f"msg_{run.number}_{k}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                   "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": args}], "stop_reason": "tool_use",
                   "usage": {"input_tokens": 10, "output_tokens": 5}}  # fmt: skip
            line("assistant", msg, requestId=f"req_{run.number}_{k}")
            if change.ok:
                block = {"type": "tool_result", "tool_use_id": tool_id, "content": f"The file {path} has been updated."}
                line("user", {"role": "user", "content": [block]}, toolUseResult=result)
            else:
                block = {"type": "tool_result", "tool_use_id": tool_id, "is_error": True,
                         "content": "<tool_use_error>String to replace not found in file.</tool_use_error>"}  # fmt: skip
                line("user", {"role": "user", "content": [block]}, toolUseResult="Error: String to replace not found")
        final = {"id": f"msg_{run.number}_end", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                 "content": [{"type": "text", "text": f"Done: {run.ask.lower()}."}], "stop_reason": "end_turn"}  # fmt: skip
        line("assistant", final, requestId=f"req_{run.number}_end")
    path = out / f"{sid}.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    return path


def codex_session(world: World, out: Path) -> Path:
    """The history as a Codex rollout: `apply_patch` custom tool calls (Add File for a new file,
    Update File hunks for edits and rewrites), with their outputs."""
    sid = "c0de0000-0000-4000-8000-000000000001"
    clock = _Clock(START_MS)
    lines: list[dict[str, Any]] = [
        {"timestamp": _iso(clock.ms), "type": "session_meta",
         "payload": {"id": sid, "timestamp": _iso(clock.ms), "cwd": str(world.root), "originator": "codex_cli_rs",
                     "cli_version": "0.77.0", "source": "cli"}}]  # fmt: skip

    def item(payload: dict[str, Any]) -> None:
        lines.append({"timestamp": _iso(clock.tick()), "type": "response_item", "payload": payload})

    for run in world.runs:
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": run.ask}]})
        for k, change in enumerate(run.changes):
            call_id = f"call_{run.number}_{k}"
            item({"type": "custom_tool_call", "name": "apply_patch", "call_id": call_id, "input": _patch(change)})
            output = (
                f"Success. Updated the following files:\nM {change.path}\n"
                if change.ok
                else "apply_patch verification failed: no match"
            )
            item({"type": "custom_tool_call_output", "call_id": call_id,
                  "output": json.dumps({"output": output, "metadata": {"exit_code": 0 if change.ok else 1}})})  # fmt: skip
        item(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"Done: {run.ask.lower()}."}],
            }
        )
    path = out / f"rollout-2026-12-05T00-00-00-{sid}.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    return path


def _patch(change: Change) -> str:
    """A Codex patch for one change: a new file is added, an existing one updated by hunks (a
    rewrite: the old lines out, the new in), as Codex writes them."""
    body = ["*** Begin Patch"]
    if change.tool == "write" and change.before is None:
        body += [f"*** Add File: {change.path}"] + ["+" + line for line in change.content.splitlines()]
    elif change.tool == "write":
        body += [f"*** Update File: {change.path}", "@@"]
        body += ["-" + line for line in (change.before or "").splitlines()] + [
            "+" + line for line in change.content.splitlines()
        ]
    else:
        body += [f"*** Update File: {change.path}", "@@"]
        body += ["-" + line for line in change.old.splitlines()] + ["+" + line for line in change.new.splitlines()]
    return "\n".join(body + ["*** End Patch"])


def observations(world: World) -> list[dict[str, Any]]:
    """What pi's extension sends for each change of `pi_session`'s calls (`edit_observed`): the file's
    sha1 before and after, and the file before."""
    import hashlib

    def sha(text: str | None) -> str | None:
        return hashlib.sha1(text.encode()).hexdigest() if text is not None else None

    out = []
    for run in world.runs:
        for k, change in enumerate(run.changes):
            if change.ok:
                out.append({"call_id": f"call_{run.number}_{k}", "path": str(world.root / change.path),
                            "before_hash": sha(change.before), "after_hash": sha(change.after),
                            "before_text": change.before, "observed_at": START_MS + 1000 * (len(out) + 1)})  # fmt: skip
    return out


def score(world: World, path: str, written_by: list[str | None]) -> dict[str, int]:
    """Lines by who wrote them (the markers) against what blame says (`rN` or None): how many of the
    agent's lines blame gave to the right run, to another run, to nobody, and hand lines it gave away."""
    counts = {"agent_lines": 0, "right": 0, "wrong_run": 0, "missed": 0, "hand_lines": 0, "hand_attributed": 0}
    for truth, said in zip(world.truth(path), written_by, strict=True):
        if truth == "hand":
            counts["hand_lines"] += 1
            counts["hand_attributed"] += said is not None
        elif truth is not None:
            counts["agent_lines"] += 1
            key = "right" if said == truth else "missed" if said is None else "wrong_run"
            counts[key] += 1
    return counts


def build_viewer_archive(db: Path, work: Path) -> dict[str, str]:
    """The browser tests' archive (`web_fixture.build_archive`) and this history on top: the repository
    under `work`, its pi session imported, and a Claude Code session of early 2025 (the timeline's
    older work). Returns what the pages are opened with."""
    from pi_memory import Archive
    from web_fixture import build_archive

    found = build_archive(db)
    world = World(work / "repo")
    scenario(world)
    session = pi_session(world, work)
    old = work / "claude" / "c1a0de00-2222-4000-8000-00000000beef.jsonl"
    old.parent.mkdir(parents=True, exist_ok=True)
    sid = old.stem
    turns = [
        ("2025-03-04T10:00:00Z", "把配置加载改成 TOML, keep JSON as a fallback"),
        ("2025-03-05T09:30:00Z", "Add a test for the loader"),
    ]
    lines = []
    for k, (ts, ask) in enumerate(turns):
        lines.append({"type": "user", "uuid": f"u{k}", "parentUuid": None, "sessionId": sid, "cwd": "/home/dev/old-tool",
                      "timestamp": ts, "message": {"role": "user", "content": ask}})  # fmt: skip
        lines.append({"type": "assistant", "uuid": f"a{k}", "parentUuid": f"u{k}", "sessionId": sid, "cwd": "/home/dev/old-tool",
                      "timestamp": ts.replace(":00Z", ":09Z"), "message": {"id": f"m{k}", "role": "assistant", "model": "claude-sonnet-4-5",
                      "content": [{"type": "text", "text": "Done: **TOML** first, then JSON.\n\n```toml\n[loader]\nformat = \"toml\"\n```"}]}})  # fmt: skip
    old.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    with Archive.open(db) as archive:
        archive.import_paths([session])
        archive.import_paths([old], agent="claude")
        pi_sid = next(s.id for s in archive.sessions(limit=100) if s.project == "repo")
    return {**found, "repo": str(world.root), "file": str(world.root / "app" / "config.py"), "repo_session": pi_sid,
            "claude_session": sid, "claude_day": "2025-03-04"}  # fmt: skip
