from pi_memory.text import (
    clip,
    fts_and,
    fts_or,
    normalize,
    query_phrases_for_snippet,
    query_tokens,
    snippet,
    tokenize,
)


def test_latin_words_of_two_or_more_chars_go_into_both_channels():
    toks = tokenize("The whale, a Sea-monster! x 42")
    assert toks.chars == ["the", "whale", "sea", "monster", "42"]
    assert toks.grams == ["the", "whale", "sea", "monster", "42"]


def test_chinese_characters_go_to_chars_and_bigrams_to_grams():
    toks = tokenize("缓存索引")
    assert toks.chars == ["缓", "存", "索", "引"]
    assert toks.grams == ["缓存", "存索", "索引"]


def test_a_single_chinese_character_run_has_no_bigram():
    toks = tokenize("锁，门")
    assert toks.chars == ["锁", "门"]
    assert toks.grams == []


def test_identifier_glued_to_chinese_is_split():
    toks = tokenize("gen-itgc后来")
    assert "itgc" in toks.chars and "后" in toks.chars and "gen" in toks.chars
    assert "后来" in toks.grams


def test_identifiers_are_indexed_whole_and_by_their_parts():
    toks = tokenize("OPENAI_API_KEY sessionBeforeCompact")
    assert toks.grams == ["openai_api_key", "sessionbeforecompact"]
    for part in ("openai", "api", "key", "session", "before", "compact"):
        assert part in toks.chars


def test_cjk_extension_b_outside_the_bmp_is_kept():
    toks = tokenize("𠮷野家")
    assert toks.chars == ["𠮷", "野", "家"]
    assert toks.grams == ["𠮷野", "野家"]


def test_cjk_extension_a_is_kept():
    toks = tokenize("㐀㐁")
    assert toks.chars == ["㐀", "㐁"]


def test_traditional_chinese_is_folded_to_simplified():
    assert tokenize("寶玉").grams == tokenize("宝玉").grams == ["宝玉"]
    assert normalize("頭髮 Vue") == "头发 vue"


def test_kana_and_hangul_are_cut_like_chinese():
    assert tokenize("カタカナ").grams == ["カタ", "タカ", "カナ"]
    assert tokenize("한국어").chars == ["한", "국", "어"]


def test_nul_bytes_and_punctuation_never_become_tokens():
    toks = tokenize('"\x00" AND OR * ^ chars: NEAR(')
    assert toks.chars == ["and", "or", "chars", "near"]


def test_query_tokens_are_distinct_and_typed():
    toks = query_tokens("Vue 响应式 响应")
    kinds = {(t.text, t.kind) for t in toks}
    assert ("vue", "word") in kinds
    assert ("响应", "gram") in kinds and ("应式", "gram") in kinds
    assert ("响", "char") in kinds
    assert len(toks) == len(kinds)


def test_fts_expressions_quote_every_token_and_filter_its_column():
    toks = query_tokens('缓存 "OR" x_y')
    assert fts_or(toks).count(" OR ") == len(toks) - 1
    for t in toks:
        assert t.fts() in fts_and(toks)
        assert t.fts().startswith(("chars:", "grams:"))
        assert '"' not in t.text


def test_hostile_query_yields_only_word_tokens():
    toks = query_tokens('" OR 1=1 -- chars:* ^NEAR(a b) \x00 {grams}')
    assert all(t.text.replace("_", "").isalnum() for t in toks)


def test_snippet_marks_the_whole_query_phrase_before_single_tokens():
    text = "前" * 300 + "这是缓存索引的方案" + "后" * 300
    out = snippet(text, [query_phrases_for_snippet("缓存索引"), ["索引", "缓存"]])
    assert "⟦缓存索引⟧" in out
    assert out.startswith("…") and out.endswith("…")
    assert len(out) < 340


def test_snippet_does_not_find_a_word_inside_a_longer_word():
    out = snippet("there is the whale", [["the"]])
    assert "⟦the⟧ whale" in out


def test_snippet_without_a_hit_shows_the_start():
    assert snippet("hello world", [["zzz"]]) == "hello world"


def test_clip_says_how_much_was_cut():
    text, cut = clip("abcdef", 3)
    assert cut and text == "abc…[3 more chars]"
    assert clip("ab", 3) == ("ab", False)


def test_snippet_marks_every_occurrence_of_the_matched_words_in_its_window():
    out = snippet("方案一：缓存索引。方案二：不用缓存索引，改方案", [["缓存索引", "方案"], ["缓", "存"]])
    assert out == "⟦方案⟧一：⟦缓存索引⟧。⟦方案⟧二：不用⟦缓存索引⟧，改⟦方案⟧"


def test_snippet_marks_english_words_only_as_whole_words_and_every_time():
    out = snippet("the theme of the whale", [["the"]])
    assert out == "⟦the⟧ theme of ⟦the⟧ whale"


def test_the_hit_marker_cannot_be_confused_with_chinese_brackets():
    from pi_memory.text import HIT_CLOSE, HIT_OPEN

    out = snippet("见【附录】里的缓存说明", [["缓存"]])
    assert out == "见【附录】里的⟦缓存⟧说明" and (HIT_OPEN, HIT_CLOSE) == ("⟦", "⟧")
