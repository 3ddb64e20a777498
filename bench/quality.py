"""Quality benchmark: does the right message come first?

Design idea: evaluation documents become pi session files and go through the
real import; query sets with one known target each are run through
`Archive.search` and, in the same run over the same documents and the same
tokens, through three baselines:

  (a) `spec`  the spec's pipeline as written (000 §7.1): the 3 rarest query
              tokens by df as anchors, FTS5 AND ordered by rowid DESC LIMIT 200
              (OR retry when empty), flat coverage score, newest first on ties;
  (b) `bm25`  FTS5 `bm25()` over an OR of all query tokens, on a separate
              FTS5 table with detail=full over the SAME tokens (the main index
              is detail=column, which would cripple bm25's term frequencies);
  (c) `like`  `text LIKE '%fragment%'`, newest first (fragment sets only).

With the `semantic` extra and named in `--only`, two more systems over the same archive: `hybrid` (`Archive.search` with
mode="hybrid": lexical and vector candidates fused) and `semantic` (vectors alone); `project` is
then asked for mode="lexical". Their vectors are embedded through the archive's own write path
from a cache under `--work` (`semantic_cache.py`: by text, so a rerun embeds nothing again);
`--embed-projects` embeds only the histories of some projects (a shared machine's time), and a
question of a project left out is then not asked of `hybrid` or `semantic`.

Query sets: CMRC2018 trial questions (target: their paragraph; Gutenberg
chunks are the distractors), Vue doc section headings (target: the section
body), and exact fragments sampled from the documents (1, 2 and 4 CJK chars,
two Chinese words, two English words, an identifier plus a Chinese word), each
kept only when exactly one document contains it (`frag-*`: after folding
traditional to simplified). The `script-*` sets are the same kinds kept when
exactly one document holds the fragment in the spelling it was cut in, the
CJK ones cut from the traditional-Chinese classics: other documents may hold
it in the other script, and the exact spelling must come first. Prints
recall@1/5/10 and MRR@10 per set and system.

    python bench/quality.py --corpus ../shared/corpora --quick
    python bench/quality.py --corpus ../shared/corpora --json bench/results/quality.json
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Timer, latency_summary, result_header, save_json, table  # noqa: E402
from corpus import BASE_TS_MS, CLASSICS, NOVELS, Doc, gutenberg_chunks, vue_sections, write_docs_as_sessions  # noqa: E402
from qsets import (  # noqa: E402
    ConvSession,
    Keys,
    Query,
    Turn,
    conversation_queries,
    day_shift,
    exact_form_cases,
    first_ts,
    group_sessions,
    last_ts,
    memdaily_conversation,
    memdaily_questions,
    read_set,
    realtalk_conversation,
    realtalk_questions,
    single_char_table,
    snowball,
    stem_channels,
    stemmed_query,
    with_long_replies,
    write_sessions,
)

from pi_memory.archive.api import Archive  # noqa: E402
from pi_memory.core import ranking  # noqa: E402
from pi_memory.core.text import (  # noqa: E402
    QueryToken,
    _char_fold_table,
    fts_and,
    fts_or,
    is_cjk,
    normalize,
    query_tokens,
    tokenize,
)
from pi_memory.search.messages import SESSION_MESSAGE_HITS  # noqa: E402
from pi_memory.storage.store import decode_text  # noqa: E402
from pi_memory.vectors import model as vmodel  # noqa: E402

K = 10


# --- documents and query sets ------------------------------------------------------------


def load_docs(
    corpus: Path, quick: bool, rng: random.Random, books: bool = True
) -> tuple[list[Doc], list[Query], list[Query]]:
    docs: list[Doc] = []
    cmrc = json.loads((corpus / "cmrc2018-trial" / "cmrc2018_trial.json").read_text(encoding="utf-8"))
    cmrc_q: list[Query] = []
    for article in cmrc["data"]:
        for para in article["paragraphs"]:
            idx = len(docs)
            docs.append(Doc("cmrc", para["id"], para["context"].strip()))
            cmrc_q += [Query("cmrc-questions", qa["question"], frozenset({idx})) for qa in para["qas"]]
    vue_q: list[Query] = []
    sections = vue_sections(corpus)
    heading_count: dict[str, int] = {}
    for _, heading, _ in sections:
        heading_count[heading] = heading_count.get(heading, 0) + 1
    for rel, heading, body in sections:
        if len(body) < 80:
            continue
        idx = len(docs)
        docs.append(Doc("vue-docs", f"{rel}#{heading}", body))
        clean = re.sub(r"\{#[^}]*\}|<[^>]+>|[`*]", "", heading).strip()
        if heading_count[heading] == 1 and len(query_tokens(clean)) >= 2:
            vue_q.append(Query("vue-headings", clean, frozenset({idx})))
    for book in CLASSICS + NOVELS if books else []:
        chunks = gutenberg_chunks(corpus, book)
        if quick:
            chunks = chunks[: len(chunks) // 3]
        docs += chunks
    if quick:
        cmrc_q = rng.sample(cmrc_q, min(150, len(cmrc_q)))
        vue_q = rng.sample(vue_q, min(150, len(vue_q)))
    return docs, cmrc_q, vue_q


_CJK2 = re.compile(r"(?=([\u3400-\u9fff]{2}))")
_WORD = re.compile(r"[a-z]{4,}")
_IDENT = re.compile(r"\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Za-z]+_[A-Za-z0-9_]+\b")


class FragmentSampler:
    """Exact fragments, each contained in exactly one document (after normalization).

    With `surface=True` a fragment is unique in the spelling it was cut in (lower-cased, not
    folded): other documents may hold it in the other script (`燦` vs `灿`), and the one that
    holds the typed spelling must still come first. `targets` limits the documents cut from.
    """

    def __init__(
        self, docs: list[Doc], rng: random.Random, surface: bool = False, targets: list[int] | None = None
    ) -> None:
        self.docs = docs
        self.rng = rng
        self.surface = surface
        self.prefix = "script-" if surface else "frag-"
        self.targets = targets if targets is not None else list(range(len(docs)))
        self.norm = [d.text.lower() if surface else normalize(d.text) for d in docs]

    def key(self, part: str) -> str:
        return part.lower() if self.surface else normalize(part)

    def unique(self, parts: list[str], target: int) -> bool:
        hits = 0
        for i, text in enumerate(self.norm):
            if all(_contains(text, p) for p in parts):
                hits += 1
                if hits > 1 or i != target:
                    return False
        return hits == 1

    def sample(self, name: str, make: Callable[[str], list[str] | None], per_set: int) -> list[Query]:
        out: list[Query] = []
        for _ in range(per_set * 60):
            if len(out) >= per_set:
                break
            idx = self.rng.choice(self.targets)
            parts = make(self.docs[idx].text)
            if parts and len(set(parts)) == len(parts) and self.unique([self.key(p) for p in parts], idx):
                out.append(Query(self.prefix + name, " ".join(parts), frozenset({idx})))
        return out

    def single_chars(self, per_set: int) -> list[Query]:
        """CJK characters found in exactly one document, from the char -> documents table."""
        char_docs: dict[str, list[int]] = {}
        for i, text in enumerate(self.norm):
            for ch in set(text):
                if is_cjk(ch):
                    char_docs.setdefault(ch, []).append(i)
        wanted = set(self.targets)
        singles = sorted(ch for ch, ds in char_docs.items() if len(ds) == 1 and ds[0] in wanted)
        picked = self.rng.sample(singles, min(per_set, len(singles)))
        return [Query(self.prefix + "1cjk", ch, frozenset({char_docs[ch][0]})) for ch in picked]

    def cjk_run(self, n: int) -> Callable[[str], list[str] | None]:
        def make(text: str) -> list[str] | None:
            starts = [m.start() for m in re.finditer(f"[\u3400-\u9fff]{{{n}}}", text)]
            if not starts:
                return None
            s = self.rng.choice(starts)
            return [text[s : s + n]]

        return make

    def two_of(self, pattern: re.Pattern[str]) -> Callable[[str], list[str] | None]:
        def make(text: str) -> list[str] | None:
            items = [m if isinstance(m, str) else m[0] for m in pattern.findall(text)]
            return self.rng.sample(items, 2) if len(items) >= 6 else None

        return make

    def ident_and_cjk(self, text: str) -> list[str] | None:
        idents = _IDENT.findall(text)
        grams = _CJK2.findall(text)
        if not idents or not grams:
            return None
        return [self.rng.choice(idents), self.rng.choice(grams)]

    def all_sets(self, per_set: int) -> list[Query]:
        return (
            self.single_chars(per_set)
            + self.sample("2cjk", self.cjk_run(2), per_set)
            + self.sample("4cjk", self.cjk_run(4), per_set)
            + self.sample("2zh-words", self.two_of(_CJK2), per_set)
            + self.sample("2en-words", self.two_of(_WORD), per_set)
            + self.sample("ident+zh", self.ident_and_cjk, per_set)
        )


def _contains(norm_text: str, part: str) -> bool:
    if part.isascii():
        return re.search(rf"(?<![a-z0-9_]){re.escape(part.lower())}(?![a-z0-9_])", norm_text) is not None
    return part in norm_text


# --- the public question sets (bench/qsets_build.py) ---------------------------------------

# Fitting constants on one half and reporting on the other (`--split`): chosen once, by set, so that
# no question is asked in both halves (the sets built from REALTALK conversations and MemDaily
# trajectories follow the half of their source: `-a` fit, `-b` report).
SPLIT_FIT = (
    "cmrc-questions",
    "frag-",
    "en-pubmedqa",
    "conv-realtalk-a-",
    "conv-memdaily-a-",
    "long-replies-a-",
    "mix-zh-old-",
    "zh-exact-simplified",
)
SPLIT_REPORT = (
    "vue-headings",
    "script-",
    "en-boolq",
    "conv-realtalk-b-",
    "conv-memdaily-b-",
    "long-replies-b-",
    "mix-en-old-",
    "zh-exact-traditional",
)


def split_of(set_name: str) -> str:
    if set_name.startswith(SPLIT_FIT):
        return "fit"
    if set_name.startswith(SPLIT_REPORT):
        return "report"
    raise ValueError(f"set {set_name!r} is in neither half of the split")


@dataclass
class QSets:
    """What the public sets add: documents (paragraphs), sessions (histories) and their queries."""

    docs: list[Doc] = field(default_factory=list)
    sessions: list[ConvSession] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)
    sources: dict[str, int] = field(default_factory=dict)  # set -> lines read


def paragraph_set(
    name: str, rows: list[dict[str, Any]], docs: list[Doc], first: int, quick: bool, rng: random.Random
) -> list[Query]:
    """Each passage a document (once), each question a query for it."""
    index: dict[str, int] = {}
    out = []
    for row in rows:
        passage = row["passage"].strip()
        if passage not in index:
            index[passage] = first + len(docs)
            docs.append(Doc(name, f"{name}-{len(docs)}", passage))
        out.append(Query(f"en-{name}", row["q"], frozenset({index[passage]})))
    return rng.sample(out, min(150, len(out))) if quick else out


def load_qsets(folder: Path, first_doc: int, classics: list[Doc], quick: bool, rng: random.Random) -> QSets:
    """The public sets under `folder` as documents, sessions and queries (a set missing is skipped, said)."""
    qs = QSets()
    keys = Keys()
    have = {p.name for p in folder.iterdir() if (p / f"{p.name}.jsonl.gz").exists()} if folder.is_dir() else set()
    for name in ("boolq", "pubmedqa", "realtalk", "memdaily"):
        if name not in have:
            print(f"question set {name} not found under {folder}: build it with bench/qsets_build.py (skipped)")
    english: list[str] = []
    for name in ("boolq", "pubmedqa"):
        if name in have:
            rows = read_set(folder, name)
            qs.sources[name] = len(rows)
            qs.queries += paragraph_set(name, rows, qs.docs, first_doc, quick, rng)
            english += [r["passage"] for r in rows]
    talks = read_set(folder, "realtalk") if "realtalk" in have else []
    days = read_set(folder, "memdaily") if "memdaily" in have else []
    qs.sources.update({"realtalk": len(talks), "memdaily": len(days)})
    if quick:
        talks, days = talks[:4], days[::10][:300]
    conversations(qs, talks, days, keys)
    if english:
        long_replies(qs, talks, "\n".join(english), rng, keys)
    english_then_chinese(qs, talks, days, keys)
    chinese_then_english(qs, talks, days[: 200 if quick else 1000], keys)
    exact_form(qs, [d.text for d in classics], 150 if quick else 500, rng, keys)
    return qs


def half(i: int) -> str:
    """Conversations and trajectories alternate between the fit (`a`) and report (`b`) halves."""
    return "ab"[i % 2]


def conversations(qs: QSets, talks: list[dict[str, Any]], days: list[dict[str, Any]], keys: Keys) -> None:
    """Each conversation as it is, in a project of its own."""
    for i, row in enumerate(talks):
        conv = realtalk_conversation(row, f"realtalk-{i}", keys)
        qs.sessions += conv.sessions
        qs.queries += conversation_queries(f"conv-realtalk-{half(i)}", f"realtalk-{i}", conv, realtalk_questions(row))
    for i, row in enumerate(days):
        conv = memdaily_conversation(row, f"memdaily-{i}", keys)
        qs.sessions += conv.sessions
        qs.queries += conversation_queries(f"conv-memdaily-{half(i)}", f"memdaily-{i}", conv, memdaily_questions(row))


def long_replies(qs: QSets, talks: list[dict[str, Any]], stream: str, rng: random.Random, keys: Keys) -> None:
    """Every conversation again, with long assistant replies cut from the English paragraphs."""
    for i, row in enumerate(talks):
        conv = realtalk_conversation(row, f"longrep-{i}", keys)
        with_long_replies(conv, stream, rng, keys)
        qs.sessions += conv.sessions
        qs.queries += conversation_queries(f"long-replies-{half(i)}", f"longrep-{i}", conv, realtalk_questions(row))


def english_then_chinese(qs: QSets, talks: list[dict[str, Any]], days: list[dict[str, Any]], keys: Keys) -> None:
    """Each `b` conversation, then 30 days of Chinese messages (`b` trajectories) after it."""
    zh = [r for i, r in enumerate(days) if half(i) == "b"]
    for i, row in enumerate(talks):
        if half(i) != "b" or not zh:
            continue
        project = f"mixa-{i}"
        conv = realtalk_conversation(row, project, keys)
        qs.sessions += conv.sessions
        after = last_ts(conv)
        for j in range(30):
            later = zh[(i * 30 + j) % len(zh)]
            shift = day_shift(first_ts(memdaily_conversation(later, project, Keys())), after, days=j + 1)
            qs.sessions += memdaily_conversation(later, project, keys, shift).sessions
        qs.queries += conversation_queries("mix-en-old", project, conv, realtalk_questions(row))


def chinese_then_english(qs: QSets, talks: list[dict[str, Any]], days: list[dict[str, Any]], keys: Keys) -> None:
    """Each `a` trajectory (its days), then 20 turns of an `a` conversation days later."""
    english = [s for i, r in enumerate(talks) if half(i) == "a" for s in r["sessions"]]
    for j, row in enumerate(r for i, r in enumerate(days) if half(i) == "a"):
        if not english:
            return
        project = f"mixb-{j}"
        conv = memdaily_conversation(row, project, keys)
        qs.sessions += conv.sessions
        raw = english[j % len(english)]
        start = (j * 7) % max(1, len(raw["turns"]) - 20)
        piece = {
            "speakers": [raw["turns"][0]["speaker"], ""],
            "sessions": [{"turns": raw["turns"][start : start + 20]}],
        }
        shift = day_shift(first_ts(realtalk_conversation(piece, project, Keys())), last_ts(conv), days=3)
        qs.sessions += realtalk_conversation(piece, project, keys, shift).sessions
        qs.queries += conversation_queries("mix-zh-old", project, conv, memdaily_questions(row))


def exact_form(qs: QSets, pool: list[str], n: int, rng: random.Random, keys: Keys) -> None:
    """The exact script form both ways, each pool (the classics; their simplified rendering) a project."""
    pairs = single_char_table(_char_fold_table())
    for typed_simplified, name, project in (
        (True, "zh-exact-simplified", "script-trad"),
        (False, "zh-exact-traditional", "script-simp"),
    ):
        case = exact_form_cases(pool, pairs, typed_simplified, n, rng)
        msg_keys = [keys() for _ in case.texts]
        for start in range(0, len(case.texts), 40):
            session = ConvSession(project, keys())
            for k in range(start, min(start + 40, len(case.texts))):
                role = "user" if k % 2 == 0 else "assistant"
                session.turns.append(Turn(role, case.texts[k], BASE_TS_MS + k * 15_000, msg_keys[k]))
            qs.sessions.append(session)
        qs.queries += [Query(name, typed, frozenset({msg_keys[i]}), "message", project) for typed, i in case.queries]


# --- systems ---------------------------------------------------------------------------


def bm25_or(toks: list[QueryToken]) -> str:
    """The bm25 baseline's expression: each token in the column that holds it. Its table keeps
    positions and columns (detail=full), where bm25 scores per column: without the filter a word
    would count in both channels (the archive's own index, detail='none', needs no filter)."""
    return " OR ".join(f'{t.column}:"{t.text}"' for t in toks)


class Systems:
    """The project and the baselines over one archive.

    `bm25`: FTS5 bm25 over an OR of all the project's query tokens (folded script, words as they
    are). `stem`: FTS5 bm25 over a table of the same messages cut as a Lucene/Tantivy analyzer
    would (CJK characters and pairs as typed, English words Snowball-stemmed), the query cut
    likewise. A session-level query groups each baseline's top `SESSION_MESSAGE_HITS` message
    hits into sessions with the project's own `ranking.session_score` (bm25 negated: higher is
    better), as `rank_sessions` groups the project's hits. A query of a project (a conversation)
    is asked inside it: the baselines filter on the session's cwd as the project filter does.
    """

    def __init__(self, archive: Archive, msg_key: dict[int, int], sess_key: dict[str, int], stem: bool) -> None:
        self.archive = archive
        self.conn = archive.store.conn
        self.msg_key = msg_key
        self.sess_key = sess_key
        self._df: dict[str, int] = {}
        self.stemmer = snowball() if stem else None
        self.session_of: dict[int, str] = {}
        self.ts_of: dict[int, int] = {}
        for msg_id, sid, ts in self.conn.execute("SELECT id, session_id, ts FROM msg WHERE indexed"):
            self.session_of[int(msg_id)] = sid
            self.ts_of[int(msg_id)] = int(ts)
        self.spans = self._project_spans()
        self._build_tables()

    def _project_spans(self) -> dict[str, tuple[int, int]]:
        """cwd -> (first, last) message id, for each project whose indexed messages are the only ones
        in that id range (an import writes a folder's files in turn): the baselines then ask FTS5
        for that rowid range, which it reads alone, instead of joining every match to its session."""
        sql = """SELECT s.cwd, min(m.id), max(m.id), count(*) FROM msg m JOIN session s ON s.id = m.session_id
                 WHERE m.indexed GROUP BY s.cwd"""
        ids = sorted(self.session_of)
        spans = {}
        for cwd, lo, hi, n in self.conn.execute(sql):
            inside = bisect.bisect_right(ids, hi) - bisect.bisect_left(ids, lo)
            if inside == n:
                spans[cwd] = (int(lo), int(hi))
        return spans

    def _build_tables(self) -> None:
        for name in ("bl_fts", "st_fts"):
            self.conn.execute(
                f"""CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5(chars, grams, content='',
                   tokenize="ascii tokenchars '_'", detail=full)"""
            )
        if self.conn.execute("SELECT count(*) FROM msg WHERE indexed").fetchall()[0][0] == 0:
            return
        rows = list(self.conn.execute("SELECT id, text FROM msg WHERE indexed"))
        self.conn.execute("BEGIN")
        for msg_id, stored in rows:
            text = decode_text(stored)
            toks = tokenize(text)
            self.conn.execute(
                "INSERT INTO bl_fts(rowid, chars, grams) VALUES (?,?,?)", (msg_id, toks.chars_text(), toks.grams_text())
            )
            if self.stemmer is not None:
                chars, grams = stem_channels(text, self.stemmer)
                self.conn.execute(
                    "INSERT INTO st_fts(rowid, chars, grams) VALUES (?,?,?)", (msg_id, " ".join(chars), " ".join(grams))
                )
        self.conn.execute("COMMIT")

    def keys(self, ids: list[int]) -> list[int]:
        return [self.msg_key.get(i, -1) for i in ids]

    def project(self, q: Query, mode: str = "lexical") -> list[int]:
        if q.level == "session":
            found = self.archive.search_sessions(q.text, limit=K, project=q.project, mode=mode)
            return [self.sess_key.get(h.session_id, -1) for h in found]
        return self.keys([h.msg_id for h in self.archive.search(q.text, limit=K, project=q.project, mode=mode)])

    def hybrid(self, q: Query) -> list[int]:
        return self.project(q, "hybrid")

    def semantic(self, q: Query) -> list[int]:
        return self.project(q, "semantic")

    def _fts(self, table: str, expr: str, q: Query) -> list[int]:
        limit = SESSION_MESSAGE_HITS if q.level == "session" else K
        if q.project is None:
            sql = f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT ?"
            params: tuple[Any, ...] = (expr, limit)
        elif (span := self.spans.get(f"/home/dev/{q.project}")) is not None:
            sql = (
                f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? AND rowid BETWEEN ? AND ? "
                f"ORDER BY bm25({table}) LIMIT ?"
            )
            params = (expr, span[0], span[1], limit)
        else:
            sql = (
                f"SELECT {table}.rowid, bm25({table}) FROM {table} JOIN msg m ON m.id = {table}.rowid "
                f"JOIN session s ON s.id = m.session_id WHERE {table} MATCH ? AND s.cwd = ? "
                f"ORDER BY bm25({table}) LIMIT ?"
            )
            params = (expr, f"/home/dev/{q.project}", limit)
        hits = [(int(r[0]), -float(r[1])) for r in self.conn.execute(sql, params)]
        if q.level == "session":
            sids = group_sessions(hits, self.session_of, self.ts_of, ranking.session_score, K)
            return [self.sess_key.get(sid, -1) for sid in sids]
        return self.keys([h for h, _ in hits])

    def bm25(self, q: Query) -> list[int]:
        toks = query_tokens(q.text)
        return self._fts("bl_fts", bm25_or(toks), q) if toks else []

    def stem(self, q: Query) -> list[int]:
        assert self.stemmer is not None
        expr = stemmed_query(q.text, self.stemmer)
        return self._fts("st_fts", expr, q) if expr else []

    def like(self, q: Query) -> list[int]:
        parts = q.text.split(" ")
        # message text is stored compressed: the scan decodes each row, as any scan of it must
        self.conn.create_scalar_function("decode_text", decode_text, 1, deterministic=True)
        where = " AND ".join(["decode_text(text) LIKE ? ESCAPE '\\'"] * len(parts))
        params = ["%" + p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for p in parts]
        sql = f"SELECT id FROM msg WHERE indexed AND {where} ORDER BY id DESC LIMIT ?"
        return self.keys([int(r[0]) for r in self.conn.execute(sql, params + [K])])

    def df(self, t: QueryToken) -> int:
        if t.fts() not in self._df:
            sql = "SELECT count(*) FROM msg_fts WHERE msg_fts MATCH ?"
            self._df[t.fts()] = int(self.conn.execute(sql, (t.fts(),)).fetchall()[0][0])
        return self._df[t.fts()]

    def spec(self, q: Query) -> list[int]:
        """Spec 000 §7.1 as written: 3 rarest anchors, AND/early termination, OR retry, flat coverage."""
        toks = [t for t in query_tokens(q.text) if self.df(t) > 0]
        if not toks:
            return []
        # coverage counts bigrams and words; a 1-char query has only its char
        scoring = [t for t in toks if t.kind != "char"] or toks
        anchors = sorted(scoring, key=lambda t: self.df(t))[:3]
        sql = "SELECT rowid FROM msg_fts WHERE msg_fts MATCH ? ORDER BY rowid DESC LIMIT 200"
        ids = [int(r[0]) for r in self.conn.execute(sql, (fts_and(anchors),))]
        if not ids:
            ids = [int(r[0]) for r in self.conn.execute(sql, (fts_or(anchors),))]
        if not ids:
            return []
        rows = self.conn.execute(
            "SELECT id, ts, text FROM msg WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)
        )
        scored = []
        for msg_id, ts, text in rows:
            norm = normalize(decode_text(text))
            covered = sum(1 for t in scoring if _contains(norm, t.text))
            scored.append((covered / len(scoring), ts, msg_id))
        scored.sort(reverse=True)
        return self.keys([m for _, _, m in scored[:K]])


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = max(len(ranks), 1)
    return {
        "n": len(ranks),
        "R@1": sum(1 for r in ranks if r is not None and r < 1) / n,
        "R@5": sum(1 for r in ranks if r is not None and r < 5) / n,
        "R@10": sum(1 for r in ranks if r is not None and r < 10) / n,
        "MRR@10": sum(1.0 / (r + 1) for r in ranks if r is not None and r < 10) / n,
    }


def first_rank(got: list[int], targets: frozenset[int]) -> int | None:
    """The 0-based rank of the first hit that is a target, None when none is in the list."""
    return next((i for i, key in enumerate(got) if key in targets), None)


def build_archive(
    docs: list[Doc], sessions: list[ConvSession], work: Path
) -> tuple[Archive, dict[int, int], dict[str, int]]:
    """Docs as corpus sessions and the sets' sessions as they are, imported together; returns the
    archive, message id -> doc index or turn key, and session id -> session key."""
    from qsets import entry_id, session_id

    folder = work / "sessions"
    write_docs_as_sessions(docs, folder)
    write_sessions(sessions, folder)
    archive = Archive.open(work / "quality.db")
    archive.import_paths([folder])
    by_text: dict[str, int] = {}
    for i, d in enumerate(docs):
        by_text.setdefault(d.text, i)
    by_entry = {entry_id(t.key): t.key for s in sessions for t in s.turns}
    sess_key = {session_id(s.key): s.key for s in sessions}
    msg_key = {}
    for msg_id, stored, eid in archive.store.conn.execute("SELECT id, text, entry_id FROM msg"):
        if eid in by_entry:
            msg_key[int(msg_id)] = by_entry[eid]
            continue
        text = decode_text(stored)
        if text in by_text:
            msg_key[int(msg_id)] = by_text[text]
    return archive, msg_key, sess_key


def embed_archive(archive: Archive, work: Path, prefixes: tuple[str, ...] | None, queries: list[Query]) -> None:
    """The archive's units (or those of some projects) embedded through its own write path, from the
    vector cache (`semantic_cache.py`); the queries embedded ahead, so no search waits for the model."""
    from semantic_cache import CachedModel, project_units

    from pi_memory.vectors.embed import embed_batch, refresh_index

    work.mkdir(parents=True, exist_ok=True)
    model = CachedModel(vmodel.load(), work / "vectors-cache.db")
    archive.use_embedder(model)
    with Timer() as t:
        if prefixes is None:
            report = archive.embed()
            done = report.embedded
        else:
            done = 0
            for prefix in prefixes:
                units = project_units(archive.store, prefix)
                for i in range(0, len(units), 64):
                    done += embed_batch(archive.store, model, units[i : i + 64])
            refresh_index(archive.store, archive.path, model.id)
        model.cached_queries([q.text for q in queries])
    print(
        f"  embedded {done} units ({model.embedded} not cached: {model.embed_seconds:.0f} s in the model) "
        f"and {len(queries)} queries in {t.ms / 1000:.0f} s",
        flush=True,
    )


def weighted(run: Callable[[Query], list[int]], weight: float) -> Callable[[Query], list[int]]:
    """`run` with `fuse.LEXICAL_WEIGHT` set for its queries (a tuning sweep in one run)."""
    from pi_memory.vectors import fuse

    def with_weight(q: Query) -> list[int]:
        saved, fuse.LEXICAL_WEIGHT = fuse.LEXICAL_WEIGHT, weight
        try:
            return run(q)
        finally:
            fuse.LEXICAL_WEIGHT = saved

    return with_weight


def recording_session_sides(
    run: Callable[[Query], list[int]], systems: Systems, out: Any
) -> Callable[[Query], list[int]]:
    """`run` (hybrid), writing for each session-level question its candidate sessions' two sides as
    `HybridSearcher.session_scores` fuses them (`HybridSearcher.session_sides`: keyword score and
    meaning score), by session key, one JSON line per question. `bench/session_fusion.py` replays fusions from them without searching again."""
    from pi_memory.vectors import hybrid

    seen: dict[str, dict[str, float]] = {}
    sides_of = hybrid.HybridSearcher.session_sides

    def traced(self: Any, groups: dict[str, list[Any]]) -> tuple[dict[str, float], dict[str, float]]:
        seen["keywords"], seen["meaning"] = sides = sides_of(self, groups)
        return sides

    def with_sides(q: Query) -> list[int]:
        seen.clear()
        hybrid.HybridSearcher.session_sides = traced  # type: ignore[method-assign]
        try:
            got = run(q)
        finally:
            hybrid.HybridSearcher.session_sides = sides_of  # type: ignore[method-assign]
        if q.level == "session" and seen:
            key = systems.sess_key
            sides = {side: {str(key.get(sid, -1)): v for sid, v in seen[side].items()} for side in seen}
            out.write(json.dumps({"set": q.set, "half": split_of(q.set), "targets": sorted(q.targets), **sides}) + "\n")
        return got

    return with_sides


def part_runners(
    systems: Systems, wanted: list[str], part: str, part_queries: list[Query], args: argparse.Namespace
) -> dict[str, Callable[[Query], list[int]]]:
    """The systems asked for, on one archive (embedded first when hybrid or semantic is asked)."""
    runners: dict[str, Callable[[Query], list[int]]] = {
        "project": systems.project,
        "spec": systems.spec,
        "bm25": systems.bm25,
        "stem": systems.stem,
        "like": systems.like,
        "hybrid": systems.hybrid,
        "semantic": systems.semantic,
    }
    runners = {k: v for k, v in runners.items() if k in wanted}
    if {"hybrid", "semantic"} & set(runners) and part in args.embed_parts.split(","):
        prefixes = tuple(p for p in args.embed_projects.split(",") if p) if part == "histories" else ()
        embed_archive(systems.archive, args.work, prefixes or None, part_queries)
        EMBEDDED[part] = prefixes or None
    if args.session_sides is not None and "hybrid" in runners:
        runners["hybrid"] = recording_session_sides(runners["hybrid"], systems, args.session_sides)
    for weight in [w for w in args.fuse_weights.split(",") if w] if "hybrid" in runners else []:
        runners[f"hybrid@{weight}"] = weighted(systems.hybrid, float(weight))
    return runners


def apply_overrides(settings: list[str]) -> None:
    """`search.RARE_CANDIDATES=100`, `ranking.PHRASE_WEIGHT=0.5` or `scoring.EXACT_RUNS_BONUS=0.5`: for tuning runs only."""
    from pi_memory.core import scoring
    from pi_memory.search import messages as search
    from pi_memory.vectors import fuse, hybrid

    modules = {"search": search, "ranking": ranking, "scoring": scoring, "fuse": fuse, "hybrid": hybrid}
    for item in settings:
        target, value = item.split("=", 1)
        mod, name = target.split(".", 1)
        current = getattr(modules[mod], name)
        setattr(modules[mod], name, type(current)(value))
        print(f"override {target} = {value}")


EMBEDDED: dict[str, tuple[str, ...] | None] = {}  # part -> project prefixes embedded (None: all)


def applies(system: str, q: Query) -> bool:
    """LIKE applies to exact fragments only, the spec's pipeline to the archive-wide message sets,
    `hybrid` and `semantic` to the questions whose archive (or project) was embedded."""
    if system.startswith(("hybrid", "semantic")):
        part = "histories" if q.project is not None else "documents"
        if part not in EMBEDDED:
            return False
        prefixes = EMBEDDED[part]
        return prefixes is None or (q.project or "").startswith(prefixes)
    if system == "like":
        return q.set.startswith(("frag", "script"))
    if system == "spec":
        return q.project is None and q.level == "message"
    return True


def run_systems(
    runners: dict[str, Callable[[Query], list[int]]], queries: list[Query]
) -> tuple[dict[str, dict[str, Any]], dict[str, list[int | None]], dict[str, list[float]]]:
    """Every query through every system: metrics per set, and each query's rank per system."""
    set_names = list(dict.fromkeys(q.set for q in queries))
    results: dict[str, dict[str, Any]] = {}
    ranks_by: dict[str, list[int | None]] = {}
    latencies: dict[str, list[float]] = {}
    for name, run in runners.items():
        per_set: dict[str, list[int | None]] = {s: [] for s in set_names}
        ms: list[float] = []
        with Timer() as t_all:
            for q in queries:
                rank: int | None = None
                if applies(name, q):
                    with Timer() as t:
                        got = run(q)
                    ms.append(t.ms)
                    rank = first_rank(got, q.targets)
                    per_set[q.set].append(rank)
                ranks_by.setdefault(name, []).append(rank)
        results[name] = {s: metrics(r) for s, r in per_set.items() if r}
        latencies[name] = ms
        print(f"  {name}: {len(ms)} queries in {t_all.ms / 1000:.1f} s", flush=True)
    return results, ranks_by, latencies


def print_report(
    results: dict[str, dict[str, Any]], ranks_by: dict[str, list[int | None]], queries: list[Query], show_misses: int
) -> None:
    set_names = list(dict.fromkeys(q.set for q in queries))
    rows = [
        [s, split_of(s), name, m["n"], m["R@1"], m["R@5"], m["R@10"], m["MRR@10"]]
        for s in set_names
        for name in results
        if (m := results[name].get(s))
    ]
    print(table(["query set", "half", "system", "n", "R@1", "R@5", "R@10", "MRR@10"], rows))
    print()
    lat = [[n, *[results[n]["_latency_ms"][k] for k in ("p50", "p95", "max")]] for n in results]
    print(table(["system (this small archive)", "p50 ms", "p95 ms", "max ms"], lat))
    if "project" not in results:
        return
    mine = results["project"]
    for base in ("bm25", "stem"):
        if base not in results:
            continue
        theirs = results[base]
        worse = [
            s
            for s in set_names
            if s in theirs
            and (mine[s]["R@1"] < theirs[s]["R@1"] - 1e-9 or mine[s]["MRR@10"] < theirs[s]["MRR@10"] - 1e-9)
        ]
        print(
            f"\nproject >= {base} on R@1 and MRR@10 in every set"
            if not worse
            else f"\nproject below {base} in: {worse}"
        )
    for base in ("bm25", "stem"):
        if base in ranks_by and show_misses:
            print_misses(queries, ranks_by["project"], ranks_by[base], base, show_misses)


def print_misses(
    queries: list[Query], mine: list[int | None], theirs: list[int | None], base: str, show_misses: int
) -> None:
    """The queries where the project did not put a target first, those the baseline did better on
    first: what tuning looks at."""
    shown: dict[str, int] = {}
    pairs = list(zip(queries, mine, theirs, strict=True))
    pairs.sort(key=lambda p: not (p[2] is not None and (p[1] is None or p[1] > p[2])))
    for q, a, b in pairs:
        if a != 0 and shown.get(q.set, 0) < show_misses:  # ranks count from 0
            shown[q.set] = shown.get(q.set, 0) + 1
            print(f"  miss [{q.set}] {q.text!r}: project rank {a}, {base} rank {b}")


def write_ranks(path: Path | None, queries: list[Query], ranks_by: dict[str, list[int | None]]) -> None:
    """One JSON line per query: its set, text and the rank each system gave its first target (from 0;
    null: not in the top 10), for comparing systems question by question (which fail where)."""
    if path is None:
        return
    with path.open("w", encoding="utf-8") as f:
        for k, q in enumerate(queries):
            ranks = {name: ranks[k] for name, ranks in ranks_by.items()}
            f.write(json.dumps({"set": q.set, "q": q.text, "ranks": ranks}, ensure_ascii=False) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument(
        "--qsets", type=Path, default=Path("bench/data"), help="the public question sets (bench/qsets_build.py)"
    )
    ap.add_argument("--quick", action="store_true", help="fewer distractors and queries (a few minutes)")
    ap.add_argument("--seed", type=int, default=2018)
    ap.add_argument("--fragments", type=int, default=0, help="queries per fragment set (default 40 quick, 150 full)")
    ap.add_argument("--sets", default="", help="comma-separated query set name prefixes to run (tuning)")
    ap.add_argument("--split", choices=("fit", "report"), default=None, help="run only this half of the sets")
    ap.add_argument("--only", default="", help="comma-separated systems to run (project,spec,bm25,stem,like)")
    ap.add_argument(
        "--show-misses",
        type=int,
        default=0,
        help="print this many queries per set where the project missed the top (those a baseline did better on first)",
    )
    ap.add_argument("--set", action="append", default=[], help="override a tuning constant: search.NAME=VALUE")
    ap.add_argument("--keep", type=Path, default=None, help="build the archive in this folder and keep it")
    ap.add_argument(
        "--work", type=Path, default=Path("/tmp/pi-memory-quality-work"), help="the vector cache (hybrid, semantic)"
    )
    ap.add_argument(
        "--embed-parts", default="documents,histories", help="archives to embed for hybrid/semantic (comma-separated)"
    )
    ap.add_argument(
        "--embed-projects", default="", help="histories: embed only these project prefixes (comma-separated)"
    )
    ap.add_argument(
        "--small-docs",
        action="store_true",
        help="the documents archive of CMRC and the Vue docs alone (no books, no BoolQ/PubMedQA): small enough to embed",
    )
    ap.add_argument("--fuse-weights", default="", help="also run hybrid at these fuse.LEXICAL_WEIGHT values (tuning)")
    ap.add_argument("--ranks", type=Path, default=None, help="write each query's rank per system here (JSON lines)")
    ap.add_argument(
        "--session-sides",
        type=argparse.FileType("w"),
        default=None,
        help="with hybrid: each session-level question's keyword and meaning score per candidate session "
        "(JSON lines, for bench/session_fusion.py)",
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    apply_overrides(args.set)
    header = result_header("quality", {k: str(v) for k, v in vars(args).items()})  # the commit being measured
    with Timer() as t_total:
        rng = random.Random(args.seed)
        docs, cmrc_q, vue_q = load_docs(args.corpus, args.quick, rng, books=not args.small_docs)
        per_set = args.fragments or (40 if args.quick else 150)
        frags = FragmentSampler(docs, rng).all_sets(per_set)
        # unique in the spelling typed; CJK fragments cut from the traditional-Chinese classics
        classics = [i for i, d in enumerate(docs) if d.source == "classics"]
        script = FragmentSampler(docs, rng, surface=True, targets=classics)
        frags += (
            script.single_chars(per_set)
            + script.sample("2cjk", script.cjk_run(2), per_set)
            + script.sample("4cjk", script.cjk_run(4), per_set)
            + script.sample("2zh-words", script.two_of(_CJK2), per_set)
            if classics  # none with --small-docs
            else []
        )
        mixed = FragmentSampler(docs, rng, surface=True)
        frags += mixed.sample("2en-words", mixed.two_of(_WORD), per_set) + mixed.sample(
            "ident+zh", mixed.ident_and_cjk, per_set
        )
        qs = load_qsets(args.qsets, len(docs), [docs[i] for i in classics], args.quick, random.Random(args.seed))
        if args.small_docs:  # the documents archive without the paragraph sets either
            qs.queries = [q for q in qs.queries if q.project is not None]
        else:
            docs += qs.docs
        queries = cmrc_q + vue_q + frags + qs.queries
        if args.sets:
            queries = [q for q in queries if any(q.set.startswith(p) for p in args.sets.split(","))]
        if args.split:
            queries = [q for q in queries if split_of(q.set) == args.split]
        # hybrid and semantic only when named in --only: they embed every document with the real model
        # first (hours for the full documents archive on one core; cached by text under --work)
        runners_wanted = args.only.split(",") if args.only else ["project", "spec", "bm25", "stem", "like"]
        work = args.keep or Path(tempfile.mkdtemp(prefix="pi-memory-quality-"))
        if args.keep:
            shutil.rmtree(work, ignore_errors=True)
        # two archives: the corpora with the paragraph sets (archive-wide questions), and the
        # histories (each question asked inside its project), so no history repeats a document
        doc_queries = [q for q in queries if q.project is None]
        history_queries = [q for q in queries if q.project is not None]
        results: dict[str, dict[str, Any]] = {}
        ranks_by: dict[str, list[int | None]] = {}
        latencies: dict[str, list[float]] = {}
        messages = 0
        try:
            for part, part_docs, part_sessions, part_queries in (
                ("documents", docs, [], doc_queries),
                ("histories", [], qs.sessions, history_queries),
            ):
                if not part_queries:
                    continue
                with Timer() as t_build:
                    archive, msg_key, sess_key = build_archive(part_docs, part_sessions, work / part)
                    systems = Systems(archive, msg_key, sess_key, stem="stem" in runners_wanted)
                messages += len(systems.session_of)
                print(
                    f"{part}: {len(part_docs)} documents, {len(part_sessions)} sessions, "
                    f"{len(systems.session_of)} indexed messages ({len(systems.spans)} projects read by rowid range), "
                    f"{len(part_queries)} queries, "
                    f"built in {t_build.ms / 1000:.1f} s",
                    flush=True,
                )
                runners = part_runners(systems, runners_wanted, part, part_queries, args)
                part_results, part_ranks, part_ms = run_systems(runners, part_queries)
                for name in runners:
                    results.setdefault(name, {}).update(part_results[name])
                    ranks_by.setdefault(name, []).extend(part_ranks[name])
                    latencies.setdefault(name, []).extend(part_ms[name])
                archive.close()
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
        queries = doc_queries + history_queries
        for name, ms in latencies.items():
            results[name]["_latency_ms"] = latency_summary(ms)
        print_report(results, ranks_by, queries, args.show_misses)
        write_ranks(args.ranks, queries, ranks_by)
    print(f"\nwhole run: {t_total.ms / 1000:.0f} s")
    data = header
    set_names = list(dict.fromkeys(q.set for q in queries))
    data.update(
        {
            "documents": len(docs),
            "history_sessions": len(qs.sessions),
            "indexed_messages": messages,
            "queries": len(queries),
            "run_seconds": round(t_total.ms / 1000, 1),
            "sources": qs.sources,
            "split": {s: split_of(s) for s in set_names},
            "query_sets": {s: sum(1 for q in queries if q.set == s) for s in set_names},
            "results": results,
        }
    )
    save_json(args.json, data)


if __name__ == "__main__":
    main()
