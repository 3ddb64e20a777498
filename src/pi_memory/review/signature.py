"""Failure signatures: what makes two failures "the same mistake" (pure functions).

Design idea: a command or an error message differs from one occurrence to the
next in what does not matter to the mistake: the folder it ran in, line numbers,
durations, hashes, temporary names. A signature keeps the program, its flags and
the names of the files it names, and replaces the rest by placeholders, so the
same failing test run in two worktrees a week apart groups together, and a later
run of the same command (passing, this time) is recognised as the same command.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

SIGNATURE_MAX = 120  # a signature is shown and typed (`review link`): one line
ERROR_LINE_MAX = 100

# `cd DIR && cmd` and `cd DIR; cmd`: where a command ran is not what it did
_CD_PREFIX = re.compile(r"^\s*cd\s+(?:\"[^\"]*\"|'[^']*'|\S+)\s*(?:&&|;)\s*")
_ENV_PREFIX = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
# 7+ hex characters with at least one digit and one letter: commit ids, content hashes
_HASH = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b", re.I)
# temporary files and folders: /tmp/..., /var/folders/..., tmpXXXX, pytest-of-user/pytest-12
_TEMP_PATH = re.compile(r"(?:/private)?(?:/tmp|/var/tmp|/var/folders|/dev/shm)(?:/[^\s'\":,)]*)?")
_TEMP_NAME = re.compile(r"(?<![<\w])(?:tmp|temp)[\w.-]*(?![\w>])|\bpytest-(?:of-)?\w+", re.I)
# an absolute or home path: only its last component names the file
_ABS_PATH = re.compile(r"(?<![\w.])~?/(?:[\w.@+-]+/)+([\w.@+-]+)")
# numbers, but not file descriptors in redirections (`2>&1`) nor digits inside names (`python3`)
_NUMBER = re.compile(r"(?<![A-Za-z_>&])\d+(?:\.\d+)?(?![A-Za-z_>])")
# how telling an error line is, best first: a named exception, then a verdict, then any complaint
_TELLING = [
    re.compile(r"\b\w*(?:Error|Exception)\b|\bpanicked\b"),
    re.compile(r"\bFAILED\b|\berror\b|\bfatal\b", re.I),
    re.compile(r"fail|not found|denied|no such|cannot|could not|unable", re.I),
]
_EXIT_LINE = re.compile(r"^\s*(?:command )?exit(?:ed)? (?:with )?code \d+\s*$", re.I)


def _strip_variable_parts(text: str) -> str:
    # each substitution only where its pattern can match at all: a review normalizes every command
    has_digit = any(c.isdigit() for c in text)
    lowered = text.lower()
    if has_digit and "-" in text:
        text = _UUID.sub("<id>", text)
    if "/" in text:
        text = _TEMP_PATH.sub("<tmp>", text)
    if "tmp" in lowered or "temp" in lowered or "pytest-" in lowered:
        text = _TEMP_NAME.sub("<tmp>", text)
    if "/" in text:
        text = _ABS_PATH.sub(r"\1", text)
    if has_digit:
        text = _NUMBER.sub("<n>", _HASH.sub("<hash>", text))
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def normalize_command(command: str) -> str:
    """A shell command without its `cd DIR &&` and `VAR=x` prefixes, folders, numbers, hashes, temp names."""
    text = command.strip()
    while True:
        stripped = _CD_PREFIX.sub("", text, count=1)
        if stripped == text:
            break
        text = stripped
    text = _ENV_PREFIX.sub("", text)
    return _clip(_strip_variable_parts(text), SIGNATURE_MAX)


def error_line(text: str) -> str:
    """The line of a tool error that says what went wrong: the last telling line, else the first.

    Test runners and compilers print the verdict last (`FAILED ...`, `AssertionError`); the
    trailing `Command exited with code N` says nothing the exit code does not.
    """
    lines = [ln.strip() for ln in text.replace("\r", "").split("\n")]
    lines = [ln for ln in lines if ln and not _EXIT_LINE.match(ln) and not set(ln) <= set("=-_*# ")]
    if not lines:
        return ""
    for tier in _TELLING:
        telling = [ln for ln in lines if tier.search(ln)]
        if telling:
            return telling[-1][:400]
    return lines[0][:400]


def normalize_error(text: str) -> str:
    """An error message's telling line, with the variable parts stripped."""
    return _clip(_strip_variable_parts(error_line(text)), ERROR_LINE_MAX)


@lru_cache(maxsize=8192)  # agents run the same commands over and over
def command_signature(command: str) -> str:
    """The signature of a shell command, failing or not: `bash: <normalized command>`."""
    return "bash: " + normalize_command(command)


def tool_error_signature(tool: str, error_text: str) -> str:
    """The signature of a failed non-shell tool call: `<tool>: <normalized error>`."""
    return f"{tool or 'tool'}: " + (normalize_error(error_text) or "(no message)")


def correction_signature(about: str) -> str:
    return "correction: " + about


def finding_key(signature: str) -> str:
    """A short stable id for a signature, easier to type than the signature (`sig_` + 8 hex)."""
    return "sig_" + hashlib.sha1(signature.encode("utf-8")).hexdigest()[:8]


def is_finding_key(value: str) -> bool:
    return bool(re.fullmatch(r"sig_[0-9a-f]{8}", value.strip().lower()))
