"""English words by their stem: scoring counts another form of a query word, and a search looks the
other forms up in the index (`core.stems`)."""

from __future__ import annotations

import random
import re

from pi_memory.core.stems import other_forms, stem, stem_root, variants


def test_a_word_and_its_other_forms_share_a_stem():
    assert stem("moving") == stem("moved") == stem("moves") == "move"
    assert stem("cities") == stem("city")


def test_the_root_is_the_start_every_form_shares_even_where_a_form_drops_a_letter():
    assert stem_root("moved") == "mov"  # `moving` drops the e
    assert stem_root("happy") == "happ"  # stem `happi`
    assert stem_root("buy") == "buy"  # too short to drop the y
    assert stem_root("OPENAI_KEY") is None and stem_root("v2") is None and stem_root("ab") is None


def test_other_forms_are_counted_never_the_form_typed_nor_a_word_that_only_starts_alike():
    text = "i am moving to lisbon. she moves, he moved; a movie about movement"
    assert other_forms(text, "moved", "mov") == 2  # moving, moves: not moved, movie, movement
    assert other_forms("nothing here", "moved", "mov") == 0


def test_the_variants_looked_up_are_forms_of_the_same_stem_likeliest_first():
    found = variants("buy")
    assert {"buys", "buying"} <= set(found) and "buy" not in found
    assert all(stem(v) == stem("buy") for v in found)
    assert "tiktok" in variants("tiktoks") and "moving" in variants("moved")
    assert variants("OPENAI_KEY") == () and len(variants("traveled")) <= 8


def test_a_plural_or_an_adverb_looks_up_the_word_it_is_made_from_not_only_its_stem():
    # the stems `hospit` and `advers` are no words: the forms looked up start from `hospital`, `adverse`
    assert variants("hospitals")[0] == "hospital" and variants("adversely")[0] == "adverse"
    assert {"stop", "stopping"} <= set(variants("stopped")) and "city" in variants("cities")
    assert {"move", "moving"} <= set(variants("moved")) and "moveing" not in variants("moved")


def test_other_forms_counts_what_the_whole_word_pattern_finds_on_any_text():
    # the definition, as one regex: the root not after a letter, digit or `_`, then letters, not
    # running into a digit or `_` (`other_forms` looks for the root with str.find, ~15x faster)
    def by_pattern(text: str, word: str, root: str) -> int:
        forms = re.findall(rf"(?<![a-z0-9_]){re.escape(root)}[a-z]*(?![0-9_])", text)
        return sum(1 for form in forms if form != word and stem(form) == stem(word))

    rng = random.Random(7)
    parts = ["mov", "ing", "s", "ed", "e", "_", "2", " ", ".", "é", "moving", "moves", "remov", "movie"]
    for _ in range(20_000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 12)))
        for word in ("move", "moving", "moved"):
            assert other_forms(text, word, "mov") == by_pattern(text, word, "mov"), (text, word)
