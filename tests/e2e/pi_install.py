"""Install real pi versions from the npm registry into a cache folder outside the repository, once.

pi 0.73.1 (`@mariozechner/pi-coding-agent`) runs on the system Node (>= 20.6); pi 1.6.0
(`@earendil-works/pi-coding-agent`) needs Node >= 22.19, which comes from the npm package
`node-<platform>-<arch>@22` (it ships the node binary) and is put first on PATH.
"""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("PI_MEMORY_E2E_CACHE", "~/.cache/pi-memory-e2e")).expanduser()


@dataclass
class PiInstall:
    version: str
    root: Path
    node_bin: Path | None  # a folder to put first on PATH, or None for the system node

    @property
    def pi(self) -> Path:
        return self.root / "node_modules" / ".bin" / "pi"

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def ready(self) -> bool:
        return self.pi.exists() and (self.node_bin is None or (self.node_bin / "node").exists())

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        if self.node_bin:
            env["PATH"] = f"{self.node_bin}{os.pathsep}{env.get('PATH', '')}"
        return env


def node_package() -> str:
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), "x64"
    )
    system = {"linux": "linux", "darwin": "darwin"}.get(platform.system().lower(), "linux")
    return f"node-{system}-{arch}"


def packages(version: str) -> tuple[list[str], str | None]:
    """npm packages to install, and the node package whose bin/ goes first on PATH."""
    if version.startswith("0."):
        return [f"@mariozechner/pi-coding-agent@{version}"], None
    node = node_package()
    return [f"{node}@22", f"@earendil-works/pi-coding-agent@{version}"], node


class InstallUnavailable(Exception):
    """npm is missing or the registry cannot be reached: the caller skips with this reason."""


@contextmanager
def install_lock(name: str) -> Iterator[None]:
    """Two test runs at once (CI and a developer) must not run npm into the same folder together."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def ensure_pi(version: str) -> PiInstall:
    specs, node = packages(version)
    root = CACHE / f"pi-{version}"
    install = PiInstall(version, root, root / "node_modules" / node / "bin" if node else None)
    if install.ready():
        return install
    with install_lock(f"pi-{version}"):
        if not install.ready():  # another run may have finished it while we waited
            npm_install(root, specs, f"pi {version}")
    if not install.ready():
        raise RuntimeError(f"npm installed {specs} into {root}, but {install.pi} (or its node) is missing")
    return install


def npm_install(root: Path, specs: list[str], what: str) -> None:
    npm = shutil.which("npm")
    if not npm:
        raise InstallUnavailable(f"npm is not installed: cannot install {what} for the end-to-end tests")
    root.mkdir(parents=True, exist_ok=True)
    cmd = [npm, "install", "--save-exact", "--no-audit", "--no-fund", "--loglevel=error", *specs]
    try:
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise InstallUnavailable(f"npm install of {what} took over 10 minutes") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise InstallUnavailable(f"npm install of {what} failed: {' | '.join(tail)}")


def ensure_typescript() -> Path:
    """`tsc` (TypeScript 5 with Node 20 types) in the cache, for type-checking the extension."""
    root = CACHE / "tools"
    tsc = root / "node_modules" / ".bin" / "tsc"

    def ready() -> bool:
        return tsc.exists() and (root / "node_modules" / "@types" / "node").exists()

    if not ready():
        with install_lock("tools"):
            if not ready():
                npm_install(root, ["typescript@5", "@types/node@20"], "TypeScript")
    return tsc
