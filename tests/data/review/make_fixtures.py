"""Writes the review fixtures: three pi 1.6.0 session files (the shape real pi writes, see tests/data/pi).

    python tests/data/review/make_fixtures.py      # rewrites the .jsonl files next to this script

What they hold (the expectations of tests/test_review.py):
- the same failing test command (`python -m pytest tests/test_cart.py -q`, exit 1) 5 times over the
  3 sessions: twice in the first run of s1, once in each of two runs of s2, once in the first run
  of s3, where `make fixtures` comes first and the same command then passes;
- one user correction in Chinese (s1, second run, about src/cart.py which the first run changed) and
  one in English (s2, second run, about tests/fixtures/prices.json which the first run of s2 changed);
- one one-off tool error (an edit whose old text did not match), not recurring;
- user messages that look like corrections but are not: "again" in a request, a "don't" in the first
  message of a session (nothing to push back on yet).
The memory "written in the middle" is added by the test (2026-11-04, between s2 and s3).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CWD = "/home/dev/shop"
TEST = "cd /home/dev/shop && python -m pytest tests/test_cart.py -q"
FAILED = (
    "F.\n=================================== FAILURES ===================================\n"
    "FAILED tests/test_cart.py::test_total - AssertionError: assert 41 == 42\n"
    "1 failed, 1 passed in 0.{n}s\n\n\nCommand exited with code 1"
)
PASSED = "..\n2 passed in 0.05s\n"

Step = tuple[Any, ...]

SESSIONS: list[tuple[str, str, list[tuple[str, list[Step]]]]] = [
    (
        "7e1c0a52-1b9d-4c56-8f0e-5a1f3c2d0001",
        "2026-11-01T09:00:00",
        [
            (
                "Run the cart tests and fix what fails. Don't push anything.",
                [
                    ("bash", TEST, FAILED.format(n=11), True),
                    ("edit", "src/cart.py", "Successfully replaced text in src/cart.py.", False),
                    ("bash", TEST, FAILED.format(n=12), True),
                    ("reply", "The cart test still fails: test_total expects 42 and gets 41."),
                ],
            ),
            (
                "不对，别改 src/cart.py 的接口，你又把 total() 的参数改了。",
                [
                    ("edit", "src/cart.py", "Successfully replaced text in src/cart.py.", False),
                    ("reply", "已经把 total() 的参数改回原来的样子。"),
                ],
            ),
        ],
    ),
    (
        "7e1c0a52-1b9d-4c56-8f0e-5a1f3c2d0002",
        "2026-11-03T14:00:00",
        [
            (
                "The cart test is red again, please fix it",
                [
                    ("bash", TEST, FAILED.format(n=13), True),
                    ("read", "src/cart.py", "def total(items):\n    return sum(i.price for i in items)\n", False),
                    ("read", "src/cart.py", "def total(items):\n    return sum(i.price for i in items)\n", False),
                    (
                        "edit",
                        "src/cart.py",
                        "Could not find the exact text in src/cart.py. The old text must match exactly "
                        "including all whitespace and newlines.",
                        True,
                    ),
                    (
                        "edit",
                        "tests/fixtures/prices.json",
                        "Successfully replaced text in tests/fixtures/prices.json.",
                        False,
                    ),
                    ("reply", "I changed the price of the apple in tests/fixtures/prices.json to 42."),
                ],
            ),
            (
                "Don't touch tests/fixtures/prices.json, I said only src/ may change. Revert it.",
                [
                    ("bash", "cd /home/dev/shop && git checkout tests/fixtures/prices.json", "", False),
                    ("reply", "Reverted tests/fixtures/prices.json."),
                ],
            ),
            (
                "Try the tests once more",
                [
                    ("bash", TEST, FAILED.format(n=14), True),
                    ("reply", "Still 41 == 42 in test_total."),
                ],
            ),
        ],
    ),
    (
        "7e1c0a52-1b9d-4c56-8f0e-5a1f3c2d0003",
        "2026-11-06T10:00:00",
        [
            (
                "Run the cart tests",
                [
                    ("bash", TEST, FAILED.format(n=15), True),
                    ("bash", "cd /home/dev/shop && make fixtures", "wrote tests/fixtures/prices.json\n", False),
                    ("bash", TEST, PASSED, False),
                    ("reply", "All green after refreshing the fixtures with make fixtures."),
                ],
            ),
            (
                "Now add a line about make fixtures to the README",
                [
                    ("edit", "README.md", "Successfully replaced text in README.md.", False),
                    ("reply", "Added a Testing section to README.md."),
                ],
            ),
        ],
    ),
]


class Writer:
    """Entries of one session, chained by parentId, two seconds apart."""

    def __init__(self, session_id: str, start: str) -> None:
        self.clock = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.n = 0
        stamp = self.stamp()
        self.lines.append({"type": "session", "version": 3, "id": session_id, "timestamp": stamp, "cwd": CWD})
        self.entry({"type": "model_change", "provider": "faux", "modelId": "faux-1"})

    def stamp(self) -> str:
        self.clock += timedelta(seconds=2)
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def entry(self, body: dict[str, Any]) -> None:
        self.n += 1
        eid = f"{self.lines[0]['id'][-4:]}{self.n:04x}"
        line = {"type": body.pop("type"), "id": eid, "parentId": self.parent, "timestamp": self.stamp(), **body}
        self.lines.append(line)
        self.parent = eid

    def ms(self) -> int:
        return int(self.clock.timestamp() * 1000)

    def message(self, message: dict[str, Any]) -> None:
        self.entry({"type": "message", "message": {**message, "timestamp": self.ms() + 2000}})

    def assistant(self, content: list[dict[str, Any]], stop: str) -> None:
        usage = {"input": 0, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 20}
        self.message(
            {
                "role": "assistant",
                "content": content,
                "api": "faux-api",
                "provider": "faux",
                "model": "faux-1",
                "usage": usage,
                "stopReason": stop,
            }
        )

    def tool(self, call_id: str, name: str, args: dict[str, Any], output: str, error: bool) -> None:
        self.assistant([{"type": "toolCall", "id": call_id, "name": name, "arguments": args}], "toolUse")
        self.message(
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{"type": "text", "text": output}],
                "details": {},
                "isError": error,
            }
        )


def write_session(session_id: str, start: str, runs: list[tuple[str, list[Step]]]) -> Path:
    w = Writer(session_id, start)
    for r, (prompt, steps) in enumerate(runs):
        w.message({"role": "user", "content": [{"type": "text", "text": prompt}]})
        for s, step in enumerate(steps):
            call_id = f"call_{r}_{s}"
            kind = step[0]
            if kind == "bash":
                w.tool(call_id, "bash", {"command": step[1]}, step[2], step[3])
            elif kind == "read":
                w.tool(call_id, "read", {"path": step[1]}, step[2], step[3])
            elif kind == "edit":
                w.tool(
                    call_id, "edit", {"path": step[1], "edits": [{"oldText": "a", "newText": "b"}]}, step[2], step[3]
                )
            else:
                w.assistant([{"type": "text", "text": step[1]}], "stop")
    path = HERE / f"review-{session_id[-4:]}.jsonl"
    path.write_text(
        "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in w.lines),
        encoding="utf-8",
    )
    return path


if __name__ == "__main__":
    for sid, start, runs in SESSIONS:
        print(write_session(sid, start, runs))
