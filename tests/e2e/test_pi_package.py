"""The pi package installed the pi way, into real pi 0.73.1 and 1.6.0.

- `pi install npm:pi-memory`: the package `npm pack` makes of `extensions/pi`, served by an npm
  registry on loopback (a packument and the tarball, the two things npm fetches), installed by pi's
  own `npm install -g` into a global folder of the test's (`npm_config_prefix`);
- `pi install git:...`: the repository as committed (HEAD), cloned by pi over git's HTTP protocol
  from loopback, then `npm install` in the clone as pi does; its root `package.json` names the
  extension.

Then a plain `pi -p` run: without the Python side on PATH the first-start check prints its one-line
hint (what to install, and how), and pi still answers; with it, the session is archived.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pi_install import InstallUnavailable, PiInstall, ensure_pi
from test_pi_live import HERE, PI_VERSIONS, archived, file_messages

ROOT = HERE.parent.parent
PACKAGE = ROOT / "extensions" / "pi"
FAUX = HERE / "faux-provider.ts"


@pytest.fixture(scope="session", params=PI_VERSIONS)
def pi(request: pytest.FixtureRequest) -> PiInstall:
    try:
        return ensure_pi(str(request.param))
    except InstallUnavailable as exc:
        pytest.skip(str(exc))


class Handler(SimpleHTTPRequestHandler):
    """Static files; a registry's packument (`/registry/NAME`, a file without a suffix) is JSON."""

    def guess_type(self, path: str | os.PathLike[str]) -> str:
        if Path(path).parent.name == "registry" and not Path(path).suffix:
            return "application/json"
        return super().guess_type(path)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  (the base class's name)
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """An HTTP server on loopback over a folder: (its base URL, the folder)."""
    root = tmp_path_factory.mktemp("served")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()  # the socket listens from the constructor on: no wait needed
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()
    server.server_close()


def npm() -> str:
    found = shutil.which("npm")
    if not found:
        pytest.skip("npm is not installed: cannot pack the pi package")
    return found


@pytest.fixture(scope="module")
def registry(served: tuple[str, Path]) -> str:
    """The packed package published into a static npm registry; its URL."""
    base, root = served
    out = root / "registry" / "-"
    out.mkdir(parents=True)
    packed = subprocess.run(
        [npm(), "pack", str(PACKAGE), "--pack-destination", str(out), "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    info = json.loads(packed.stdout)[0]
    tarball = out / info["filename"]
    data = tarball.read_bytes()
    version = info["version"]
    manifest = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    manifest["dist"] = {
        "tarball": f"{base}/registry/-/{tarball.name}",
        "shasum": hashlib.sha1(data).hexdigest(),
        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
    }
    packument = {"name": "pi-memory", "dist-tags": {"latest": version}, "versions": {version: manifest}}
    (root / "registry" / "pi-memory").write_text(json.dumps(packument), encoding="utf-8")
    return f"{base}/registry/"


@pytest.fixture(scope="module")
def git_repo(served: tuple[str, Path]) -> str:
    """The repository's HEAD as a bare repository served over git's (dumb) HTTP protocol."""
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    base, root = served
    bare = root / "git" / "pi-memory" / "pi-memory"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(ROOT), str(bare)], check=True, timeout=300)
    subprocess.run(["git", "update-server-info"], cwd=bare, check=True, timeout=60)
    return f"git:{base}/git/pi-memory/pi-memory"


class Machine:
    """A user's machine for pi: home, agent folder, a global npm folder, one project."""

    def __init__(self, pi: PiInstall, home: Path, tmp_path: Path) -> None:
        self.pi = pi
        self.agent_dir = Path(os.environ["PI_CODING_AGENT_DIR"])
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        self.project = home / "blog"
        self.project.mkdir()
        self.db = os.environ["PI_MEMORY_DB"]
        # `pi-memory` as an installed console script would be, for this checkout's code
        self.scripts = tmp_path / "scripts"
        self.scripts.mkdir()
        script = self.scripts / "pi-memory"
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pi_memory "$@"\n', encoding="utf-8")
        script.chmod(0o755)
        # PATH without this Python's scripts: no `pi-memory` unless a test puts it back
        bare_path = os.pathsep.join(
            p
            for p in {
                str(Path(shutil.which("node") or "/usr/bin/node").parent),
                str(Path(npm()).parent),
                "/usr/bin",
                "/bin",
            }
        )
        self.env = pi.env(
            {
                "HOME": str(home),
                "PATH": bare_path,
                "PI_CODING_AGENT_DIR": str(self.agent_dir),
                "PI_MEMORY_DB": self.db,
                "PI_OFFLINE": "1",
                "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                "TMPDIR": str(tmp_path),
                "npm_config_prefix": str(tmp_path / "npm-global"),
                "npm_config_cache": str(tmp_path / "npm-cache"),
                "npm_config_update_notifier": "false",
                "npm_config_audit": "false",
                "npm_config_fund": "false",
                "GIT_TERMINAL_PROMPT": "0",
            }
        )

    def install(self, source: str, **extra: str) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **extra}
        return subprocess.run(
            [str(self.pi.pi), "install", source], env=env, capture_output=True, text=True, timeout=300
        )

    def run(self, prompt: str, **extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.pi.pi), "-e", str(FAUX), "--model", "faux/faux-1", "-nc", "-ns", "-np", "-p", prompt]
        env = {**self.env, "PI_FAUX_SCRIPT": "", **extra}
        return subprocess.run(cmd, cwd=self.project, env=env, capture_output=True, text=True, timeout=180)

    def session_files(self) -> list[Path]:
        return sorted((self.agent_dir / "sessions").rglob("*.jsonl"))


@pytest.fixture
def machine(pi: PiInstall, isolated_home: Path, tmp_path: Path) -> Machine:
    return Machine(pi, isolated_home, tmp_path)


def hint_of(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("pi-memory: the Python side is not installed")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_pi_install_npm_installs_the_packed_package_whose_first_start_names_what_to_install(
    machine: Machine, registry: str
) -> None:
    installed = machine.install("npm:pi-memory", npm_config_registry=registry)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    settings = json.loads((machine.agent_dir / "settings.json").read_text(encoding="utf-8"))
    assert settings["packages"] == ["npm:pi-memory"]
    # pi 0.73 installs with `npm install -g` (our npm_config_prefix), pi 1.x into its agent folder's npm/
    (manifest,) = [
        p
        for root in (Path(machine.env["npm_config_prefix"]), machine.agent_dir / "npm")
        for p in root.glob("**/node_modules/pi-memory/package.json")
    ]
    assert json.loads(manifest.read_text(encoding="utf-8"))["pi"] == {"extensions": ["./index.ts"]}

    tools = machine.scripts.parent / "uv-only"  # a machine with uv but without pi-memory
    tools.mkdir()
    (tools / "uv").write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    (tools / "uv").chmod(0o755)
    first = machine.run("hello", PATH=f"{tools}{os.pathsep}{machine.env['PATH']}")  # and no PI_MEMORY_BRIDGE
    assert first.returncode == 0 and "OK." in first.stdout, first.stderr
    hint = hint_of(first.stderr)
    print(f"\npi {machine.pi.version}, installed from npm, first start: {hint}")
    assert "Install it with `uv tool install pi-memory`" in hint and "PI_MEMORY_BRIDGE" in hint

    second = machine.run("parallel blog: go", PI_MEMORY_BRIDGE=f"{sys.executable} -m pi_memory bridge")
    assert second.returncode == 0, second.stderr
    assert "pi-memory:" not in second.stderr
    path = machine.session_files()[-1]
    session_id, expected = file_messages(path)
    assert expected and archived(machine.db, session_id) == expected


def test_pi_install_git_clones_the_repository_whose_first_start_names_its_python_project(
    machine: Machine, git_repo: str
) -> None:
    installed = machine.install(git_repo)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    clones = list((machine.agent_dir / "git").rglob("extensions/pi/index.ts"))
    assert len(clones) == 1
    checkout = clones[0].parent.parent.parent

    first = machine.run("hello")
    assert first.returncode == 0 and "OK." in first.stdout, first.stderr
    hint = hint_of(first.stderr)
    print(f"\npi {machine.pi.version}, installed from git, first start: {hint}")
    assert f"Install it with `pip install {checkout}`" in hint  # the clone holds the Python project

    second = machine.run("parallel blog: go", PATH=f"{machine.scripts}{os.pathsep}{machine.env['PATH']}")
    assert second.returncode == 0, second.stderr
    assert "pi-memory:" not in second.stderr  # `pi-memory` found on PATH by the first-start check
    session_id, expected = file_messages(machine.session_files()[-1])
    assert expected and archived(machine.db, session_id) == expected
