"""Install real pi versions from the npm registry into a cache folder outside the repository, once.

pi 0.73.1 (`@mariozechner/pi-coding-agent`) runs on the system Node (>= 20.6); pi 1.6.0
(`@earendil-works/pi-coding-agent`) needs Node >= 22.19, which comes from the npm package
`node-<platform>-<arch>@22` (it ships the node binary) and is put first on PATH.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
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


def ensure_pi(version: str) -> PiInstall:
    specs, node = packages(version)
    root = CACHE / f"pi-{version}"
    install = PiInstall(version, root, root / "node_modules" / node / "bin" if node else None)
    if install.pi.exists() and (install.node_bin is None or (install.node_bin / "node").exists()):
        return install
    npm = shutil.which("npm")
    if not npm:
        raise InstallUnavailable("npm is not installed: cannot install pi for the end-to-end tests")
    root.mkdir(parents=True, exist_ok=True)
    cmd = [npm, "install", "--save-exact", "--no-audit", "--no-fund", "--loglevel=error", *specs]
    try:
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise InstallUnavailable(f"npm install of pi {version} took over 10 minutes") from None
    if proc.returncode != 0 or not install.pi.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise InstallUnavailable(f"npm install of pi {version} failed: {' | '.join(tail)}")
    return install


def ensure_typescript() -> Path:
    """`tsc` (TypeScript 5 with Node 20 types) in the cache, for type-checking the extension."""
    root = CACHE / "tools"
    tsc = root / "node_modules" / ".bin" / "tsc"
    if tsc.exists() and (root / "node_modules" / "@types" / "node").exists():
        return tsc
    npm = shutil.which("npm")
    if not npm:
        raise InstallUnavailable("npm is not installed: cannot install TypeScript")
    root.mkdir(parents=True, exist_ok=True)
    cmd = [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "typescript@5", "@types/node@20"]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or not tsc.exists():
        raise InstallUnavailable(f"npm install of typescript failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    return tsc
