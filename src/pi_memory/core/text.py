"""Text normalization and the bilingual two-channel tokenizer (pure functions).

Design idea: Chinese has no spaces and FTS5's tokenizers cannot cut it, so we
cut it ourselves and hand FTS5 space-separated tokens. Every CJK character goes
into the `chars` channel (recall: a 1-char query must work) and every pair of
adjacent CJK characters into the `grams` channel (precision: `缓存` is not
`存缓`). Words of letters, digits and underscores (2+ chars) go into both
channels. Traditional Chinese is folded to simplified before cutting, so
`宝玉` finds `寶玉` and back. The same tokens are cut from documents and queries, so
what was indexed can always be found: `tokenize` cuts queries, `index_texts` cuts a
document into the index's two columns (each token once where the index needs it, by one
scan in C when the optional extension `_cut.c` is built, the same tokens either way).

Nothing here touches a database: a query string only ever becomes a list of
tokens made of word characters, which are quoted when an FTS5 expression is
built. No user text is ever spliced into FTS5 syntax.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from . import fold_table

if TYPE_CHECKING:
    import numpy as np

# Han ideographs (URO, Ext A, Ext B-H, compatibility), kana and Hangul syllables
# are "CJK" here: scripts without spaces, cut into characters and bigrams.
_CJK_RANGES = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # CJK Ext A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0002ebef"  # Ext B-F (outside the BMP)
    "\U00030000-\U000323af"  # Ext G-H
    "\U0002f800-\U0002fa1f"  # compatibility supplement
)
MIN_WORD_LEN = 2
_CJK_RUN = re.compile(f"[{_CJK_RANGES}]+")
_SEGMENT = re.compile(f"([{_CJK_RANGES}]+)|([^{_CJK_RANGES}]+)")
_WORD_RUN = re.compile(r"\w+")
# words: runs of 2+ word characters that are not CJK (letters of any script, digits, _)
_WORDS = re.compile(f"[^\\W{_CJK_RANGES}]{{{MIN_WORD_LEN},}}")
# camelCase: a lower-case letter followed by an upper-case one
_CAMEL = re.compile(r"[a-z][A-Z]")
# Parts of identifiers: `openAiKey` -> open, ai, key; `OPENAI_API_KEY` -> openai, api, key.
_IDENT_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_HAS_CJK = re.compile(f"[{_CJK_RANGES}]")
_SURROGATE = re.compile(r"([\ud800-\udfff])")
_ASCII_RUNS = re.compile(r"([\x00-\x7f]+)")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


@lru_cache(maxsize=1)
def _t2s() -> object | None:
    try:
        import opencc
    except ImportError:  # pragma: no cover - opencc is a runtime dependency
        return None
    return opencc.OpenCC("t2s")


def fold_chinese(text: str) -> str:
    """Fold traditional Chinese to simplified, as opencc's t2s does; text without CJK, or without a
    character that t2s would change it for (`_may_fold`), is returned as is.

    Most traditional text is folded by the character table, in C, giving what opencc gives (~1.4
    instead of ~25 us on a 600-character message, run for every message and run summary an import
    indexes): t2s converts the longest entries of its dictionaries, so text in which no phrase
    starts that it converts otherwise than character by character converts character by character
    (`_fold_program`, `scripts/gen_fold_table.py`). Other text goes to opencc: only its pieces
    that need it.
    """
    # `_may_fold` first: a scan in C, where the regex tried ~20 instructions a character of every
    # text with a non-ASCII character (an agent's `→` of a tool call, a dash) that holds no CJK
    if text.isascii() or not _may_fold(text) or not _HAS_CJK.search(text):
        return text
    by_table = _native_fold()
    if by_table is None:
        return _opencc_t2s(text)
    program = _fold_program()
    folded = by_table(text, program)
    if folded is not None:
        return folded
    # No key of t2s's dictionaries holds an ASCII character (a test reads them all), so opencc
    # converts the pieces between ASCII characters each on its own: the lines the table folds
    # are folded so, and of the others only the pieces that need it go to opencc. In the import
    # bench's 40-message sessions one message in 14 has such a phrase (~1,200 chars, 6-7 lines):
    # ~22 instead of ~60 us for it, 4% of its characters left for opencc.
    lines = text.split("\n")
    for i, line in enumerate(lines):
        folded = by_table(line, program)
        lines[i] = _fold_pieces(line, by_table, program) if folded is None else folded
    return "\n".join(lines)


def _fold_pieces(line: str, by_table: Callable[[str, bytes], str | None], program: bytes) -> str:
    """A line folded piece by piece between its ASCII runs: by the table where it can, else by opencc."""
    pieces = _ASCII_RUNS.split(line)
    for i, piece in enumerate(pieces):
        if not piece.isascii():
            folded = by_table(piece, program)
            pieces[i] = _opencc_t2s(piece) if folded is None else folded
    return "".join(pieces)


def _opencc_t2s(text: str) -> str:
    converter = _t2s()
    if converter is None:  # pragma: no cover
        return text
    try:
        return converter.convert(text)  # type: ignore[attr-defined,no-any-return]
    except UnicodeEncodeError:  # a lone surrogate (JSON may hold one): fold around it
        return "".join(p if _SURROGATE.fullmatch(p) else converter.convert(p) for p in _SURROGATE.split(text) if p)  # type: ignore[attr-defined]


def _may_fold(text: str) -> bool:
    """Whether opencc's t2s may change text: it holds a character of `_char_fold_table` or of
    `fold_table.FOLD_TRIGGERS` (a phrase such as `回覆` changes with none of the first), or one
    beyond the Basic Multilingual Plane (which the tables do not cover). Simplified Chinese has
    none, and skips opencc (~7 us on a 600-character message, of ~150 us of its parse work);
    one scan in C where the optional extension is built."""
    any_set = _native_any_set()
    if any_set is not None:
        return any_set(text, _trigger_bitmap())
    return not _triggers().isdisjoint(text) or _ASTRAL.search(text) is not None


@lru_cache(maxsize=1)
def _fold_program() -> bytes:
    """The table `_cut.fold` folds by: for each code point of the Basic Multilingual Plane, the
    character it folds to (0: itself; `_ONLY_OPENCC` where only opencc can say: the characters of
    `fold_table.UNTABLED` and the few that fold beyond the plane), a bitmap of the characters
    `fold_table.PHRASE_STARTS` begin with, and those phrase starts as sorted numbers
    (first << 16 | second); machine byte order, built once in ~2 ms."""
    from array import array

    folds = array("H", bytes(0x10000 * 2))
    for point, simplified in _char_fold_table().items():
        if point < 0x10000:
            folds[point] = ord(simplified) if ord(simplified) < 0x10000 else _ONLY_OPENCC
    for ch in fold_table.UNTABLED:
        folds[ord(ch)] = _ONLY_OPENCC
    pairs = sorted({ord(pair[0]) << 16 | ord(pair[1]) for pair in _phrase_starts()})
    starts = _bmp_bitmap(pair >> 16 for pair in pairs)
    return folds.tobytes() + starts + struct.pack(f"={len(pairs)}I", *pairs)  # uint32s, native order


_ONLY_OPENCC = 0xFFFF  # a noncharacter: nothing folds to it (`_cut.fold` reads the same value)


def _phrase_starts() -> list[str]:
    chars = fold_table.PHRASE_STARTS
    return [chars[i : i + 2] for i in range(0, len(chars), 2)]


@lru_cache(maxsize=1)
def _trigger_bitmap() -> bytes:
    """`_traditional_bitmap` with `fold_table.FOLD_TRIGGERS` set too."""
    return _bmp_bitmap([*_char_fold_table(), *map(ord, fold_table.FOLD_TRIGGERS)])


@lru_cache(maxsize=1)
def _triggers() -> frozenset[str]:
    return _traditional() | frozenset(fold_table.FOLD_TRIGGERS)


def normalize(text: str) -> str:
    """The form both documents and queries are matched in: simplified and lower-case."""
    text = text.replace("\x00", " ")
    return fold_chinese(text).lower()


@lru_cache(maxsize=1)
def _char_fold_table() -> dict[int, str]:
    """Traditional -> simplified for single characters (opencc's t2s, shipped as data in `fold_table`).

    opencc converts running traditional text at ~1 us per character (it
    segments phrases), too slow for scoring hundreds of candidates per query;
    per character it is a `str.translate`.
    """
    return {ord(a): b for a, b in zip(fold_table.TRADITIONAL, fold_table.SIMPLIFIED, strict=True)}


@lru_cache(maxsize=1)
def _foldable() -> re.Pattern[str]:
    """Any character `_char_fold_table` changes: most text has none and skips the translation.

    Written as ranges of consecutive code points, which compiles in half the time of 4,000 literals.
    """
    points = sorted(_char_fold_table())
    ranges: list[list[int]] = []
    for point in points:
        if ranges and point == ranges[-1][1] + 1:
            ranges[-1][1] = point
        else:
            ranges.append([point, point])
    body = "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)
    return re.compile(f"[{body}]") if body else re.compile("(?!)")


def normalize_lower(text: str) -> str:
    """Lower-cased, NUL-free text, not folded: what `scoring.score_documents` reads."""
    return text.replace("\x00", " ").lower() if "\x00" in text else text.lower()


def normalize_fast(text: str, lower: str | None = None) -> str:
    """`normalize` at ~1/25 of the cost on traditional text: folds per character, skipping opencc's
    phrase rules (a handful of characters differ). For scoring and snippets, never for indexing.
    Keeps the length of the text, so positions found in it are positions in the original.
    `lower`: the text's `normalize_lower` form, when the caller has it already.
    """
    text = normalize_lower(text) if lower is None else lower
    # `isascii` is a flag of the string, free; folding through the table costs about what looking
    # for a foldable character first would (and compiling that class costs a fresh process ~45 ms)
    return text if text.isascii() else fold_chars(text)


def fold_chars(text: str) -> str:
    """Each traditional character replaced by its simplified one, as code points in a NumPy array:
    `str.translate` with a dict looks every character up in Python (~40 us per KB, 10-20x this)."""
    import numpy as np  # here: a parse worker, which only cuts documents, never loads it (~0.2 s of CPU)

    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    table = _fold_array()
    folded = np.where(codes < table.size, table.take(codes, mode="clip"), codes)
    return folded.tobytes().decode("utf-32-le", "surrogatepass")


@lru_cache(maxsize=1)
def _fold_array() -> np.ndarray:
    """`_char_fold_table` as an array over the code points up to its highest (identity elsewhere)."""
    import numpy as np

    table = _char_fold_table()
    out = np.arange(max(table) + 1, dtype=np.uint32)
    for point, simplified in table.items():
        out[point] = ord(simplified)
    return out


@lru_cache(maxsize=1)
def _char_variants() -> dict[str, tuple[str, ...]]:
    """simplified -> the characters that fold to it (the inverse of `_char_fold_table`)."""
    out: dict[str, list[str]] = {}
    for trad, simp in _char_fold_table().items():
        out.setdefault(simp, []).append(chr(trad))
    return {simp: tuple(sorted(trads)) for simp, trads in out.items()}


MAX_SURFACE_FORMS = 8  # per token: enough for every two-character word seen; a cap, not a target


@lru_cache(maxsize=8192)  # a query's tokens recur across queries; the expansion is pure
def surface_forms(folded: str) -> tuple[str, ...]:
    """Every spelling of a folded (simplified) token that folds back to it, the token itself first.

    Scoring counts these in the lower-cased text instead of folding every
    candidate (which costs ~50 us per traditional KB): `发现` -> `发现`, `發現`, `髮現`...
    Capped at MAX_SURFACE_FORMS; text without CJK has one form.
    """
    if folded.isascii():
        return (folded,)
    variants = _char_variants()
    forms = [""]
    for ch in folded:
        options = (ch, *variants.get(ch, ()))
        forms = [f + o for f in forms for o in options][:MAX_SURFACE_FORMS]
    return tuple(forms)


@lru_cache(maxsize=8192)  # asked for every CJK token of a query (~300 for a long question); pure
def other_script_chars(folded: str) -> tuple[str, ...]:
    """The characters of a folded CJK token's other spellings that fold to one of its own (`發`, `髮`
    for `发`): the ones the index keeps as typed (`surface_chars`)."""
    variants = _char_variants()
    return tuple(sorted({v for ch in folded for v in variants.get(ch, ())}))


def typed_forms(query: str) -> dict[str, set[str]]:
    """folded CJK char or bigram -> the spellings the user typed for it (lower-cased).

    Folding per character keeps positions, so each folded token lines up with
    what was typed; `宝玉` typed as `寶玉` maps `宝玉` -> {`寶玉`}.
    """
    typed = query.replace("\x00", " ").lower()
    folded = typed.translate(_char_fold_table())
    out: dict[str, set[str]] = {}
    for match in _CJK_RUN.finditer(folded):
        start, end = match.span()
        for i in range(start, end):
            out.setdefault(folded[i], set()).add(typed[i])
            if i + 1 < end:
                out.setdefault(folded[i : i + 2], set()).add(typed[i : i + 2])
    return out


def is_cjk(ch: str) -> bool:
    return bool(_CJK_RUN.fullmatch(ch))


@dataclass
class Tokens:
    """The tokens of one text, per channel, in text order (duplicates kept)."""

    chars: list[str] = field(default_factory=list)
    grams: list[str] = field(default_factory=list)

    def chars_text(self) -> str:
        return " ".join(self.chars)

    def grams_text(self) -> str:
        return " ".join(self.grams)


@lru_cache(maxsize=16384)  # identifiers recur across a session's messages (~10 us each to split)
def _identifier_parts(word: str) -> tuple[str, ...]:
    """Sub-words of an identifier, for recall of `api key` in `OPENAI_API_KEY`."""
    if "_" not in word and word.islower():
        return ()
    parts = [p.lower() for piece in word.split("_") for p in _IDENT_PART.findall(piece)]
    parts = [p for p in parts if len(p) >= MIN_WORD_LEN]
    return tuple(parts) if len(parts) > 1 else ()


SHORT_TEXT = 500  # below this, a set of the text's characters beats a scan with the compiled class


def surface_chars(text: str) -> list[str]:
    """The distinct characters of text spelled in a script that folds to another (`燦` of `燦爛`).

    The index keeps them as typed (in a small index of their own, beside the
    folded channels): a character typed in traditional script finds the few
    messages that hold it as typed, even when its simplified form is in every
    other message (`構` among `构`).
    """
    if text.isascii():
        return []
    if len(text) <= SHORT_TEXT:  # a query: no need to compile the class in a fresh process (~45 ms)
        return sorted(set(text) & _traditional())
    return sorted(set(_foldable().findall(text)))


def surface_text(text: str) -> str:
    """What the `msg_typed` index keeps of a text, space-joined: `surface_chars(text)` (by one scan in C
    when the optional extension is built, a bitmap of the folding characters: ~29 -> ~3 us on a
    700-character message), and, in a text that has any, the characters they fold to that it holds
    as typed (`typed_targets`), so either spelling typed finds a mixed text by the one it holds."""
    surface = _native_surface()
    if surface is None or text.isascii():
        found = " ".join(surface_chars(text))
    else:
        found = surface(text, _traditional_bitmap())
    if not found:
        return found
    targets = typed_targets(text)
    return f"{found} {' '.join(targets)}" if targets else found


def typed_targets(text: str) -> list[str]:
    """The characters of a text written only in the simplified script that others fold to (`发` of
    `發`, `髮`; `fold_table.SIMPLIFIED_ONLY`), as typed: in a text written in the other script, the one
    `发` is what a person typing `发` looks for (`了`, written so in both scripts, is not among them:
    it would be in every traditional text)."""
    return sorted(set(text) & _simplified_only())


@lru_cache(maxsize=1)
def _simplified_only() -> frozenset[str]:
    return frozenset(fold_table.SIMPLIFIED_ONLY)


@lru_cache(maxsize=1)
def _traditional_bitmap() -> bytes:
    """The characters `_char_fold_table` changes as a bitmap over the Basic Multilingual Plane."""
    return _bmp_bitmap(_char_fold_table())


def _bmp_bitmap(points: Iterable[int]) -> bytes:
    """Code points as a bitmap over the Basic Multilingual Plane (bit c % 8 of byte c / 8), as the
    C scans read it; points beyond the plane are left out."""
    bits = bytearray(0x10000 // 8)
    for point in points:
        if point < 0x10000:
            bits[point >> 3] |= 1 << (point & 7)
    return bytes(bits)


@lru_cache(maxsize=1)
def _traditional() -> frozenset[str]:
    """Every character `_char_fold_table` changes, as a set (what `_foldable` matches)."""
    return frozenset(chr(point) for point in _char_fold_table())


def tokenize(text: str) -> Tokens:
    """Cut text into the two channels. Case and script are normalized first.

    This runs for every query, so each token kind is found by one regex pass and
    appended in bulk (documents are cut by `index_texts`, to the same tokens).
    """
    cjk, pairs, words, parts = _pieces(text)
    return Tokens(cjk + words + parts, pairs + words)


def _pieces(text: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """The tokens of text by kind, in text order: CJK characters, CJK pairs, words (lower-case),
    identifier parts."""
    text = fold_chinese(text.replace("\x00", " "))
    runs = _CJK_RUN.findall(text)
    chars: list[str] = list("".join(runs))
    grams: list[str] = []
    for run in runs:
        if len(run) > 1:
            grams.extend(map(str.__add__, run, run[1:]))
    originals = _WORDS.findall(text)
    words = [w.lower() for w in originals]
    parts: list[str] = []
    for original, word in zip(originals, words, strict=True):
        if "_" in word or (original != word and _CAMEL.search(original)):
            parts.extend(_identifier_parts(original))
    return chars, grams, words, parts


def index_texts(text: str) -> tuple[str, str]:
    """The two columns a message's index entry is written with: the tokens of `tokenize(text)`,
    each written once where the index needs it.

    - `grams`: the `grams` channel exactly (CJK pairs and words, repeats kept): FTS5 counts its
      tokens into the message's length (`codec.LENGTH_CHANNEL`).
    - `chars`: the `chars` channel without what the index already has: each CJK character once,
      then the identifier parts; the words are in `grams`.

    The index keeps which messages hold a token, not where or how often (`detail = 'none'`;
    `'column'` in older archives, whose column lists no query filters on), so both columns find
    the same messages as the whole channels would, with ~30% fewer tokens for FTS5 to hash.
    One scan in C cuts the text when the optional extension is built (`_cut.c`: ~4x faster on a
    700-character message, where tokenizing was most of a bulk import's parse work); case and
    identifier parts are done here, as `tokenize` does them.
    """
    cut = _native_cut()
    if cut is None:
        cjk, pairs, words, parts = _pieces(text)
        return " ".join([*dict.fromkeys(cjk), *parts]), " ".join(pairs + words)
    cjk_chars, cjk_grams, originals, identifiers = cut(fold_chinese(text.replace("\x00", " ")))
    if not originals:
        return cjk_chars, cjk_grams
    # one lower() for all words: a space is neither cased nor case-ignorable, so no word's casing
    # (a final sigma) depends on its neighbours, and lower() never makes a space
    lowered = originals.lower()
    split = " ".join(p for w in identifiers.split(" ") for p in _identifier_parts(w)) if identifiers else ""
    chars = f"{cjk_chars} {split}" if cjk_chars and split else cjk_chars or split
    return chars, f"{cjk_grams} {lowered}" if cjk_grams else lowered


@lru_cache(maxsize=1)
def _native_cut() -> Callable[[str], tuple[str, str, str, str]] | None:
    """The C scan of `index_texts`, or None where the optional extension was not built."""
    native = _native()
    return None if native is None else native.cut


@lru_cache(maxsize=1)
def _native_any_set() -> Callable[[str, bytes], bool] | None:
    """The C scan of `_may_fold`, or None where the optional extension was not built."""
    native = _native()
    return None if native is None else native.any_set


@lru_cache(maxsize=1)
def _native_fold() -> Callable[[str, bytes], str | None] | None:
    """The C fold of `fold_chinese`, or None where the optional extension was not built."""
    native = _native()
    return None if native is None else native.fold


@lru_cache(maxsize=1)
def _native_surface() -> Callable[[str, bytes], str] | None:
    """The C scan of `surface_text`, or None where the optional extension was not built."""
    native = _native()
    return None if native is None else native.surface


def _native() -> Any:
    """The optional C extension (`_cut.c`), unless it was not built or PI_MEMORY_PURE_PYTHON is set."""
    if os.environ.get("PI_MEMORY_PURE_PYTHON"):
        return None
    try:
        from . import _cut  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _cut


@dataclass(frozen=True)
class QueryToken:
    """One distinct query token and the FTS5 column it is looked up in."""

    text: str
    # "char" (one CJK character), "gram" (two), "word", "part" (of an identifier), "surface" (a
    # character typed in a script that folds to another: finds candidates, never scored itself)
    kind: str

    @property
    def column(self) -> str:
        return "grams" if self.kind == "gram" else "chars"

    def fts(self) -> str:
        """An FTS5 expression for this token alone: a quoted string, no column filter.

        A token's shape says which channel holds it (one CJK character: `chars`; two: `grams`; a
        word: both, its parts: `chars`), so the filter would match the same rows; and the
        indexes of archives created since schema m008 keep no column lists to filter on
        (`schema.COMPACT_FTS`).
        """
        return f'"{self.text}"'


def query_tokens(query: str) -> list[QueryToken]:
    """Distinct tokens of a query, in the order they first appear (folded: see `surface_tokens`)."""
    toks = tokenize(query)
    seen: set[tuple[str, str]] = set()
    out: list[QueryToken] = []
    grams = [g for g in toks.grams if len(g) == 2 and is_cjk(g[0]) and is_cjk(g[1])]
    words = [w for w in toks.grams if w not in grams]
    chars = [c for c in toks.chars if len(c) == 1 and is_cjk(c)]
    parts = [w for w in toks.chars if not (len(w) == 1 and is_cjk(w)) and w not in words]
    for kind, items in (("word", words), ("gram", grams), ("char", chars), ("part", parts)):
        for item in items:
            key = (kind, item)
            if key not in seen:
                seen.add(key)
                out.append(QueryToken(item, kind))
    return out


def implied_tokens(tokens: Iterable[QueryToken]) -> set[str]:
    """The tokens every text holding another of them holds too: the characters of a two-character
    CJK gram, the parts of an identifier (cutting the other's text yields them). A query for
    `api_key` asks for `api_key & api & key`, and the rows holding all three are the rows holding
    `api_key`: a row count that multiplies their shares as if independent is off by the parts'."""
    tokens = list(tokens)
    out: set[str] = set()
    for holder in tokens:
        cut = tokenize(holder.text)
        inside = (set(cut.chars) | set(cut.grams)) - {holder.text}
        out |= {t.text for t in tokens if t.text in inside}
    return out


def surface_tokens(query: str, besides: Iterable[QueryToken] = ()) -> list[QueryToken]:
    """The query's characters typed in a script that folds to another, as `tokenize` indexes them;
    with `besides` (the query's tokens), only those no token of it already spells."""
    taken = {t.text for t in besides}
    return [QueryToken(ch, "surface") for ch in surface_chars(query.replace("\x00", " ")) if ch not in taken]


def fts_or(tokens: list[QueryToken]) -> str:
    """An FTS5 OR over tokens, each a quoted string (`QueryToken.fts`)."""
    return " OR ".join(t.fts() for t in tokens)


def fts_and(tokens: list[QueryToken]) -> str:
    return " AND ".join(t.fts() for t in tokens)


# --- snippets ---------------------------------------------------------------------

SNIPPET_RADIUS = 150
# The hit marker of every snippet (search, recall, memory; text and --json alike): a stable
# contract. Mathematical white square brackets, U+27E6/U+27E7: they cannot be mistaken for the
# Chinese 【】 that archived text itself uses, and almost never occur in source or prose.
HIT_OPEN, HIT_CLOSE = "\u27e6", "\u27e7"


def find_first(norm_text: str, needles: list[str]) -> tuple[int, str] | None:
    """Earliest position of any needle (already normalized) in normalized text."""
    best: tuple[int, str] | None = None
    for needle in needles:
        if not needle:
            continue
        # once a hit is known, a CJK needle is looked for only up to where it could still win
        # (an ASCII one prefers a whole word anywhere, so it is looked for everywhere)
        end = best[0] + len(needle) if best is not None and not needle.isascii() else len(norm_text)
        pos = norm_text.find(needle, 0, end) if end < len(norm_text) else _find_token(norm_text, needle)
        if pos >= 0 and (best is None or pos < best[0] or (pos == best[0] and len(needle) > len(best[1]))):
            best = (pos, needle)
    return best


# what a whole word may not touch on either side: ASCII letters and digits (`_` is a boundary)
WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def whole_word_at(text: str, start: int, end: int) -> bool:
    """text[start:end] is not inside a longer run of ASCII letters and digits (`_` is a boundary)."""
    return (start == 0 or text[start - 1] not in WORD_CHARS) and (end >= len(text) or text[end] not in WORD_CHARS)


def _find_token(norm_text: str, needle: str) -> int:
    """First whole-word occurrence of an ASCII needle (else its first occurrence at all).

    `str.find` and a look at the neighbours: a regex with a look-behind cannot
    skip ahead and costs ~10x on long texts.
    """
    first = norm_text.find(needle)
    if first < 0 or not needle.isascii():
        return first
    pos = first
    while pos >= 0:
        if whole_word_at(norm_text, pos, pos + len(needle)):
            return pos
        pos = norm_text.find(needle, pos + 1)
    return first


def typed_runs(query: str) -> tuple[str, ...]:
    """The query's own runs as typed (lower-cased, not folded): whole words and whole CJK stretches."""
    runs: list[str] = []
    for match in _WORD_RUN.finditer(query.replace("\x00", " ").lower()):
        for seg in _SEGMENT.finditer(match.group()):
            piece = seg.group()
            if (len(piece) >= 2 or is_cjk(piece)) and piece not in runs:
                runs.append(piece)
    return tuple(runs)


def query_phrases_for_snippet(query: str) -> list[str]:
    """The query's own runs (whole words, whole CJK stretches), longest first."""
    runs: list[str] = []
    for match in _WORD_RUN.finditer(normalize(query)):
        for seg in _SEGMENT.finditer(match.group()):
            piece = seg.group()
            if len(piece) >= 2 or is_cjk(piece):
                runs.append(piece)
    return sorted(set(runs), key=lambda r: (-len(r), r))


def occurrences(norm_text: str, needles: list[str], start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Every occurrence of the needles within [start, end), as non-overlapping spans, longest first wins.

    `str.find` and a map of the characters already taken: a Chinese question has ~40 needles,
    each found many times in a snippet's window, and comparing every span with every other was
    the slowest part of a search's snippets.
    """
    end = len(norm_text) if end is None else end
    taken = bytearray(max(0, end - start))
    spans: list[tuple[int, int]] = []
    for needle in sorted({n for n in needles if n}, key=lambda n: (-len(n), n)):
        whole_word = needle.isascii()
        pos = norm_text.find(needle, start, end)
        while pos >= 0:
            a, b = pos, pos + len(needle)
            if (not whole_word or whole_word_at(norm_text, a, b)) and taken.find(1, a - start, b - start) < 0:
                spans.append((a, b))
                taken[a - start : b - start] = b"\x01" * (b - a)
            pos = norm_text.find(needle, pos + 1, end)
    return sorted(spans)


def snippet(
    text: str, needles: list[str] | list[list[str]], radius: int = SNIPPET_RADIUS, lower: str | None = None
) -> str:
    """About `radius` chars either side of the first hit, every hit in the window marked, one line.

    `needles` may be groups in priority order: the first group with a hit wins
    (the whole query phrase before its single tokens), and every occurrence of
    that group's needles in the window is marked with HIT_OPEN/HIT_CLOSE.
    `lower`: the text's `normalize_lower` form, when the caller has it (a search's candidates).
    """
    norm = normalize_fast(text, lower)
    # normalization keeps length for nearly all text; if not, cut the normalized form
    base = text if len(norm) == len(text) else norm
    groups: list[list[str]] = (
        [list(g) for g in needles if isinstance(g, list)]
        if needles and isinstance(needles[0], list)
        else [[n for n in needles if isinstance(n, str)]]
    )
    for group in groups:
        hit = find_first(norm, group)
        if hit is not None:
            pos, needle = hit
            start, end = max(0, pos - radius), min(len(base), pos + len(needle) + radius)
            spans = occurrences(norm, group, start, end) or [(pos, pos + len(needle))]
            return (
                ("…" if start > 0 else "") + _one_line(mark(base, spans, start, end)) + ("…" if end < len(base) else "")
            )
    out = base[: 2 * radius]
    return _one_line(out) + ("…" if len(base) > 2 * radius else "")


def mark(text: str, spans: list[tuple[int, int]], start: int = 0, end: int | None = None) -> str:
    """text[start:end] with each (sorted, non-overlapping) span wrapped in HIT_OPEN/HIT_CLOSE."""
    end = len(text) if end is None else end
    parts, at = [], start
    for a, b in spans:
        parts += [text[at:a], HIT_OPEN, text[a:b], HIT_CLOSE]
        at = b
    parts.append(text[at:end])
    return "".join(parts)


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def clip(text: str, limit: int, marker: str = "…[{n} more chars]") -> tuple[str, bool]:
    """Cut text to `limit` chars, saying how much was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit] + marker.format(n=len(text) - limit), True
