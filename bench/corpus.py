"""Turn the public corpora into real pi v3 session files (benchmark input).

Design idea: benchmarks must exercise the same path a user's sessions take
(parse -> render -> tokenize -> write), so documents become pi session files:
a `session` header, then `message` entries with ids and parentIds, user and
assistant alternating, ~625 chars per message, ~40 messages per session. The
corpus mix is the spec's: Chinese classics (traditional), English novels, the
Vue docs in Chinese. The corpus root is always an argument.

Run alone to write a folder of sessions:
    python bench/corpus.py --corpus ../shared/corpora --out /tmp/sessions
"""

from __future__ import annotations

import argparse
import json
import random
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MESSAGE_CHARS = 625
MESSAGES_PER_SESSION = 40
CLASSICS = ("23863", "23950", "23962", "24264")  # traditional Chinese novels
NOVELS = ("1342", "2701", "84")  # English novels
BASE_TS_MS = 1_700_000_000_000  # 2023-11-14: fixed, so runs are comparable


@dataclass(frozen=True)
class Doc:
    """One unit of text from a corpus: a source name (the 'project') and its text."""

    source: str
    title: str
    text: str


def strip_gutenberg(raw: str) -> str:
    start = re.search(r"\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG[^\n]*\n", raw)
    end = re.search(r"\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG", raw)
    return raw[start.end() if start else 0 : end.start() if end else len(raw)]


def paragraphs(text: str) -> list[str]:
    return [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def pack(paras: Iterable[str], size: int = MESSAGE_CHARS) -> Iterator[str]:
    """Consecutive paragraphs joined into chunks of about `size` chars (long ones cut)."""
    buf = ""
    for p in paras:
        while len(p) > size * 1.5:
            head, p = p[:size], p[size:]
            if buf:
                yield buf
                buf = ""
            yield head
        if buf and len(buf) + len(p) + 1 > size:
            yield buf
            buf = ""
        buf = f"{buf}\n{p}" if buf else p
    if buf:
        yield buf


def gutenberg_chunks(root: Path, book: str) -> list[Doc]:
    raw = (root / "gutenberg" / f"{book}.txt").read_text(encoding="utf-8", errors="replace")
    source = "classics" if book in CLASSICS else "novels"
    return [Doc(source, book, chunk) for chunk in pack(paragraphs(strip_gutenberg(raw)))]


def vue_sections(root: Path) -> list[tuple[str, str, str]]:
    """(file, heading, body) for every `##`/`###` section of the Vue docs in Chinese."""
    out = []
    for path in sorted((root / "vue-docs-zh-cn" / "src").rglob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        text = re.sub(r"^---\n.*?\n---\n", "", text, flags=re.S)  # front matter
        rel = str(path.relative_to(root / "vue-docs-zh-cn"))
        parts = re.split(r"^(#{1,3} .+)$", text, flags=re.M)
        heading = ""
        for piece in parts:
            if re.match(r"^#{1,3} ", piece):
                heading = piece.lstrip("#").strip()
            elif piece.strip():
                out.append((rel, heading, piece.strip()))
    return out


def vue_chunks(root: Path) -> list[Doc]:
    docs = []
    for rel, heading, body in vue_sections(root):
        for chunk in pack(paragraphs(body)):
            docs.append(Doc("vue-docs", f"{rel}#{heading}", chunk))
    return docs


def corpus_docs(root: Path) -> list[Doc]:
    """Every chunk of the spec's corpus mix, in a stable order."""
    docs: list[Doc] = []
    for book in CLASSICS + NOVELS:
        docs += gutenberg_chunks(root, book)
    docs += vue_chunks(root)
    return docs


# --- pi session files ------------------------------------------------------------------


def _iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def session_lines(texts: list[str], project: str, session_no: int, start_ms: int, rng: random.Random) -> Iterator[str]:
    """The JSONL lines of one pi v3 session holding `texts` as alternating user/assistant messages."""
    sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    yield json.dumps(
        {"type": "session", "version": 3, "id": sid, "timestamp": _iso(start_ms), "cwd": f"/home/dev/{project}"},
        ensure_ascii=False,
    )
    parent = None
    for i, text in enumerate(texts):
        ts = start_ms + i * 15_000
        entry_id = f"{session_no:06x}{i:02x}"[-8:]
        role = "user" if i % 2 == 0 else "assistant"
        if role == "user":
            message = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}
        else:
            message = {
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "provider": "bench",
                "model": "bench-1",
                "stopReason": "stop",
                "timestamp": ts,
            }
        entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": _iso(ts), "message": message}
        yield json.dumps(entry, ensure_ascii=False)
        parent = entry_id


def write_session(folder: Path, texts: list[str], project: str, session_no: int, rng: random.Random) -> Path:
    start_ms = BASE_TS_MS + session_no * 3_600_000
    path = folder / project / f"s{session_no:07d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(session_lines(texts, project, session_no, start_ms, rng)) + "\n", encoding="utf-8")
    return path


def write_docs_as_sessions(docs: list[Doc], folder: Path, seed: int = 7, first_session: int = 0) -> dict[int, Path]:
    """Consecutive docs of one source become sessions of ~40 messages; returns doc index -> file.

    Doc `i` becomes message `i % 40` of its session, so a benchmark can map a
    search hit (session, seq) back to the doc it came from.
    """
    rng = random.Random(seed)
    where: dict[int, Path] = {}
    session_no = first_session
    i = 0
    while i < len(docs):
        source = docs[i].source
        j = i
        while j < len(docs) and j - i < MESSAGES_PER_SESSION and docs[j].source == source:
            j += 1
        path = write_session(folder, [d.text for d in docs[i:j]], source, session_no, rng)
        for k in range(i, j):
            where[k] = path
        session_no += 1
        i = j
    return where


def synthetic_texts(docs: list[Doc], rng: random.Random, n: int) -> list[tuple[str, str]]:
    """`n` (source, text) messages cut at random offsets of the corpus: realistic text, nearly all distinct."""
    by_source: dict[str, str] = {}
    for d in docs:
        by_source[d.source] = by_source.get(d.source, "") + "\n" + d.text
    # the spec's mix: about equal thirds of classics, novels and Chinese docs
    sources = sorted(by_source)
    out = []
    for _ in range(n):
        src = rng.choice(sources)
        blob = by_source[src]
        start = rng.randrange(0, max(1, len(blob) - MESSAGE_CHARS))
        out.append((src, blob[start : start + MESSAGE_CHARS].strip()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"), help="corpus root")
    ap.add_argument("--out", type=Path, required=True, help="folder to write session files into")
    args = ap.parse_args()
    docs = corpus_docs(args.corpus)
    where = write_docs_as_sessions(docs, args.out)
    print(f"{len(docs)} messages in {len(set(where.values()))} session files under {args.out}")


if __name__ == "__main__":
    main()
