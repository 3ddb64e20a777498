"""Recall inside the current session: search, list or read back records by branch, file, kind and id.

Design idea (spec 002, `pi_compact_recall`, folded into our tools): after a
compaction the model still needs the details it no longer sees, and only the
ones of its own line of work. So a recall is always *scoped*: `branch` (the
entries on the current branch, whose ids the caller passes: pi knows its
branch, the archive does not), `session` (every branch of the session) or
`all` (every session). Inside the scope it selects records three ways:

- `entry_ids`: exactly these records, in session order (query, kind, file and
  page are ignored), with their full text or verbatim JSON in segments;
- `action: "list"`: the newest records, bounded, no query needed;
- a query (and/or `file`): the content search, ranked as everywhere else
  (`Searcher` with the scope as a filter), plus a bounded scan of the
  successful tool outputs the index leaves out, matched on their full text.

An empty query with only a kind lists nothing (spec rule): history is read on
purpose, not dumped. Compaction and branch summaries are `derived`, everything
else `primary` (`source_class`). One params dict in, one JSON-able dict out,
so the bridge and MCP register it in one line; `format_recall` turns it into
the text a model reads: the evidence header, whole result blocks within
16,000 characters, and the ids of whatever was left out. A long body comes in
`offset`/`raw_limit` segments whose cursors join them back exactly.

May import: the core, the storage layer, `search`, `runs`, `compact` and
`pi_memory.errors`; it reads through the `ArchiveView` protocol, never the
facade. The tool spec and its bridge shell are `frontends.tools.recall`.
"""

from __future__ import annotations

from .model import RECALL_MAX_CHARS, RecallItem, RecallRequest, RecallResult, allowed_roles, parse_request
from .present import format_recall
from .scope import branch_ids_from
from .select import recall

__all__ = [
    "RECALL_MAX_CHARS",
    "RecallItem",
    "RecallRequest",
    "RecallResult",
    "allowed_roles",
    "branch_ids_from",
    "format_recall",
    "parse_request",
    "recall",
]
