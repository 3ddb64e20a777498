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
"""

from __future__ import annotations

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


def literal(chars: str) -> str:
    lines = [chars[i : i + PER_LINE] for i in range(0, len(chars), PER_LINE)]
    return "(\n" + "".join(f'    "{line}"\n' for line in lines) + ")"


def main() -> None:
    folds = single_char_folds()
    traditional = "".join(sorted(folds))
    simplified = "".join(folds[c] for c in traditional)
    OUT.write_text(
        '"""Traditional -> simplified Chinese, one character at a time: generated, do not edit.\n\n'
        "Written by `scripts/gen_fold_table.py` from opencc's t2s conversion; TRADITIONAL[i]\n"
        "folds to SIMPLIFIED[i]. A test compares it with the installed opencc.\n"
        '"""\n\n'
        f"TRADITIONAL = {literal(traditional)}\n\n"
        f"SIMPLIFIED = {literal(simplified)}\n",
        encoding="utf-8",
    )
    print(f"{len(folds)} characters -> {OUT}")


if __name__ == "__main__":
    main()
