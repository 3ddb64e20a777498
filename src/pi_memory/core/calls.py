"""Tool calls for people to read (pure): arguments one per line, file contents and edits as they were.

Design idea: a tool call is stored as JSON, where a file's content or an edit's text is one string
full of `\\n` escapes. A person reads it as the text it is: each argument on its own line, a string
of several lines shown as those lines, a list of edits as each edit's old and new text, nested
keys named by their path (`edits[0].oldText`). The rendered archive text keeps a call as
`→ name({json})` clipped at 300 characters; `readable_call_line` turns that into the same shape
as far as the clipped JSON goes (escapes decoded, never executed or parsed as anything but data).
"""

from __future__ import annotations

import json
import re
from typing import Any

_CALL = re.compile(r"^→ ([\w.:-]+)\((.*)\)(…?)$", re.S)
_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def readable_arguments(args: Any, prefix: str = "") -> str:
    """Arguments as `key: value` lines; multi-line strings as their lines under `key:`."""
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        return "\n".join(_item(f"{prefix}{key}", value) for key, value in args.items())
    if isinstance(args, list):
        return "\n".join(_item(f"{prefix}[{k}]", value) for k, value in enumerate(args))
    return json.dumps(args, ensure_ascii=False)


def _item(key: str, value: Any) -> str:
    if isinstance(value, str):
        return f"{key}:\n{value}" if "\n" in value else f"{key}: {value}"
    if isinstance(value, dict) and value:
        return readable_arguments(value, key + ".")
    if isinstance(value, list) and value and any(isinstance(v, dict | list) for v in value):
        return readable_arguments(value, key)
    return f"{key}: {json.dumps(value, ensure_ascii=False)}"


def readable_call_line(line: str) -> str:
    """`→ name({json})` as `→ name` and its arguments one per line (JSON escapes decoded, even in a
    clipped call); any other line as it is."""
    found = _CALL.match(line)
    if not found:
        return line
    name, body, clipped = found.groups()
    try:
        return f"→ {name}\n" + readable_arguments(json.loads(body))
    except ValueError:
        return f"→ {name}\n" + _unescape(body) + (clipped or "")


def _unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        return _SIMPLE[code] if code in _SIMPLE else chr(int(code[1:], 16))

    return _ESCAPE.sub(one, text)


def readable_snippet(snippet: str) -> str:
    """A search snippet of a tool call with its JSON escapes decoded (`\\n` as a line break)."""
    return _unescape(snippet) if "→ " in snippet else snippet
