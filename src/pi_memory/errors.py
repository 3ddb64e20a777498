"""Errors a person can act on: each carries one line that says what is wrong and what to do."""

from __future__ import annotations

from pathlib import Path


class ArchiveError(Exception):
    """Any failure the front ends report as one clear line."""


class CorruptDatabase(ArchiveError):
    def __init__(self, path: Path, detail: str, identity: tuple[int, int] | None = None) -> None:
        self.path = path
        self.detail = detail
        self.identity = identity  # (device, inode) of the damaged file: only that one is moved aside
        super().__init__(f"archive {path} is damaged ({detail})")


class NotFound(ArchiveError):
    pass


class BadInput(ArchiveError):
    pass
