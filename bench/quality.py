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
import json
import random
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Timer, latency_summary, result_header, save_json, table  # noqa: E402
from corpus import CLASSICS, NOVELS, Doc, gutenberg_chunks, vue_sections, write_docs_as_sessions  # noqa: E402

from pi_memory.archive.api import Archive  # noqa: E402
from pi_memory.core.text import QueryToken, fts_and, fts_or, is_cjk, normalize, query_tokens, tokenize  # noqa: E402
from pi_memory.storage.store import decode_text  # noqa: E402

K = 10


@dataclass
class Query:
    set: str
    text: str
    target: int  # doc index


# --- documents and query sets ------------------------------------------------------------


def load_docs(corpus: Path, quick: bool, rng: random.Random) -> tuple[list[Doc], list[Query], list[Query]]:
    docs: list[Doc] = []
    cmrc = json.loads((corpus / "cmrc2018-trial" / "cmrc2018_trial.json").read_text(encoding="utf-8"))
    cmrc_q: list[Query] = []
    for article in cmrc["data"]:
        for para in article["paragraphs"]:
            idx = len(docs)
            docs.append(Doc("cmrc", para["id"], para["context"].strip()))
            cmrc_q += [Query("cmrc-questions", qa["question"], idx) for qa in para["qas"]]
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
            vue_q.append(Query("vue-headings", clean, idx))
    books = CLASSICS + NOVELS
    for book in books:
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
                out.append(Query(self.prefix + name, " ".join(parts), idx))
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
        return [Query(self.prefix + "1cjk", ch, char_docs[ch][0]) for ch in picked]

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


# --- systems ---------------------------------------------------------------------------


def _bm25_or(toks: list[QueryToken]) -> str:
    """The bm25 baseline's expression: each token in the column that holds it. Its table keeps
    positions and columns (detail=full), where bm25 scores per column: without the filter a word
    would count in both channels (the archive's own index, detail='none', needs no filter)."""
    return " OR ".join(f'{t.column}:"{t.text}"' for t in toks)


class Systems:
    """The project and the baselines over one archive."""

    def __init__(self, archive: Archive, msg_to_doc: dict[int, int]) -> None:
        self.archive = archive
        self.conn = archive.store.conn
        self.msg_to_doc = msg_to_doc
        self._df: dict[str, int] = {}
        self._build_bm25_table()

    def _build_bm25_table(self) -> None:
        self.conn.execute(
            """CREATE VIRTUAL TABLE IF NOT EXISTS bl_fts USING fts5(chars, grams, content='',
               tokenize="ascii tokenchars '_'", detail=full)"""
        )
        if self.conn.execute("SELECT count(*) FROM msg WHERE indexed").fetchall()[0][0] == 0:
            return
        rows = list(self.conn.execute("SELECT id, text FROM msg WHERE indexed"))
        self.conn.execute("BEGIN")
        for msg_id, text in rows:
            toks = tokenize(decode_text(text))
            self.conn.execute(
                "INSERT INTO bl_fts(rowid, chars, grams) VALUES (?,?,?)", (msg_id, toks.chars_text(), toks.grams_text())
            )
        self.conn.execute("COMMIT")

    def docs(self, ids: list[int]) -> list[int]:
        return [self.msg_to_doc.get(i, -1) for i in ids]

    def project(self, q: str) -> list[int]:
        return self.docs([h.msg_id for h in self.archive.search(q, limit=K)])

    def bm25(self, q: str) -> list[int]:
        toks = query_tokens(q)
        if not toks:
            return []
        sql = "SELECT rowid FROM bl_fts WHERE bl_fts MATCH ? ORDER BY bm25(bl_fts) LIMIT ?"
        return self.docs([int(r[0]) for r in self.conn.execute(sql, (_bm25_or(toks), K))])

    def like(self, q: str) -> list[int]:
        parts = q.split(" ")
        # message text is stored compressed: the scan decodes each row, as any scan of it must
        self.conn.create_scalar_function("decode_text", decode_text, 1, deterministic=True)
        where = " AND ".join(["decode_text(text) LIKE ? ESCAPE '\\'"] * len(parts))
        params = ["%" + p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for p in parts]
        sql = f"SELECT id FROM msg WHERE indexed AND {where} ORDER BY id DESC LIMIT ?"
        return self.docs([int(r[0]) for r in self.conn.execute(sql, params + [K])])

    def df(self, t: QueryToken) -> int:
        if t.fts() not in self._df:
            sql = "SELECT count(*) FROM msg_fts WHERE msg_fts MATCH ?"
            self._df[t.fts()] = int(self.conn.execute(sql, (t.fts(),)).fetchall()[0][0])
        return self._df[t.fts()]

    def spec(self, q: str) -> list[int]:
        """Spec 000 §7.1 as written: 3 rarest anchors, AND/early termination, OR retry, flat coverage."""
        toks = [t for t in query_tokens(q) if self.df(t) > 0]
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
        return self.docs([m for _, _, m in scored[:K]])


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = max(len(ranks), 1)
    return {
        "n": len(ranks),
        "R@1": sum(1 for r in ranks if r is not None and r < 1) / n,
        "R@5": sum(1 for r in ranks if r is not None and r < 5) / n,
        "R@10": sum(1 for r in ranks if r is not None and r < 10) / n,
        "MRR@10": sum(1.0 / (r + 1) for r in ranks if r is not None and r < 10) / n,
    }


def build_archive(docs: list[Doc], work: Path) -> tuple[Archive, dict[int, int]]:
    sessions = work / "sessions"
    write_docs_as_sessions(docs, sessions)
    archive = Archive.open(work / "quality.db")
    archive.import_paths([sessions])
    by_text: dict[str, int] = {}
    for i, d in enumerate(docs):
        by_text.setdefault(d.text, i)
    msg_to_doc = {}
    for msg_id, stored in archive.store.conn.execute("SELECT id, text FROM msg"):
        text = decode_text(stored)
        if text in by_text:
            msg_to_doc[int(msg_id)] = by_text[text]
    return archive, msg_to_doc


def apply_overrides(settings: list[str]) -> None:
    """`search.RARE_CANDIDATES=100`, `ranking.PHRASE_WEIGHT=0.5` or `scoring.EXACT_RUNS_BONUS=0.5`: for tuning runs only."""
    from pi_memory.core import ranking, scoring
    from pi_memory.search import messages as search

    modules = {"search": search, "ranking": ranking, "scoring": scoring}
    for item in settings:
        target, value = item.split("=", 1)
        mod, name = target.split(".", 1)
        current = getattr(modules[mod], name)
        setattr(modules[mod], name, type(current)(value))
        print(f"override {target} = {value}")


def run_systems(
    runners: dict[str, Callable[[str], list[int]]], queries: list[Query]
) -> tuple[dict[str, dict[str, Any]], dict[str, list[int | None]]]:
    """Every query through every system: metrics per set, and each query's rank per system."""
    set_names = list(dict.fromkeys(q.set for q in queries))
    results: dict[str, dict[str, Any]] = {}
    ranks_by: dict[str, list[int | None]] = {}
    for name, run in runners.items():
        per_set: dict[str, list[int | None]] = {s: [] for s in set_names}
        ms: list[float] = []
        for q in queries:
            rank: int | None = None
            if name != "like" or q.set.startswith(("frag", "script")):  # LIKE applies to exact fragments only
                with Timer() as t:
                    got = run(q.text)
                ms.append(t.ms)
                rank = got.index(q.target) if q.target in got else None
                per_set[q.set].append(rank)
            ranks_by.setdefault(name, []).append(rank)
        results[name] = {s: metrics(r) for s, r in per_set.items() if r}
        results[name]["_latency_ms"] = latency_summary(ms)
    return results, ranks_by


def print_report(
    results: dict[str, dict[str, Any]], ranks_by: dict[str, list[int | None]], queries: list[Query], show_misses: int
) -> None:
    set_names = list(dict.fromkeys(q.set for q in queries))
    rows = [
        [s, name, m["n"], m["R@1"], m["R@5"], m["R@10"], m["MRR@10"]]
        for s in set_names
        for name in results
        if (m := results[name].get(s))
    ]
    print(table(["query set", "system", "n", "R@1", "R@5", "R@10", "MRR@10"], rows))
    print()
    lat = [[n, *[results[n]["_latency_ms"][k] for k in ("p50", "p95", "max")]] for n in results]
    print(table(["system (this small archive)", "p50 ms", "p95 ms", "max ms"], lat))
    if "project" not in results or "bm25" not in results:
        return
    mine, theirs = results["project"], results["bm25"]
    worse = [
        s
        for s in set_names
        if mine[s]["R@1"] < theirs[s]["R@1"] - 1e-9 or mine[s]["MRR@10"] < theirs[s]["MRR@10"] - 1e-9
    ]
    print("\nproject >= bm25 on R@1 and MRR@10 in every set" if not worse else f"\nproject below bm25 in: {worse}")
    # queries where the project did not put the target first, those bm25 did better on first: what tuning looks at
    shown: dict[str, int] = {}
    pairs = list(zip(queries, ranks_by["project"], ranks_by["bm25"], strict=True))
    pairs.sort(key=lambda p: not (p[2] is not None and (p[1] is None or p[1] > p[2])))
    for q, a, b in pairs:
        if a != 0 and shown.get(q.set, 0) < show_misses:  # ranks count from 0
            shown[q.set] = shown.get(q.set, 0) + 1
            print(f"  miss [{q.set}] {q.text!r}: project rank {a}, bm25 rank {b}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--quick", action="store_true", help="fewer distractors and queries (about a minute)")
    ap.add_argument("--seed", type=int, default=2018)
    ap.add_argument("--fragments", type=int, default=0, help="queries per fragment set (default 40 quick, 150 full)")
    ap.add_argument("--sets", default="", help="comma-separated query set name prefixes to run (tuning)")
    ap.add_argument("--only", default="", help="comma-separated systems to run (project,spec,bm25,like)")
    ap.add_argument(
        "--show-misses",
        type=int,
        default=0,
        help="print this many queries per set where the project missed the top (those bm25 did better on first)",
    )
    ap.add_argument("--set", action="append", default=[], help="override a tuning constant: search.NAME=VALUE")
    ap.add_argument("--keep", type=Path, default=None, help="build the archive in this folder and keep it")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    apply_overrides(args.set)
    header = result_header("quality", {k: str(v) for k, v in vars(args).items()})  # the commit being measured
    rng = random.Random(args.seed)
    docs, cmrc_q, vue_q = load_docs(args.corpus, args.quick, rng)
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
    )
    mixed = FragmentSampler(docs, rng, surface=True)
    frags += mixed.sample("2en-words", mixed.two_of(_WORD), per_set) + mixed.sample(
        "ident+zh", mixed.ident_and_cjk, per_set
    )
    queries = cmrc_q + vue_q + frags
    if args.sets:
        queries = [q for q in queries if any(q.set.startswith(p) for p in args.sets.split(","))]
    work = args.keep or Path(tempfile.mkdtemp(prefix="pi-memory-quality-"))
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
    try:
        with Timer() as t_build:
            archive, msg_to_doc = build_archive(docs, work)
            systems = Systems(archive, msg_to_doc)
        print(f"{len(docs)} documents, {len(queries)} queries, built in {t_build.ms / 1000:.1f} s")
        runners: dict[str, Callable[[str], list[int]]] = {
            "project": systems.project,
            "spec": systems.spec,
            "bm25": systems.bm25,
            "like": systems.like,
        }
        if args.only:
            runners = {k: v for k, v in runners.items() if k in args.only.split(",")}
        results, ranks_by = run_systems(runners, queries)
        print_report(results, ranks_by, queries, args.show_misses)
        data = header
        data.update({"documents": len(docs), "queries": len(queries), "results": results})
        data["query_sets"] = {s: sum(1 for q in queries if q.set == s) for s in dict.fromkeys(q.set for q in queries)}
        save_json(args.json, data)
        archive.close()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
