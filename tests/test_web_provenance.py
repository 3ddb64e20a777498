"""The viewer's history-to-code pages and its reading aids, server side, on both backends: search with
a count, pages, session groups and addresses; the one short-id rule; Markdown rendered safely;
readable tool calls; the timeline and the all-time overview; the file view; export; resume."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from conftest import claude_line  # noqa: E402
from pi_memory.frontends.web.app import Settings, create_app  # noqa: E402
from provenance_world import World, pi_session, scenario  # noqa: E402


def client(archive: Any) -> TestClient:
    return TestClient(create_app(archive, Settings()), raise_server_exceptions=False)


@pytest.fixture
def web(imported: Any) -> Iterator[TestClient]:
    with client(imported) as c:
        yield c


def test_a_search_says_how_many_results_and_pages_them_by_session(web: TestClient) -> None:
    first = web.get("/search?q=the&limit=5")
    count = re.search(r'<p class="count quiet">1–5 of (\d+)\+? messages', first.text)
    assert count and int(count.group(1)) > 10
    assert 'rel="next"' in first.text and "page=2" in first.text
    second = web.get("/search?q=the&limit=5&page=2")
    assert "6–10 of" in second.text and 'rel="prev"' in second.text
    groups = re.findall(r'<li class="session-group">', second.text)
    hits = re.findall(r'<li class="hit">', second.text)
    assert 1 <= len(groups) <= len(hits) == 5
    assert re.search(r'<a class="addr" href="/read/r\d+/m\d+">r\d+/m\d+</a>', second.text)


def test_a_page_past_the_last_shows_the_last(web: TestClient) -> None:
    page = web.get("/search?q=README&page=99")
    assert page.status_code == 200 and "<b>" not in page.text.split('class="pager pages"')[-1][:0]
    assert web.get("/search?q=README&page=0").status_code == 400


def test_every_page_shows_a_session_by_the_last_8_characters_of_its_id(web: TestClient, imported: Any) -> None:
    sid = imported.sessions()[0].id
    pages = [web.get(u).text for u in ("/search?q=the", "/search?track=sessions", "/search?q=README&track=runs", "/")]
    shown = {m for html in pages for m in re.findall(r"session ([0-9a-z-]{8})\b", html)}
    assert shown and all(any(s.id.endswith(m) for s in imported.sessions(limit=100)) for m in shown)
    assert f"session {sid[-8:]}" in web.get(f"/session/{sid}").text
    assert f"session {sid[:8]}<" not in "".join(pages)


def test_markdown_is_rendered_with_code_blocks_and_every_tag_escaped(archive: Any) -> None:
    archive.ensure_session("md-session-0001", "/home/dev/md")
    text = "**Fixed** it:\n\n```python\nprint('<b>hi</b>')\n```\n\n<script>alert(1)</script> [x](javascript:alert(1))"
    msg = archive.capture_message("md-session-0001", {"role": "assistant", "content": [{"type": "text", "text": text}],
                                                       "stopReason": "stop", "timestamp": 1_796_000_000_000})  # fmt: skip
    with client(archive) as c:
        html = c.get(f"/session/md-session-0001?at={msg}").text
    assert "<strong>Fixed</strong>" in html and '<pre><code class="language-python">' in html
    assert "print(&#x27;&lt;b&gt;hi&lt;/b&gt;&#x27;)" in html or "print('&lt;b&gt;hi&lt;/b&gt;')" in html
    assert "<script>alert" not in html and "&lt;script&gt;" in html and 'href="javascript' not in html


def test_a_tool_call_on_the_session_page_shows_its_arguments_without_escapes(archive: Any) -> None:
    archive.ensure_session("tool-session-0001", "/home/dev/tools")
    call = {"type": "toolCall", "id": "c1", "name": "edit",
            "arguments": {"path": "a.py", "edits": [{"oldText": "def f():\n    pass\n", "newText": "def f():\n    return 1\n"}]}}  # fmt: skip
    archive.capture_message(
        "tool-session-0001", {"role": "assistant", "content": [call], "stopReason": "toolUse", "timestamp": 1}
    )
    with client(archive) as c:
        html = c.get("/session/tool-session-0001").text
    body = re.search(r'<details class="tool"><summary>→ edit</summary><pre class="body">(.*?)</pre>', html, re.S)
    assert body is not None
    assert "\\n" not in body.group(1) and "edits[0].newText:\ndef f():\n    return 1" in body.group(1)


def test_the_timeline_stacks_every_day_by_agent_and_a_day_lists_its_runs(archive: Any) -> None:
    archive.import_paths([Path(__file__).parent / "data" / "pi"])
    old = claude_session_long_ago(archive)
    with client(archive) as c:
        page = c.get("/timeline")
        assert page.status_code == 200
        assert 'class="bar agent-claude"' in page.text and 'class="bar agent-pi"' in page.text
        day = re.search(r'href="/timeline\?day=(2025-0[0-9]-\d\d)#day"', page.text)
        assert day is not None
        listed = c.get(f"/timeline?day={day.group(1)}")
        assert "2 runs" in listed.text and f"session {old[-8:]}" in listed.text
        only_pi = c.get("/timeline?agent=pi").text
        assert "agent-claude" not in only_pi.split("<svg", 1)[1] and c.get("/timeline?day=someday").status_code == 400
        # the overview's per-agent chart counts all time: Claude work a year before the window shows
        overview = c.get("/").text
        assert re.search(r'<text class="label"[^>]*>claude</text>', overview)


def claude_session_long_ago(archive: Any, tmp: Path | None = None) -> str:
    """A Claude Code session of two runs, in 2025 (months before the pi fixtures)."""
    import tempfile

    sid = "c1a0de00-1111-4000-8000-00000000abcd"
    folder = Path(tempfile.mkdtemp())
    lines = [
        claude_line("u1", "user", "first ask of long ago", session=sid, cwd="/w/old", timestamp="2025-03-04T10:00:00Z"),
        claude_line(
            "a1",
            "assistant",
            [{"type": "text", "text": "done"}],
            session=sid,
            cwd="/w/old",
            timestamp="2025-03-04T10:00:05Z",
            msg_id="m1",
        ),  # fmt: skip
        claude_line("u2", "user", "second ask", session=sid, cwd="/w/old", timestamp="2025-03-04T11:00:00Z"),
        claude_line(
            "a2",
            "assistant",
            [{"type": "text", "text": "done too"}],
            session=sid,
            cwd="/w/old",
            timestamp="2025-03-04T11:00:05Z",
            msg_id="m2",
        ),  # fmt: skip
    ]
    (folder / f"{sid}.jsonl").write_bytes(b"".join(lines))
    archive.import_paths([folder / f"{sid}.jsonl"], agent="claude")
    return sid


def test_the_file_view_shows_each_line_with_the_run_that_wrote_it(archive: Any, tmp_path: Path) -> None:
    world = World(tmp_path / "repo")
    scenario(world)
    archive.import_paths([pi_session(world, tmp_path)])
    path = world.root / "app/config.py"
    with client(archive) as c:
        page = c.get(f"/file?path={path}")
        assert page.status_code == 200 and str(path) in page.text
        rows = re.findall(r'<tr class="shade-(\d)" id="L(\d+)">', page.text)
        assert len(rows) == 10 and rows[0][0] == "0"  # the first line was typed by hand
        assert re.search(r'<td class="who"><a href="/read/r1/m\d+"', page.text)
        assert "Write the config loader" in page.text  # the runs, with what the user asked
        run = c.get("/read/r3").text
        assert f'href="/file?path={path}"' in run
        missing = c.get("/file?path=/etc/passwd")
        assert (
            missing.status_code == 404 and "no archived session changed" in missing.text and "root:" not in missing.text
        )
        assert c.get("/file?path=relative/x.py").status_code == 400


def test_a_session_page_offers_resume_and_export(archive: Any, tmp_path: Path) -> None:
    world = World(tmp_path / "repo")
    scenario(world)
    session = pi_session(world, tmp_path)
    archive.import_paths([session])
    sid = archive.sessions()[0].id
    with client(archive) as c:
        page = c.get(f"/session/{sid}").text
        assert f"pi --session {session}" in page and f'href="/export/{sid}?format=html"' in page
        download = c.get(f"/export/{sid}?format=html")
        assert download.status_code == 200 and "attachment" in download.headers["content-disposition"]
        assert download.text.startswith("<!doctype html>") and "<script" not in download.text
        assert c.get(f"/export/{sid}?format=pdf").status_code == 400
        assert c.get("/export/r3?format=md").text.startswith("# ")
