"""The one JSON decoder for what comes from outside: session lines, bridge requests, memory exports.

Design idea: Python's decoder recurses once per level of nesting, so one line nested ~1,000 deep
(2 KB; a model can emit such tool arguments) raised `RecursionError` wherever it was read: the
bridge stopped answering, an import stopped at that file on every run, `watch` exited. A value
nested that deep is refused here, before the decoder sees it, as any malformed line is: a
`ValueError` with a short reason, which every reader already turns into a skipped line or an
error answer. Nothing that reads the values afterwards (rendering, canonical JSON, summaries)
can then recurse deeper than `MAX_DEPTH` either.

The check costs nothing on ordinary lines: a line with fewer than `MAX_DEPTH` brackets cannot
be nested deeper, and most lines are told so by two `count` calls. The others are scanned once,
their strings skipped whole by one regular expression.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Deeper than any tool argument or message seen in real sessions (under 20), far below what the
# decoder and every reader after it can recurse through (the interpreter's limit is 1,000 frames).
MAX_DEPTH = 100

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


# JSON may escape a UTF-16 surrogate alone (`"\ud800"`: a JavaScript string cut inside an emoji);
# decoded, it is a string no UTF-8 can carry, which SQLite refused (a live capture lost, an import
# stopped) and an MCP answer could not be written. Each escape is matched whole, left to right (an
# escaped backslash included), so a pair is kept and a lone one becomes U+FFFD, as JavaScript shows it.
_SURROGATE_ESCAPES = re.compile(
    r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\\.", re.DOTALL
)


def _paired_only(found: re.Match[str]) -> str:
    escape = found.group()
    return "\\ufffd" if len(escape) == 6 and escape[2] in "dD" and found.group(1) is None else escape


class TooDeep(ValueError):
    """A JSON value nested deeper than `MAX_DEPTH`."""


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether brackets outside strings nest deeper than `limit` (unbalanced ones count too)."""
    if text.count("[") + text.count("{") <= limit:
        return False  # cannot be deeper than its brackets
    depth = 0
    for char in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        if depth > limit:
            return True
    return False


def loads(text: str | bytes, limit: int = MAX_DEPTH) -> Any:
    """`json.loads`, refusing a value nested deeper than `limit` (`TooDeep`); any failure is a
    `ValueError` whose message says what was wrong in a few words."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")  # UnicodeDecodeError is a ValueError
    if too_deep(text, limit):
        raise TooDeep(f"nested deeper than {limit} levels")
    if "\\ud" in text or "\\uD" in text:
        text = _SURROGATE_ESCAPES.sub(_paired_only, text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        raise ValueError(f"not JSON ({exc.msg} at {where})") from None
    except RecursionError:  # pragma: no cover - the depth check comes first; a guard all the same
        raise TooDeep(f"nested deeper than {limit} levels") from None
