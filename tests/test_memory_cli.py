"""The memory commands of the CLI, with --json where they have it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner

from conftest import python_cli
from pi_memory.frontends.cli.main import cli
from pi_memory.memory.chain import canonical


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def ok_json(*args: str) -> object:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_remember_then_memories_json_lists_it(ws: Path) -> None:
    made = ok_json("remember", "--pin", "--kind", "constraint", "--cwd", str(ws), "不要修改生产数据库")
    assert made["action"] == "created" and made["memory"]["pinned"] and made["memory"]["author"] == "user"
    ok_json("remember", "--cwd", str(ws), "使用", "pnpm", "而不是", "npm")
    listing = ok_json("memories", "--cwd", str(ws))
    assert [m["body"] for m in listing["memories"]] == ["不要修改生产数据库", "使用 pnpm 而不是 npm"]
    assert listing["chain"]["ok"] and listing["workspace"] == str(ws.resolve())
    found = ok_json("memories", "--cwd", str(ws), "pnpm")
    assert [m["body"] for m in found["memories"]] == ["使用 pnpm 而不是 npm"]


def test_memory_group_and_aliases_do_the_same(ws: Path) -> None:
    made = ok_json("memory", "remember", "--cwd", str(ws), "note one")
    assert ok_json("memory", "list", "--cwd", str(ws))["memories"][0]["id"] == made["memory"]["id"]
    gone = ok_json("forget-memory", "--cwd", str(ws), made["memory"]["id"])
    assert gone["memory"]["status"] == "resolved"
    assert ok_json("memories", "--cwd", str(ws))["memories"] == []
    assert len(ok_json("memory", "list", "--status", "resolved", "--cwd", str(ws))["memories"]) == 1


def test_supersede_pin_unpin_show_and_confirm(ws: Path, archive: object) -> None:
    old = ok_json("remember", "--cwd", str(ws), "use node 18")["memory"]["id"]
    new = ok_json("remember", "--cwd", str(ws), "--supersede", old, "use node 22")["memory"]
    assert new["supersedes"] == old
    assert ok_json("memory", "pin", "--cwd", str(ws), new["id"])["memory"]["pinned"]
    assert not ok_json("memory", "unpin", "--cwd", str(ws), new["id"])["memory"]["pinned"]
    assert ok_json("memory", "show", "--cwd", str(ws), new["id"])["body"] == "use node 22"
    proposal = archive.memory_propose(ws, "a model's idea")  # type: ignore[attr-defined]
    confirmed = ok_json("memory", "confirm", "--pin", "--cwd", str(ws), proposal.record.id)["memory"]
    assert confirmed["status"] == "active" and confirmed["pinned"] and confirmed["confirmed"]


def test_session_memories_need_their_session(ws: Path) -> None:
    made = ok_json("remember", "--scope", "session", "--session", "s1", "--cwd", str(ws), "only here")
    assert ok_json("memories", "--cwd", str(ws))["memories"] == []
    assert len(ok_json("memories", "--cwd", str(ws), "--session", "s1")["memories"]) == 1
    code, _out, err = run("forget-memory", "--cwd", str(ws), made["memory"]["id"])
    assert code == 1 and "no memory" in err
    code, _out, err = run("remember", "--scope", "session", "--cwd", str(ws), "no session")
    assert code == 2 and "--session" in err


def test_errors_are_one_line_without_traceback(ws: Path) -> None:
    code, _out, err = run("remember", "--cwd", str(ws), "x" * 8001)
    assert code == 2 and "8,000" in err and "Traceback" not in err and err.count("\n") == 1
    code, _out, err = run("memory", "show", "--cwd", str(ws), "mem_0000000000")
    assert code == 1 and err.startswith("Error: no memory")


def test_export_import_round_trip_into_another_workspace(ws: Path, tmp_path: Path) -> None:
    ok_json("remember", "--cwd", str(ws), "first")
    ok_json("remember", "--pin", "--cwd", str(ws), "second")
    out_file = tmp_path / "memory.jsonl"
    code, _out, err = run("memory", "export", "--cwd", str(ws), "-o", str(out_file))
    assert code == 0, err
    assert len(out_file.read_text().splitlines()) == 2
    other = tmp_path / "other"
    other.mkdir()
    result = ok_json("memory", "import", "--cwd", str(other), str(out_file))
    assert (result["added"], result["already"]) == (2, 0)
    assert ok_json("memory", "import", "--cwd", str(other), str(out_file))["added"] == 0
    mine = ok_json("memories", "--cwd", str(ws))["memories"]
    theirs = ok_json("memories", "--cwd", str(other))["memories"]
    assert mine == theirs


@pytest.mark.sqlite_only("tampers with the file directly; test_pg_memory tampers with PostgreSQL rows")
def test_verify_fails_after_tampering_and_repair_continues_from_the_trusted_events(
    ws: Path, archive_target: str, tmp_path: Path
) -> None:
    for text in ("one", "two", "three"):
        ok_json("remember", "--cwd", str(ws), text)
    assert ok_json("memory", "verify", "--cwd", str(ws))[0]["ok"]
    conn = apsw.Connection(archive_target)
    conn.execute("DROP TRIGGER memory_event_no_update")
    event = json.loads(next(conn.execute("SELECT event FROM memory_event WHERE seq=2"))[0])
    conn.execute("UPDATE memory_event SET event=? WHERE seq=2", (canonical({**event, "body": "TWO"}),))
    conn.close()
    code, out, _err = run("memory", "verify", "--cwd", str(ws), "--json")
    report = json.loads(out)[0]
    assert code == 1 and report["broken_at"] == 2 and report["trusted"] == 1
    code, _out, err = run("remember", "--cwd", str(ws), "four")
    assert code == 1 and "memory repair" in err
    code, out, err = run("memory", "export", "--raw", "--cwd", str(ws))
    assert len(out.splitlines()) == 3 and "broken at event 2" in err
    repaired = ok_json("memory", "repair", "--cwd", str(ws))
    assert (repaired["kept"], repaired["left_behind"]) == (1, 2)
    ok_json("remember", "--cwd", str(ws), "four")
    assert [m["body"] for m in ok_json("memories", "--cwd", str(ws))["memories"]] == ["one", "four"]
    assert ok_json("memory", "verify", "--all")[0]["ok"]


def test_inject_prints_only_the_users_active_memories(ws: Path, archive: object) -> None:
    ok_json("remember", "--cwd", str(ws), "user rule")
    archive.memory_propose(ws, "model idea")  # type: ignore[attr-defined]
    code, out, _err = run("memory", "inject", "--cwd", str(ws))
    assert code == 0 and "user rule" in out and "model idea" not in out


def test_the_installed_command_runs_remember_and_memories(ws: Path) -> None:
    remember = subprocess.run(
        [*python_cli(), "remember", "--cwd", str(ws), "--json", "使用 pnpm"], capture_output=True, text=True, check=True
    )
    assert json.loads(remember.stdout)["action"] == "created"
    listing = subprocess.run(
        [*python_cli(), "memories", "--cwd", str(ws), "--json", "使用"], capture_output=True, text=True, check=True
    )
    assert [m["body"] for m in json.loads(listing.stdout)["memories"]] == ["使用 pnpm"]


def test_every_memory_subcommand_is_documented_in_the_commands_page() -> None:
    import re

    from pi_memory.frontends.cli.memory import memory

    page = (Path(__file__).resolve().parent.parent / "docs" / "commands.md").read_text(encoding="utf-8")
    documented = {
        name for group in re.findall(r"^## `pi-memory memory ([a-z|]+)", page, flags=re.M) for name in group.split("|")
    }
    assert set(memory.commands) <= documented, f"undocumented: {sorted(set(memory.commands) - documented)}"
