"""In-session folding: consumed tool output folds into short blocks, the prompt prefix stays byte-stable.

Design idea (spec 004, "活跃区消费即折叠、不可变前缀、LSM 多层收敛"): a long pi session
carries every old `read`/`bash` output in every request. Once consumed, that output is
replaced in the model's context by a pointer stub or one block that cites where the archive
keeps it (`r12/m4`, readable in full with `session_read`). Every fold is a *record* persisted
in the session (a pi custom entry) with its rendered text frozen inside it, so the context sent
to the provider is a pure function of (the session's messages, the fold records): records are
only ever appended, so a fold changes the request bytes once, at its span, and every later
request starts with the same bytes as the one before. `/reload`, `pi -c` and a resume read the
same records and rebuild the same bytes.

Three kinds of record: `stubs` (deterministic auto-fold of old successful tool outputs, batched),
`block` (the model's `fold` tool: its summary plus the folded entries' addresses), `merge` (when
fold text itself passes a budget, the folded material merges into one block one level higher).

Everything here is pure (no database): `view` maps context messages to entry ids, `plan` decides
new records, `apply` turns records into edits of the message list, `render` writes the texts,
`status` counts. The pi extension talks to it through `frontends.bridge.fold`.

May import: `compact` (boundaries, settings), the storage layer (reading fold
records of archived sessions) and `pi_memory.errors`.
"""

from __future__ import annotations

from .apply import Edit, apply_records
from .plan import FoldSettings, plan_auto, plan_block, plan_merge
from .records import FoldRecord, parse_records
from .status import FoldStatus, fold_status
from .view import ContextView, view_from_entries, view_from_messages

__all__ = [
    "ContextView",
    "Edit",
    "FoldRecord",
    "FoldSettings",
    "FoldStatus",
    "apply_records",
    "fold_status",
    "parse_records",
    "plan_auto",
    "plan_block",
    "plan_merge",
    "view_from_entries",
    "view_from_messages",
]
