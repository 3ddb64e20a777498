"""The demo archive: the sample sessions shipped inside the package, in an archive file of its own.

What it is for: the first set-up command (`pip install . && pi-memory demo`) shows the main job,
finding past work by keywords in Chinese and English, on a machine with no agent sessions yet,
without touching the user's archive or shell: the demo archive lives in the cache folder, and the
commands that follow name it with `--db`. Building it again restores whatever was forgotten in it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..ingest.importer import ImportReport, find_files
from .api import Archive

SAMPLES = Path(__file__).resolve().parent.parent / "samples"  # real pi sessions, shipped as package data
DEMO_QUERY = "缓存索引 方案"


def demo_db_path() -> Path:
    """`$XDG_CACHE_HOME/pi-memory/demo.db` (default `~/.cache/...`): a file the user can delete at will."""
    cache = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(cache).expanduser() / "pi-memory" / "demo.db"


def build_demo(path: Path | None = None) -> tuple[Path, ImportReport]:
    """Import the sample sessions into the demo archive (made if missing), forgotten ones included."""
    path = path or demo_db_path()
    found = find_files([SAMPLES])
    if not found.files:
        raise FileNotFoundError(f"the sample sessions are missing from this installation ({SAMPLES})")
    with Archive.open(path) as archive:
        report = archive.import_paths(found.files, force=True, include_forgotten=True)
    return path, report
