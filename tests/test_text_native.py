"""`index_texts` (the index's two columns, cut in C when the optional extension is built) holds
exactly the tokens `tokenize` gives, on real session text and on text made to break it: the `grams`
channel as it is, the `chars` channel less what the index already has (repeats, the words)."""

from __future__ import annotations

import json
import random
import re
import shutil
import sysconfig
from pathlib import Path

import pytest

from pi_memory.core import fold_table, text
from pi_memory.core.text import fold_chinese, index_texts, is_cjk, tokenize

DATA = Path(__file__).parent / "data"


def reference(s: str) -> tuple[str, str]:
    """What `index_texts` must give, from `tokenize`'s channels: `grams` as it is; `chars` with
    each CJK character once and without the words (which `grams` holds), then the identifier parts."""
    toks = tokenize(s)
    n_cjk = next((i for i, t in enumerate(toks.chars) if not is_cjk(t)), len(toks.chars))
    n_pairs = next((i for i, t in enumerate(toks.grams) if not all(map(is_cjk, t))), len(toks.grams))
    words = toks.grams[n_pairs:]
    assert toks.chars[n_cjk : n_cjk + len(words)] == words
    chars = [*dict.fromkeys(toks.chars[:n_cjk]), *toks.chars[n_cjk + len(words) :]]
    return " ".join(chars), toks.grams_text()


def session_texts() -> list[str]:
    """Every string value in the real session files under tests/data (pi, Claude Code, Codex)."""
    out: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for path in sorted(DATA.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="surrogateescape").splitlines():
            try:
                walk(json.loads(line))
            except ValueError:
                continue
    return out


EDGES = [
    "",
    " ",
    "a",
    "ab",
    "字",
    "__",
    "_a_",
    "ΟΔΟΣ ΑΣʰ ΑΒ",  # final sigma: lower() of the joined words must equal each word's
    "İstanbul ΣΑΣ",  # lower() that lengthens a word
    "fooBar_baz OPENAI_API_KEY openAiKey XMLHttpRequest v2_final",
    "缓存索引 cache_key 缓存 構造函數 のテスト 한국어 𠀀𠀁字",
    "abc字def 字a字 ab\x00cd 字\x00字",
    "tab\tnew\nline\r\u3000全角空格\u00a0nbsp",
    "\u30fb・katakana middle dot ー",
    "e\u0301\u0301 combining ʰmodifier",
]


def fuzz(n: int) -> list[str]:
    rng = random.Random(7)
    alphabet = (
        "aAzZ_ 09ΣσςİıÅ字構构の한\x00\u0301ʰ-.,\n\U00020001\u30fb"
        + "".join(chr(rng.randrange(32, 0x3000)) for _ in range(200))
        + "".join(chr(rng.randrange(0x3000, 0x33000)) for _ in range(100))
    )
    return ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 80))) for _ in range(n)]


@pytest.mark.parametrize("pure", [False, True], ids=["native if built", "pure python"])
def test_index_texts_gives_the_tokenizer_s_channels_on_real_session_text(pure: bool, monkeypatch) -> None:
    if pure:
        monkeypatch.setattr(text, "_native_cut", lambda: None)
    texts = session_texts()
    assert len(texts) > 1000
    assert [index_texts(s) for s in texts] == [reference(s) for s in texts]


@pytest.mark.parametrize("pure", [False, True], ids=["native if built", "pure python"])
def test_index_texts_gives_the_tokenizer_s_channels_on_edge_cases_and_random_text(pure: bool, monkeypatch) -> None:
    if pure:
        monkeypatch.setattr(text, "_native_cut", lambda: None)
    for s in EDGES + fuzz(20_000):
        assert index_texts(s) == reference(s), repr(s)


def test_index_texts_writes_each_chinese_character_once_and_the_words_only_with_the_pairs() -> None:
    chars, grams = index_texts("缓存 openAiKey and OPENAI_API_KEY 缓存")
    assert chars == "缓 存 open ai key openai api key"
    assert grams == "缓存 缓存 openaikey and openai_api_key"


def test_the_index_columns_hold_every_token_of_both_channels() -> None:
    for s in EDGES + session_texts()[:3000]:
        toks = tokenize(s)
        chars, grams = index_texts(s)
        assert set(chars.split()) | set(grams.split()) == set(toks.chars) | set(toks.grams), repr(s)
        assert grams.split() == toks.grams  # the length FTS5 counts is the grams channel's


def test_the_c_scan_is_built_wherever_a_c_compiler_is_installed() -> None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}): the pure-Python path is used")
    assert text._native_cut() is not None, "the optional extension pi_memory.core._cut was not built"


def test_the_c_scan_refuses_anything_but_a_string() -> None:
    cut = text._native_cut()
    if cut is None:
        pytest.skip("the optional extension is not built")
    with pytest.raises(TypeError):
        cut(b"bytes")  # type: ignore[arg-type]


def test_a_lone_surrogate_next_to_chinese_is_folded_around_not_an_error() -> None:
    assert fold_chinese("構\ud800構造") == "构\ud800构造"
    assert index_texts("構\ud800構") == ("构", "")


@pytest.mark.parametrize("pure", [False, True], ids=["native if built", "pure python"])
def test_surface_text_is_the_typed_characters_joined_on_real_and_random_text(pure: bool, monkeypatch) -> None:
    if pure:
        monkeypatch.setattr(text, "_native_surface", lambda: None)
    samples = EDGES + session_texts() + fuzz(5_000) + ["構造 構 燦爛 寶玉 宝玉 𠀀 the end" * 40]
    for s in samples:
        found = text.surface_chars(s)
        expected = found + text.typed_targets(s) if found else []
        assert text.surface_text(s) == " ".join(expected), repr(s)
    assert text.surface_text("構造 構 燦爛 构") == "構 燦 爛 构"


def test_pi_memory_pure_python_turns_the_c_scan_off() -> None:
    import os
    import subprocess
    import sys

    code = (
        "from pi_memory.core import text; "
        "print(text._native_cut() is None, text._native_surface() is None, text._native_any_set() is None, "
        "text._native_fold() is None)"
    )
    env = {**os.environ, "PI_MEMORY_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True", "True"]


FOLDING = [
    "红楼梦里的宝玉发现了代码的问题",  # simplified: opencc leaves it, and is not asked
    "紅樓夢裡的寶玉發現了程式碼的問題",
    "请回覆这封邮件",  # no traditional character, yet t2s changes the phrase (覆 -> 复)
    "一目瞭然 反覆 意志消沈 憑藉",
    "坏了 覆盖 深沉",  # trigger characters outside their phrases: t2s leaves them
    "𠁞 an astral character t2s changes, and 𠀀 one it keeps",
    "lone \ud800 surrogate 發現",
    "mixed English and 中文 text",
]


def test_folding_skips_opencc_only_for_text_it_would_leave_as_it_is() -> None:
    converter = text._t2s()
    samples = FOLDING + EDGES + session_texts() + fuzz(3_000)
    for s in samples:
        try:
            expected = converter.convert(s)  # type: ignore[attr-defined]
        except UnicodeEncodeError:
            continue  # opencc cannot take a lone surrogate; `fold_chinese` folds around it
        assert fold_chinese(s) == expected, repr(s)
        if not text._may_fold(s):
            assert expected == s, repr(s)
    assert not text._may_fold("红楼梦里的宝玉发现了代码的问题")
    assert text._may_fold("请回覆这封邮件") and text._may_fold("𠀀")


def _t2s_phrases() -> list[str]:
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "scripts" / "gen_fold_table.py"
    spec = importlib.util.spec_from_file_location("gen_fold_table", script)
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return list(gen.t2s_phrases())


def test_folding_by_the_table_gives_what_opencc_gives_around_every_phrase_of_t2s() -> None:
    # each phrase of opencc's dictionary between random characters, traditional and simplified:
    # a phrase the table would fold otherwise must send the text to opencc
    converter = text._t2s()
    phrases = _t2s_phrases()
    rng = random.Random(11)
    around = list(fold_table.TRADITIONAL[::7]) + list("的了是在我有他这中大来上 a1")
    for phrase in phrases:
        for _ in range(10):
            before = "".join(rng.choice(around) for _ in range(rng.randrange(4)))
            after = "".join(rng.choice(around) for _ in range(rng.randrange(4)))
            s = before + phrase + after
            assert fold_chinese(s) == converter.convert(s), repr(s)  # type: ignore[attr-defined]
    alphabet = sorted(set("".join(phrases))) + list(fold_table.TRADITIONAL[:300]) + list("的了 a")
    for _ in range(20_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 12)))
        assert fold_chinese(s) == converter.convert(s), repr(s)  # type: ignore[attr-defined]


def _t2s_keys() -> list[str]:
    """Every key of every dictionary the installed opencc's t2s reads (its config names them)."""
    import subprocess
    import tempfile

    import opencc

    clib = Path(opencc.__file__).parent / "clib"
    config = json.loads((clib / "share" / "opencc" / "t2s.json").read_text(encoding="utf-8"))
    files = re.findall(r'"file": "([^"]+)"', json.dumps(config))
    assert "TSPhrases.ocd2" in files and "TSCharacters.ocd2" in files
    keys: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in files:
            out = Path(tmp) / f"{name}.txt"
            source = clib / "share" / "opencc" / name
            subprocess.run(
                [str(clib / "bin" / "opencc_dict"), "-i", str(source), "-o", str(out), "-f", "ocd2", "-t", "text"],
                check=True,
            )
            keys += [line.split("\t", 1)[0] for line in out.read_text(encoding="utf-8").splitlines() if "\t" in line]
    return keys


def test_no_key_of_t2s_holds_an_ascii_character_so_opencc_converts_the_pieces_between_them_alone() -> None:
    keys = _t2s_keys()
    assert len(keys) > 4_000
    assert not [k for k in keys if any(c.isascii() for c in k)]


def test_a_text_with_a_phrase_only_opencc_folds_sends_it_only_the_pieces_that_need_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if text._native_fold() is None:
        pytest.skip("the optional extension is not built")
    converter = text._t2s()
    s = "紅樓夢裡的寶玉發現了 bug\n請回覆這封郵件, thanks 乾隆皇帝\n程式碼 OK\n\n"
    expected = converter.convert(s)  # type: ignore[attr-defined]
    asked: list[str] = []

    class Spy:
        def convert(self, piece: str) -> str:
            asked.append(piece)
            return converter.convert(piece)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(text, "_t2s", lambda: Spy())
    assert fold_chinese(s) == expected == "红楼梦里的宝玉发现了 bug\n请回复这封邮件, thanks 乾隆皇帝\n程式码 OK\n\n"
    assert asked == ["請回覆這封郵件", "乾隆皇帝"]


def test_the_c_fold_says_when_only_opencc_can_fold_a_text() -> None:
    fold = text._native_fold()
    if fold is None:
        pytest.skip("the optional extension is not built")
    program = text._fold_program()
    assert fold("紅樓夢裡的寶玉發現了", program) == "红楼梦里的宝玉发现了"
    assert fold("天乾物燥 lone \ud800 ok", program) == "天干物燥 lone \ud800 ok"
    assert fold("乾隆皇帝", program) is None  # a phrase t2s keeps: 乾 alone folds to 干
    assert fold("请回覆", program) is None  # a phrase t2s changes though no character does alone
    assert fold("𠁞 發", program) is None  # beyond the plane
    assert fold("a\x00發\uffff", program) == "a\x00发\uffff"  # opencc keeps both too
    assert fold("", program) == ""
    with pytest.raises(ValueError):
        fold("發", b"too short")
    with pytest.raises(TypeError):
        fold(b"bytes", program)  # type: ignore[arg-type]


def test_the_c_and_python_checks_for_foldable_text_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    samples = FOLDING + EDGES + fuzz(2_000)
    native = [text._may_fold(s) for s in samples]
    monkeypatch.setattr(text, "_native_any_set", lambda: None)
    assert [text._may_fold(s) for s in samples] == native
