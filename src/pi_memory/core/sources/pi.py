"""pi session files (v1, v2, v3; pi 0.73 and 1.x) -> records (pure functions).

Design idea: a session file is a header line plus a tree of entries (id /
parentId), several branches in one file. We keep every line verbatim and turn
the message-like entries into rendered messages; nothing here decides what is
new, the store does that by content hash. Bad lines are skipped and counted
with their line numbers, never fatal: a torn JSON fragment in the middle, a
truncated last line, invalid UTF-8, a BOM, CRLF, unknown entry types and roles.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO

from .. import jsonline
from ..render import Rendered, render_message, render_text_role
from ..usage import TokenUsage, from_pi

# Entries that become archived messages; every other type is kept verbatim only.
MESSAGE_TYPES = ("message", "compaction", "branch_summary", "custom_message")
MAX_LINE_BYTES = 64 * 1024 * 1024  # a line longer than this is skipped, not parsed


@dataclass
class Header:
    session_id: str
    cwd: str
    started_at: int  # unix ms
    version: int
    parent_session: str | None = None
    agent: str = "pi"  # which agent wrote the file: pi, claude, codex


@dataclass
class Entry:
    """One line of a session file after the header."""

    line_no: int
    type: str
    entry_id: str | None
    parent_id: str | None
    ts: int  # unix ms, 0 if unknown
    data: dict[str, Any]
    raw: bytes  # the line exactly as in the file (no line ending)
    rendered: Rendered | None = None
    # `data` is the JSON of `raw` as `decode_line` read it (pi's lines), not built from several
    # lines or reshaped (Claude Code, Codex): then it is what parsing `raw` again would give
    data_is_line: bool = False
    packed_raw: bytes | None = None  # a non-message line as `entry.raw` stores it, when a parse worker packed it
    usage: TokenUsage | None = None  # the model request this line records, if any (`core.usage`)

    @cached_property
    def key(self) -> str:
        """Identity of a non-message entry: its content without the tree links.

        v1 files get ids only when pi migrates them; keying on content keeps a
        re-import of the migrated file from duplicating anything. Kept once computed: a parse
        worker computes it and sends the entry on without its parsed JSON.
        """
        body = {k: v for k, v in self.data.items() if k not in ("id", "parentId")}
        return hashlib.sha1(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


@dataclass
class Skipped:
    line_no: int
    error: str


@dataclass
class ParsedSession:
    header: Header | None
    entries: list[Entry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    name: str | None = None

    @property
    def messages(self) -> list[Entry]:
        return [e for e in self.entries if e.rendered is not None]


def parse_iso_ms(value: Any) -> int:
    """ISO-8601 (with Z) or epoch ms -> unix ms; 0 when it cannot be read."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return int(value if value > 1e11 else value * 1000)
    if not isinstance(value, str) or not value:
        return 0
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def decode_line(raw: bytes, notes: list[str] | None = None) -> dict[str, Any]:
    """One JSON object from one line; raises ValueError with a short reason (nesting deeper than
    `jsonline.MAX_DEPTH` included). Invalid UTF-8 is read with U+FFFD in place of the bad bytes
    (the line itself is kept as it is), and said in `notes` when given."""
    if len(raw) > MAX_LINE_BYTES:
        raise ValueError(f"line of {len(raw)} bytes is over the {MAX_LINE_BYTES} byte limit")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        if notes is not None:
            notes.append(f"invalid UTF-8 at byte {exc.start + 1}: kept, with U+FFFD in place of the bad bytes")
    text = text.lstrip("\ufeff").strip()
    if not text:
        raise ValueError("empty line")
    value = jsonline.loads(text)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _header(data: dict[str, Any]) -> Header:
    sid = data.get("id")
    if not isinstance(sid, str) or not sid:
        raise ValueError("session header without an id")
    version = data.get("version")
    return Header(
        session_id=sid,
        cwd=str(data.get("cwd") or ""),
        started_at=parse_iso_ms(data.get("timestamp")),
        version=version if isinstance(version, int) else 1,
        parent_session=data.get("parentSession") if isinstance(data.get("parentSession"), str) else None,
    )


def render_entry(data: dict[str, Any], ts: int) -> Rendered | None:
    """The archived message an entry stands for, if it is message-like."""
    kind = data.get("type")
    if kind == "message" and isinstance(data.get("message"), dict):
        msg = data["message"]
        msg_ts = msg.get("timestamp")
        return render_message(msg, parse_iso_ms(msg_ts) if msg_ts is not None else ts)
    if kind in ("compaction", "branch_summary"):
        return render_text_role("summary", str(data.get("summary", "")), ts, {"kind": kind})
    if kind == "custom_message":
        meta = {"customType": data.get("customType")}
        return render_text_role("custom", data.get("content"), ts, meta)
    return None


def _entry(line_no: int, data: dict[str, Any], raw: bytes) -> Entry:
    ts = parse_iso_ms(data.get("timestamp"))
    entry_id = data.get("id") if isinstance(data.get("id"), str) else None
    parent = data.get("parentId") if isinstance(data.get("parentId"), str) else None
    kind = str(data["type"]) if isinstance(data.get("type"), str) else "unknown"
    entry = Entry(line_no, kind, entry_id, parent, ts, data, raw, data_is_line=True)
    entry.rendered = render_entry(data, ts)
    entry.usage = usage_of(entry)
    return entry


# Entries of pi 1.x that record a model request of their own: a cache warm-up (`usage`), the
# summary call of a compaction or a branch summary (their `usage`, with the entry's provider/model).
REQUEST_TYPES = ("usage", "compaction", "branch_summary")


def usage_of(entry: Entry) -> TokenUsage | None:
    """The model request a pi line records: an assistant message's usage, or a 1.x request entry's."""
    data = entry.data
    msg = data.get("message")
    if entry.type == "message" and isinstance(msg, dict) and entry.rendered is not None:
        return from_pi(msg, entry.rendered.ts, entry.rendered.hash)
    if entry.type in REQUEST_TYPES and isinstance(data.get("usage"), dict):
        shaped = {k: data.get(k) for k in ("provider", "model", "usage")}
        return from_pi(dict(shaped, role="assistant"), entry.ts, entry.key)
    return None


def parse_lines(lines: Iterable[bytes]) -> ParsedSession:
    """Parse the lines of one pi session file. Never raises on bad content."""
    result = ParsedSession(header=None)
    previous_id: str | None = None
    for line_no, raw in enumerate(lines, start=1):
        raw = raw.rstrip(b"\r\n")
        if not raw.strip():
            continue
        notes: list[str] = []
        try:
            data = decode_line(raw, notes)
        except ValueError as exc:
            result.skipped.append(Skipped(line_no, str(exc)))
            continue
        result.skipped += [Skipped(line_no, note) for note in notes]  # reported, and kept
        if result.header is None:
            if data.get("type") != "session":
                result.skipped.append(Skipped(line_no, "first line is not a pi session header"))
                return result
            try:
                result.header = _header(data)
            except ValueError as exc:
                result.skipped.append(Skipped(line_no, str(exc)))
                return result
            continue
        entry = _entry(line_no, data, raw)
        if entry.entry_id is None and result.header.version < 2:
            entry.parent_id = previous_id  # v1: a linear chain in file order
        previous_id = entry.entry_id or previous_id
        if entry.type == "session_info":
            name = data.get("name")
            result.name = name.strip() if isinstance(name, str) and name.strip() else None
        result.entries.append(entry)
    return result


def open_regular(path: Path | str) -> BinaryIO:
    """A session file opened for reading, refused (`OSError`) unless it is a regular file: a FIFO
    named on the command line or appearing in a watched folder would block the reader forever
    (opened without waiting for a writer, then refused), a device would never end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device)", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def iter_file_lines(path: Path) -> Iterator[bytes]:
    with open_regular(path) as fh:
        yield from fh


def read_session_file(path: Path) -> ParsedSession:
    return parse_lines(iter_file_lines(path))


# --- where pi keeps sessions ------------------------------------------------------


def agent_dir() -> Path:
    env = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(env).expanduser() if env else Path.home() / ".pi" / "agent"


def default_sessions_dir() -> Path:
    return agent_dir() / "sessions"


def project_of(cwd: str) -> str:
    """A short project name for a working directory: its last component."""
    parts = [p for p in re.split(r"[\\/]+", cwd.strip()) if p]
    return parts[-1] if parts else ""


def active_branch(entries: list[Entry]) -> list[Entry]:
    """Root-to-leaf path ending at the last entry in the file (pi's current leaf)."""
    if not entries:
        return []
    by_id = {e.entry_id: e for e in entries if e.entry_id}
    path: list[Entry] = []
    seen: set[int] = set()
    node: Entry | None = entries[-1]
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        path.append(node)
        node = by_id.get(node.parent_id) if node.parent_id else None
    return list(reversed(path))
