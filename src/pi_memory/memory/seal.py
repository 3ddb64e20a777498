"""Keyed seals on the memory log: tamper evidence that holds against a writer of the archive file.

Design idea: the hash chain (`chain.py`) proves the events agree with each other, but anyone who
can write the file can append an event with a correct hash, rewrite one and recompute the rest,
or start a replacement chain: the forged text was then injected into the system prompt as the
user's instruction. So each event also gets a seal: an HMAC-SHA256, under a key that lives
outside the archive (`memory.key`, mode 0600, in the user's config folder), of the event's hash,
its place (workspace, chain, seq) and the seal before it. Without the key no seal can be made,
and a seal vouches for everything before it. The head of each workspace's chain (chain, seq,
seal) is pinned outside the archive too (`memory-pins/`, beside the key), so removing events
from the end, or going back to an older copy, is seen as well.

`verify` then reports, at the first event that fails: a forged append (an event without a seal,
or with one that does not match), a rewritten suffix (the first rewritten event's seal no longer
matches), a replaced chain (the active chain is not the pinned one), a cut chain (it ends before
its pinned head). The trusted prefix stops there; nothing after it is injected or built on.

What it cannot detect: a process that can read the key (the user's own programs, an agent with a
shell as the user) can seal what it writes, exactly as `pi-memory remember` does. Events written
before the archive had seals are trusted as they are when first sealed (at the next write), and
on a machine without the key and pins the archive's seals cannot be checked (its chains are then
untrusted until repaired, or the key is copied over).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import jsonline
from .chain import ChainRow

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: pins are written without a lock
    fcntl = None  # type: ignore[assignment]

KEY_FILE = "memory.key"
PINS_FILE = "memory-pins.json"  # all pins in one file: written by earlier versions, still read
PINS_DIR = "memory-pins"
_DOMAIN = b"pi-memory memory seal v1"
NO_SEAL = ""  # the seal "before" event 1


def config_dir() -> Path:
    """Where the key and the pins live: `$XDG_CONFIG_HOME/pi-memory`, else `~/.config/pi-memory`."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "pi-memory"


def key_path() -> Path:
    return config_dir() / KEY_FILE


def read_key() -> bytes | None:
    try:
        text = key_path().read_text(encoding="ascii").strip()
        return bytes.fromhex(text) if len(text) == 64 else None
    except (OSError, ValueError):
        return None


def ensure_key() -> bytes:
    """The key, made now (32 random bytes, mode 0600, in a 0700 folder) if there is none yet."""
    key = read_key()
    if key is not None:
        return key
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(key_path(), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        key = read_key()
        if key is None:
            raise OSError(f"{key_path()} is not a pi-memory key (64 hex digits): move it aside") from None
        return key
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(secrets.token_hex(32) + "\n")
    return ensure_key()


def seal(key: bytes, workspace: str, chain: int, row: ChainRow, previous: str) -> str:
    """The seal of one event at its place, chained to the seal before it."""
    return _seal(key, workspace, chain, row.seq, row.hash, previous)


@functools.lru_cache(maxsize=16384)  # every read checks every seal again: the same inputs, the same HMAC
def _seal(key: bytes, workspace: str, chain: int, seq: int, event_hash: str, previous: str) -> str:
    message = b"\n".join([_DOMAIN, workspace.encode(), str(chain).encode(), str(seq).encode()])
    message += b"\n" + event_hash.encode() + b"\n" + previous.encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def clear_cache() -> None:
    _seal.cache_clear()


def seal_rows(key: bytes, workspace: str, chain: int, rows: Sequence[ChainRow], previous: str = NO_SEAL) -> list[str]:
    """The seals of consecutive events, the first chained to `previous`."""
    seals = []
    for row in rows:
        previous = seal(key, workspace, chain, row, previous)
        seals.append(previous)
    return seals


# --- checking ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    """A workspace's chain head as last written by this user: chain id, seq and seal."""

    chain: int
    seq: int
    seal: str

    def to_dict(self) -> dict[str, Any]:
        return {"chain": self.chain, "seq": self.seq, "seal": self.seal}


@dataclass
class SealCheck:
    """How far the seals (and the pin) vouch for a chain's events, and why not further."""

    sealed: int  # events whose seal matches, from the first
    problem: str | None = None
    legacy: bool = False  # no seal at all and no pin: written before seals, sealed at the next write


def check(
    key: bytes | None,
    workspace: str,
    chain: int | None,
    rows: Sequence[ChainRow],
    seals: dict[int, str],
    pin: Pin | None,
    pinned_present: bool,
) -> SealCheck:
    """Check the seals of `rows` (the chain's hash-trusted events) and the pin; pure.

    `pinned_present`: the pinned chain is in this archive. A pin of a chain the archive does not
    hold is another archive's that lived at this path (a damaged one moved aside, a deleted one):
    this archive's chains are then checked by their seals alone, and none may be unsealed."""
    if pin is not None and pin.chain != chain:
        if pinned_present:
            return SealCheck(0, _replaced(pin, chain))
        pin, may_be_legacy = None, False
    else:
        may_be_legacy = pin is None
    if not rows:
        return SealCheck(0)
    if not seals and may_be_legacy:
        return SealCheck(len(rows), legacy=True)
    if key is None:
        return SealCheck(0, f"its events are sealed with a key this user does not have ({key_path()} is missing)")
    previous, good = NO_SEAL, 0
    for row in rows:
        stored = seals.get(row.seq)
        if stored is None:
            return SealCheck(good, f"event {row.seq} has no seal: it was written without the key (forged?)")
        if not hmac.compare_digest(stored, seal(key, workspace, chain or 0, row, previous)):
            return SealCheck(good, f"event {row.seq}'s seal does not match: it was altered or forged")
        previous, good = stored, good + 1
    if pin is not None and (good < pin.seq or not hmac.compare_digest(_seal_at(rows, seals, pin.seq), pin.seal)):
        return SealCheck(min(good, pin.seq - 1), _cut(pin, good))
    return SealCheck(good)


def _seal_at(rows: Sequence[ChainRow], seals: dict[int, str], seq: int) -> str:
    return seals.get(seq, "") if 0 < seq <= len(rows) else ""


def _replaced(pin: Pin | None, chain: int | None) -> str:
    pinned = f"chain {pin.chain}" if pin is not None else "another chain"
    active = f"chain {chain}" if chain is not None else "no chain"
    return f"the log was replaced: {active} is active where {pinned} was pinned (`memory repair` restores it)"


def _cut(pin: Pin, good: int) -> str:
    if good < pin.seq:
        return f"events were removed: the chain was pinned at event {pin.seq} and holds {good} sealed events"
    return f"event {pin.seq} is not the one pinned: the chain was rolled back or rewritten"


# --- the pins -----------------------------------------------------------------------------
#
# One small file per (archive, workspace) in `memory-pins/`: a write pins its workspace by
# rewriting that file alone, so the cost of a write does not grow with the number of workspaces
# this user has (one file for all of them was parsed and rewritten on every write: 7 ms a write
# at 400 workspaces, growing linearly). A `memory-pins.json` written by earlier versions is still
# read for the workspaces that have no file of their own yet.


def pins_dir() -> Path:
    return config_dir() / PINS_DIR


def legacy_pins_path() -> Path:
    return config_dir() / PINS_FILE


def pin_path(archive: str, workspace: str) -> Path:
    """The file that pins one workspace of one archive: named by a hash of both."""
    name = hashlib.sha256(f"{archive}\0{workspace}".encode()).hexdigest()[:40]
    return pins_dir() / f"{name}.json"


def archive_key(db_path: Path | str) -> str:
    """The archive a pin belongs to: its file, fully resolved."""
    return str(Path(db_path).expanduser().resolve())


def read_pin(archive: str, workspace: str) -> Pin | None:
    try:
        entry = jsonline.loads(pin_path(archive, workspace).read_text(encoding="utf-8"))
    except FileNotFoundError:
        entry = _legacy_pins().get(archive, {}).get(workspace)
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("archive", archive) != archive:
        return None
    if entry.get("workspace", workspace) != workspace:
        return None
    try:
        return Pin(int(entry["chain"]), int(entry["seq"]), str(entry["seal"]))
    except (KeyError, TypeError, ValueError):
        return None


@contextlib.contextmanager
def pinning() -> Iterator[None]:
    """Around a memory write and the pin that follows its commit: every writer of this user takes
    this lock first, so pins are written in the order the writes committed (a pin never goes back
    to an older head). A writer killed between its commit and its pin leaves the pin behind the
    chain, which the seals still vouch for."""
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with _locked(folder / (PINS_FILE + ".lock")):
        yield


def write_pin(archive: str, workspace: str, pin: Pin) -> None:
    """Pin a workspace's head (inside `pinning`): its own file written again, mode 0600."""
    folder = pins_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = pin_path(archive, workspace)
    temp = target.with_name(f"{target.stem}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"archive": archive, "workspace": workspace, **pin.to_dict()}, fh, ensure_ascii=False)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(temp, target)


def _legacy_pins() -> dict[str, dict[str, Any]]:
    """The one-file pins of earlier versions, parsed once per version of the file (it can be large
    and is read for every workspace not pinned the new way yet)."""
    path = legacy_pins_path()
    try:
        stat = path.stat()
    except OSError:
        return {}
    identity = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if identity not in _LEGACY:
        try:
            value = jsonline.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            value = {}
        _LEGACY.clear()  # one version of one file
        _LEGACY[identity] = value if isinstance(value, dict) else {}
    return _LEGACY[identity]


_LEGACY: dict[tuple[str, int, int, int], dict[str, dict[str, Any]]] = {}  # the file's identity -> its pins


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
