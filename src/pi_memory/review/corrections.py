"""User corrections: a user message that pushes back on what the agent just did (pure functions).

Design idea: a correction is the user's own verdict on the previous run, the
most direct evidence of a mistake there is, and it is recognised by a small set
of cue phrases in Chinese and English (不要, 别, 不对, 又, don't, stop, wrong,
revert, "I said", ...). Cues are matched where they act as pushback: at the
start of a clause, or in a phrase only pushback uses; words that merely contain
a cue (特别, 区别, 别人, "don't know") are not. Only the opening of the message
is read (pasted logs further down say "error" and "wrong" all the time), and
the caller only asks about a message that follows an earlier run of the same
session: the first message of a session has nothing to push back on.
"""

from __future__ import annotations

import re

OPENING_CHARS = 300  # corrections say so at once; later text is context, logs, pasted code
_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.S)
_CLAUSE = r"(?:^|(?<=[\s,.;:!?，。；：！？、(（\"“]))"

# (cue shown in the report, pattern); Chinese patterns need no word boundaries but exclude compounds
CUES: list[tuple[str, re.Pattern[str]]] = [
    ("不要", re.compile(r"不要")),
    ("别", re.compile(r"(?<![特区分识类级告离性个差派判鉴辨道送惜])别(?![人的处名称针致墅具])")),
    ("不对", re.compile(r"不对")),
    ("错了", re.compile(r"错了")),
    ("不是这样", re.compile(r"不是(?:这样|这个|我要的|让你)")),
    ("又", re.compile(r"又(?:错|来|把|在|改|删|忘|犯|没|是|跑|搞|弄|加|写)")),
    ("撤销", re.compile(r"撤销|撤回|回滚|还原|改回")),
    ("停", re.compile(r"停下|停止|先停|别再")),
    ("我说过", re.compile(r"我(?:说|讲)(?:过|了)|我不是说")),
    (
        "don't",
        re.compile(
            _CLAUSE + r"(?:please\s+)?(?:don'?t|do not)\b(?!\s+(?:know|think|understand|see|have|need to know))", re.I
        ),
    ),
    ("stop", re.compile(_CLAUSE + r"stop\b", re.I)),
    ("wrong", re.compile(r"\bwrong\b", re.I)),
    ("revert", re.compile(r"\b(?:revert|undo|roll\s*back|put it back)\b", re.I)),
    ("I said", re.compile(r"\bI (?:said|told you|asked you|already said)\b", re.I)),
    ("not what I", re.compile(r"\bnot what I\b|\bthat'?s not\b|\bthat is not\b", re.I)),
    ("no,", re.compile(r"^\s*no\s*[,.!]", re.I)),
    ("why did you", re.compile(r"\bwhy (?:did|do|would) you\b", re.I)),
    ("shouldn't have", re.compile(r"\b(?:shouldn'?t|should not) have\b", re.I)),
    ("again", re.compile(r"\b(?:you|it)(?:'s| is| did| broke| failed)?\s+(?:\w+\s+)?again\b(?!\s*,?\s*please)", re.I)),
]


# Most user messages are not corrections: a message none of these strings occurs in (lowercased)
# is not one, and the cue patterns are only tried on the others. Each cue pattern needs one of them.
_TRIGGERS = (
    "不要", "别", "不对", "错了", "不是", "又", "撤", "回滚", "还原", "改回", "停", "我说", "我讲",
    "don't", "dont", "do not", "stop", "wrong", "revert", "undo", "roll", "put it back", "i said", "i told",
    "i asked", "i already", "not what", "that's not", "thats not", "that is not", "why did", "why do",
    "why would", "shouldn", "should not", "again",
)  # fmt: skip


def _may_be_correction(head: str) -> bool:
    lowered = head.lower()
    return lowered.lstrip().startswith("no") or any(t in lowered for t in _TRIGGERS)


def opening(text: str, limit: int = OPENING_CHARS) -> str:
    """The start of a message without code (inline or fenced): where a correction says what it is."""
    return (_CODE.sub(" ", text) if "`" in text else text)[:limit]


def correction_cues(text: str) -> list[str]:
    """The cues that make this user message a correction, in the order of `CUES`; empty if none."""
    head = opening(text)
    if not _may_be_correction(head):
        return []
    return [name for name, pattern in CUES if pattern.search(head)]


def mentioned(text: str, candidates: list[str]) -> list[str]:
    """The candidates (paths, commands) the message names, by full text or by file name."""
    out = []
    for item in candidates:
        name = item.rstrip("/").rsplit("/", 1)[-1]
        if item in text or (len(name) >= 3 and name in text):
            out.append(item)
    return out
