"""The web viewer in a real headless Chromium (Debian's), driven by Playwright, against the real server.

The server is started as a user starts it (`python -m pi_memory serve`) on a small
archive (`web_fixture.py`); the browser types, clicks and reads what a person sees.
Skipped, with the reason, when Chromium or Playwright is not installed (`.ci/run`
installs both).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_memory import Archive
from web_fixture import BROKEN_WS, CHROMIUM, CHROMIUM_ARGS, HOSTILE_SESSION, SOUND_WS, build_archive, running_server

pytest.importorskip("starlette")
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")


@pytest.fixture(scope="module")
def archive_info(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    db = tmp_path_factory.mktemp("web") / "archive.db"
    return db, build_archive(db)


@pytest.fixture(scope="module")
def server(archive_info: tuple[Path, dict[str, str]]) -> Iterator[str]:
    with running_server(archive_info[0], "--write") as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    profile = tempfile.mkdtemp(prefix="pi-memory-chromium-")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    tab = browser.new_page()
    dialogs: list[str] = []
    tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    tab.dialogs = dialogs
    yield tab
    tab.close()


def type_query(page: Any, server: str, query: str) -> list[str]:
    """Type into the search box as a person does; returns the marked words once the results came."""
    page.goto(f"{server}/search")
    page.locator("#q").press_sequentially(query, delay=20)
    page.wait_for_function("q => document.getElementById('results').dataset.query === q", arg="q=" + _quoted(query))
    return [m.inner_text() for m in page.locator("#results mark").all()]


def _quoted(query: str) -> str:
    from urllib.parse import quote_plus

    return quote_plus(query)


def test_an_english_search_typed_in_the_box_shows_the_hits_with_the_words_marked(page: Any, server: str) -> None:
    marked = type_query(page, server, "README")
    assert marked and {m.lower() for m in marked} == {"readme"}
    assert page.url.endswith("/search?q=README")  # the URL holds the query
    assert page.locator("#results li.hit").count() >= 1


def test_a_chinese_search_shows_the_hits_with_the_phrase_marked(page: Any, server: str) -> None:
    marked = type_query(page, server, "响应式")
    assert "响应式" in marked
    assert "Vue" in page.locator("#results").inner_text() or "reactive" in page.locator("#results").inner_text()


def test_a_shared_search_url_opens_with_its_results(page: Any, server: str) -> None:
    page.goto(f"{server}/search?q=SSE+%E6%96%AD%E6%B5%81&track=runs")
    assert page.locator("input[name=track][value=runs]").is_checked()
    assert {"SSE", "断流"} <= {m.inner_text() for m in page.locator("#results mark").all()}


def test_clicking_a_hit_opens_the_session_at_that_message(page: Any, server: str) -> None:
    type_query(page, server, "zcat")
    link = page.locator("#results li.hit a.title").first
    target = re.search(r"#(m\d+)$", link.get_attribute("href") or "")
    assert target is not None
    link.click()
    page.wait_for_url(re.compile(r"/session/.+\?at=\d+#m\d+$"))
    message = page.locator(f"article#{target.group(1)}")
    assert "target" in (message.get_attribute("class") or "")
    assert message.is_visible() and "zcat" in message.inner_text()
    assert page.evaluate(f"document.getElementById('{target.group(1)}').getBoundingClientRect().top") < 400


def test_a_script_in_an_archived_message_is_shown_as_text_and_never_runs(
    page: Any, server: str, archive_info: tuple[Path, dict[str, str]]
) -> None:
    msg = archive_info[1]["hostile_msg"]
    page.goto(f"{server}/session/{HOSTILE_SESSION}?at={msg}#m{msg}")
    shown = page.locator(f"article#m{msg} .body").inner_text()
    assert "<script>window.__pwned = 1;" in shown and '<img src=x onerror="window.__pwned = 2">' in shown
    type_query(page, server, "zebrafish")
    assert "<script>" in page.locator("#results").inner_text()
    assert page.evaluate("window.__pwned") is None and page.title() != "pwned" and page.dialogs == []
    assert page.locator("#results script, #results img").count() == 0


def test_forget_without_the_csrf_token_is_refused(
    page: Any, server: str, archive_info: tuple[Path, dict[str, str]]
) -> None:
    memory = archive_info[1]["memory"]
    page.goto(f"{server}/memory?ws={SOUND_WS}")
    status = page.evaluate(
        """async ([ws, ref]) => {
             const body = new URLSearchParams({ws, ref, confirm: "yes"});
             const r = await fetch("/memory/forget", {method: "POST", body});
             return [r.status, await r.text()];
           }""",
        [SOUND_WS, memory],
    )
    assert status[0] == 403 and "CSRF" in status[1]
    page.reload()
    assert page.locator(f"article#{memory}").is_visible()
    assert "status-active" in (page.locator(f"article#{memory}").get_attribute("class") or "")


def test_forget_with_its_confirmation_page_works(page: Any, server: str) -> None:
    page.goto(f"{server}/memory?ws={SOUND_WS}")
    before = page.locator("section.mem-group:has(h2:text-is('provisional')) article").count()
    page.locator("section.mem-group:has(h2:text-is('provisional')) a.action:text('forget…')").first.click()
    assert page.locator("h1").inner_text() == "Forget this memory?"
    page.locator("button.danger").click()
    page.wait_for_url(re.compile(r"/memory\?ws="))
    assert page.locator("section.mem-group:has(h2:text-is('provisional')) article").count() == before - 1


def test_the_memory_page_shows_a_broken_chain_as_broken(page: Any, server: str) -> None:
    page.goto(f"{server}/memory")
    row = page.locator("tr", has_text=BROKEN_WS)
    assert "BROKEN at event 2" in row.inner_text()
    assert "verified" in page.locator("tr", has_text=SOUND_WS).inner_text()
    page.goto(f"{server}/memory?ws={BROKEN_WS}")
    alert = page.locator(".chain-broken")
    assert alert.is_visible() and "BROKEN at event 2" in alert.inner_text()
    assert page.locator("a.action").count() == 0  # a broken log takes no writes


def test_with_a_token_the_browser_is_asked_for_it_before_any_page(
    browser: Any, archive_info: tuple[Path, dict[str, str]]
) -> None:
    with running_server(archive_info[0], "--token", "correct-horse-battery") as url:
        tab = browser.new_page()
        tab.goto(f"{url}/search?q=README")
        assert "/login" in tab.url and tab.locator("input[name=token]").is_visible()
        tab.fill("input[name=token]", "wrong-token-here")
        tab.click("button[type=submit]")
        assert "That token is wrong" in tab.locator("main").inner_text()
        tab.fill("input[name=token]", "correct-horse-battery")
        tab.click("button[type=submit]")
        tab.wait_for_url(re.compile(r"/search\?q=README$"))
        assert tab.locator("#results mark").count() >= 1
        tab.close()


def test_the_review_page_draws_the_ledger_as_a_chart(browser: Any, tmp_path: Path) -> None:
    db = tmp_path / "review.db"
    with Archive.open(db) as archive:
        archive.import_paths([Path(__file__).parent / "data" / "review"])
        archive.memory_remember(
            "/home/dev/shop", "Run make fixtures before pytest tests/test_cart.py: stale price fixtures", kind="fact"
        )
    tab = browser.new_page()
    try:
        with running_server(db) as url:
            tab.goto(f"{url}/review?project=/home/dev/shop")
            assert "python -m pytest tests/test_cart.py -q" in tab.inner_text("main")
            chart = tab.locator("section.ledger svg").first
            assert chart.is_visible() and tab.locator("section.ledger svg rect.bar").count() >= 2
            text = chart.text_content() or ""
            assert "/100 (" in text and " runs)" in text and "no runs" in text  # written after every run
    finally:
        tab.close()


def test_the_usage_page_plots_tokens_dollars_and_cache_hits_per_day(page: Any, server: str) -> None:
    page.goto(f"{server}/")
    page.click("text=Usage")
    page.wait_for_selector("#usage-totals")
    for plot in ("tokens", "cost", "cache"):
        assert page.locator(f"#plot-{plot}").is_visible()
    assert page.locator("#plot-tokens rect.bar").count() >= 1
    assert page.locator("#plot-cache circle.dot").count() == page.locator("#plot-tokens rect.bar").count()
    # the fixture's sessions ran on a scripted model the price table does not know: never $0
    assert "$0" not in page.inner_text("#usage-cost")
    assert "not in the price table" in page.inner_text("#usage-unknown")
