"""Builders for synthetic pi session entries (dicts as `getBranch()` returns them)."""

from __future__ import annotations

from typing import Any


class Branch:
    """Appends pi entries with sequential ids e001, e002, ... each a child of the last."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def _add(self, body: dict[str, Any]) -> str:
        entry_id = f"e{len(self.entries) + 1:03d}"
        parent = self.entries[-1]["id"] if self.entries else None
        ts = f"2026-12-02T10:00:{len(self.entries):02d}.000Z"
        self.entries.append({"id": entry_id, "parentId": parent, "timestamp": ts, **body})
        return entry_id

    def msg(self, message: dict[str, Any]) -> str:
        return self._add({"type": "message", "message": message})

    def user(self, text: str) -> str:
        return self.msg({"role": "user", "content": [{"type": "text", "text": text}]})

    def assistant(self, text: str = "", calls: list[tuple[str, str, dict[str, Any]]] = (), stop: str = "") -> str:  # type: ignore[assignment]
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "toolCall", "id": cid, "name": name, "arguments": args} for cid, name, args in calls]
        reason = stop or ("toolUse" if calls else "stop")
        return self.msg({"role": "assistant", "content": content, "stopReason": reason})

    def result(self, call_id: str, text: str, name: str = "bash", error: bool = False) -> str:
        return self.msg(
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{"type": "text", "text": text}],
                "isError": error,
            }
        )

    def bash(self, command: str, output: str, exit_code: int) -> str:
        return self.msg({"role": "bashExecution", "command": command, "output": output, "exitCode": exit_code})

    def meta(self, kind: str, **fields: Any) -> str:
        return self._add({"type": kind, **fields})

    def compaction(self, first_kept: str, summary: str = "old summary", details: Any = None) -> str:
        body: dict[str, Any] = {
            "type": "compaction",
            "summary": summary,
            "firstKeptEntryId": first_kept,
            "tokensBefore": 100,
        }
        if details is not None:
            body["details"] = details
        return self._add(body)
