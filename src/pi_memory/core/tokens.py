"""How many tokens a text costs a model, estimated without its tokenizer (pure functions).

Design idea: a BPE tokenizer spends very different amounts on different kinds of characters.
An English word is about one token whatever its length up to ~8 letters, a CJK character is
0.6-1.2 tokens (the tokenizer's vocabulary decides), digits go in groups, code is dense in
punctuation and indentation. Characters / 4 (pi's rule, and ours before) is right for English
prose only: it undercounts Chinese about 3x and code by a third. So a text is counted by kind of
run (CJK characters, words, digit runs, punctuation, whitespace, other characters) and each count
weighed by a tokenizer family's weights, fitted by least squares against real tokenizers
(`bench/token_calibration.py`: o200k_base for OpenAI and most others, the published Claude
tokenizer for Anthropic models; results and per-kind errors in `bench/results/tokens.json` and
docs/usage.md). The estimate is within 15% on Chinese, English and code requests; it is an
estimate, never shown as a provider's count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# One alternation, first match wins; each group is one feature.
_RUNS = re.compile(
    r"(?P<cjkp>[\u3000-\u303f\uff00-\uffef])"
    r"|(?P<cjk>[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff])"
    r"|(?P<word>[A-Za-z]+)"
    r"|(?P<digits>[0-9]+)"
    r"|(?P<newline>\n[ \t]*)"
    r"|(?P<space>[ \t]{2,})"
    r"|(?P<punct>[!-/:-@\[-`{-~])"
    r"|(?P<other>[^\x00-\x7f])"
)
FEATURES = ("cjk", "cjkp", "word", "long", "digits", "newline", "space", "punct", "other")
LONG_WORD = 6  # letters past this in one word run cost extra tokens (identifiers, rare words)


@dataclass(frozen=True)
class Weights:
    """Tokens per unit of each feature (`FEATURES`), fitted per tokenizer family."""

    cjk: float
    cjkp: float  # CJK punctuation and full-width forms
    word: float
    long: float  # per letter past LONG_WORD
    digits: float  # per group of up to three digits
    newline: float
    space: float
    punct: float
    other: float


# Fitted by bench/token_calibration.py (see bench/results/tokens.json for the corpora and errors).
OPENAI = Weights(
    cjk=0.769, cjkp=1.471, word=1.041, long=0.379, digits=1.0, newline=0.221, space=1.808, punct=0.518, other=1.228
)
ANTHROPIC = Weights(
    cjk=1.052, cjkp=2.125, word=1.122, long=0.327, digits=1.0, newline=0.008, space=1.536, punct=0.667, other=1.579
)
FAMILIES = {"openai": OPENAI, "anthropic": ANTHROPIC}


def family_of(model: str | None, provider: str | None = None) -> str:
    """The tokenizer family of a model: Anthropic's for Claude models, OpenAI's o200k otherwise
    (most other providers' tokenizers are closer to it than to chars / 4)."""
    name = f"{provider or ''}/{model or ''}".lower()
    return "anthropic" if "claude" in name or "anthropic" in name else "openai"


def features(text: str) -> dict[str, int]:
    """How many of each kind of run the text holds (`FEATURES`)."""
    counts = dict.fromkeys(FEATURES, 0)
    for match in _RUNS.finditer(text):
        kind = match.lastgroup
        assert kind is not None
        if kind == "word":
            counts["word"] += 1
            counts["long"] += max(0, len(match.group()) - LONG_WORD)
        elif kind == "digits":
            counts["digits"] += (len(match.group()) + 2) // 3
        else:
            counts[kind] += 1
    return counts


def estimate_from(counts: dict[str, int], family: str = "openai") -> int:
    w = FAMILIES.get(family, OPENAI)
    total = sum(getattr(w, name) * counts.get(name, 0) for name in FEATURES)
    return int(round(total))


def estimate_tokens(text: str, family: str = "openai") -> int:
    """Tokens `text` costs a model of this tokenizer family (`family_of`), estimated."""
    if not text:
        return 0
    if text.isascii() and len(text) > 200_000:
        return len(text) // 4  # a huge ASCII blob (a log, base64): not worth the scan
    return estimate_from(features(text), family)


def estimate_chars(chars: int) -> int:
    """The old rule, for a size known only in characters: four characters a token."""
    return (chars + 3) // 4
