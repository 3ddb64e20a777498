"""Fit and check the token estimator (`pi_memory.core.tokens`) against real tokenizers.

Texts of three kinds (Chinese, English, code) are cut into chunks of about the size of a tool
output or a turn (~3,000 characters); each chunk is counted by a real tokenizer (OpenAI's
o200k_base through the `bpe-openai` package, which ships its vocabulary; Claude's published
tokenizer, `tokenizer.json` of the `anthropic` SDK up to 0.38, through `tokenizers`) and by the
estimator's features. Weights are fitted by least squares on the even chunks and checked on the
odd ones; `--check` only checks the weights in the code. Neither tokenizer is needed at run time.

    pip install bpe-openai tokenizers   # bench only
    python bench/token_calibration.py --zh ../shared/corpora/vue-docs-zh-cn ../shared/corpora/cmrc2018-trial \
        --en ../shared/corpora/gutenberg/1342.txt ../shared/corpora/gutenberg/2701.txt \
        --code src extensions /usr/lib/python3.11/json --claude-tokenizer /tmp/anthropic/tokenizer.json \
        --json bench/results/tokens.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import git_commit, machine, save_json  # noqa: E402

from pi_memory.core import tokens  # noqa: E402

CHUNK = 3000
TEXT_SUFFIXES = {".md", ".txt", ".json", ".py", ".ts", ".js", ".vue", ".c", ".h", ".css", ".html", ".sh", ".toml"}


def files_under(paths: Iterable[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in TEXT_SUFFIXES)
        elif p.is_file():
            out.append(p)
    return out


def chunks(paths: Iterable[str], limit: int, rng: random.Random) -> list[str]:
    """Up to `limit` chunks of ~CHUNK characters, cut at line ends, sampled over the files."""
    pieces: list[str] = []
    for f in files_under(paths):
        text = f.read_text(encoding="utf-8", errors="replace")
        if f.suffix == ".json" and "cmrc" in f.name:
            text = "\n".join(_cmrc_texts(text))
        at = 0
        while at < len(text):
            end = text.find("\n", at + CHUNK)
            end = len(text) if end < 0 else end + 1
            piece = text[at:end]
            if len(piece) > CHUNK // 3:
                pieces.append(piece)
            at = end
    rng.shuffle(pieces)
    return pieces[:limit]


def _cmrc_texts(raw: str) -> list[str]:
    data = json.loads(raw)
    return [p["context"] for d in data.get("data", []) for p in d.get("paragraphs", [])]


def counters(claude_tokenizer: str | None) -> dict[str, Callable[[str], int]]:
    import bpe_openai

    o200k = bpe_openai.get_encoding("o200k_base")
    found: dict[str, Callable[[str], int]] = {"openai": lambda t: len(o200k.encode(t))}
    if claude_tokenizer:
        from tokenizers import Tokenizer

        claude = Tokenizer.from_file(claude_tokenizer)
        found["anthropic"] = lambda t: len(claude.encode(t).ids)
    return found


def matrix(texts: list[str]) -> np.ndarray:
    return np.array([[tokens.features(t)[f] for f in tokens.FEATURES] for t in texts], dtype=float)


# Weights not fitted: the corpora hold too few digits to learn theirs (a fit gave 3 tokens per group
# of three, where a file of numbers measures 1.0: both tokenizers split digits in groups of three).
FIXED = {"digits": 1.0}


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares on relative error (each chunk weighs the same), weights kept >= 0, `FIXED` as set."""
    fixed = np.array([FIXED.get(f, np.nan) for f in tokens.FEATURES])
    free = np.isnan(fixed)
    w = np.where(free, 0.0, fixed)
    w[free] = _fit_free(x[:, free], y - x[:, ~free] @ fixed[~free], y)
    return w


def _fit_free(x: np.ndarray, y: np.ndarray, truth: np.ndarray) -> np.ndarray:
    scale = 1 / np.maximum(truth, 1)
    w, *_ = np.linalg.lstsq(x * scale[:, None], y * scale, rcond=None)
    for _ in range(len(w)):  # drop negative weights one at a time and refit the rest
        if (w >= 0).all():
            break
        keep = w > 0
        w = np.zeros_like(w)
        sub, *_ = np.linalg.lstsq(x[:, keep] * scale[:, None], y * scale, rcond=None)
        w[keep] = sub
    return w


def errors(estimate: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    rel = (estimate - truth) / np.maximum(truth, 1)
    return {
        "chunks": int(len(truth)),
        "total_error_pct": round(float(estimate.sum() / max(truth.sum(), 1) - 1) * 100, 1),
        "mean_abs_error_pct": round(float(np.abs(rel).mean()) * 100, 1),
        "p90_abs_error_pct": round(float(np.percentile(np.abs(rel), 90)) * 100, 1),
    }


def evaluate(kinds: dict[str, list[str]], count: Callable[[str], int], w: np.ndarray, half: int) -> dict[str, Any]:
    """Errors of weights `w` on each kind's chunks of parity `half` (0 even, 1 odd), and of chars / 4."""
    out: dict[str, Any] = {}
    for kind, texts in kinds.items():
        part = texts[half::2]
        truth = np.array([count(t) for t in part], dtype=float)
        est = matrix(part) @ w
        chars4 = np.array([tokens.estimate_chars(len(t)) for t in part], dtype=float)
        row = errors(est, truth)
        row["chars_per_token"] = round(sum(len(t) for t in part) / max(truth.sum(), 1), 2)
        row["chars4_total_error_pct"] = errors(chars4, truth)["total_error_pct"]
        row["chars4_mean_abs_error_pct"] = errors(chars4, truth)["mean_abs_error_pct"]
        out[kind] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zh", nargs="+", required=True)
    ap.add_argument("--en", nargs="+", required=True)
    ap.add_argument("--code", nargs="+", required=True)
    ap.add_argument("--claude-tokenizer", help="tokenizer.json of the anthropic SDK (<= 0.38)")
    ap.add_argument("--chunks", type=int, default=300, help="chunks per kind")
    ap.add_argument("--check", action="store_true", help="check the weights in the code only, fit nothing")
    ap.add_argument("--json")
    args = ap.parse_args()
    rng = random.Random(40)
    kinds = {k: chunks(getattr(args, k), args.chunks, rng) for k in ("zh", "en", "code")}
    result: dict[str, Any] = {"commit": git_commit(), "machine": machine(), "chunk_chars": CHUNK, "families": {}}
    for family, count in counters(args.claude_tokenizer).items():
        coded = np.array([getattr(tokens.FAMILIES[family], f) for f in tokens.FEATURES])
        entry: dict[str, Any] = {"in_code": dict(zip(tokens.FEATURES, coded.tolist(), strict=True))}
        entry["in_code_errors_odd"] = evaluate(kinds, count, coded, 1)
        if not args.check:
            train = [t for texts in kinds.values() for t in texts[0::2]]
            w = fit(matrix(train), np.array([count(t) for t in train], dtype=float))
            entry["fitted"] = {f: round(float(v), 3) for f, v in zip(tokens.FEATURES, w, strict=True)}
            entry["fitted_errors_odd"] = evaluate(kinds, count, w, 1)
        result["families"][family] = entry
        print(f"\n{family}: weights in code" + ("" if args.check else f"; fitted {entry['fitted']}"))
        print(
            f"{'w':6} {'kind':6} {'chunks':>6} {'chars/tok':>9} {'total%':>7} {'mean|%|':>8} {'p90|%|':>7} {'chars/4 total%':>15}"
        )
        rows = [("code", k, r) for k, r in entry["in_code_errors_odd"].items()]
        rows += [("fitted", k, r) for k, r in entry.get("fitted_errors_odd", {}).items()]
        for which, kind, row in rows:
            print(
                f"{which:6} {kind:6} {row['chunks']:>6} {row['chars_per_token']:>9} {row['total_error_pct']:>7} "
                f"{row['mean_abs_error_pct']:>8} {row['p90_abs_error_pct']:>7} {row['chars4_total_error_pct']:>15}"
            )
    if args.json:
        save_json(Path(args.json), result)


if __name__ == "__main__":
    main()
