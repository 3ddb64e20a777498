"""Write src/pi_memory/core/fold_table.py: opencc's traditional -> simplified mapping of single Han characters.

Design idea: scoring and snippets fold per character (`text.normalize_fast`),
and building that table from opencc at run time (one conversion of ~28,000
characters, then a 4,000-character regex) cost ~25 ms on the first query of
every process. The table is data, so it ships as data: a Python module of two
strings compiled to bytecode, loaded in well under a millisecond.
`tests/test_text.py` checks it still equals what the installed opencc says, so
an opencc upgrade that changes a character fails the tests until this script
is run again:

    python scripts/gen_fold_table.py

It also writes `SIMPLIFIED_ONLY` (the characters of SIMPLIFIED that s2t converts: a traditional text
holds them only where it mixes in the simplified script) and `FOLD_TRIGGERS`: with TRADITIONAL, the characters without which opencc's t2s
leaves a text as it is (`text.fold_chinese` skips opencc for such text, ~25 us a message). A
phrase can change with no traditional character in it (`回覆` -> `回复`), so each such phrase
of opencc's TSPhrases dictionary gives the character it changes, read from the installed
dictionary with the `opencc_dict` tool the opencc package ships.

And what lets `text.fold_chinese` fold most traditional text without opencc, by the table (in C:
~1.4 us instead of ~25 on a 600-character message), giving what opencc gives: t2s cuts text into the
longest entries of its dictionaries and converts each, so text in which no phrase starts that t2s
converts otherwise than character by character (`PHRASE_STARTS`: their first two characters) and
no character that changes alone but not by the table (`UNTABLED`) converts character by character.
"""

from __future__ import annotations

import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import opencc

# Han ranges folded character by character (URO, Ext A, compatibility ideographs).
FOLD_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))
OUT = Path(__file__).resolve().parent.parent / "src" / "pi_memory" / "core" / "fold_table.py"
PER_LINE = 40


def single_char_folds() -> dict[str, str]:
    chars = [chr(c) for lo, hi in FOLD_RANGES for c in range(lo, hi + 1)]
    folded = opencc.OpenCC("t2s").convert("\n".join(chars)).split("\n")
    if len(folded) != len(chars):
        raise SystemExit("opencc did not keep one line per character")
    return {a: b for a, b in zip(chars, folded, strict=True) if a != b and len(b) == 1}


@lru_cache(maxsize=1)
def bmp_changes() -> frozenset[str]:
    """Every character of the Basic Multilingual Plane that t2s changes on its own (one conversion
    of ~63,000 characters, asked for by `fold_triggers` and `untabled`)."""
    chars = [chr(c) for c in range(0x80, 0x10000) if not 0xD800 <= c <= 0xDFFF]
    folded = opencc.OpenCC("t2s").convert("\n".join(chars)).split("\n")
    if len(folded) != len(chars):
        raise SystemExit("opencc did not keep one line per character")
    return frozenset(a for a, b in zip(chars, folded, strict=True) if a != b)


@lru_cache(maxsize=1)
def t2s_phrases() -> tuple[str, ...]:
    """The phrases of the installed opencc's TSPhrases dictionary (t2s's phrase step), read once."""
    clib = Path(opencc.__file__).parent / "clib"
    tool, source = clib / "bin" / "opencc_dict", clib / "share" / "opencc" / "TSPhrases.ocd2"
    if not tool.exists() or not source.exists():
        raise SystemExit(f"this opencc package ships no {tool.name} or {source.name}: cannot read its phrases")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "phrases.txt"
        subprocess.run([str(tool), "-i", str(source), "-o", str(out), "-f", "ocd2", "-t", "text"], check=True)
        return tuple(line.split("\t", 1)[0] for line in out.read_text(encoding="utf-8").splitlines() if "\t" in line)


def fold_triggers(traditional: set[str]) -> str:
    """The characters besides `traditional` that t2s may change a text for: any other character it
    changes alone, and of each phrase it changes that holds none of them, the character it changes."""
    converter = opencc.OpenCC("t2s")
    alone = bmp_changes()
    triggers = alone - traditional
    for phrase in t2s_phrases():
        folded = converter.convert(phrase)
        if folded == phrase or set(phrase) & alone:
            continue
        changed = [a for a, b in zip(phrase, folded, strict=False) if a != b]
        triggers |= {changed[0]} if len(phrase) == len(folded) and changed else set(phrase)
    return "".join(sorted(triggers))


def untabled(traditional: set[str]) -> str:
    """The characters of the Basic Multilingual Plane t2s changes alone that the table does not
    hold (into several characters, or outside FOLD_RANGES)."""
    return "".join(sorted(bmp_changes() - traditional))


def phrase_starts(folds: dict[str, str]) -> str:
    """The first two characters of each phrase of TSPhrases that t2s converts otherwise than
    character by character, sorted and without repeats, concatenated (two characters each)."""
    converter = opencc.OpenCC("t2s")
    table = str.maketrans(folds)
    starts = {
        phrase[:2]
        for phrase in t2s_phrases()
        if len(phrase) > 1 and converter.convert(phrase) != phrase.translate(table)
    }
    return "".join(sorted(starts))


def simplified_only(simplified: str) -> str:
    """The characters others fold to that opencc's s2t writes otherwise (`发` -> `發`): the ones a
    traditional text holds only where it mixes in the simplified script (`了`, `只` are written
    so in both, and are left out)."""
    converter = opencc.OpenCC("s2t")
    return "".join(sorted(c for c in set(simplified) if converter.convert(c) != c))


def literal(chars: str) -> str:
    """A string literal, in lines of PER_LINE characters when it is longer (as ruff formats it)."""
    if len(chars) <= PER_LINE:
        return f'"{chars}"'
    lines = [chars[i : i + PER_LINE] for i in range(0, len(chars), PER_LINE)]
    return "(\n" + "".join(f'    "{line}"\n' for line in lines) + ")"


def main() -> None:
    folds = single_char_folds()
    traditional = "".join(sorted(folds))
    simplified = "".join(folds[c] for c in traditional)
    triggers = fold_triggers(set(traditional))
    alone, starts = untabled(set(traditional)), phrase_starts(folds)
    only = simplified_only(simplified)
    OUT.write_text(
        '"""Traditional -> simplified Chinese, one character at a time: generated, do not edit.\n\n'
        "Written by `scripts/gen_fold_table.py` from opencc's t2s conversion; TRADITIONAL[i]\n"
        "folds to SIMPLIFIED[i]. A test compares it with the installed opencc.\n"
        '"""\n\n'
        f"TRADITIONAL = {literal(traditional)}\n\n"
        f"SIMPLIFIED = {literal(simplified)}\n\n"
        "# With TRADITIONAL, what may make t2s change a text (see the script): text with none of them\n"
        "# (and nothing beyond the Basic Multilingual Plane) folds to itself.\n"
        f"FOLD_TRIGGERS = {literal(triggers)}\n\n"
        "# Text without them folds character by character, by the table (see the script): the\n"
        "# characters t2s changes alone that the table does not hold, and the first two characters of\n"
        "# each phrase t2s converts otherwise than character by character.\n"
        f"UNTABLED = {literal(alone)}\n\n"
        f"PHRASE_STARTS = {literal(starts)}\n\n"
        "# The characters of SIMPLIFIED that opencc's s2t converts (see the script): those a traditional\n"
        "# text holds only as typed in the simplified script, which the typed-script index keeps.\n"
        f"SIMPLIFIED_ONLY = {literal(only)}\n",
        encoding="utf-8",
    )
    print(
        f"{len(folds)} characters, {len(triggers)} more triggers, {len(alone)} untabled, {len(starts) // 2} phrase starts -> {OUT}"
    )


if __name__ == "__main__":
    main()
