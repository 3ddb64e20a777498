"""The web viewer, server side: every route through Starlette's test client, on both backends.

Pages are read as HTML text; what matters is what a person would see (hits marked,
hostile text escaped, one clear message for a bad request) and what the server
refuses (changes without --write, without the CSRF token, without the access token).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from conftest import python_cli  # noqa: E402
from pi_memory import Archive  # noqa: E402
from pi_memory.frontends.web.app import Settings, create_app

LONG_OUTPUT_SESSION = "01a2364c-a7f6-75cb-ba8a-42838165f27d"  # pi-0.73.1-long-output-en: a 23 KB tool output
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror=alert(1)>'


def client(archive: Any, **settings: Any) -> TestClient:
    return TestClient(create_app(archive, Settings(**settings)), raise_server_exceptions=False)


@pytest.fixture
def web(imported: Archive) -> Iterator[TestClient]:
    with client(imported) as c:
        yield c


def hostile_session(archive: Any) -> int:
    archive.ensure_session("hostile-session-0001", "/home/dev/evil", name="hostile " + HOSTILE)
    msg_id = archive.capture_message(
        "hostile-session-0001", {"role": "user", "content": "zebrafish " + HOSTILE, "timestamp": 1_760_000_000_000}
    )
    assert msg_id is not None
    return int(msg_id)


def marks(html: str) -> list[str]:
    return re.findall(r"<mark>(.*?)</mark>", html)


# --- overview -------------------------------------------------------------------------


def test_overview_shows_totals_plots_and_last_imports(web: TestClient, imported: Archive) -> None:
    page = web.get("/")
    assert page.status_code == 200
    stats = imported.stats()
    assert f"<b>{stats.messages:,}</b>" in page.text and "messages per day" in page.text
    assert page.text.count("<svg") == 3 and 'class="bar"' in page.text
    assert "vue-shop" in page.text  # a project bar
    assert "pi-0.73.1-long-output-en.jsonl" in page.text  # an import


def test_overview_days_must_be_a_number_in_range(web: TestClient) -> None:
    for bad in ("x", "0", "400"):
        page = web.get(f"/?days={bad}")
        assert page.status_code == 400 and "days must be" in page.text and "Traceback" not in page.text


# --- search ---------------------------------------------------------------------------


def test_an_english_search_marks_every_query_word_in_the_snippets(web: TestClient) -> None:
    page = web.get("/search?q=README+lines")
    assert page.status_code == 200
    found = {m.lower() for m in marks(page.text)}
    assert "readme" in found
    assert 'href="/session/01a2364c-d5a8-7716-9be0-0b674cbd69b4?at=' in page.text


def test_a_chinese_search_marks_the_chinese_phrase(web: TestClient) -> None:
    page = web.get("/search?q=响应式")
    assert page.status_code == 200
    assert "响应式" in marks(page.text)
    assert "No messages match" not in page.text


def test_a_mixed_search_marks_both_scripts(web: TestClient) -> None:
    found = set(marks(web.get("/search?q=SSE 断流").text))
    assert "SSE" in found and "断流" in found


def test_the_search_page_keeps_the_query_and_filters_in_its_form(web: TestClient) -> None:
    page = web.get("/search?q=cart&project=vue-shop&agent=pi&kind=user&since=2020-01-01&until=2099-01-01")
    assert page.status_code == 200
    assert 'value="cart"' in page.text and 'value="vue-shop"' in page.text
    assert '<option value="pi" selected>' in page.text and '<option value="user" selected>' in page.text
    assert 'value="2020-01-01"' in page.text and 'value="2099-01-01"' in page.text


def test_until_before_everything_finds_nothing(web: TestClient) -> None:
    page = web.get("/search?q=README&until=2000-01-01")
    assert "No messages match" in page.text and not marks(page.text)


def test_the_runs_track_lists_run_summaries_linking_to_the_run(web: TestClient) -> None:
    page = web.get("/search?q=README&track=runs")
    assert page.status_code == 200 and 'class="hit run-hit"' in page.text
    assert re.search(r'href="/read/r\d+"', page.text)


def test_the_sessions_track_lists_sessions_with_or_without_a_query(web: TestClient) -> None:
    listed = web.get("/search?track=sessions")
    assert "Recent sessions" in listed.text and "Faux test session" in listed.text
    found = web.get("/search?track=sessions&q=reactive")
    assert "Vue 购物车" in found.text and "matching messages" in found.text


def test_a_partial_search_is_only_the_results_fragment(web: TestClient) -> None:
    page = web.get("/search?q=README&partial=1")
    assert page.status_code == 200 and "<html" not in page.text and '<ol class="hits">' in page.text


def test_an_empty_search_explains_itself(web: TestClient) -> None:
    assert "Type to search" in web.get("/search").text


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("track=everything", "unknown track"),
        ("q=x&agent=gpt", "unknown agent"),
        ("q=x&kind=robot", "unknown kind"),
        ("q=x&since=yesterday", "bad date"),
        ("q=x&until=13/13/13", "bad date"),
        ("q=x&limit=0", "limit must be between"),
        ("q=x&limit=lots", "limit must be a whole number"),
        ("q=x&mode=fuzzy", "unknown mode"),
        ("q=x&mode=semantic", "semantic search is not available"),  # nothing embedded (or a team archive)
        ("q=" + "x" * 600, "too long"),
    ],
)
def test_bad_search_parameters_give_one_clear_message(web: TestClient, query: str, says: str) -> None:
    page = web.get(f"/search?{query}")
    assert page.status_code == 400
    assert says in page.text and "Traceback" not in page.text and "<h1>Bad request</h1>" in page.text


def test_a_bad_partial_search_answers_a_fragment_not_a_whole_page(web: TestClient) -> None:
    page = web.get("/search?q=x&since=nope&partial=1")
    assert page.status_code == 400 and "<html" not in page.text and "bad date" in page.text


# --- sessions, runs, detail reads ----------------------------------------------------------


def test_the_session_page_shows_header_run_cards_and_folded_tool_calls(web: TestClient) -> None:
    page = web.get(f"/session/{LONG_OUTPUT_SESSION}")
    assert page.status_code == 200
    assert "Why are requests slow?" in page.text and '<span class="agent">pi</span>' in page.text
    assert page.text.count('class="run-card') >= 2
    assert "zcat logs/app.log.1.gz" in page.text and '<span class="bad">exit 1</span>' in page.text
    assert '<details class="tool"><summary>→ bash</summary>' in page.text
    assert 'class="msg role-tool_error' in page.text


def test_a_session_opened_at_a_message_marks_it_as_the_target(web: TestClient, imported: Archive) -> None:
    hit = imported.search("README")[0]
    page = web.get(f"/session/{hit.session_id}?at={hit.msg_id}")
    assert f'id="m{hit.msg_id}"' in page.text
    assert re.search(rf'class="msg role-\w+ target" id="m{hit.msg_id}"', page.text)


def test_a_session_id_prefix_opens_the_session(web: TestClient) -> None:
    assert "Why are requests slow?" in web.get(f"/session/{LONG_OUTPUT_SESSION[:12]}").text


def test_a_long_session_is_paged_fifty_messages_at_a_time(archive: Any) -> None:
    archive.ensure_session("long-session-0001", "/home/dev/long")
    for i in range(120):
        archive.capture_message("long-session-0001", {"role": "user", "content": f"step {i}", "timestamp": 1000 + i})
    with client(archive) as c:
        first = c.get("/session/long-session-0001")
        assert first.text.count('<article class="msg') == 51 and "step 0<" in first.text and "later ▶" in first.text
        later = re.search(r'href="\?start=(\d+)">later', first.text)
        assert later is not None
        second = c.get(f"/session/long-session-0001?start={later.group(1)}")
        assert "step 100<" in second.text and "◀ earlier" in second.text
        last = c.get("/session/long-session-0001?last=1")
        assert "step 119<" in last.text and "later ▶" not in last.text


def test_a_long_tool_output_is_read_in_12_kb_pages_that_add_up_to_the_whole(web: TestClient, imported: Archive) -> None:
    addresses = imported.run_addresses(m.msg_id for m in imported.read(LONG_OUTPUT_SESSION, before=50).messages)
    address = next(a for a in addresses.values() if imported.read_address(a).total_chars > 20_000)
    first = web.get(f"/read/{address}")
    assert first.status_code == 200 and "next page ▶" in first.text
    offset = re.search(r"offset=(\d+)", first.text)
    assert offset is not None and 0 < int(offset.group(1)) <= 12 * 1024
    second = web.get(f"/read/{address}?offset={offset.group(1)}")
    assert second.status_code == 200 and "first page" in second.text
    raw = web.get(f"/read/{address}?raw=1")
    assert "verbatim source line" in raw.text and "&#34;toolResult&#34;" in raw.text


def test_a_run_page_lists_its_messages_with_links_into_the_session(web: TestClient, imported: Archive) -> None:
    run = imported.runs(session=LONG_OUTPUT_SESSION)[0]
    page = web.get(f"/read/{run.address}")
    assert page.status_code == 200 and f"Run {run.address}" in page.text
    assert f"/session/{LONG_OUTPUT_SESSION}?at=" in page.text


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/no/such/page", 404, "no such page"),
        ("/session/does-not-exist-at-all", 404, "no session matches"),
        ("/session/abc", 400, "too short"),
        ("/session/" + LONG_OUTPUT_SESSION + "?at=999999999", 404, "is not in session"),
        ("/session/" + LONG_OUTPUT_SESSION + "?at=x", 400, "at must be a whole number"),
        ("/read/r999999", 404, "r999999"),
        ("/read/banana", 400, "is not an address"),
        ("/read/r1/m999", 404, "has no message m999"),
        ("/read/r1/m1?offset=99999999", 400, "outside the text"),
        ("/memory/explode?ws=/x&ref=mem_1", 404, "no memory action"),
        ("/memory/forget", 400, "name the workspace"),
    ],
)
def test_unknown_things_and_bad_parameters_give_one_clear_message(
    web: TestClient, path: str, status: int, says: str
) -> None:
    page = web.get(path)
    assert page.status_code == status, page.text
    assert says.lower() in page.text.lower() and "Traceback" not in page.text


# --- hostile archived text ------------------------------------------------------------------


def test_archived_html_is_shown_as_text_everywhere(archive: Any) -> None:
    msg_id = hostile_session(archive)
    archive.memory_remember("/home/dev/evil", "remember " + HOSTILE)
    with client(archive) as c:
        pages = [
            c.get("/search?q=zebrafish").text,
            c.get("/search?track=sessions").text,
            c.get(f"/session/hostile-session-0001?at={msg_id}").text,
            c.get("/memory?ws=/home/dev/evil").text,
        ]
    for html in pages:
        assert "<script>document" not in html and "<img src=x" not in html
        assert "&lt;script&gt;" in html


def test_pages_forbid_inline_scripts_by_content_security_policy(web: TestClient) -> None:
    policy = web.get("/").headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy


# --- memory -----------------------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path) -> str:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return str(folder.resolve())


def test_the_memory_index_lists_workspaces_with_their_chain_status(archive: Any, ws: str) -> None:
    archive.memory_remember(ws, "use pnpm, not npm", kind="preference")
    with client(archive) as c:
        page = c.get("/memory")
    assert ws in page.text and "verified" in page.text


def test_a_workspace_page_groups_pinned_active_provisional_and_resolved(archive: Any, ws: str) -> None:
    archive.memory_remember(ws, "always run the linter", kind="preference", pin=True)
    archive.memory_remember(ws, "the API lives in src/api", kind="fact")
    archive.memory_propose(ws, "tests live in tests/", kind="fact")
    gone = archive.memory_remember(ws, "old fact", kind="fact").record.id
    archive.memory_forget(ws, gone)
    with client(archive) as c:
        page = c.get(f"/memory?ws={ws}").text
    sections = dict(re.findall(r"<h2>(\w+) <small>\((\d+)\)</small></h2>", page))
    assert sections == {"pinned": "1", "active": "1", "provisional": "1", "resolved": "1", "superseded": "0"}
    assert "Chain verified" in page and "Read-only" in page and "forget…" not in page


def test_a_read_only_viewer_refuses_every_change(archive: Any, ws: str) -> None:
    mem = archive.memory_remember(ws, "keep me", kind="fact").record.id
    with client(archive) as c:
        confirm = c.get(f"/memory/forget?ws={ws}&ref={mem}")
        assert "read-only" in confirm.text and 'name="csrf"' not in confirm.text
        refused = c.post("/memory/forget", data={"ws": ws, "ref": mem, "confirm": "yes", "csrf": "anything"})
    assert refused.status_code == 403 and "read-only" in refused.text
    assert archive.memory_get(ws, mem).status == "active"


def test_forget_needs_the_csrf_token_and_a_confirmation(archive: Any, ws: str) -> None:
    mem = archive.memory_remember(ws, "forget me later", kind="fact").record.id
    with client(archive, write=True) as c:
        page = c.get(f"/memory?ws={ws}").text
        assert f"/memory/forget?ws={ws}&amp;ref={mem}" in page
        confirm = c.get(f"/memory/forget?ws={ws}&ref={mem}").text
        token = re.search(r'name="csrf" value="([^"]+)"', confirm)
        assert token is not None and "Yes, forget it" in confirm
        without = c.post("/memory/forget", data={"ws": ws, "ref": mem, "confirm": "yes"})
        wrong = c.post("/memory/forget", data={"ws": ws, "ref": mem, "confirm": "yes", "csrf": "guess"})
        unconfirmed = c.post("/memory/forget", data={"ws": ws, "ref": mem, "csrf": token.group(1)})
        assert (without.status_code, wrong.status_code, unconfirmed.status_code) == (403, 403, 400)
        assert "CSRF" in without.text and archive.memory_get(ws, mem).status == "active"
        done = c.post(
            "/memory/forget",
            data={"ws": ws, "ref": mem, "confirm": "yes", "csrf": token.group(1)},
            follow_redirects=False,
        )
    assert done.status_code == 303 and done.headers["location"].startswith("/memory?ws=")
    assert archive.memory_get(ws, mem).status == "resolved"


def test_confirming_a_proposal_makes_it_authoritative(archive: Any, ws: str) -> None:
    mem = archive.memory_propose(ws, "the build uses make", kind="fact").record.id
    with client(archive, write=True) as c:
        token = re.search(r'name="csrf" value="([^"]+)"', c.get(f"/memory/confirm?ws={ws}&ref={mem}").text)
        assert token is not None
        c.post("/memory/confirm", data={"ws": ws, "ref": mem, "confirm": "yes", "csrf": token.group(1)})
    record = archive.memory_get(ws, mem)
    assert record.confirmed and record.status == "active"


def test_an_unknown_memory_is_one_clear_message(archive: Any, ws: str) -> None:
    archive.memory_remember(ws, "something", kind="fact")
    with client(archive, write=True) as c:
        page = c.get(f"/memory/forget?ws={ws}&ref=mem_nothere")
    assert page.status_code in (400, 404) and "Traceback" not in page.text


@pytest.mark.sqlite_only("tampers with the file directly")
def test_a_broken_chain_is_shown_as_broken(archive: Any, ws: str, archive_target: str) -> None:
    for i in range(3):
        archive.memory_remember(ws, f"memory number {i}", kind="fact")
    tamper_second_event(archive_target)
    with client(archive, write=True) as c:
        index = c.get("/memory").text
        page = c.get(f"/memory?ws={ws}").text
    assert "BROKEN at event 2" in index
    assert "Chain BROKEN at event 2" in page and "first 1 of 3 events are trusted" in page
    assert "forget…" not in page  # a broken log takes no writes until it is repaired


def tamper_second_event(db: str) -> None:
    import json

    import apsw

    conn = apsw.Connection(db)
    conn.execute("DROP TRIGGER IF EXISTS memory_event_no_update")
    ((event,),) = list(conn.execute("SELECT event FROM memory_event WHERE seq=2"))
    changed = json.loads(str(event))
    changed["body"] = "something else"
    conn.execute("UPDATE memory_event SET event=? WHERE seq=2", (json.dumps(changed),))
    conn.close()


# --- access -------------------------------------------------------------------------------


def test_with_a_token_every_page_asks_for_it_first(imported: Archive) -> None:
    with client(imported, token="s3cret-token") as c:
        asked = c.get("/search?q=README", follow_redirects=False)
        assert asked.status_code == 303 and asked.headers["location"].startswith("/login?next=")
        login = c.get(asked.headers["location"])
        assert 'type="password" name="token"' in login.text
        wrong = c.post("/login?next=/search", data={"token": "guess"})
        assert wrong.status_code == 401 and "wrong" in wrong.text
        right = c.post("/login?next=/search%3Fq%3DREADME", data={"token": "s3cret-token"}, follow_redirects=False)
        assert right.status_code == 303 and right.headers["location"] == "/search?q=README"
        assert "httponly" in right.headers["set-cookie"].lower()
        assert c.get("/search?q=README").status_code == 200


def test_a_login_never_redirects_to_another_site(imported: Archive) -> None:
    with client(imported, token="s3cret-token") as c:
        answer = c.post("/login?next=//evil.example/x", data={"token": "s3cret-token"}, follow_redirects=False)
    assert answer.headers["location"] == "/"


def test_a_loopback_server_answers_only_to_its_own_host_names(imported: Archive) -> None:
    with client(imported, allowed_hosts={"127.0.0.1:8765"}) as c:
        assert c.get("/", headers={"host": "127.0.0.1:8765"}).status_code == 200
        assert c.get("/", headers={"host": "rebound.example:8765"}).status_code == 421


def test_serve_refuses_a_public_address_without_a_token() -> None:
    done = subprocess.run([*python_cli(), "serve", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "needs --token" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# --- review ---------------------------------------------------------------------------

REVIEW_DATA = Path(__file__).parent / "data" / "review"
REVIEW_WS = "/home/dev/shop"  # the review fixtures' project (see tests/test_review.py)
REVIEW_COMMAND = "bash: python -m pytest tests/test_cart.py -q"
REVIEW_MEMORY_TS = 1_793_750_400_000  # 2026-11-04: between the second and the third session


@pytest.fixture
def reviewed(archive: Any) -> Any:
    archive.import_paths([REVIEW_DATA])
    archive.memory_remember(
        REVIEW_WS,
        "Run make fixtures before pytest tests/test_cart.py: the cart test fails on stale price fixtures",
        kind="constraint",
        ts=REVIEW_MEMORY_TS,
    )
    memory_id = archive.review(cwd=REVIEW_WS).ledger[0]["memory_id"]  # suggested by shared words; now linked
    archive.review_link(memory_id, REVIEW_COMMAND, cwd=REVIEW_WS)
    return archive


def test_the_review_page_shows_the_recurring_failure_and_the_ledger_as_a_chart(reviewed: Any) -> None:
    report = reviewed.review(project=REVIEW_WS, cwd=REVIEW_WS)
    failure = report.failures[0]
    with client(reviewed) as c:
        page = c.get("/review", params={"project": REVIEW_WS})
    assert page.status_code == 200 and 'href="/review" class="here"' in page.text
    html = page.text
    assert "python -m pytest tests/test_cart.py -q" in html and "<td>5</td>" in html
    for address in failure["evidence"] + failure["fixed_in"]:
        assert f'<a href="/read/{address}">{address}</a>' in html
    assert "src/cart.py" in html and "tests/fixtures/prices.json" in html  # both corrections
    assert "failed 5 times in 3 sessions" in html  # the candidate rule
    ledger = html[html.index("<h2>Ledger") : html.index("<h2>Recurring")]
    assert ledger.count("<svg") == 1 and ledger.count('class="bar"') == 2
    row = report.ledger[0]
    assert row["link"] == "linked" and (row["after"]["hits"], row["after"]["runs"]) == (1, 2)
    for side in (row["before"], row["after"]):  # the rate with its counts and window size, as text
        assert f"{side['rate']:g}/100 ({side['hits']} of {side['runs']} runs)" in ledger
    assert "50/100 (1 of 2 runs)" in ledger and "fewer" in ledger


def test_the_review_page_filters_by_window_and_agent(reviewed: Any) -> None:
    with client(reviewed) as c:
        early = c.get("/review?until=2026-11-01&ws=" + REVIEW_WS).text
        none = c.get("/review?agent=codex&ws=" + REVIEW_WS).text
    assert "2 runs in" in early and "<td>2</td>" in early
    assert "0 runs in 0 sessions" in none and "None." in none


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("since=yesterday-ish", "bad date"),
        ("until=2026-13-45", "bad date"),
        ("agent=gpt", "unknown agent"),
        ("min_count=0", "min_count must be between"),
        ("min_count=x", "min_count must be a whole number"),
    ],
)
def test_bad_review_parameters_give_one_clear_message(reviewed: Any, query: str, says: str) -> None:
    with client(reviewed) as c:
        page = c.get("/review?" + query)
    assert page.status_code == 400 and says in page.text and "Traceback" not in page.text


def test_archived_html_in_a_finding_is_shown_as_text_on_the_review_page(reviewed: Any) -> None:
    reviewed.ensure_session("hostile-review-0001", REVIEW_WS, name="hostile")
    for i, text in enumerate(["please edit src/cart.py", "Don't do that, revert it " + HOSTILE]):
        reviewed.capture_message(
            "hostile-review-0001", {"role": "user", "content": text, "timestamp": 1_793_900_000_000 + i * 60_000}
        )
    with client(reviewed) as c:
        html = c.get("/review?min_count=1&ws=" + REVIEW_WS).text
    assert "&lt;script&gt;" in html
    assert "<script>document" not in html and "<img src=x" not in html
