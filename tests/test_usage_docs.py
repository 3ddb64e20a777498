"""docs/usage.md's benchmark tables are the committed result files' own: regenerated, nothing changes."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "usage.md"


@pytest.mark.parametrize(("bench", "result"), [("fold_bench", "fold.json"), ("usage_bench", "usage.json")])
def test_the_docs_table_is_the_one_the_committed_results_generate(bench: str, result: str) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        module = importlib.import_module(bench)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    out = json.loads((ROOT / "bench" / "results" / result).read_text(encoding="utf-8"))
    block = "\n".join([module.DOCS_START, *module.table_lines(out), module.DOCS_END])
    assert block in DOCS.read_text(encoding="utf-8"), (
        f"run: python bench/{bench}.py --from-json ... --docs docs/usage.md"
    )
