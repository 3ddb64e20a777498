"""The progress line of a long import: files, messages, rate, ETA, redrawn in place on a terminal.

Design idea: one small helper the CLI hands to `Archive.import_paths(on_progress=...)`; it draws
only on a terminal (the CLI does not create it for `--json` or when stderr is piped), redraws at
most a few times a second, and erases itself at the end so the summary line stands alone. The
line's wording is a pure function, tested without a terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

REDRAW_S = 0.2


def progress_line(files: int, total: int, messages: int, elapsed: float) -> str:
    """`importing 120/751 files · 4,800 messages · 2,310 msg/s · ETA 0:04`."""
    parts = [f"importing {files:,}/{total:,} files", f"{messages:,} messages"]
    if elapsed > 0 and messages:
        parts.append(f"{messages / elapsed:,.0f} msg/s")
    if 0 < files < total and elapsed > 0:
        left = round(elapsed / files * (total - files))
        parts.append(
            f"ETA {left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}"
            if left >= 3600
            else f"ETA {left // 60}:{left % 60:02d}"
        )
    return " · ".join(parts)


class ImportProgress:
    """Draws `progress_line` on a terminal stream as files finish; `close()` erases it."""

    def __init__(self, total_files: int, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total_files
        self.stream = stream
        self.clock = clock
        self.start = clock()
        self.files = 0
        self.last_draw = float("-inf")
        self.width = 0

    def __call__(self, _path: Path, messages: int) -> None:
        self.files += 1
        now = self.clock()
        if now - self.last_draw >= REDRAW_S or self.files == self.total:
            self.last_draw = now
            self._draw(progress_line(self.files, self.total, messages, now - self.start))

    def _draw(self, line: str) -> None:
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def close(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()


def embed_line(done: int, total: int, elapsed: float) -> str:
    """`embedding 1,200/30,000 units · 28/s · ETA 17:08`."""
    parts = [f"embedding {done:,}/{total:,} units"]
    if elapsed > 0 and done:
        parts.append(f"{done / elapsed:,.1f}/s")
        left = round(elapsed / done * (total - done))
        if 0 < done < total:
            parts.append(
                f"ETA {left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}"
                if left >= 3600
                else f"ETA {left // 60}:{left % 60:02d}"
            )
    return " · ".join(parts)


class EmbedProgress(ImportProgress):
    """`embed_line` redrawn on a terminal as batches finish (`Archive.embed(progress=...)`)."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(0, stream, clock)

    def __call__(self, done: int, total: int, elapsed: float) -> None:  # type: ignore[override]
        now = self.clock()
        if now - self.last_draw >= REDRAW_S or done == total:
            self.last_draw = now
            self._draw(embed_line(done, total, elapsed))
