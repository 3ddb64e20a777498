"""pi-memory: a local-first black box and long-term memory for coding agents.

The public API is `Archive` (see `pi_memory.api`); every front end is a thin
shell over it. The names below are loaded when first used, so a process that
needs one part of the package (a parse worker: `python -m pi_memory.parse_worker`)
does not load the rest (search, and with it NumPy).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .archive import Archive, Stats, Window
    from .errors import ArchiveError
    from .ingest.importer import ImportReport
    from .search.messages import Hit

__all__ = ["Archive", "ArchiveError", "Hit", "ImportReport", "Stats", "Window"]
__version__ = "0.1.0"

_HOMES = {
    "Archive": ".archive",
    "Stats": ".archive",
    "Window": ".archive",
    "ArchiveError": ".errors",
    "ImportReport": ".ingest.importer",
    "Hit": ".search.messages",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'pi_memory' has no attribute {name!r}")
    value = getattr(import_module(home, __name__), name)
    globals()[name] = value
    return value
