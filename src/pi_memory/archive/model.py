"""The facade's plain values: a session, a window of messages, the archive's totals, and date options.

Each has `to_dict()`, the shape of the `--json` output and of the bridge's answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..core import jsonline
from ..errors import BadInput


@dataclass
class SessionInfo:
    id: str
    agent: str
    cwd: str
    project: str
    started_at: int
    last_at: int
    name: str | None
    first_user: str | None
    messages: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class MessageView:
    msg_id: int
    seq: int
    ts: int
    role: str
    text: str
    entry_id: str | None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Window:
    session: SessionInfo
    messages: list[MessageView]
    around: int | None
    before_more: bool
    after_more: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session.to_dict(),
            "around": self.around,
            "before_more": self.before_more,
            "after_more": self.after_more,
            "messages": [m.to_dict() for m in self.messages],
        }


@dataclass
class Stats:
    messages: int
    indexed: int
    sessions: int
    projects: int
    db_bytes: int
    oldest: int | None
    newest: int | None
    roles: dict[str, int]
    path: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def parse_since(value: str | None) -> int | None:
    """`YYYY-MM-DD` (or a full ISO time) -> unix ms, UTC; a clear error otherwise."""
    if value is None or value == "":
        return None
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"bad date {value!r}: use YYYY-MM-DD") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def parse_until(value: str | None) -> int | None:
    """An end date, inclusive: `YYYY-MM-DD` means up to the end of that day (UTC); a full time is exact."""
    end = parse_since(value)
    if end is not None and value is not None and len(value.strip()) == 10:
        end += 24 * 3600 * 1000
    return end


def json_meta(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = jsonline.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
