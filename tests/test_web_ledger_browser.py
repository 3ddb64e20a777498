"""The context ledger page in a real headless Chromium (Debian's), against the real server.

A priced pi session (Claude Sonnet 4.5) with a fold record and pi-memory's own compaction is
imported, a memory injection recorded; the browser goes from the session page to its ledger
and from the usage page's session table to the same ledger, and reads what a person sees.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pi_memory import Archive
from test_usage import compaction_line, pi_session
from test_web_browser import browser, page  # noqa: F401  (the Chromium fixtures, and their skips)
from web_fixture import running_server

SESSION = "0a0b0c13-ledger"
REQUESTS = [(100, 10, 0, 9000, 0), (100, 10, 9000, 100, 0), (100, 10, 2000, 3000, 0), (100, 10, 5000, 50, 0)]


def fold_line() -> str:
    data = {"id": "f1", "kind": "stubs", "level": 0, "ts": 1772359290000, "trigger": "age"}
    data |= {"before_chars": 24000, "after_chars": 400, "before_tokens": 6000, "after_tokens": 100}
    return json.dumps(
        {
            "type": "custom",
            "customType": "pi-memory-fold",
            "id": "f0000001",
            "parentId": "a0000001",
            "timestamp": "2026-03-01T10:01:30.000Z",
            "data": data,
        }
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("ledger")
    path = folder / f"{SESSION}.jsonl"
    pi_session(path, "claude-sonnet-4-5", "anthropic", REQUESTS)
    lines = path.read_text().splitlines()
    lines.insert(5, fold_line())
    details = {"contextTokensBefore": 8000, "contextTokensAfter": 3000}
    lines.append(compaction_line("c0000001", "a0000003", "2026-03-01T10:04:00.000Z", "checkpoint", 5050,
                                 fromHook=True, details=details))  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    db = folder / "archive.db"
    with Archive.open(db) as a:
        a.import_paths([path])
        a.record_context_event(SESSION, "memory", "用户偏好：回答用中文。Prefer pytest -q.")
    with running_server(db) as url:
        yield url


def test_the_session_page_links_to_its_ledger_with_the_folds_savings_and_the_cache_around_it(
    page: Any,  # noqa: F811
    server: str,
) -> None:
    page.goto(f"{server}/session/{SESSION}")
    page.click("#ledger-link")
    page.wait_for_selector("#ledger-events")
    assert page.url.endswith(f"/usage/ledger/{SESSION}")
    fold = page.locator("#ledger-events tr.event-fold")
    assert fold.count() == 1
    cells = [c.inner_text() for c in fold.locator("td").all()]
    # 6,000 tokens down to 100 in each of the two requests after it; cache 98% before, 39% after
    assert cells[3] == "-5,900" and cells[4] == "2" and cells[5] == "-11,800"
    assert cells[6].startswith("−$") and cells[7] == "98% → 39%"
    assert page.locator("#ledger-events tr.event-memory").count() == 1
    assert page.locator("#ledger-events tr.event-compaction").count() == 1
    assert page.inner_text("#ledger-removed") == "11.8K" and page.inner_text("#ledger-saved").startswith("$")
    assert page.locator("#ledger-plot rect.bar.cached").count() == len(REQUESTS)
    assert page.locator("#ledger-plot line.mark-fold").count() == 1


def test_the_usage_pages_session_table_opens_the_same_ledger(page: Any, server: str) -> None:  # noqa: F811
    page.goto(f"{server}/usage")
    page.wait_for_selector("#usage-sessions")
    page.locator(f"#usage-sessions a[href='/usage/ledger/{SESSION}']").click()
    page.wait_for_selector("#ledger-totals")
    assert page.url.endswith(f"/usage/ledger/{SESSION}") and page.locator("tr.event-fold").count() == 1


def test_an_unknown_session_in_a_ledger_address_is_a_clear_404(page: Any, server: str) -> None:  # noqa: F811
    response = page.goto(f"{server}/usage/ledger/ffffffff-nope")
    assert response.status == 404
