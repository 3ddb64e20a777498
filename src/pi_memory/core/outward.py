"""Text leaving the archive for a terminal or a wire: control characters shown, never obeyed.

Design idea: the archive holds whatever a session printed or a model wrote, terminal escape
sequences included (an OSC title, a clear screen, an OSC 52 clipboard write, an OSC 8 link).
Printed raw by `search` or `read`, they act on the reader's terminal. So every text the CLI
prints goes through `for_terminal`, which writes each control character as its JSON escape
(`\\u001b`): visible and unambiguous on a terminal, and the same character again inside a
JSON string, so `--json` output goes through it unchanged in meaning. Kept as they are: line
feeds and tabs (and a CR before a line feed, dropped). Escaped besides the C0 and C1 controls
and DEL: the bidirectional overrides (text that displays in another order than it reads) and
lone surrogates (no UTF-8 can carry them: printing one raised `UnicodeEncodeError`).
"""

from __future__ import annotations

import re

_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_CONTROLS = [c for c in range(0x20) if c not in (0x09, 0x0A)] + [0x7F, *range(0x80, 0xA0), *_BIDI]
_ESCAPED = {c: f"\\u{c:04x}" for c in _CONTROLS}
_SURROGATE = re.compile("[\ud800-\udfff]")


def for_terminal(text: str) -> str:
    """`text` with every control character written as its escape (see the module's docstring)."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    text = text.translate(_ESCAPED)
    return text if text.isascii() else no_lone_surrogates(text, escape=True)


def no_lone_surrogates(text: str, escape: bool = False) -> str:
    """Lone surrogates (from a JavaScript string, or bytes a file name did not decode) replaced by
    U+FFFD, or with `escape` by their escape: text any UTF-8 stream can carry."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub((lambda m: f"\\u{ord(m.group()):04x}") if escape else "\ufffd", text)
