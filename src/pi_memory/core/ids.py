"""Ids and queries from outside, read in one place: run ids, addresses, message ids, references.

Design idea: an id comes from a person (a CLI argument), a model (a tool argument), a URL (the
web viewer) or the pi extension, and each front end used to read it its own way: `read --around
2**70` or `forget r<huge>` reached SQLite and died with `OverflowError`, a 100 KB session id
became a LIKE pattern too complex to run, the viewer answered 500. Here every id is checked
once: a number is ASCII digits within SQLite's 64-bit integers, a reference (a session id or
prefix, a memory id) is at most `MAX_REF_CHARS` characters of one line. A bad one is a
`BadInput` whose one line says what was wrong and shows at most `SHOWN_CHARS` of what was given.

A query is data, any characters at all, but not any length: a search's cost grows with its
query, faster than linearly for Chinese (every pair of characters is a term: 1,000 random CJK
characters took ~120 ms here, 4,000 ~430 ms, 40,000 18 s; a 1 MB query held the bridge or the MCP
server for seconds). So a query is at most `MAX_QUERY_CHARS` characters, checked where every
front end's search enters (the facade, the memory and recall tools).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import BadInput

MAX_INT = (1 << 63) - 1  # SQLite's largest integer: every id is a row id or a position
MAX_REF_CHARS = 200  # a session id is 36 characters, a memory id 16: far longer is not an id
SHOWN_CHARS = 40  # what an error message quotes of a bad value
MAX_QUERY_CHARS = 1_000  # a pasted error line fits; keywords are a few dozen

_ADDRESS = re.compile(r"r(\d+)(?:/m(\d+))?", re.ASCII | re.IGNORECASE)
_DIGITS = re.compile(r"\d+", re.ASCII)


def shown(value: object) -> str:
    """A value as an error message quotes it: its repr, cut to `SHOWN_CHARS` characters."""
    text = repr(value if not isinstance(value, str) or len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS])
    return text if not isinstance(value, str) or len(value) <= SHOWN_CHARS else f"{text}… ({len(value)} characters)"


def number(value: object, what: str, low: int = 0) -> int:
    """A whole number from `low` to `MAX_INT`: an int, or a string of ASCII digits."""
    out_of_range = f"{what} {shown(value)} is out of range ({low} to {MAX_INT})"
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        if len(value.strip()) > len(str(MAX_INT)):
            raise BadInput(out_of_range)  # not even converted: a million digits would take seconds
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"{what} {shown(value)} is not a whole number")
    if not low <= value <= MAX_INT:
        raise BadInput(out_of_range)
    return value


def reference(value: object, what: str) -> str:
    """A reference (a session id or prefix, a memory id): one line of at most `MAX_REF_CHARS`."""
    if not isinstance(value, str):
        raise BadInput(f"{what} must be a string, not {type(value).__name__}")
    text = value.strip()
    if len(text) > MAX_REF_CHARS:
        raise BadInput(f"{what} {shown(text)} is too long to be one (at most {MAX_REF_CHARS} characters)")
    if any(c in text for c in "\x00\n\r"):
        raise BadInput(f"{what} {shown(text)} holds a line break or NUL: no id does")
    return text


@dataclass
class Address:
    run_id: int
    pos: int | None  # 1-based message position in the run; None for the whole run

    def __str__(self) -> str:
        return f"r{self.run_id}" + (f"/m{self.pos}" if self.pos else "")


def is_address(value: str) -> bool:
    """Whether `value` has an address's shape (`r12`, `r12/m3`), in range or not."""
    return isinstance(value, str) and bool(_ADDRESS.fullmatch(value.strip()))


def address(value: str) -> Address:
    """`r12` (a run) or `r12/m3` (its third message)."""
    found = _ADDRESS.fullmatch(value.strip()) if isinstance(value, str) else None
    if not found:
        raise BadInput(f"{shown(value)} is not an address: use r<N> for a run or r<N>/m<K> for one message")
    if found.group(2) and not found.group(2).strip("0"):
        raise BadInput("message positions start at 1: r<N>/m1 is the first message")
    pos = number(found.group(2), "message position", low=1) if found.group(2) else None
    return Address(number(found.group(1), "run id", low=1), pos)


def run_id(value: str) -> int:
    """`r12` -> 12."""
    found = _ADDRESS.fullmatch(value.strip()) if isinstance(value, str) else None
    if not found or found.group(2):
        raise BadInput(f"{shown(value)} is not a run id: use r<N>, e.g. r12")
    return number(found.group(1), "run id", low=1)


def query(value: object, what: str = "query") -> str:
    """A search query: a string of at most `MAX_QUERY_CHARS` characters (any characters at all)."""
    if not isinstance(value, str):
        raise BadInput(f"the {what} must be a string, not {type(value).__name__}")
    if len(value) > MAX_QUERY_CHARS:
        raise BadInput(
            f"the {what} is {len(value)} characters long: at most {MAX_QUERY_CHARS} (search with its rarest words)"
        )
    return value
