"""Every page of the viewer in a real headless Chromium (Debian's, through Playwright), screenshot and all.

The server is started as a user starts it (`python -m pi_memory serve`) on the browser tests' archive
with a history of edits in a git repository on top (`provenance_world.build_viewer_archive`). Each page
must load without a script error, show what it is for, and photograph (the same shots
`scripts/web_screenshots.py` writes to docs/screenshots); then the keyboard shortcut, a click on the
timeline, the file view's links, and an exported HTML file opened from disk with no network at all.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_memory import Archive
from provenance_world import build_viewer_archive
from web_fixture import CHROMIUM, CHROMIUM_ARGS, running_server

pytest.importorskip("starlette")
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str], Path]]:
    work = tmp_path_factory.mktemp("viewer")
    found = build_viewer_archive(work / "archive.db", work)
    with running_server(work / "archive.db") as url:
        yield url, found, work


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    profile = tempfile.mkdtemp(prefix="pi-memory-chromium-")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1200, "height": 820},
        )
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    tab = browser.new_page()
    tab.errors = []
    tab.on("pageerror", lambda exc: tab.errors.append(str(exc)))
    tab.on("console", lambda msg: tab.errors.append(msg.text) if msg.type == "error" else None)
    yield tab
    tab.close()


def pages(found: dict[str, str], archive: Path) -> list[tuple[str, str, str]]:
    """(name, path, a text the page must show) of every page of the viewer."""
    with Archive.open(archive) as a:
        hit = a.search("zcat", limit=1)[0]
        run = a.changed_files(found["repo_session"]).files[0].edits[-1].run
    return [
        ("overview", "/", "Sessions per agent"),
        ("search-en", "/search?q=README+lines", "of this page"),
        ("search-zh", "/search?q=响应式+购物车", "响应式"),
        ("search-runs", "/search?q=SSE+断流&track=runs", "runs"),
        ("sessions", "/search?track=sessions", "Recent sessions"),
        ("session", f"/session/{hit.session_id}?at={hit.msg_id}#m{hit.msg_id}", "resume:"),
        ("session-markdown", f"/session/{found['claude_session']}", "TOML"),
        ("run", f"/read/{run}", "Files this run changed"),
        ("timeline", "/timeline", "Click a day"),
        ("timeline-day", f"/timeline?day={found['claude_day']}#day", "把配置加载改成 TOML"),
        ("file", f"/file?path={found['file']}", "not written by an archived session"),
        ("memory", "/memory", "Long-term memory"),
        ("review", "/review", "Review"),
    ]


def test_every_page_loads_in_chromium_without_a_script_error_and_photographs(
    page: Any, site: tuple[str, dict[str, str], Path], tmp_path: Path
) -> None:
    url, found, work = site
    for name, path, says in pages(found, work / "archive.db"):
        response = page.goto(url + path)
        page.wait_for_load_state("networkidle")
        assert response.status == 200, name
        assert says in page.inner_text("main"), name
        shot = tmp_path / f"{name}.png"
        page.screenshot(path=str(shot), full_page=False)
        assert shot.stat().st_size > 5_000, name
    assert page.errors == []


def test_slash_focuses_the_search_box_and_opens_search_from_any_page(
    page: Any, site: tuple[str, dict[str, str], Path]
) -> None:
    url, found, _work = site
    page.goto(f"{url}/search?q=README")
    page.locator("main").click()
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.id") != "q"
    page.goto(f"{url}/timeline")
    page.keyboard.press("/")
    page.wait_for_url(f"{url}/search")
    page.keyboard.press("Control+k")
    assert page.evaluate("document.activeElement.id") == "q"


def test_a_click_on_a_day_of_the_timeline_lists_its_runs(page: Any, site: tuple[str, dict[str, str], Path]) -> None:
    url, found, _work = site
    page.goto(f"{url}/timeline")
    page.locator(f'svg a[href^="/timeline?day={found["claude_day"]}"]').first.click()
    page.wait_for_url(f"**day={found['claude_day']}**")
    assert "把配置加载改成 TOML" in page.inner_text("#day")


def test_the_file_view_links_each_line_to_the_message_that_wrote_it(
    page: Any, site: tuple[str, dict[str, str], Path]
) -> None:
    url, found, _work = site
    page.goto(f"{url}/file?path={found['file']}")
    assert page.locator("tr.shade-0").count() == 2  # the two lines typed by hand
    link = page.locator("td.who a").first
    address = link.inner_text()
    link.click()
    page.wait_for_url(f"**/read/{address}")
    assert "write" in page.inner_text("main")


def test_an_exported_html_file_opens_from_disk_with_nothing_loaded_from_elsewhere(
    page: Any, site: tuple[str, dict[str, str], Path], tmp_path: Path
) -> None:
    _url, found, work = site
    out = tmp_path / "session.html"
    with Archive.open(work / "archive.db") as archive:
        out.write_text(archive.export(found["repo_session"], fmt="html"), encoding="utf-8")
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(out.as_uri())
    assert requested == [out.as_uri()]
    assert "evidence of what was said and done" in page.inner_text("body")
    tool = page.locator("details").first
    assert not tool.locator("pre").is_visible()
    tool.locator("summary").click()
    assert "content:" in tool.locator("pre").inner_text() or "path:" in tool.locator("pre").inner_text()
    assert page.locator("script").count() == 0 and page.errors == []
