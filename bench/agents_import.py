"""Import speed for Claude Code and Codex files: messages per second.

    python bench/agents_import.py [COPIES]

Makes COPIES copies of the Claude Code and Codex test fixtures under a temporary folder (each
copy with fresh session ids and uuids, so nothing is deduplicated), imports them into a fresh
archive and prints files, messages and messages/s for each agent.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

from pi_memory import Archive

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
SOURCES = {
    "claude": sorted((DATA / "claude").rglob("*.jsonl")),
    "codex": sorted((DATA / "codex").rglob("*.jsonl")),
}


def fresh_copy(src: Path, dest: Path, n: int) -> None:
    """The same file with every id made unique to copy n (keys that hold ids get a suffix)."""
    out = []
    for raw in src.read_bytes().splitlines():
        try:
            data = json.loads(raw)
        except ValueError:
            out.append(raw)
            continue
        text = json.dumps(data, ensure_ascii=False)
        for key in ("sessionId", "uuid", "parentUuid", "id"):
            text = text.replace(f'"{key}": "', f'"{key}": "{n}-')
        text = re.sub(r'"timestamp": "\d{4}', f'"timestamp": "{3000 + n}', text)  # distinct times: distinct lines
        out.append(text.encode())
    dest.write_bytes(b"\n".join(out) + b"\n")


def main(copies: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for agent, files in SOURCES.items():
            folder = root / agent
            folder.mkdir()
            for n in range(copies):
                for i, src in enumerate(files):
                    fresh_copy(src, folder / f"{uuid.uuid4()}-{i}.jsonl", n)
        with Archive.open(root / "archive.db") as archive:
            for agent in SOURCES:
                start = time.perf_counter()
                report = archive.import_paths([root / agent], agent=agent)
                took = time.perf_counter() - start
                print(
                    f"{agent}: {report.files} files, {report.added} messages in {took:.2f} s: {report.added / took:,.0f} msg/s"
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
