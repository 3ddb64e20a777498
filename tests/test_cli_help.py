"""What a new user meets first: the help, the README's commands, exit codes, short ids, hits."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import pi_memory.frontends.cli.shell as cli_module
from pi_memory.archive.demo import SAMPLES
from pi_memory.frontends.cli.main import EXAMPLES, INTERNAL_COMMANDS, cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
READMES = (README, ROOT / "README.zh-CN.md")
DEMO = SAMPLES  # the sample sessions `pi-memory demo` imports
# examples that need more than the demo archive: a watcher, a client on stdin, PostgreSQL, pi,
# a memory id made on the way, or a file on disk an archived session wrote (blame)
NOT_RUN = {"watch", "mcp", "bridge", "push", "pg-roles", "forget-memory", "serve", "review link", "blame", "embed"} | {
    f"memory {name}" for name in ("show", "forget", "confirm", "pin", "unpin", "import", "repair")
}


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo archive of the README (`pi-memory demo`), made once."""
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    result = CliRunner().invoke(cli, ["--db", str(db), "import", str(DEMO)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh copy of the demo archive as the default archive (a README line's `--db` is dropped);
    the isolated home is `~`."""
    db = tmp_path / "demo.db"
    shutil.copy(demo_template, db)
    monkeypatch.setenv("PI_MEMORY_DB", str(db))
    monkeypatch.setenv("HOME", str(isolated_home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for folder in (".pi/agent/sessions", ".claude/projects"):  # a user who has pi and Claude Code
        (isolated_home / folder).mkdir(parents=True, exist_ok=True)
    yield db


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def command_name(args: list[str]) -> str:
    words = [a for a in args if not a.startswith("-")]
    return " ".join(words[:2]) if words and words[0] in ("memory", "review") else (words[0] if words else "")


def readme_commands(readme_path: Path = README) -> list[str]:
    """Every `pi-memory ...` command in the README's bash blocks (one per `&&` step)."""
    readme = readme_path.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```bash\n(.*?)```", readme, flags=re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            for step in line.split("&&"):
                step = step.strip()
                if step.startswith("pi-memory ") and "|" not in step:
                    found.append(step)
    return found


def runnable(line: str) -> list[str] | None:
    """The arguments to run on the demo archive: its `--db` (the demo archive's path) dropped, `~`
    expanded as a shell would; None for a command that needs more than the demo archive."""
    args = shlex.split(line)[1:]
    if args[:1] == ["--db"]:
        args = args[2:]
    if "postgresql" in line or command_name(args) in NOT_RUN or "|" in line:
        return None
    return [os.path.expanduser(a) if a.startswith("~/") else a for a in args]


def test_the_readme_has_commands_to_try_on_the_demo_archive():
    commands = readme_commands()
    assert "pi-memory demo" in commands
    assert len([c for c in commands if c.startswith("pi-memory --db ~/.cache/pi-memory/demo.db ")]) >= 8
    assert len([c for c in commands if runnable(c)]) >= 12


@pytest.mark.parametrize("line", readme_commands())
def test_every_readme_command_runs_against_the_demo_archive(demo: Path, line: str):
    args = runnable(line)
    if args is None:
        pytest.skip("needs more than the demo archive (a watcher, a client, PostgreSQL or pi)")
    code, out, err = invoke(*args)
    assert code == 0, f"{line}: {err}"


@pytest.mark.parametrize("line", [line for lines in EXAMPLES.values() for line in lines])
def test_every_help_example_runs_against_the_demo_archive(demo: Path, line: str):
    if not line.startswith("pi-memory ") or runnable(line) is None:
        pytest.skip("needs more than the demo archive (a watcher, a client, PostgreSQL, pi or a memory id)")
    code, out, err = invoke(*(runnable(line) or []))
    assert code == 0, f"{line}: {err}"


def test_every_command_has_examples_in_its_help():
    missing = []
    for name in cli.commands:
        if "Examples:" not in invoke(name, "--help")[1]:
            missing.append(name)
    assert not missing


def test_top_level_help_lists_internal_commands_apart_and_whole():
    out = invoke("--help")[1]
    user, internal = out.split("Internal commands", 1)
    for name in INTERNAL_COMMANDS:
        assert re.search(rf"^  {re.escape(name)} ", internal, flags=re.M) and not re.search(
            rf"^  {re.escape(name)} ", user, flags=re.M
        )
    assert re.search(r"^  search ", user, flags=re.M)
    assert not [line for line in out.splitlines()[1:] if line.rstrip().endswith("...")]  # nothing cut off
    assert "2 usage error" in re.sub(r"\s+", " ", out)


def test_a_new_command_is_listed_with_the_user_commands(monkeypatch: pytest.MonkeyPatch):
    @cli.command("brand-new")
    def brand_new() -> None:
        """A command another branch adds."""

    try:
        user = invoke("--help")[1].split("Internal commands", 1)[0]
        assert "brand-new  " in user or "brand-new " in user
    finally:
        del cli.commands["brand-new"]


# --- exit codes: 2 for usage errors (click's and the library's), 1 for failures --------------


@pytest.mark.parametrize(
    "args",
    [
        ("search",),  # a missing argument (click)
        ("search", "x", "--limit", "0"),  # out of range (click)
        ("search", "x", "--since", "last tuesday"),  # a bad date (the library)
        ("search", "x", "--kind", "tools"),  # not a kind
        ("search", ""),
        ("search", "   "),
        ("read", "01a2364c"),  # ambiguous
        ("read", "abc"),  # too short
        ("recall",),  # nothing asked
    ],
)
def test_usage_errors_exit_2(demo: Path, args: tuple[str, ...]):
    code, _out, err = invoke(*args)
    assert code == 2 and err.strip()


def test_library_usage_errors_are_one_line(demo: Path):
    for args in (("search", "  "), ("read", "01a2364c"), ("search", "x", "--since", "soon")):
        code, _out, err = invoke(*args)
        assert code == 2 and err.count("\n") == 1 and err.startswith("Error: ")


def test_what_is_not_there_exits_1(demo: Path):
    assert invoke("read", "ffffffff-none")[0] == 1
    assert invoke("read", "r999")[0] == 1


def test_the_empty_query_error_says_what_to_give(demo: Path):
    err = invoke("search", " \t ")[2]
    assert "the query is empty" in err and "search --help" in err


def test_recall_without_a_query_names_the_cli_flags(demo: Path):
    err = invoke("recall", "--session", "6aa2dbdd")[2]
    assert "--file" in err and "--entry-ids" in err and "--list" in err and "entry_ids" not in err


# --- short ids -------------------------------------------------------------------------------


def test_the_short_id_a_listing_shows_opens_the_session(demo: Path):
    listing = invoke("sessions")[1].splitlines()
    row = next(line for line in listing if "search-svc" in line)
    short = row.split()[6]
    assert len(short) == 8
    code, out, _ = invoke("read", short)
    assert code == 0 and f"session {short}" in out.splitlines()[0]
    assert invoke("search", "缓存索引", "--session", short)[0] == 0
    assert invoke("runs", "--session", short, "--json")[0] == 0
    assert invoke("recall", "--session", short, "--scope", "session", "方案")[0] == 0


def test_an_ambiguous_prefix_lists_the_candidates_with_their_short_ids(demo: Path):
    code, _out, err = invoke("read", "01a2364c")
    assert code == 2 and "pick one of:" in err
    shorts = {line.split()[6] for line in invoke("sessions")[1].splitlines()}
    listed = {c.split()[0] for c in err.split("pick one of: ", 1)[1].rstrip(" …\n").split("; ")}
    assert listed and listed <= shorts


def test_search_shows_sessions_by_short_id(demo: Path):
    out = invoke("search", "缓存索引")[1]
    assert "session=5ac092eb" in out and "01a2364c-91f5" not in out


def test_sessions_columns_line_up(demo: Path):
    rows = invoke("sessions")[1].splitlines()
    starts = {line.index(line.split()[6]) for line in rows}  # the short id column
    ends = {line.index(" msg") for line in rows}  # the message counts, right-aligned
    assert len(starts) == 1 and len(ends) == 1


# --- content hits: address and how to open them ------------------------------------------------


def test_content_hits_show_their_address_and_how_to_open_it(demo: Path):
    out = invoke("search", "proxy_buffering")[1]
    address = re.search(r"^  (r\d+/m\d+) msg_id=\d+ ", out, flags=re.M)
    assert address and "pi-memory read rN/mK" in out
    code, opened, _ = invoke("read", address.group(1))
    assert code == 0 and "proxy_buffering" in opened


# --- hits: every occurrence, brackets off a terminal, colour on one -----------------------------


def test_search_marks_every_occurrence_with_brackets_when_piped(demo: Path):
    out = invoke("search", "缓存索引 方案")[1]
    line = next(line for line in out.splitlines() if "docs/" in line and "msg_id=15 " in line)
    assert line.count("⟦方案⟧") == 2 and "⟦缓存索引⟧" in line and "【" not in line


def test_json_snippets_keep_the_bracket_marker(demo: Path):
    hits = json.loads(invoke("search", "缓存索引", "--json")[1])["hits"]
    assert all("⟦" in h["snippet"] and "⟧" in h["snippet"] for h in hits)


def test_search_colours_hits_on_a_terminal(demo: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(cli_module, "_colour", lambda: True)
    result = CliRunner().invoke(cli, ["search", "缓存索引"], color=True)
    assert "\x1b[1;31m缓存索引\x1b[0m" in result.stdout and "⟦" not in result.stdout


def test_no_color_turns_colour_off(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert not cli_module._colour()


# --- forget without a terminal ------------------------------------------------------------------


def test_forget_without_a_terminal_refuses_in_one_line_and_deletes_nothing(demo: Path):
    code, _out, err = invoke("forget", "36b88c10")
    assert code == 2 and err.count("\n") == 1 and "use --yes to forget without a terminal" in err
    assert invoke("read", "36b88c10")[0] == 0
    assert invoke("forget", "36b88c10", "--yes")[0] == 0
    assert invoke("read", "36b88c10")[0] == 1


def test_forget_help_says_it_needs_yes_without_a_terminal():
    out = invoke("forget", "--help")[1]
    assert "without a terminal to ask on it refuses unless --yes" in re.sub(r"\s+", " ", out).lower()


# --- small things -----------------------------------------------------------------------------


def test_one_file_is_one_file(tmp_path: Path):
    code, out, _ = invoke("--db", str(tmp_path / "x.db"), "import", str(DEMO / "pi-1.6.0-vue-reactive-zh.jsonl"))
    assert code == 0 and out.startswith("1 file (0 unchanged), 1 session: ")


def test_doctor_checks_the_installation(demo: Path):
    code, out, _ = invoke("doctor")
    assert code == 0 and "installation:" in out and "watch extra" in out and "pi extension" in out
    checks = json.loads(invoke("doctor", "--json")[1])["install"]
    assert {c["name"] for c in checks} >= {"watch extra", "mcp extra", "pg extra", "pi on PATH", "pi extension"}


@pytest.mark.parametrize("readme_path", READMES, ids=lambda p: p.name)
def test_the_readme_contents_list_every_section(readme_path: Path):
    readme = readme_path.read_text(encoding="utf-8")
    sections = [line[3:].strip() for line in readme.splitlines() if line.startswith("## ")]
    heading = sections.pop(0)  # "Contents" / "目录"
    contents = readme.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- \[(.+?)\]\(#", contents, flags=re.M)
    assert listed == sections


def test_the_readme_cites_no_spec_a_reader_of_the_repository_does_not_have():
    assert not re.search(r"\bspec\b|the spec's", README.read_text(encoding="utf-8"))
