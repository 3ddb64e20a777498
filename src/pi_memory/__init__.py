"""pi-memory: a local-first black box and long-term memory for coding agents.

The public API is `Archive` (see `pi_memory.api`); every front end is a thin
shell over it.
"""

from .archive import Archive, Stats, Window
from .errors import ArchiveError
from .ingest.importer import ImportReport
from .search.messages import Hit

__all__ = ["Archive", "ArchiveError", "Hit", "ImportReport", "Stats", "Window"]
__version__ = "0.1.0"
