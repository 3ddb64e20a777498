"""Real pi, real extension, real bridge: every message of a session lands in the archive once, in order.

Each test runs the real pi CLI (0.73.1 and 1.6.0) in RPC mode with a scripted fake model (no network,
no API key), the pi-memory extension from `extensions/pi/` and the bridge of this checkout
(`PI_MEMORY_BRIDGE` = this Python `-m pi_memory bridge`). Archive and agent folders live in tmp_path.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_install import InstallUnavailable, PiInstall, ensure_pi, ensure_typescript
from pi_rpc import PiRpc

from conftest import python_cli
from pi_memory import Archive
from pi_memory.core.sources.pi import read_session_file

HERE = Path(__file__).resolve().parent
EXTENSION = HERE.parent.parent / "extensions" / "pi" / "index.ts"
PI_VERSIONS = ["0.73.1", "1.6.0"]

NOTES = "proxy_buffering off fixes the stalled SSE stream behind nginx\n"
TURN_ONE_ANSWER = "The fix was nginx proxy_buffering off; 记下了这个缓冲问题."
SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "turn one",
            "replies": [
                {
                    "content": [
                        {"type": "text", "text": "Let me look."},
                        {"type": "toolCall", "name": "bash", "arguments": {"command": "cat notes.txt"}},
                    ]
                },
                {"content": [{"type": "toolCall", "name": "read", "arguments": {"path": "missing-file.txt"}}]},
                {"content": TURN_ONE_ANSWER},
            ],
        },
        {
            "match": "turn two",
            "replies": [
                {
                    "content": [
                        {"type": "toolCall", "name": "session_search", "arguments": {"query": "proxy_buffering"}}
                    ]
                },
                {"content": "Found it in the archive: proxy_buffering off."},
            ],
        },
        {"match": "turn three", "replies": [{"content": "After reload: still here."}]},
        {
            "match": "turn four",
            "replies": [
                {"content": [{"type": "toolCall", "name": "bash", "arguments": {"command": "echo resumed"}}]},
                {"content": "Resumed fine."},
            ],
        },
        {
            "match": "parallel",
            "replies": [
                {"content": [{"type": "toolCall", "name": "bash", "arguments": {"command": "echo parallel"}}]},
                {"content": "parallel done"},
            ],
        },
    ],
    "fallback": "OK.",
}


@pytest.fixture(scope="session", params=PI_VERSIONS)
def pi(request: pytest.FixtureRequest) -> PiInstall:
    try:
        return ensure_pi(str(request.param))
    except InstallUnavailable as exc:
        pytest.skip(str(exc))


class World:
    """One isolated machine: agent dir, archive, project folders, the fake model's script."""

    def __init__(self, pi: PiInstall, home: Path, tmp_path: Path) -> None:
        self.pi = pi
        self.home = home
        self.agent_dir = Path(os.environ["PI_CODING_AGENT_DIR"])
        self.db = os.environ["PI_MEMORY_DB"]  # a file, or a team archive's URL (`any_world`)
        self.log = open(tmp_path / "pi-stderr.log", "w", encoding="utf-8")  # noqa: SIM115
        self.started: list[subprocess.Popen[bytes]] = []
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        settings = {"compaction": {"keepRecentTokens": 120}, "retry": {"baseDelayMs": 100}}  # small enough to compact
        (self.agent_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        script = tmp_path / "faux-script.json"
        script.write_text(json.dumps(SCRIPT, ensure_ascii=False), encoding="utf-8")
        self.env = pi.env(
            dict(
                os.environ,
                HOME=str(home),
                PI_OFFLINE="1",
                PI_FAUX_SCRIPT=str(script),
                PI_MEMORY_BRIDGE=f"{sys.executable} -m pi_memory bridge",
                TMPDIR=str(tmp_path),
            )
        )

    def project(self, name: str) -> Path:
        cwd = self.home / name
        cwd.mkdir(exist_ok=True)
        (cwd / "notes.txt").write_text(NOTES, encoding="utf-8")
        return cwd

    def base_cmd(self) -> list[str]:
        return [
            str(self.pi.pi),
            "-e",
            str(HERE / "faux-provider.ts"),
            "-e",
            str(HERE / "e2e-hooks.ts"),
            "-e",
            str(EXTENSION),
            "--model",
            "faux/faux-1",
            "-nc",
            "-ns",
            "-np",
        ]

    def rpc(self, cwd: Path, *args: str, env: dict[str, str] | None = None) -> PiRpc:
        cmd = [*self.base_cmd(), "--mode", "rpc", *args]
        rpc = PiRpc(cmd, cwd, env or self.env, self.log, settles=self.pi.major >= 1)
        self.started.append(rpc.p)
        return rpc

    def print_mode(self, cwd: Path, prompt: str) -> subprocess.Popen[bytes]:
        cmd = [*self.base_cmd(), "-p", prompt]
        proc = subprocess.Popen(cmd, cwd=cwd, env=self.env, stdout=subprocess.DEVNULL, stderr=self.log)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        """After a failed test: no pi (and so no bridge, which exits on EOF) outlives it."""
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
            for pipe in (proc.stdin, proc.stdout):
                if pipe:
                    pipe.close()
        self.log.close()

    def session_files(self) -> list[Path]:
        return sorted((self.agent_dir / "sessions").rglob("*.jsonl"))

    def stderr(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(encoding="utf-8", errors="replace")


@pytest.fixture
def world(pi: PiInstall, isolated_home: Path, tmp_path: Path) -> Iterator[World]:
    w = World(pi, isolated_home, tmp_path)
    yield w
    w.stop_all()


@pytest.fixture
def any_world(pi: PiInstall, isolated_home: Path, tmp_path: Path, archive_target: str) -> Iterator[World]:
    """A world whose archive is the SQLite file or a team archive on PostgreSQL (`archive_target`)."""
    w = World(pi, isolated_home, tmp_path)
    assert w.db == archive_target
    yield w
    w.stop_all()


def file_messages(path: Path) -> tuple[str, list[tuple[str, str, str | None]]]:
    """(session id, [(role, text, entry id)]) of every message-like entry of a session file, in file order."""
    parsed = read_session_file(path)
    assert parsed.header is not None
    msgs = [(e.rendered.role, e.rendered.text, e.entry_id) for e in parsed.entries if e.rendered is not None]
    return parsed.header.session_id, msgs


def archived(db: str, session_id: str) -> list[tuple[str, str, str | None]]:
    with Archive.open(db) as archive:
        window = archive.read(session_id, before=50, after=0)
    assert not window.before_more
    return [(m.role, m.text, m.entry_id) for m in window.messages]


def tool_result_text(path: Path, tool: str) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        msg = entry.get("message") or {}
        if entry.get("type") == "message" and msg.get("role") == "toolResult" and msg.get("toolName") == tool:
            return "".join(b.get("text", "") for b in msg.get("content", []) if isinstance(b, dict))
    raise AssertionError(f"no {tool} tool result in {path.name}")


def test_a_live_pi_session_is_archived_once_in_order_and_searchable_by_the_model(any_world: World) -> None:
    world = any_world
    shop = world.project("shop")
    first = world.rpc(shop)
    first.prompt("turn one: why does the SSE stream stall behind nginx?")
    first.prompt("turn two: 上次那个 proxy_buffering 问题 is what?")
    first.command("/e2e-note written while idle")
    first.command("/e2e-reload")
    first.prompt("turn three after the reload")
    first.request({"type": "compact"})
    first.request({"type": "bash", "command": "echo from-user-bash"})
    first.request({"type": "set_session_name", "name": "修复 SSE 断流"})
    first.command("/recall stats")
    first.command("/recall proxy_buffering")  # the pick list is answered with its first entry
    wait_for(lambda: any(n.startswith("[archived history") for n in first.notifications))
    assert first.close() == 0

    resumed = world.rpc(shop, "-c")
    resumed.prompt("turn four, resumed with -c")
    resumed.command("/recall import")  # batches over the agent's sessions folder, with progress
    wait_for(lambda: any("import done" in n for n in resumed.notifications))
    assert resumed.close() == 0

    # two pi processes writing to the archive at the same time
    both = [world.print_mode(world.project(name), f"parallel {name}: go") for name in ("blog", "api")]
    assert [p.wait(timeout=120) for p in both] == [0, 0]

    files = world.session_files()
    assert len(files) == 3, world.stderr()
    total = 0
    for path in files:
        session_id, expected = file_messages(path)
        assert archived(world.db, session_id) == expected, path.name
        total += len(expected)
    with Archive.open(world.db) as archive:
        stats = archive.stats()
        shop_id, shop_messages = file_messages(next(p for p in files if "shop" in p.parent.name))
        info = archive.session_info(shop_id)
    assert stats.messages == total and stats.sessions == 3
    assert info.name == "修复 SSE 断流" and info.project == "shop"
    roles = {role for role, _text, _id in shop_messages}
    assert {"user", "assistant", "tool_result", "tool_error", "bash", "summary", "custom"} <= roles
    customs = [text for role, text, _id in shop_messages if role == "custom"]
    assert customs == ["记忆提示 e2e hint for turn one: nginx buffering", "idle note: written while idle"]

    # turn 2: the model's session_search found the answer given in turn 1
    turn_one_msg = next(i for i, (role, text, _id) in enumerate(shop_messages) if text == TURN_ONE_ANSWER)
    with Archive.open(world.db) as archive:
        answer_id = archive.read(shop_id, before=50, after=0).messages[turn_one_msg].msg_id
    shop_file = next(p for p in files if "shop" in p.parent.name)
    found = tool_result_text(shop_file, "session_search")
    assert found.startswith("[archived history")
    assert f"msg_id={answer_id} assistant:" in found

    # /recall stats told the user, and nothing went wrong on the way
    stats_note = next(n for n in first.notifications if n.startswith("archive "))
    assert "messages " in stats_note and "sessions " in stats_note
    # /recall <keywords>: a pick list of hits; the chosen one opens its session window
    (pick,) = first.selects
    assert pick["title"] == "recall: proxy_buffering" and "proxy_buffering" in pick["options"][0]
    window = next(n for n in first.notifications if n.startswith("[archived history"))
    assert f"session {shop_id[:8]}" in window and "proxy_buffering" in window
    done = next(n for n in resumed.notifications if "import done" in n)
    assert done.startswith("pi-memory: import done: 1 file, ")
    # archived text shown back (a checkpoint may quote "last read failed") is not a problem report
    notes = [n for n in first.notifications + resumed.notifications if not n.startswith("[archived history")]
    problems = [n for n in notes if "failed" in n]
    assert not problems, world.stderr()


def bridge_pid(pi_pid: int) -> int:
    """The `pi_memory bridge` child of a pi process."""
    pid = bridge_pid_or_none(pi_pid)
    if pid is None:
        raise AssertionError(f"pi {pi_pid} has no bridge child")
    return pid


def bridge_pid_or_none(pi_pid: int) -> int | None:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pi_pid and b"pi_memory" in cmdline and (proc / "stat").read_text().split(")")[1].split()[0] != "Z":
            return int(proc.name)
    return None


def wait_for(predicate: Any, timeout: float = 10) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the bridge process through /proc")
def test_a_killed_bridge_never_stops_pi_tells_the_user_once_and_import_fills_the_gap(
    world: World, tmp_path: Path
) -> None:
    flag = tmp_path / "bridge-broken"
    env = dict(
        world.env, PI_MEMORY_BRIDGE=f"{sys.executable} {HERE / 'bridge-wrapper.py'}", PI_MEMORY_E2E_BROKEN=str(flag)
    )
    shop = world.project("shop")
    rpc = world.rpc(shop, env=env)
    rpc.prompt("turn one: why does the SSE stream stall behind nginx?")
    (path,) = world.session_files()
    session_id, _ = file_messages(path)
    # every message archived with its entry id (a live capture gets its id from the backfill that
    # follows it: counting messages alone snapshotted one still without its id)
    wait_for(lambda: archived(world.db, session_id) == file_messages(path)[1])
    before_kill = archived(world.db, session_id)

    flag.touch()  # restarts fail from now on, as if the package had been uninstalled
    os.kill(bridge_pid(rpc.pid), signal.SIGKILL)
    rpc.prompt("turn three after the kill")
    rpc.prompt("turn four, still without a bridge")
    assert rpc.close() == 0

    _, expected = file_messages(path)
    assert "After reload: still here." in [text for _r, text, _i in expected]  # pi kept answering
    warnings = [n for n in rpc.notifications if "pi-memory" in n]
    assert len(warnings) == 1, rpc.notifications
    after = archived(world.db, session_id)
    assert after[: len(before_kill)] == before_kill  # nothing already written was lost
    assert len(after) < len(expected)  # the turns after the kill were not archived live

    flag.unlink()
    done = subprocess.run([*python_cli(), "import", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert archived(world.db, session_id) == expected


def test_writes_queued_while_the_bridge_is_down_are_retried_in_order_after_a_restart(world: World) -> None:
    shop = world.project("shop")
    rpc = world.rpc(shop)
    rpc.prompt("turn one: why does the SSE stream stall behind nginx?")
    (path,) = world.session_files()
    session_id, _ = file_messages(path)
    wait_for(lambda: len(archived(world.db, session_id)) == len(file_messages(path)[1]))
    first_bridge = bridge_pid(rpc.pid)

    os.kill(first_bridge, signal.SIGKILL)
    rpc.prompt("turn three after the kill")  # its messages queue up while no bridge runs
    rpc.prompt("turn four, the bridge is back")
    wait_for(lambda: bridge_pid_or_none(rpc.pid) not in (None, first_bridge))  # a fresh bridge took over
    assert rpc.close() == 0

    _, expected = file_messages(path)
    assert archived(world.db, session_id) == expected  # no import needed: the queue was replayed
    assert len([n for n in rpc.notifications if "pi-memory" in n]) == 1


def test_the_extension_type_checks_against_the_pi_api(pi: PiInstall, tmp_path: Path) -> None:
    """Strict `tsc --noEmit` of extensions/pi/index.ts against the installed pi's own type declarations."""
    try:
        tsc = ensure_typescript()
    except InstallUnavailable as exc:
        pytest.skip(str(exc))
    modules = pi.root / "node_modules"
    package = "@mariozechner/pi-coding-agent" if pi.major == 0 else "@earendil-works/pi-coding-agent"
    typebox = next((modules / "typebox").glob("build/index.d.*ts"), None)
    if typebox is None:
        pytest.skip(f"pi {pi.version} ships no typebox declarations")
    config = {
        "compilerOptions": {
            "target": "ES2022",
            "module": "NodeNext",
            "moduleResolution": "NodeNext",
            "strict": True,
            "noEmit": True,
            "skipLibCheck": True,
            "types": ["node"],
            "typeRoots": [str(tsc.parent.parent / "@types")],
            "baseUrl": str(tmp_path),
            "paths": {
                "@mariozechner/pi-coding-agent": [str(modules / package / "dist" / "index.d.ts")],
                "typebox": [str(typebox)],
                "*": [str(modules / "*")],
            },
        },
        "files": [str(EXTENSION)],
    }
    (tmp_path / "tsconfig.json").write_text(json.dumps(config), encoding="utf-8")
    done = subprocess.run(
        [str(tsc), "-p", str(tmp_path / "tsconfig.json")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_documented_pi_install_command_sets_the_extension_up(world: World) -> None:
    """`pi install <repo>/extensions/pi` (README), then a plain pi run archives its session."""
    blog = world.project("blog")
    installed = subprocess.run(
        [str(world.pi.pi), "install", str(EXTENSION.parent)], env=world.env, capture_output=True, text=True, timeout=120
    )
    assert installed.returncode == 0, installed.stderr
    cmd = [str(world.pi.pi), "-e", str(HERE / "faux-provider.ts"), "--model", "faux/faux-1", "-nc", "-ns", "-np"]
    run = subprocess.run([*cmd, "-p", "parallel blog: go"], cwd=blog, env=world.env, capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr
    (path,) = world.session_files()
    session_id, expected = file_messages(path)
    assert len(expected) == 4  # user, assistant tool call, tool result, final answer
    assert archived(world.db, session_id) == expected


def test_a_missing_package_is_reported_once_at_session_start_and_pi_still_works(world: World) -> None:
    env = dict(world.env, PI_MEMORY_BRIDGE=f"{sys.executable} -m pi_memory_not_installed bridge")
    rpc = world.rpc(world.project("shop"), env=env)
    rpc.request({"type": "get_state"})  # pi is up; the notice came with the session start, before any prompt
    wait_for(lambda: any("pi-memory" in n for n in rpc.notifications), timeout=20)
    rpc.prompt("turn three: answer without an archive")
    rpc.prompt("turn four: and again")
    assert rpc.close() == 0
    warnings = [n for n in rpc.notifications if "pi-memory" in n]
    assert len(warnings) == 1 and "No module named pi_memory_not_installed" in warnings[0]
    (path,) = world.session_files()
    assert "After reload: still here." in [text for _r, text, _i in file_messages(path)[1]]
