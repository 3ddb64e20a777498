"""Rule-derived memory candidates from a compacted window (pure), and the adapter that stores them.

Design idea: after a compaction we keep, as provisional session-scoped memory,
only what needs no interpretation: files changed, commands with exit codes,
test count lines, and short sentences in the USER's own words that carry a
persistence marker (偏好 / 默认 / 始终 / 总是 / 以后都 / 本项目 / always / never /
from now on / in this project), sorted into preference / constraint /
decision by keyword. Never from assistant text (the model's claims are not the
user's wishes); anything that looks like a credential is skipped. Each
candidate carries the entry ids it came from. They are never promoted or
injected without the user's confirmation; that policy lives in the memory log.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ArchiveError
from .boundary import Entry, visible_messages
from .facts import collect_facts, excerpt, text_of

MAX_SENTENCE_CHARS = 200
MAX_PER_KIND = 20  # newest first; a long window must not flood the memory log
ZH_MARKERS = ("偏好", "默认", "始终", "总是", "以后都", "本项目")
EN_MARKER_RE = re.compile(r"\b(always|never|from now on|in this project)\b", re.IGNORECASE)
CONSTRAINT_RE = re.compile(
    r"\b(never|must|must not|don't|do not|shall not|forbidden)\b|不要|禁止|不能|不许|必须|别再|不准", re.IGNORECASE
)
DECISION_RE = re.compile(
    r"\b(decided|decision|we will|we'll|switch to|instead of|rather than)\b|决定|改用|选用|采用|换成|而不是",
    re.IGNORECASE,
)
CREDENTIAL_RE = re.compile(
    r"\bsk-[A-Za-z0-9_-]{8,}|\b(?:ghp|gho|github_pat|xox[abp]|AKIA)[A-Za-z0-9_]{8,}|"
    r"\b(?:api[_-]?key|secret|token|passw(?:or)?d|pwd|credential|bearer)\b|"
    r"[A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD)[A-Za-z0-9_]*\s*[=:]|"
    r"\b[A-Za-z0-9+/_-]{32,}={0,2}|密码|密钥|令牌",
    re.IGNORECASE,
)


@dataclass
class DerivedMemory:
    """A candidate record: provisional, session-scoped, author `rule`."""

    kind: str  # file | command | test | preference | constraint | decision
    text: str
    entry_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "entryIds": list(self.entry_ids)}


def looks_like_credential(text: str) -> bool:
    return bool(CREDENTIAL_RE.search(text))


def has_persistence_marker(sentence: str) -> bool:
    return any(m in sentence for m in ZH_MARKERS) or bool(EN_MARKER_RE.search(sentence))


def classify(sentence: str) -> str:
    if CONSTRAINT_RE.search(sentence):
        return "constraint"
    if DECISION_RE.search(sentence):
        return "decision"
    return "preference"


def sentences(text: str) -> list[str]:
    """Sentences split at Chinese and English end marks and line breaks (a '.' inside a path is not an end)."""
    parts = re.split(r"(?<=[。！？!?；;])|\n|(?<=\.)\s+", text)
    return [p.strip() for p in parts if p and p.strip()]


def user_rules(messages: Sequence[tuple[str, Mapping[str, Any]]]) -> list[DerivedMemory]:
    """Short marked sentences from user messages only, first occurrence of each, in order."""
    out: dict[str, DerivedMemory] = {}
    for entry_id, msg in messages:
        if msg.get("role") != "user":
            continue
        for sentence in sentences(text_of(msg.get("content"))):
            if (
                len(sentence) > MAX_SENTENCE_CHARS
                or not has_persistence_marker(sentence)
                or looks_like_credential(sentence)
            ):
                continue
            if sentence in out:
                out[sentence].entry_ids.append(entry_id)
            else:
                out[sentence] = DerivedMemory(classify(sentence), sentence, [entry_id])
    return list(out.values())


def _newest(items: list[DerivedMemory]) -> list[DerivedMemory]:
    return items[-MAX_PER_KIND:]


def derive_memories(compacted_entries: Sequence[Entry]) -> list[DerivedMemory]:
    """Candidates from the entries a compaction replaced; pure and deterministic."""
    messages = [m for m in visible_messages(compacted_entries) if m[1].get("role") != "system"]
    facts = collect_facts(messages)
    files: dict[str, DerivedMemory] = {}
    for touch in facts.files:
        if touch.action in ("edit", "write", "bash-change") and touch.ok is not False:
            record = files.setdefault(touch.path, DerivedMemory("file", f"changed {touch.path}"))
            record.entry_ids.extend(
                i for i in (touch.entry_id, touch.result_entry_id) if i and i not in record.entry_ids
            )
    commands = [
        DerivedMemory(
            "command",
            f"`{excerpt(c.command, 160)}` exited {c.exit_code}",
            list(dict.fromkeys([c.entry_id, c.result_entry_id])),
        )
        for c in facts.commands
        if c.exit_code is not None and not looks_like_credential(c.command)
    ]
    tests = [DerivedMemory("test", f"tests: {counts}", [eid]) for eid, counts in facts.tests]
    return _newest(list(files.values())) + _newest(commands) + _newest(tests) + user_rules(messages)


# Our candidate kinds -> the memory log's kinds (files, commands and tests are plain facts).
MEMORY_KIND = {"file": "fact", "command": "fact", "test": "fact"}


def write_derived(archive: Any, session_id: str, workspace: str, records: Sequence[DerivedMemory]) -> int:
    """Store candidates as provisional, session-scoped proposals (author `rule`); returns how many were new.

    Uses the memory log (`pi_memory.memory.Memories.propose`, merged from the
    memory branch). Without it nothing is written and 0 is returned, so a
    compaction never fails for want of it. A refused record is skipped; a
    broken memory chain stops the writes (the log refuses appends until repaired).
    """
    try:
        memory = importlib.import_module("pi_memory.memory")
    except ImportError:
        return 0
    memories = memory.Memories(archive.store)
    written = 0
    for record in records:
        try:
            result = memories.propose(
                workspace,
                record.text,
                kind=MEMORY_KIND.get(record.kind, record.kind),
                scope="session",
                session_id=session_id,
                source_entry_ids=record.entry_ids,
                author="rule",
            )
        except memory.MemoryChainBroken:
            break
        except ArchiveError:
            continue
        written += int(bool(result.written))
    return written
