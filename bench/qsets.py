"""The public question sets as pi sessions, and the stemmed bm25 baseline's tokens (bench input).

Design idea: every question set becomes what a user's archive holds. A
paragraph set (BoolQ, PubMedQA) becomes documents like the corpora's; a
conversation (REALTALK, MemDaily) becomes one pi session per dated session
(REALTALK) or day (MemDaily), each turn one message with its real time, the
first speaker as `user` and the other as `assistant`, all in a project of its
own (`cwd` /home/dev/<project>); a question is asked inside that project, as a
user asks about one history. Each message and session gets an integer key the
scoring counts in (a hit is any evidence turn, any evidence session).

Built from the same sets:
  - `mix-en-old` / `mix-zh-old`: a history whose language changes over time
    (an English chat, then Chinese days; Chinese days, then an English chat);
  - `long-replies`: a chat where long assistant replies (log-normal length,
    mean ~1,000 chars, a tail to 6,000, as `realistic.py`) cut from English
    paragraphs hold most of the common words;
  - `zh-exact-*`: a character typed in one script that exactly one message
    holds in that script, while its other-script form fills hundreds of
    others (the classics, or their simplified rendering): it must come first.

The pure parts (loading, cutting into sessions, grouping hits by session, the
stemmed tokens) are tested in tests/test_bench_qsets.py.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

DAY_MS = 86_400_000


@dataclass(frozen=True)
class Query:
    """One question: a hit is any of `targets` (message keys, or session keys when `level` is session)."""

    set: str
    text: str
    targets: frozenset[int]
    level: str = "message"
    project: str | None = None


@dataclass
class Turn:
    role: str
    text: str
    ts: int  # unix ms
    key: int


@dataclass
class ConvSession:
    project: str
    key: int
    turns: list[Turn] = field(default_factory=list)


class Keys:
    """Integer keys for messages and sessions, above every document index."""

    def __init__(self, start: int = 1_000_000) -> None:
        self.next = start

    def __call__(self) -> int:
        self.next += 1
        return self.next


def read_set(folder: Path, name: str) -> list[dict[str, Any]]:
    path = folder / name / f"{name}.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def iso_ms(value: str, shift_ms: int = 0) -> int:
    """An ISO time without zone (the sets' local times) as unix ms, read as UTC."""
    return int(datetime.fromisoformat(value).replace(tzinfo=timezone.utc).timestamp() * 1000) + shift_ms


def increasing(turns: list[Turn]) -> None:
    """Times strictly increasing inside a session (two turns of one second keep their order)."""
    for prev, cur in zip(turns, turns[1:], strict=False):
        if cur.ts <= prev.ts:
            cur.ts = prev.ts + 1


# --- conversations ----------------------------------------------------------------------


@dataclass
class Conversation:
    """A history cut into sessions, with the key of each turn and of its session, by source id."""

    sessions: list[ConvSession]
    turn_key: dict[str, int]
    session_of: dict[str, int]  # source turn id -> session key


def realtalk_conversation(row: dict[str, Any], project: str, keys: Keys, shift_ms: int = 0) -> Conversation:
    """REALTALK: each dated session one pi session; the first speaker is `user`, the other `assistant`."""
    first = row["speakers"][0].lower()
    sessions, turn_key, session_of = [], {}, {}
    for raw in row["sessions"]:
        session = ConvSession(project, keys())
        for t in raw["turns"]:
            role = "user" if t["speaker"].lower() == first else "assistant"
            turn = Turn(role, t["text"], iso_ms(t["ts"], shift_ms), keys())
            session.turns.append(turn)
            turn_key[t["id"]] = turn.key
            session_of[t["id"]] = session.key
        increasing(session.turns)
        sessions.append(session)
    return Conversation(sessions, turn_key, session_of)


def memdaily_conversation(row: dict[str, Any], project: str, keys: Keys, shift_ms: int = 0) -> Conversation:
    """MemDaily: a user's messages, one pi session per day (all `user`: the set has no replies)."""
    by_day: dict[str, ConvSession] = {}
    turn_key, session_of = {}, {}
    for m in row["messages"]:
        day = m["ts"][:10]
        session = by_day.setdefault(day, ConvSession(project, keys()))
        turn = Turn("user", m["text"], iso_ms(m["ts"], shift_ms), keys())
        session.turns.append(turn)
        turn_key[str(m["mid"])] = turn.key
        session_of[str(m["mid"])] = session.key
    sessions = list(by_day.values())
    for s in sessions:
        increasing(s.turns)
    return Conversation(sessions, turn_key, session_of)


def conversation_queries(
    prefix: str, project: str, conv: Conversation, questions: Iterable[tuple[str, list[str]]]
) -> list[Query]:
    """A turn-level and a session-level query per question with at least one evidence turn we hold."""
    out: list[Query] = []
    for text, evidence in questions:
        held = [e for e in evidence if e in conv.turn_key]
        if not held or not text.strip():
            continue
        out.append(Query(f"{prefix}-turn", text, frozenset(conv.turn_key[e] for e in held), "message", project))
        out.append(Query(f"{prefix}-session", text, frozenset(conv.session_of[e] for e in held), "session", project))
    return out


def realtalk_questions(row: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [(q["q"], list(q["evidence"])) for q in row["qa"]]


def memdaily_questions(row: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [(row["q"], [str(t) for t in row["targets"]])]


def last_ts(conv: Conversation) -> int:
    return max(t.ts for s in conv.sessions for t in s.turns)


def first_ts(conv: Conversation) -> int:
    return min(t.ts for s in conv.sessions for t in s.turns)


def day_shift(from_ms: int, after_ms: int, days: int = 1) -> int:
    """The whole-day shift that puts `from_ms` at least `days` days after `after_ms` (times of day kept)."""
    gap = after_ms - from_ms
    return (max(0, math.ceil(gap / DAY_MS)) + days) * DAY_MS


# --- long assistant replies ---------------------------------------------------------------

ASSISTANT_MEAN = 1_000  # as realistic.py: log-normal, mean ~1,000 chars, a tail to 6,000
ASSISTANT_SIGMA = 0.8
ASSISTANT_MAX = 6_000


def lognormal_length(rng: random.Random, mean: float = ASSISTANT_MEAN, sigma: float = ASSISTANT_SIGMA) -> int:
    mu = math.log(mean) - sigma * sigma / 2
    return max(40, min(ASSISTANT_MAX, int(rng.lognormvariate(mu, sigma))))


def cut_text(stream: str, n: int, rng: random.Random) -> str:
    """`n` characters of `stream` from a random word boundary."""
    start = rng.randrange(0, max(1, len(stream) - n))
    space = stream.find(" ", start)
    start = space + 1 if 0 <= space < start + 40 else start
    return stream[start : start + n].strip()


def with_long_replies(conv: Conversation, stream: str, rng: random.Random, keys: Keys, every: int = 4) -> None:
    """After every `every`-th turn of each session an assistant reply of realistic length cut from `stream`."""
    for session in conv.sessions:
        out: list[Turn] = []
        for i, turn in enumerate(session.turns):
            out.append(turn)
            if (i + 1) % every == 0:
                out.append(Turn("assistant", cut_text(stream, lognormal_length(rng), rng), turn.ts + 1, keys()))
        increasing(out)
        session.turns = out


# --- the exact script form ----------------------------------------------------------------


def single_char_table(table: dict[int, str]) -> dict[str, str]:
    """Traditional -> simplified pairs of one character each that differ."""
    return {chr(a): b for a, b in table.items() if len(b) == 1 and chr(a) != b}


@dataclass
class ScriptCase:
    """A pool of messages and, per query character, the one message that holds it as typed."""

    texts: list[str]
    queries: list[tuple[str, int]]  # (typed character, index of its one message in texts)


def exact_form_cases(
    pool: list[str], pairs: dict[str, str], typed_simplified: bool, n: int, rng: random.Random, min_others: int = 100
) -> ScriptCase:
    """Queries whose typed form is in exactly one message while the other form fills >= `min_others`.

    `typed_simplified`: the pool is the traditional text; the one message is a pool message with
    that character written in simplified. Otherwise the pool is rendered in simplified (character
    by character) and the one message keeps that character in traditional.
    """
    texts = list(pool) if typed_simplified else [p.translate(str.maketrans(pairs)) for p in pool]
    present: Counter[str] = Counter(ch for text in texts for ch in set(text))
    # typed form -> the form the rest of the pool holds (of the traditional forms of one simplified
    # character, the one most messages hold)
    if typed_simplified:
        other_of: dict[str, str] = {}
        for t, s in sorted(pairs.items()):
            if present[t] > present[other_of.get(s, "")]:
                other_of[s] = t
    else:
        other_of = dict(pairs)
    typed_chars = sorted(c for c, o in other_of.items() if present[o] > min_others and present[c] == 0)
    rng.shuffle(typed_chars)
    used: set[int] = set()
    queries: list[tuple[str, int]] = []
    for typed in typed_chars:
        # a message that holds the character: as the pool has it (traditional), or in its original
        # text (the simplified rendering keeps the traditional form only where the original had it)
        holds = other_of[typed] if typed_simplified else typed
        free = [i for i, text in enumerate(texts if typed_simplified else pool) if holds in text and i not in used]
        if len(queries) >= n or not free:
            continue
        i = rng.choice(free)
        if typed_simplified:
            texts[i] = texts[i].replace(other_of[typed], typed)
        else:  # the simplified rendering, this one character kept as typed in traditional
            texts[i] = pool[i].translate(str.maketrans({t: s for t, s in pairs.items() if t != typed}))
        used.add(i)
        queries.append((typed, i))
    # a query stays only if its typed form ended in exactly one message and its other form in enough
    final = [
        (typed, i)
        for typed, i in queries
        if sum(typed in text for text in texts) == 1 and sum(other_of[typed] in text for text in texts) >= min_others
    ]
    return ScriptCase(texts, final)


# --- the stemmed bm25 baseline ------------------------------------------------------------

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(f"[^\\W{_CJK}]{{2,}}")


def stem_channels(text: str, stem: Callable[[list[str]], list[str]]) -> tuple[list[str], list[str]]:
    """What a Lucene/Tantivy user's analyzer gives: CJK characters and their pairs as typed (no
    script folding), words lower-cased and Snowball-stemmed. Returns (chars, grams): the
    characters and the stems in `chars`, the CJK pairs in `grams`."""
    runs = _CJK_RUN.findall(text)
    chars = list("".join(runs))
    grams = [run[i : i + 2] for run in runs for i in range(len(run) - 1)]
    words = stem([w.lower() for w in _WORD.findall(text)])
    return chars + words, grams


def stemmed_query(text: str, stem: Callable[[list[str]], list[str]]) -> str:
    """An FTS5 OR over every distinct token of the query, each in its column."""
    chars, grams = stem_channels(text, stem)
    terms = [f'chars:"{t}"' for t in dict.fromkeys(chars)] + [f'grams:"{g}"' for g in dict.fromkeys(grams)]
    return " OR ".join(terms)  # tokens are word characters or CJK: no quote to escape


def snowball() -> Callable[[list[str]], list[str]]:
    import Stemmer  # PyStemmer: the `bench` extra

    stemmer = Stemmer.Stemmer("english")
    return stemmer.stemWords  # type: ignore[no-any-return]


# --- sessions grouped as the project groups them ----------------------------------------------


def group_sessions(
    hits: list[tuple[int, float]],
    session_of: dict[int, str],
    ts_of: dict[int, int],
    score: Callable[[Iterable[float]], float],
    limit: int,
) -> list[str]:
    """Message hits (id, score: higher is better), best first, grouped into sessions ranked by
    `score` over each session's message scores, newest best message first on ties: what
    `search.messages.rank_sessions` does with the project's hits."""
    groups: dict[str, list[tuple[int, float]]] = {}
    for msg_id, s in hits:
        groups.setdefault(session_of[msg_id], []).append((msg_id, s))
    ranked = sorted(groups.items(), key=lambda kv: (score(s for _, s in kv[1]), ts_of[kv[1][0][0]]), reverse=True)
    return [sid for sid, _ in ranked[:limit]]


# --- pi session files ----------------------------------------------------------------------


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def session_id(key: int) -> str:
    return str(uuid.UUID(int=(key * 0x9E3779B97F4A7C15) % (1 << 128), version=4))


def entry_id(key: int) -> str:
    return f"k{key:07x}"


def session_file_lines(session: ConvSession) -> Iterator[str]:
    """A pi v3 session: the header (its id from the session key, cwd naming the project), then
    one message entry per turn, parented in order, entry ids from the turn keys."""
    start = session.turns[0].ts if session.turns else 0
    header = {
        "type": "session",
        "version": 3,
        "id": session_id(session.key),
        "timestamp": _iso(start),
        "cwd": f"/home/dev/{session.project}",
    }
    yield json.dumps(header, ensure_ascii=False)
    parent = None
    for turn in session.turns:
        message: dict[str, Any] = {
            "role": turn.role,
            "content": [{"type": "text", "text": turn.text}],
            "timestamp": turn.ts,
        }
        if turn.role == "assistant":
            message.update({"provider": "bench", "model": "bench-1", "stopReason": "stop"})
        eid = entry_id(turn.key)
        entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": _iso(turn.ts), "message": message}
        yield json.dumps(entry, ensure_ascii=False)
        parent = eid


def write_sessions(sessions: Iterable[ConvSession], folder: Path) -> int:
    n = 0
    for s in sessions:
        if not s.turns:
            continue
        path = folder / "q" / s.project / f"s{s.key}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(session_file_lines(s)) + "\n", encoding="utf-8")
        n += 1
    return n
