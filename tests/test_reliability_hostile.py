"""Hostile input through every front end: nested JSON, huge and out-of-range ids, over-long queries,
terminal escape sequences, lone surrogates, FIFOs and unusable paths.

Each is answered with one clear line (an error response, a 400, a tool error, exit 1 or 2) and
nothing good is lost: the lines, files and requests after the bad one are read as ever.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from conftest import python_cli
from pi_memory import Archive
from pi_memory.core import ids, jsonline, outward
from pi_memory.errors import BadInput
from pi_memory.frontends.bridge.server import serve
from pi_memory.frontends.cli.main import cli
from pi_memory.frontends.mcp_server import build_server
from reliability import env, nested_line, pi_lines

HUGE = str(2**70)
LONG_ID = "a" * 100_000
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGVsbG8=\x07\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ \x9b31m"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# --- the one JSON decoder ----------------------------------------------------------------


def test_json_nested_deeper_than_the_limit_is_refused_before_the_decoder_recurses() -> None:
    with pytest.raises(jsonline.TooDeep, match="nested deeper than 100 levels"):
        jsonline.loads("[" * 1000 + "]" * 1000)
    with pytest.raises(jsonline.TooDeep):
        jsonline.loads("[" * 100_000)  # unclosed: still refused, never a RecursionError
    assert jsonline.loads("[" * 100 + "]" * 100) is not None
    assert jsonline.loads(json.dumps({"a": "[" * 5000})) == {"a": "[" * 5000}  # brackets in strings are text


def test_json_lone_surrogate_escapes_read_as_replacement_characters_and_pairs_stay() -> None:
    assert jsonline.loads(r'"a\ud800b"') == "a\ufffdb"
    assert jsonline.loads(r'"\udc00"') == "\ufffd"
    assert jsonline.loads(r'"\ud83d\ude00"') == "😀"
    assert jsonline.loads(r'"\\ud800"') == "\\ud800"  # an escaped backslash, then text
    assert jsonline.loads(r'["\u00e9", "\uDBFF"]') == ["é", "\ufffd"]


def test_json_errors_are_value_errors_saying_what_was_wrong() -> None:
    with pytest.raises(ValueError, match=r"not JSON \(Expecting value at column 1\)"):
        jsonline.loads("nope")
    with pytest.raises(ValueError):
        jsonline.loads(b"\xff\xfe")


# --- the one id parser ---------------------------------------------------------------------


def test_ids_in_range_are_read_and_others_refused_in_one_line() -> None:
    assert ids.address("r12/m3") == ids.Address(12, 3) and ids.run_id(" R7 ") == 7
    for bad, says in [
        ("r" + HUGE, "run id '1180591620717411303424' is out of range"),
        ("r1/m" + HUGE, "message position '1180591620717411303424' is out of range"),
        ("r1/m0", "message positions start at 1"),
        ("r١٢", "is not an address"),  # Arabic-Indic digits are not ids
        ("r" + "9" * 1_000_000, "is out of range"),  # never converted: a million digits
    ]:
        with pytest.raises(BadInput, match=says):
            ids.address(bad)
    with pytest.raises(BadInput, match="message id 1180591620717411303424 is out of range"):
        ids.number(2**70, "message id")
    with pytest.raises(BadInput, match=r"session id 'a{40}'… \(100000 characters\) is too long"):
        ids.reference(LONG_ID, "session id")
    with pytest.raises(BadInput, match="the query is 1001 characters long: at most 1000"):
        ids.query("x" * 1001)


# --- the one output sanitizer ----------------------------------------------------------------


def test_terminal_output_shows_control_characters_as_escapes_and_keeps_lines_and_tabs() -> None:
    shown = outward.for_terminal(ESCAPES + "\nline\ttab\r\nnext \u202egnp.exe \ud800")
    assert not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) < 0xA0 for c in shown)
    assert "\\u001b]0;pwned\\u0007" in shown and "\\u009b31m" in shown and "\\u202e" in shown
    assert "\nline\ttab\nnext" in shown and "\\ud800" in shown
    assert json.loads(outward.for_terminal(json.dumps({"t": ESCAPES}, ensure_ascii=False))) == {"t": ESCAPES}


# --- session files: nested lines, FIFOs, unusable paths --------------------------------------


def _three_files(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.jsonl").write_bytes(b"".join(pi_lines("sess-a-000001", ["alpha one", "alpha two"])))
    lines = pi_lines("sess-b-000001", ["beta one", "beta two", "beta three"])
    (folder / "b.jsonl").write_bytes(b"".join([*lines[:2], nested_line(), *lines[2:]]))
    (folder / "c.jsonl").write_bytes(b"".join(pi_lines("sess-c-000001", ["gamma one"])))
    return folder


def test_a_line_nested_1000_deep_is_skipped_and_reported_and_every_other_line_and_file_is_imported(
    tmp_path: Path, db_path: Path
) -> None:
    folder = _three_files(tmp_path / "s")
    for again in ([], ["--force"]):  # and again on a later run: nothing stops at that file
        code, out, err = run("import", str(folder), "--json", *again)
        report = json.loads(out)
        assert code == 1 and report["failed"] == [str(folder / "b.jsonl")]
        assert report["errors"] == [
            {"path": str(folder / "b.jsonl"), "line": 3, "error": "nested deeper than 100 levels"}
        ]
    with Archive.open(db_path) as archive:
        assert archive.stats().messages == 6 and archive.stats().sessions == 3
        assert archive.search("gamma")[0].session_id == "sess-c-000001"


def test_watch_reads_past_a_nested_line_and_goes_on_after_a_file_that_cannot_be_read(
    tmp_path: Path, db_path: Path
) -> None:
    from pi_memory.frontends.watch import Watcher

    folder = _three_files(tmp_path / "s")
    os.mkfifo(folder / "fifo.jsonl")
    seen: list[str] = []
    with Archive.open(db_path) as archive:
        watcher = Watcher(archive.follower(), [folder], seen.append)
        for name in ("b.jsonl", "fifo.jsonl", "a.jsonl"):  # a FIFO would block a reader forever
            watcher.handle(folder / name, "sync")
        assert archive.stats().messages == 5
    assert set(watcher.failed) == {str(folder / "b.jsonl"), str(folder / "fifo.jsonl")}
    assert "not a regular file" in watcher.failed[str(folder / "fifo.jsonl")]
    assert any("b.jsonl:3: nested deeper than 100 levels" in line for line in seen)


def test_watch_survives_a_defect_while_reading_one_file(tmp_path: Path, db_path: Path, monkeypatch) -> None:
    from pi_memory.frontends.watch import Watcher

    folder = _three_files(tmp_path / "s")
    seen: list[str] = []
    with Archive.open(db_path) as archive:
        follower = archive.follower()
        sync = follower.sync

        def defective(path: Path) -> Any:
            if path.name == "a.jsonl":
                raise TypeError("a parser's defect")
            return sync(path)

        monkeypatch.setattr(follower, "sync", defective)
        watcher = Watcher(follower, [folder], seen.append)
        watcher.handle(folder / "a.jsonl", "sync")
        watcher.handle(folder / "c.jsonl", "sync")
        assert archive.search("gamma")
    assert watcher.failed == {str(folder / "a.jsonl"): "cannot archive: TypeError: a parser's defect"}


def test_import_skips_fifos_missing_and_unusable_paths_with_an_error_each_and_imports_the_rest(
    tmp_path: Path, isolated_home: Path, db_path: Path
) -> None:
    default = Path(os.environ["PI_CODING_AGENT_DIR"]) / "sessions"
    default.mkdir(parents=True)
    (default / "private.jsonl").write_bytes(b"".join(pi_lines("sess-private-01", ["never imported"])))
    good = tmp_path / "good.jsonl"
    good.write_bytes(b"".join(pi_lines("sess-good-0001", ["delta one"])))
    fifo = tmp_path / "named.jsonl"
    os.mkfifo(fifo)
    (tmp_path / "x.jsonl").mkdir()  # a folder named like a session file: nothing in it
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "gone")
    code, out, err = run("import", str(fifo), "/no/such/place", str(tmp_path / "dangling.jsonl"), str(good), "--json")
    report = json.loads(out)
    assert code == 1 and report["added"] == 1
    assert report["failed"] == [str(fifo), "/no/such/place", str(tmp_path / "dangling.jsonl")]
    reasons = [e["error"] for e in report["errors"]]
    assert reasons == [
        "cannot read: not a regular file (a FIFO, socket or device)",
        "no such file or folder",
        "no such file or folder (a broken link)",
    ]
    assert err.splitlines() == [f"{e['path']}: {e['error']}" for e in report["errors"]]
    with Archive.open(db_path) as archive:
        assert not archive.search("never imported")  # the default folders were never read


@pytest.mark.parametrize("make", ["empty folder", "folder of .json", "folder named x.jsonl"])
def test_a_folder_without_session_files_imports_nothing_never_the_default_folders(
    tmp_path: Path, isolated_home: Path, db_path: Path, make: str
) -> None:
    default = Path(os.environ["PI_CODING_AGENT_DIR"]) / "sessions"
    default.mkdir(parents=True)
    (default / "private.jsonl").write_bytes(b"".join(pi_lines("sess-private-01", ["never imported"])))
    folder = tmp_path / ("x.jsonl" if make == "folder named x.jsonl" else "project")
    folder.mkdir()
    if make == "folder of .json":
        (folder / "package.json").write_text("{}", encoding="utf-8")
    code, out, err = run("import", str(folder))
    assert code == 0 and out.startswith("0 files") and "nothing imported" in err
    with Archive.open(db_path) as archive:
        assert archive.stats().messages == 0
        assert archive.import_paths([]).files == 0 and archive.stats().messages == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000 all the same")
def test_an_unreadable_file_is_one_error_and_the_rest_is_imported(tmp_path: Path, db_path: Path) -> None:
    folder = _three_files(tmp_path / "s")
    (folder / "a.jsonl").chmod(0)
    code, out, _ = run("import", str(folder), "--json")
    report = json.loads(out)
    assert code == 1 and str(folder / "a.jsonl") in report["failed"] and report["added"] == 4


# --- the bridge -------------------------------------------------------------------------


def bridge(db: Path, *requests: Any) -> list[dict[str, Any]]:
    body = b"".join(r if isinstance(r, bytes) else json.dumps(r).encode() + b"\n" for r in requests)
    out = io.BytesIO()
    assert serve(db, io.BytesIO(body), out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_the_bridge_answers_a_nested_request_and_every_request_after_it(db_path: Path) -> None:
    nested = b'{"id":1,"method":"search","params":{"query":"x","extra":' + b"[" * 1000 + b"]" * 1000 + b"}}\n"
    out = bridge(db_path, nested, {"id": 2, "method": "search", "params": {"query": "anything"}})
    assert out[0]["error"] == {"code": "parse_error", "message": "request refused: nested deeper than 100 levels"}
    assert out[1]["id"] == 2 and "result" in out[1]


def test_the_bridge_answers_hostile_numbers_ids_and_queries_with_one_clear_error_each(db_path: Path) -> None:
    requests = [
        b'{"id":1,"method":"search","params":{"query":"x","limit":NaN}}\n',
        b'{"id":2,"method":"search","params":{"query":"x","limit":Infinity}}\n',
        {"id": 3, "method": "read", "params": {"session_id": "sess-a-000001", "around": 2**70}},
        {"id": 4, "method": "read", "params": {"session_id": LONG_ID}},
        {"id": 5, "method": "search", "params": {"query": "x" * 1_000_000}},
        {"id": 6, "method": "hello"},
    ]
    out = bridge(db_path, *requests)
    errors = {r["id"]: r.get("error") for r in out}
    assert errors[1] == errors[2] == {"code": "bad_params", "message": "limit must be an integer"}
    assert errors[4]["code"] == "bad_input" and "too long to be one" in errors[4]["message"]
    assert errors[5] == {
        "code": "bad_input",
        "message": "the query is 1000000 characters long: at most 1000 (search with its rarest words)",
    }
    assert errors[6] is None and all(e is None or e["code"] != "internal" for e in errors.values())


def test_a_captured_message_with_a_lone_surrogate_escape_is_kept_and_found(db_path: Path) -> None:
    start = {"id": 1, "method": "session_start", "params": {"session_id": "sess-js-000001", "cwd": "/w/js"}}
    capture = (
        b'{"id":2,"method":"capture","params":{"session_id":"sess-js-000001","message":'
        b'{"role":"user","content":"zebrafish cut \\ud83d here","timestamp":1790000000000}}}\n'
    )
    out = bridge(db_path, start, capture, {"id": 3, "method": "search", "params": {"query": "zebrafish"}})
    assert "error" not in out[1], out[1]
    assert "cut \ufffd here" in json.dumps(out[2]["result"], ensure_ascii=False)


# --- MCP: the SDK's client, and one real stdio process ------------------------------------------


def _mcp(archive: Archive, name: str, arguments: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(build_server(archive)) as client:
            return await client.call_tool(name, arguments)

    return anyio.run(go)


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def test_mcp_tool_errors_say_what_was_wrong(db_path: Path, tmp_path: Path) -> None:
    with Archive.open(db_path) as archive:
        archive.import_paths([_three_files(tmp_path / "s")])
        cases = [
            ("session_read", {"session_id": "sess-a-000001", "around_msg_id": 2**70}, "message id"),
            ("session_read", {"session_id": LONG_ID}, "too long to be one"),
            ("session_search", {"query": "x" * 5000}, "at most 1000"),
        ]
        for name, arguments, says in cases:
            result = _mcp(archive, name, arguments)
            assert result.is_error and says in _text(result), _text(result)


def test_mcp_memory_errors_never_name_another_workspace(db_path: Path, tmp_path: Path, monkeypatch) -> None:
    other = tmp_path / "secret-project-of-someone"
    other.mkdir()
    with Archive.open(db_path) as archive:
        memory_id = archive.memory_remember(str(other), "the deploy key lives in vault").record.id
        here = tmp_path / "here"
        here.mkdir()
        monkeypatch.chdir(here)
        result = _mcp(archive, "memory_read", {"id": memory_id})
        assert result.is_error and "secret-project" not in _text(result) and "no memory" in _text(result)
        code, _out, err = run("memory", "show", memory_id, "--cwd", str(here))
        assert code == 1 and str(other.resolve()) in err  # a person is told where it is


def test_mcp_over_stdio_keeps_the_session_after_invalid_utf8_and_nested_lines(db_path: Path, tmp_path: Path) -> None:
    with Archive.open(db_path) as archive:
        archive.import_paths([_three_files(tmp_path / "s")])
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "session_search", "arguments": {}}}
    call["params"]["arguments"] = {"query": "gamma"}  # type: ignore[index]
    lines = [
        json.dumps(init).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        b"\xff\xfe not even JSON \xc3",
        b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"session_search","arguments":{"query":"x\xff"}}}',
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"session_search","arguments":{"query":'
        + b"[" * 1000
        + b"]" * 1000
        + b"}}}",  # the SDK cannot parse it (nesting): dropped unanswered, the session goes on
        json.dumps(call).encode(),
    ]
    proc = subprocess.Popen(
        [*python_cli(), "--db", str(db_path), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"\n".join(lines) + b"\n")
    proc.stdin.flush()
    answers: dict[Any, dict[str, Any]] = {}
    while 9 not in answers:  # bounded: the server answers or ends (EOF ends the loop)
        line = proc.stdout.readline()
        if not line:
            break
        message = json.loads(line)
        answers[message.get("id")] = message
    _out, err = proc.communicate(timeout=60)
    assert set(answers) == {1, 5, 9}, err.decode()
    assert "No matches for 'x\ufffd'" in json.dumps(answers[5], ensure_ascii=False)
    assert "sess-c-000001" in json.dumps(answers[9])


# --- the web viewer, through its ASGI app ---------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/read/r" + HUGE, 400, "out of range"),
        ("/read/r1/m" + HUGE, 400, "out of range"),
        ("/session/" + "a" * 5000, 400, "too long to be one"),
        ("/search?q=" + "x" * 5000, 400, "at most"),
    ],
    ids=["huge run id", "huge message position", "long session id", "long query"],
)
def test_the_web_viewer_answers_hostile_ids_with_400_not_500(
    db_path: Path, tmp_path: Path, path: str, status: int, says: str
) -> None:
    from starlette.testclient import TestClient

    from pi_memory.frontends.web.app import Settings, create_app

    with Archive.open(db_path) as archive:
        archive.import_paths([_three_files(tmp_path / "s")])
        with TestClient(create_app(archive, Settings()), raise_server_exceptions=False) as web:
            page = web.get(path)
    assert page.status_code == status and says in page.text


# --- the CLI ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["read", "sess-a-000001", "--around", HUGE], "message id 1180591620717411303424 is out of range"),
        (["read", "r" + HUGE], "run id '1180591620717411303424' is out of range"),
        (["forget", "r" + HUGE, "--yes"], "run id '1180591620717411303424' is out of range"),
        (["forget", HUGE + "0", "--yes"], "message id '11805916207174113034240' is out of range"),
        (["read", LONG_ID], "is too long to be one (at most 200 characters)"),
        (["search", "x" * 5000], "the query is 5000 characters long"),
        (["memory", "show", "mem_" + LONG_ID], "memory id 'mem_aaaa"),
    ],
    ids=["around 2**70", "read r2**70", "forget r2**70", "forget msg 2**70", "100 KB id", "long query", "memory id"],
)
def test_hostile_ids_and_queries_on_the_command_line_are_one_line_and_exit_2(
    db_path: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    run("import", str(_three_files(tmp_path / "s")))
    code, _out, err = run(*args)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_archived_terminal_escapes_are_shown_never_obeyed_by_search_read_and_json(tmp_path: Path) -> None:
    path = tmp_path / "evil.jsonl"
    path.write_bytes(b"".join(pi_lines("sess-evil-00001", [f"zebrafish {ESCAPES} end", "ok"])))
    run("import", str(path))
    outputs = [run("search", "zebrafish")[1], run("read", "sess-evil-00001")[1], run("read", "r1")[1]]
    outputs.append(run("read", "r1/m1")[1])
    for out in outputs:
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, out
        assert "\\u001b" in out
    window = json.loads(run("read", "sess-evil-00001", "--json")[1])
    assert f"zebrafish {ESCAPES} end" in window["messages"][0]["text"]  # --json: the text itself


def test_memory_import_of_a_nested_or_undecodable_file_is_one_line(tmp_path: Path) -> None:
    nested = tmp_path / "nested.jsonl"
    nested.write_bytes(b'{"hash":"x","seq":1,"prev_hash":"0","v":' + b"[" * 1000 + b"]" * 1000 + b"}\n{}\n")
    code, _, err = run("memory", "import", str(nested), "--cwd", str(tmp_path))
    assert code == 2 and "line 1 is not a memory event (nested deeper than 100 levels)" in err
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n")
    code, _, err = run("memory", "import", str(binary), "--cwd", str(tmp_path))
    assert code in (1, 2) and len(err.strip().splitlines()) == 1 and "Traceback" not in err


HOSTILE_QUERIES = [
    '"unterminated',
    "nginx AND OR NEAR(",
    "chars: grams: msg_fts:",
    "* ^ ( ) {} [] -",
    "a\x00b",
    "'; DROP TABLE msg; --",
    "\u202egnp.exe",
    "😀 𠮷 \U0010ffff",
    "\x1b[2J\x1b]0;t\x07",
    "x" * 1000,
    "锁" * 500,
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=[f"q{i}" for i in range(len(HOSTILE_QUERIES))])
def test_a_hostile_query_is_data_through_every_front_end(db_path: Path, tmp_path: Path, query: str) -> None:
    from starlette.testclient import TestClient

    from pi_memory.frontends.web.app import Settings, create_app

    folder = _three_files(tmp_path / "s")
    with Archive.open(db_path) as archive:
        archive.import_paths([folder])
        assert isinstance(archive.search(query), list)  # the API
        assert not _mcp(archive, "session_search", {"query": query}).is_error
        with TestClient(create_app(archive, Settings()), raise_server_exceptions=False) as web:
            page = web.get("/search", params={"q": query[:500]})  # the viewer caps its own field at 500
            assert page.status_code == 200
    code, out, err = run("search", query.replace("\x00", ""), "--json")  # argv cannot hold a NUL
    assert code == 0 and json.loads(out)["query"] == query.replace("\x00", ""), err
    (answer,) = bridge(db_path, {"id": 1, "method": "search", "params": {"query": query}})
    assert "result" in answer, answer


def test_a_line_over_the_size_limit_is_skipped_with_its_size_and_the_rest_is_imported(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_memory.core.sources import pi

    monkeypatch.setattr(pi, "MAX_LINE_BYTES", 4096)  # as 64 MB is to a real file, without writing 64 MB
    lines = pi_lines("sess-huge-00001", ["before the huge one", "x" * 10_000, "after the huge one"])
    path = tmp_path / "huge.jsonl"
    path.write_bytes(b"".join(lines))
    with Archive.open(db_path) as archive:
        report = archive.import_paths([path])
        assert [(e.line, e.error.split(" is over")[0]) for e in report.errors] == [
            (3, f"line of {len(lines[2]) - 1} bytes")
        ]
        assert archive.search("before") and archive.search("after")
