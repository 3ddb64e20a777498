"""Long-term memory: an append-only, hash-chained event log the user controls.

Parts, bottom to top:
- `caches`      what a long-lived process keeps between calls, bounded by size
- `chain`       canonical event JSON, hashes, chain verification (pure)
- `model`       the projected record and the vocabularies (kinds, scopes, authors, statuses)
- `policy`      limits and who may do what (pure; judges events on append and on replay)
- `projection`  current state = replay of the events (pure)
- `find`        listing, BM25 search over a workspace's records, the injection block (pure)
- `log`         the chains in the archive database: append, verify, export, import, repair
- `service`     the operations (`Memories`): remember, propose, edit, forget, confirm, list
- `present`     the text of listings, records, writes and chain reports

The model's tools and pi's slash commands over these are a front end's
(`pi_memory.frontends.tools.memory`).

May import: the core, the storage layer and `pi_memory.errors`.
"""

from .chain import ChainReport, ChainRow, verify_chain
from .log import MemoryChainBroken, MemoryLog, MemoryRefused, workspace_key
from .model import MemoryRecord
from .projection import MemoryState, project
from .service import Listing, Memories, WriteResult, clear_caches

__all__ = [
    "ChainReport",
    "ChainRow",
    "Listing",
    "Memories",
    "MemoryChainBroken",
    "MemoryLog",
    "MemoryRecord",
    "MemoryRefused",
    "MemoryState",
    "WriteResult",
    "clear_caches",
    "project",
    "verify_chain",
    "workspace_key",
]
