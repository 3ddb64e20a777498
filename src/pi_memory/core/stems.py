"""English words by their Snowball stem, for scoring: `moved` also counts `moving` (pure).

Design idea: the index keeps words as they are typed (one token a word form), so a question asking
`When did Ann move to Lisbon?` finds the turn that says `I'm moving to Lisbon` by `lisbon`, and
scoring must then see that `moving` is `move`. Stemming the index would cost a second token for
most English words and change what an exact word finds; instead the few candidates a query scores
are searched for the other forms of each query word: every word that starts as the query word
does (the part it shares with its stem: `happ` of `happy`/`happi`) is stemmed, and counts when
its stem is the query word's. The form typed still comes first (`scoring.STEM_ONLY_WEIGHT`).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

ROOT_MIN = 3  # a shorter start would find most words of a text, each to be stemmed


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import snowballstemmer  # type: ignore[import-untyped]  # uses PyStemmer's C code where it is installed

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball (Porter 2) stem of a lower-case English word."""
    return str(_stemmer().stemWord(word))


@lru_cache(maxsize=4096)
def stem_root(word: str) -> str | None:
    """The start `word` shares with its stem, which its other forms start with too (`happ` of `happy`,
    stem `happi`: `happiness`), less a final `e`, `y` or `i` that other forms drop or change (`mov` of
    `moved`: `moving`), or None for a word that is not plain English letters or whose start is too
    short. Only a start: what follows is checked by stemming every word that has it."""
    if not (word.isascii() and word.isalpha()) or len(word) < ROOT_MIN:
        return None
    root = os.path.commonprefix([word, stem(word)])
    if root[-1:] in ("e", "y", "i") and len(root) > ROOT_MIN:
        root = root[:-1]
    return root if len(root) >= ROOT_MIN else None


_FORM_TAIL = re.compile(r"[a-z]*(?![0-9_])")
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def other_forms(text: str, word: str, root: str) -> int:
    """How many words of a lower-cased text are another form of `word`: they start with its `root`
    (not inside a longer run of letters, digits and `_`), go on in letters (not into a digit or
    `_`), and have its stem (`moving` for `move`; never `word` itself, counted as typed).

    `str.find` for the root, then a regex for the rest: one regex with the look-behind first
    cannot skip ahead to the root and cost ~15x on long texts (English abstracts: ~4 ms a query)."""
    pos = text.find(root)
    if pos < 0:
        return 0
    target = stem(word)
    found = 0
    while pos >= 0:
        if pos == 0 or text[pos - 1] not in _WORD_CHARS:
            tail = _FORM_TAIL.match(text, pos + len(root))
            if tail:  # none: the root runs into a digit or `_`
                form = text[pos : tail.end()]
                if form != word and stem(form) == target:
                    found += 1
                pos = text.find(root, tail.end())  # a root inside this form is inside a word
                continue
        pos = text.find(root, pos + 1)
    return found


# Other forms of an English word are made from its bases (the word with its usual ending undone:
# `hospital` of `hospitals`, `adverse` of `adversely`) by the usual endings, and kept where they stem
# as the word does: most of what this makes is no word at all, and the index holds none of those,
# so the likeliest come first and the rest are cut at VARIANTS_MAX. Endings were once put on the
# stem (`hospit`), which made `hospitting` but never `hospital`: the index lookups went to words no
# text holds (bench/quality.py, fit half, R@1: conversations session 0.551 -> 0.560; boolq, of the
# report half, 0.646 -> 0.663).
VARIANTS_MAX = 8  # per query word: the most an index is asked for (each one lookup)
_VOWELS = "aeiouy"


def _bases(word: str) -> list[str]:
    """What `word` may be made from, by its usual ending undone (`hospitals` -> `hospital`,
    `stopped` -> `stop`, `cities` -> `city`, `moving` -> `move`); empty for a word with none."""
    out: list[str] = []
    if word.endswith(("ies", "ied")):
        out.append(word[:-3] + "y")
    if word.endswith("es"):
        out += [word[:-2], word[:-1]]
    elif word.endswith("s") and not word.endswith("ss"):
        out.append(word[:-1])
    if word.endswith("ed"):
        out += [word[:-2], word[:-1]] + ([word[:-3]] if word[-3:-2] == word[-4:-3] else [])
    if word.endswith("ing"):
        out += [word[:-3], word[:-3] + "e"] + ([word[:-4]] if word[-4:-3] == word[-5:-4] else [])
    if word.endswith("ily"):
        out.append(word[:-3] + "y")
    elif word.endswith("ly"):
        out.append(word[:-2])
    if word.endswith("ers"):
        out += [word[:-3], word[:-2]]
    elif word.endswith("er"):
        out += [word[:-2], word[:-1]]
    return [b for b in dict.fromkeys(out) if len(b) >= ROOT_MIN]


def _forms(base: str) -> list[str]:
    """The forms the usual endings make of a base, likeliest first (`move`: `moves`, `moved`, `moving`)."""
    if base.endswith("e"):
        return [base, base + "s", base + "d", base[:-1] + "ing", base + "r", base + "rs", base + "ly"]
    out = [base, base + "s", base + "ed", base + "ing", base + "es", base + "er", base + "ers", base + "ly"]
    if base.endswith("y") and base[-2] not in _VOWELS:  # city -> cities
        out += [base[:-1] + ending for ending in ("ies", "ied", "ier", "ily")]
    if base[-1] not in _VOWELS + "wx" and base[-2] in _VOWELS and base[-3] not in _VOWELS:  # stop -> stopping
        out += [base + base[-1] + ending for ending in ("ing", "ed", "er")]
    return out


@lru_cache(maxsize=4096)
def variants(word: str) -> tuple[str, ...]:
    """Other forms of an English word that share its stem (`buys`, `buying` for `buy`; `hospital` for
    `hospitals`), made from its bases and checked by stemming: the ones a search also looks up in
    the index, where a message may hold the word only in another form. The likeliest first."""
    if stem_root(word) is None:
        return ()
    target = stem(word)
    bases = [b for b in _bases(word) if stem(b) == target] or [word]
    per_base = [_forms(b) for b in bases]
    # each base's likeliest forms before any base's rarer ones
    made = [forms[k] for k in range(max(map(len, per_base))) for forms in per_base if k < len(forms)]
    found = dict.fromkeys(m for m in made if m != word and len(m) >= ROOT_MIN and stem(m) == target)
    return tuple(found)[:VARIANTS_MAX]
