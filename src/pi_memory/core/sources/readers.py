"""Which parser reads a file, and where each agent keeps its sessions.

Design idea: the three formats differ only in how lines become entries, so each
has a reader with the same shape, `parse(lines, start_line) -> ParsedSession`,
that may be fed a file in consecutive chunks (whole files for `import`,
appended lines for `watch`). The format of a file is sniffed from its first
line's shape, never from where it was found, so any file given explicitly is
read by the right parser.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from . import claude, codex
from .pi import ParsedSession, decode_line, default_sessions_dir, open_regular, parse_lines

AGENTS = ("pi", "claude", "codex")
CLAUDE_TYPES = frozenset(
    {"user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation", "progress", "attachment"}
)
CODEX_LEGACY_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning", "local_shell_call"})
SNIFF_MAX_LINES = 20


class Reader(Protocol):
    def parse(self, lines: Iterable[bytes], start_line: int = 1) -> ParsedSession: ...


@dataclass
class PiReader:
    """pi's parser needs its header line first; later chunks get it prepended again."""

    header_raw: bytes | None = None
    previous_id: str | None = None

    def parse(self, lines: Iterable[bytes], start_line: int = 1) -> ParsedSession:
        chunk = list(lines)
        if start_line == 1 or self.header_raw is None:
            parsed = parse_lines(chunk)
            self.header_raw = _first_header(chunk) if parsed.header else None
            shift = start_line - 1
        else:
            parsed = parse_lines([self.header_raw, *chunk])
            shift = start_line - 2
            first = parsed.entries[0] if parsed.entries else None
            if first and parsed.header and parsed.header.version < 2 and first.entry_id is None and not first.parent_id:
                first.parent_id = self.previous_id  # v1 files chain by file order, across chunks too
        for entry in parsed.entries:
            entry.line_no += shift
        for skip in parsed.skipped:
            skip.line_no += shift
        if parsed.entries:
            self.previous_id = parsed.entries[-1].entry_id or self.previous_id
        return parsed

    def open_tail(self, lines: list[bytes]) -> int:
        return 0


def _first_header(lines: list[bytes]) -> bytes | None:
    for raw in lines:
        if raw.strip():
            return raw.rstrip(b"\r\n")
    return None


def sniff_lines(lines: Iterable[bytes]) -> str | None:
    """The agent that wrote a file, from the shape of its first readable line."""
    for n, raw in enumerate(lines):
        if n >= SNIFF_MAX_LINES:
            break
        try:
            data = decode_line(raw.rstrip(b"\r\n"))
        except ValueError:
            continue
        kind = data.get("type")
        if kind == "session":
            return "pi"
        if "payload" in data and kind in codex.WRAPPED_TYPES:
            return "codex"
        if isinstance(data.get("sessionId"), str) or kind in CLAUDE_TYPES:
            return "claude"
        if (kind is None and isinstance(data.get("id"), str)) or (
            kind in CODEX_LEGACY_TYPES and "parentId" not in data
        ):
            return "codex"
        return None
    return None


def sniff_file(path: Path) -> str | None:
    try:
        with open_regular(path) as fh:
            return sniff_lines(fh)
    except OSError:
        return None


def reader_for(path: Path, agent: str | None = None) -> Reader:
    """A fresh reader for a file; the format is sniffed unless given (pi when unknown)."""
    agent = agent or sniff_file(path) or "pi"
    if agent == "claude":
        return claude.reader_for(path)
    if agent == "codex":
        return codex.reader_for(path)
    return PiReader()


def reader_for_agent(agent: str, session_id: str) -> Reader:
    """A fresh reader of one agent's lines for an archived session (its file may be gone)."""
    if agent == "claude":
        return claude.ClaudeReader(fallback_id=session_id)
    if agent == "codex":
        return codex.CodexReader(fallback_id=session_id)
    return PiReader()


def read_session_file(path: Path, agent: str | None = None) -> ParsedSession:
    """A whole session file, opened once: its format is sniffed from the lines read (the readers
    hold a file's lines in memory anyway)."""
    with open_regular(path) as fh:
        lines = fh.readlines()
    return reader_for(path, agent or sniff_lines(lines) or "pi").parse(lines)


def open_tail(reader: Reader, lines: list[bytes]) -> int:
    """Trailing lines that may still grow into a longer message (held back by the watcher)."""
    fn = getattr(reader, "open_tail", None)
    return int(fn(lines)) if fn else 0


# --- where agents keep sessions -------------------------------------------------------


def claude_dir() -> Path:
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env).expanduser() if env else Path.home() / ".claude"


def codex_home() -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".codex"


def session_roots(agent: str | None = None) -> list[tuple[str, Path]]:
    """Every folder where an agent keeps session files, existing or not."""
    roots = [
        ("pi", default_sessions_dir()),
        ("claude", claude_dir() / "projects"),
        ("codex", codex_home() / "sessions"),
        ("codex", codex_home() / "archived_sessions"),
    ]
    return [(a, p) for a, p in roots if agent is None or a == agent]


def existing_roots(agent: str | None = None) -> list[Path]:
    return [p for _a, p in session_roots(agent) if p.is_dir()]
