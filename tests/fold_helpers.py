"""A scripted pi session for the fold tests and bench: messages as pi builds them, and the shim's loop.

`Session` appends messages the way pi's agent does (user prompt, assistant with tool calls,
tool results, final answer), gives each persisted message an entry id, and `request()` does
what `extensions/pi/fold.ts` does before each model call: `on_context`, persist the returned
records, splice the edits. The payload is the folded message list.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pi_memory.compact.fold.apply import Edit
from pi_memory.compact.fold.plan import FoldSettings
from pi_memory.compact.fold.service import fold_now, on_context


def body(tag: str, size: int) -> str:
    line = f"{tag}: line of scripted tool output for the fold tests\n"
    return (line * (size // len(line) + 1))[:size]


@dataclass
class Session:
    cfg: FoldSettings = field(default_factory=FoldSettings)
    fold: bool = True
    messages: list[dict[str, Any]] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)  # full pi entries (root to leaf)
    folds: list[dict[str, Any]] = field(default_factory=list)
    payloads: list[list[dict[str, Any]]] = field(default_factory=list)
    clock: int = 1_700_000_000_000
    lookup: Callable[[list[str]], dict[str, str]] = lambda ids: {}
    n: int = 0
    reuse_ids: bool = False  # a provider that names its calls call_0, call_1... again every turn

    def tick(self) -> int:
        self.clock += 7
        return self.clock

    def add(self, message: dict[str, Any]) -> None:
        self.n += 1
        self.messages.append(message)
        self.entries.append({"type": "message", "id": f"e{self.n:07d}", "message": message})

    def slim(self) -> list[dict[str, Any]]:
        out = []
        for e in self.entries:
            if e["type"] == "message":
                m = e["message"]
                out.append(
                    {
                        "id": e["id"],
                        "type": "message",
                        "role": m["role"],
                        "ts": m["timestamp"],
                        "call": m.get("toolCallId"),
                    }
                )
        return out

    def persist(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            self.folds.append(r)
            self.n += 1
            self.entries.append({"type": "custom", "customType": "pi-memory-fold", "id": f"e{self.n:07d}", "data": r})

    def request(self) -> list[dict[str, Any]]:
        msgs = json.loads(json.dumps(self.messages))
        if self.fold:
            out = on_context(msgs, self.slim(), self.folds, self.cfg, self.lookup, self.tick())
            self.persist(out["records"])
            for edit in reversed([Edit(**e) for e in out["edits"]]):
                msgs[edit.start : edit.end] = [edit.message]
        self.payloads.append(msgs)
        return msgs

    def user(self, text: str) -> None:
        self.add({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": self.tick()})

    def call(self, calls: list[tuple[str, dict[str, Any]]], run: int, step: int) -> list[str]:
        blocks = [
            {
                "type": "toolCall",
                "id": f"call_{k}" if self.reuse_ids else f"call_{run}_{step}_{k}",
                "name": name,
                "arguments": args,
            }
            for k, (name, args) in enumerate(calls)
        ]
        self.add({"role": "assistant", "content": blocks, "stopReason": "toolUse", "timestamp": self.tick()})
        return [str(b["id"]) for b in blocks]

    def result(self, call_id: str, name: str, text: str, error: bool = False) -> None:
        self.add(
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{"type": "text", "text": text}],
                "isError": error,
                "timestamp": self.tick(),
            }
        )

    def answer(self, text: str) -> None:
        self.add(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "stopReason": "stop",
                "timestamp": self.tick(),
            }
        )

    def run(self, i: int, tools: list[tuple[str, dict[str, Any], int]]) -> None:
        """One prompt: a request per tool call (each answered), then the final answer."""
        self.user(f"run {i}: look at the next files")
        for step, (name, args, size) in enumerate(tools):
            self.request()
            (cid,) = self.call([(name, args)], i, step)
            self.result(cid, name, body(f"{name} {i}.{step}", size))
        self.request()
        self.answer(f"done with run {i}")

    def fold_tool(self, summary: str, keep_last: int = 0) -> dict[str, Any]:
        out = fold_now(
            self.entries, self.folds, self.cfg, self.lookup, self.tick(), summary=summary, keep_last=keep_last
        )
        self.persist(out["records"])
        return out


def prefix_share(prev: list[dict[str, Any]], cur: list[dict[str, Any]]) -> float:
    """Share of the current request's bytes that are a prefix of the previous request."""
    a, b = json.dumps(prev, ensure_ascii=False), json.dumps(cur, ensure_ascii=False)
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n / len(b) if b else 1.0


def appended(prev: list[dict[str, Any]], cur: list[dict[str, Any]]) -> bool:
    return len(cur) >= len(prev) and cur[: len(prev)] == prev
