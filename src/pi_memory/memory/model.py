"""What a memory is: the record the projection builds, and the vocabularies events use.

A record is never stored: it is the result of replaying a workspace's events
(see `projection`). Only the events are stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("preference", "constraint", "decision", "fact", "note")
SCOPES = ("workspace", "session")
# Older logs used `project` and `user`; both meant "this workspace" (never cross-workspace sharing).
SCOPE_ALIASES = {"project": "workspace", "user": "workspace"}
AUTHORS = ("user", "model", "rule")
STATUSES = ("active", "provisional", "superseded", "resolved")
# Filters people and tools may ask for, on top of the statuses: `pinned` (active and pinned), `all`.
STATUS_FILTERS = (*STATUSES, "pinned", "all")
EVENT_TYPES = ("create", "supersede", "pin", "unpin", "resolve", "edit", "confirm")


@dataclass(frozen=True)
class MemoryRecord:
    """The current state of one memory, as replayed from its events."""

    id: str
    body: str
    kind: str
    scope: str
    session_id: str | None
    author: str
    priority: int
    pinned: bool
    status: str
    confirmed: bool  # a model/rule proposal the user confirmed: authoritative from then on
    created_seq: int
    created_ts: int
    updated_seq: int
    updated_ts: int
    supersedes: str | None = None
    superseded_by: str | None = None
    source_entry_ids: tuple[str, ...] = field(default=())
    edits: int = 0

    @property
    def authoritative(self) -> bool:
        """Written or confirmed by the user: the only records ever injected into a prompt."""
        return self.author == "user" or self.confirmed

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "body": self.body,
            "kind": self.kind,
            "scope": self.scope,
            "session_id": self.session_id,
            "author": self.author,
            "priority": self.priority,
            "pinned": self.pinned,
            "status": self.status,
            "confirmed": self.confirmed,
            "created_seq": self.created_seq,
            "created_ts": self.created_ts,
            "updated_seq": self.updated_seq,
            "updated_ts": self.updated_ts,
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
            "source_entry_ids": list(self.source_entry_ids),
            "edits": self.edits,
        }
