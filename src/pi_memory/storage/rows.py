"""The values a write carries into the store: a session's row, a new message, another source line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..core.echo import is_echo_message
from ..core.text import index_texts
from .codec import compress, encode_text, packed_with, plain


@dataclass
class SessionRow:
    id: str
    agent: str
    cwd: str
    project: str
    started_at: int
    last_at: int
    name: str | None = None
    parent_session: str | None = None
    source_path: str | None = None


def meta_json(meta: dict[str, Any]) -> str | None:
    """A message's meta as `msg.meta` stores it (made before the transaction, often by a parse worker)."""
    return json.dumps(meta, ensure_ascii=False, separators=(",", ":"), default=str) if meta else None


@dataclass
class NewMessage:
    """A message ready to write: everything but its seq and id is computed."""

    session_id: str
    ts: int
    role: str
    text: str
    indexed: bool
    entry_id: str | None
    parent_id: str | None
    meta: dict[str, Any]
    hash: str
    raw: bytes | None = None  # the verbatim source line, if any (or only `packed_raw`: `has_line`)
    entry_type: str = "message"
    chars: str | bytes = ""  # the tokens (`text.index_texts`): text, or its UTF-8 from a parse worker
    grams: str | bytes = ""
    packed: str | bytes | None = None  # `encode_text(text, dict_id)`, made before the transaction
    packed_raw: bytes | None = None  # `compress(raw, text)`, likewise
    typed: str | bytes | None = None  # `msg_typed`'s column (`text.surface_chars` joined), when made before
    meta_json: str | None = None  # `msg.meta` as stored, when made before
    # the archive's own output (`core.echo`): a call to its tools or a result is one by itself; a parse
    # worker, which sees whole runs, says so of the other messages of a run that only asked the archive
    echo: bool = False
    index_waits: bool = False  # written with `INDEX_PENDING`: indexed (and counted) at the next idle moment

    def __post_init__(self) -> None:
        if not self.echo:
            self.echo = is_echo_message(self.role, self.meta)

    @property
    def has_line(self) -> bool:
        """Whether the message came from a source line (kept verbatim): as it is, or packed already."""
        return self.raw is not None or self.packed_raw is not None

    def prepare(self) -> None:
        """Tokenize outside the transaction."""
        if self.indexed and not self.chars and not self.grams:
            self.chars, self.grams = index_texts(self.text)
            if not self.chars and not self.grams:
                self.indexed = False

    def pack(self, dict_id: int = 0, later: bool = False) -> None:
        """Compress the text (with the archive's dictionary `dict_id`) and the verbatim line outside
        the transaction (SQLite's storage). A text a parse worker packed with that dictionary is kept
        as it is; any other (not packed yet, or packed with another dictionary) is packed here. An
        archive without a dictionary yet keeps the text as it is, packed once it has learned one
        from its first messages (`Store.text_codec`). `later`: the text and the verbatim line stay
        plain, to be packed with the message's deferred index entry (`Store.index_pending`)."""
        if later and self.packed is None:
            self.packed = self.text
        elif not dict_id:
            self.packed = self.text
        elif not packed_with(self.packed, dict_id):
            self.packed = encode_text(self.text, dict_id)
        if self.packed_raw is None and self.raw is not None:
            self.packed_raw = plain(self.raw) if later else compress(self.raw, self.text)


@dataclass
class NewEntry:
    """A non-message source line, kept verbatim."""

    session_id: str
    key: str
    entry_id: str | None
    type: str
    ts: int
    raw: bytes
    packed_raw: bytes | None = None  # `compress(raw)`, when made before the transaction (a parse worker)
