import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import BAD_DATA, PI_DATA, python_cli
from pi_memory.frontends.cli.main import cli

pytestmark = pytest.mark.usefixtures("archive_target")  # every command on both backends

README = Path(__file__).resolve().parent.parent / "README.md"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_import_json_reports_files_added_skipped_and_errors():
    code, out, _ = run("import", str(PI_DATA), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["files"] == 12 and report["added"] == 160 and report["errors"] == []
    code, out, _ = run("import", str(PI_DATA), "--json", "--force")
    assert json.loads(out)["added"] == 0 and json.loads(out)["skipped"] == 160


def test_import_of_bad_files_lists_line_numbers_keeps_every_good_line_and_exits_one():
    code, out, err = run("import", str(BAD_DATA))
    assert code == 1
    assert "pi-non-json-line-in-middle.jsonl: 1 bad line (line 7): not JSON" in err
    assert "pi-invalid-utf8.jsonl: 1 bad line (line 4): invalid UTF-8 at byte" in err
    code, out, _ = run("import", str(BAD_DATA / "pi-truncated-mid-line.jsonl"), "--json", "--force")
    report = json.loads(out)
    errors = report["errors"]
    assert code == 1 and report["failed"] == [str(BAD_DATA / "pi-truncated-mid-line.jsonl")]
    assert errors == [{"path": str(BAD_DATA / "pi-truncated-mid-line.jsonl"), "line": 13, "error": errors[0]["error"]}]
    code, out, _ = run("import", str(PI_DATA), "--json")
    assert code == 0 and json.loads(out)["failed"] == []


def test_import_without_a_path_reads_the_pi_sessions_folder(isolated_home: Path):
    sessions = Path(os.environ["PI_CODING_AGENT_DIR"]) / "sessions"
    sessions.parent.mkdir(parents=True)
    import shutil

    shutil.copytree(PI_DATA / "agent-dir" / "sessions", sessions)
    code, out, _ = run("import", "--json")
    assert code == 0 and json.loads(out)["files"] == 3


def test_search_json_matches_the_contract():
    run("import", str(PI_DATA))
    code, out, _ = run("search", "缓存索引", "--json", "--limit", "3")
    assert code == 0
    data = json.loads(out)
    assert {"query", "took_ms", "hits"} <= set(data) and data["query"] == "缓存索引"
    assert 1 <= len(data["hits"]) <= 3
    assert set(data["hits"][0]) == {"msg_id", "session_id", "seq", "role", "ts", "project", "score", "snippet"}


def test_search_text_output_is_grouped_by_session():
    run("import", str(PI_DATA))
    code, out, _ = run("search", "响应式")
    assert code == 0 and out.startswith("[") and "msg_id=" in out and "⟦响应式⟧" in out


def test_read_and_stats_json_shapes():
    run("import", str(PI_DATA))
    sid = json.loads(run("search", "缓存索引", "--json")[1])["hits"][0]["session_id"]
    code, out, _ = run("read", sid, "--json")
    window = json.loads(out)
    assert code == 0 and window["session"]["id"] == sid and window["messages"]
    assert {"msg_id", "seq", "ts", "role", "text"} <= set(window["messages"][0])
    code, out, _ = run("stats", "--json")
    st = json.loads(out)
    assert {"messages", "sessions", "db_bytes"} <= set(st) and st["messages"] == 160


def test_db_option_works_before_and_after_the_command(tmp_path: Path):
    db1, db2 = tmp_path / "one.db", tmp_path / "two.db"
    run("--db", str(db1), "import", str(PI_DATA / "pi-0.73.1-long-output-en.jsonl"))
    run("import", str(PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl"), "--db", str(db2))
    assert json.loads(run("--db", str(db1), "stats", "--json")[1])["messages"] == 10
    assert json.loads(run("stats", "--json", "--db", str(db2))[1])["messages"] == 23


def test_a_missing_path_is_one_clear_line_and_the_other_paths_are_imported():
    code, out, err = run("import", "/no/such/place", str(PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl"))
    assert code == 1 and err.strip() == "/no/such/place: no such file or folder"
    assert "23 messages added" in out


def test_a_bad_since_is_one_clear_line():
    code, _, err = run("search", "x", "--since", "last tuesday")
    assert code == 2 and err.strip() == "Error: bad date 'last tuesday': use YYYY-MM-DD"


def test_an_unreadable_db_path_is_one_clear_line(tmp_path: Path):
    (tmp_path / "dir.db").mkdir()
    code, _, err = run("--db", str(tmp_path / "dir.db"), "stats")
    assert code != 0 and "is a directory" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_file_that_is_not_a_database_is_moved_aside_and_replaced(tmp_path: Path):
    db = tmp_path / "junk.db"
    db.write_bytes(os.urandom(8192))
    code, out, err = run("--db", str(db), "import", str(PI_DATA / "pi-0.73.1-vue-reactive-zh.jsonl"), "--json")
    assert code == 0 and json.loads(out)["added"] == 23
    assert "moved to" in err and "pi-memory import" in err
    assert (tmp_path / "junk.db.corrupt").exists()


def test_a_damaged_database_fails_check_and_is_moved_aside(tmp_path: Path):
    db = tmp_path / "a.db"
    run("--db", str(db), "import", str(PI_DATA))
    data = bytearray(db.read_bytes())
    pages = len(data) // 4096
    for page in range(pages // 2, pages):  # scribble over the second half of the file, whole pages
        data[page * 4096 : (page + 1) * 4096] = os.urandom(4096)
    db.write_bytes(bytes(data))
    result = CliRunner().invoke(cli, ["--db", str(db), "check"])
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert "moved to" in result.stderr and "pi-memory import" in result.stderr
    assert list(tmp_path.glob("a.db*.corrupt"))
    # a fresh archive works afterwards
    assert json.loads(run("--db", str(db), "stats", "--json")[1])["messages"] == 0


def test_python_m_pi_memory_runs_the_cli(tmp_path: Path):
    out = subprocess.run(
        python_cli() + ["--db", str(tmp_path / "x.db"), "stats", "--json"], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout)["messages"] == 0


def test_every_cli_command_is_in_the_readmes_command_table():
    readme = README.read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `pi-memory ([a-z-]+)` \|", readme, flags=re.M))
    commands = set(cli.commands)
    assert commands <= listed, f"not in the README's command table: {sorted(commands - listed)}"
    assert listed <= commands, f"in the README's table but no such command: {sorted(listed - commands)}"


def test_readme_has_exactly_two_setup_commands():
    readme = README.read_text(encoding="utf-8")
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    block = setup.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert len(commands) == 2
    assert "pytest" in commands[1]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "python3 -m pytest" in ci and "python3 -m pytest" in commands[1]


def test_demo_builds_its_own_archive_and_never_the_users(
    db_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
):
    """`pi-memory demo` (set-up command 1): the demo archive in the cache folder, whatever --db says."""
    monkeypatch.setenv("HOME", str(isolated_home))
    demo_db = Path(os.environ["XDG_CACHE_HOME"]) / "pi-memory" / "demo.db"
    result = CliRunner().invoke(cli, ["--db", str(db_path), "demo"])
    assert result.exit_code == 0, result.output
    assert not db_path.exists() and demo_db.exists()
    assert "r5/m1" in result.output and "pi-memory --db ~/.cache/pi-memory/demo.db read r5/m1" in result.output
    forgot = CliRunner().invoke(cli, ["--db", str(demo_db), "forget", "36b88c10", "--yes"])
    assert forgot.exit_code == 0
    again = CliRunner().invoke(cli, ["demo"])  # brings back what was forgotten in it
    assert again.exit_code == 0 and CliRunner().invoke(cli, ["--db", str(demo_db), "read", "36b88c10"]).exit_code == 0
