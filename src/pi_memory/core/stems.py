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


@lru_cache(maxsize=4096)
def _root_pattern(root: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z0-9_]){re.escape(root)}[a-z]*(?![0-9_])")


def other_forms(text: str, word: str, root: str) -> int:
    """How many words of a lower-cased text are another form of `word`: they start with its `root`
    and have its stem (`moving` for `move`; never `word` itself, counted as typed)."""
    if root not in text:
        return 0
    target = stem(word)
    found = 0
    for match in _root_pattern(root).finditer(text):
        form = match.group()
        if form != word and stem(form) == target:
            found += 1
    return found


# How other forms of an English word are made from its stem, the word itself or their shared start,
# most common first: the candidates `variants` checks by stemming (most of what they make is no word
# at all, and the index holds none of those).
_ENDINGS = ("", "s", "ed", "ing", "es", "er", "d", "ers", "e", "ly")
VARIANTS_MAX = 8  # per query word: the most an index is asked for (each one lookup)


@lru_cache(maxsize=4096)
def variants(word: str) -> tuple[str, ...]:
    """Other forms of an English word that share its stem (`buys`, `buying` for `buy`; `tiktok` for
    `tiktoks`), made by its usual endings and checked by stemming: the ones a search also looks up in
    the index, where a message may hold the word only in another form. The likeliest first."""
    root = stem_root(word)
    if root is None:
        return ()
    target = stem(word)
    bases = [target, word, root] + ([target[:-1] + "y"] if target.endswith("i") else [])  # happi -> happy
    made: list[tuple[int, str]] = []
    for base in dict.fromkeys(bases):
        made += [(rank, base + ending) for rank, ending in enumerate(_ENDINGS)]
        if base[-1] not in "aeiouy":  # stop -> stopping
            made += [(rank + 2, base + base[-1] + ending) for rank, ending in enumerate(("ing", "ed", "er"))]
        if base.endswith("e"):  # move -> moving
            made += [(rank + 2, base[:-1] + ending) for rank, ending in enumerate(("ing", "ed", "er"))]
        if base.endswith("y"):  # city -> cities
            made += [(rank + 1, base[:-1] + ending) for rank, ending in enumerate(("ies", "ied", "ier"))]
    found = dict.fromkeys(m for _, m in sorted(made) if m != word and len(m) >= ROOT_MIN and stem(m) == target)
    return tuple(found)[:VARIANTS_MAX]
