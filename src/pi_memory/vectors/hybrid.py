"""Search with vectors: the nearest units within a search's filters, and their fusion with the
lexical hits, as a layer over the lexical `Searcher` (which it calls and never changes).

Design idea: a hybrid search is the lexical search plus one more candidate source. The query is
embedded on a worker thread while the lexical search runs (the model runs in C without the GIL),
so the model's ~20 ms mostly hides behind the lexical side's own time. The vector side scans the
index (`index.ScanIndex`: session, time and role masked first, so a question asked inside one
project finds that project's nearest units, not the archive's), rescores the best by bits exactly
from the archive's int8 vectors, and keeps those the search's filters allow (echoes, the asking
run, every other filter: the same SQL as the lexical side's, `search.messages.filter_sql`). Both
lists are then fused (`fuse.mix`); a candidate the vector side cannot judge (a tool result, never
embedded) keeps its lexical score on both sides.

`mode`: `hybrid` (fused), `semantic` (the vector side alone), `lexical` (the `Searcher` alone:
this module is not involved).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core import ranking
from ..core.text import query_phrases_for_snippet, query_tokens
from ..search.messages import MAX_LIMIT, Filters, Hit, Searcher, filter_sql
from ..storage.store import Store, decode_text
from . import fuse
from . import index as scan
from .codes import hamming_columns, int8_scores, sign_bits, smallest
from .model import DIM
from .units import KIND_MESSAGE, ROLE_CODES

MODES = ("lexical", "hybrid", "semantic")
FUSION = "mix"  # `fuse.mix` (scores); "rrf": reciprocal rank fusion, the measured alternative
FUSE_DEPTH = 100  # vector hits fused (the pilot's figure)
# lexical hits fused. A lexical search's time grows with the hits it scores (106k units: 7 ms for
# 10, 12 for 50, 24 for 100), and it runs while the query is embedded (~18 ms), so 50 would hide
# behind the model; bench/quality.py with vectors (--quick --small-docs): 50 left the fit half as
# it was (CMRC, every fragment set) but cost Vue headings R@1 0.453 -> 0.447 and R@10 0.793 ->
# 0.767, a topic's section off the first page for 1 query in 40. Kept at 100: ~6 ms for that.
LEXICAL_DEPTH = 100
# units rescored exactly after the sign-bit pass, per unit kept: bench/semantic_scan.py measured
# the share of the exact top 100 found this way
RESCORE_PER_HIT = 10
CHECK_PER_HIT = 2  # rescored units checked against the filters, per unit kept (echoes drop out there)
EXTRA_MAX = 50_000  # vectors newer than the index scored straight from the archive; more: rebuild


def check_mode(mode: str | None) -> str | None:
    from ..errors import BadInput

    if mode is not None and mode not in MODES:
        raise BadInput(f"unknown mode {mode!r}: use lexical, hybrid or semantic")
    return mode


class VectorSearch:
    """The vector side of one archive: query embedding, the index, the filtered nearest units."""

    def __init__(self, store: Store, db_path: Path, model_id: str, load: Callable[[], Any]) -> None:
        self.store = store
        self.db_path = db_path
        self.model_id = model_id
        self.load = load
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pi-memory-query")
        self._index: scan.ScanIndex | None = None
        self._index_stamp: int | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def has_vectors(self) -> bool:
        sql = "SELECT EXISTS (SELECT 1 FROM vec WHERE kind = ? AND model = ?)"
        return bool(self.store.scalar(sql, (KIND_MESSAGE, self.model_id)))

    def embed_query(self, query: str, filters: Filters | None = None) -> Future[np.ndarray]:
        """The query's vector, computed on the worker thread (`filters`: the search's, for a vector
        side that can start its own work there, `pg.PgVectorSearch`)."""
        return self.pool.submit(lambda: np.asarray(self.load().query(query), dtype=np.float32))

    # --- the index -------------------------------------------------------------------

    def index(self) -> scan.ScanIndex | None:
        """The index as on disk now (reloaded when its manifest changed), rebuilt when stale if no
        embedder holds the archive; None: score the archive's vectors directly."""
        manifest = scan.folder_of(self.db_path) / "msg.json"
        try:
            stamp = manifest.stat().st_mtime_ns
        except OSError:
            stamp = None
        if stamp is None or stamp != self._index_stamp:
            self._index = scan.ScanIndex.load(manifest.parent) if stamp is not None else None
            self._index_stamp = stamp
        current = self._index
        generation = scan.generation(self.store)
        if current is not None and current.fits(self.model_id, generation):
            return current
        with scan.writer_lock(self.db_path, wait=False) as got:
            if not got:
                return None
            self._index = scan.ScanIndex.build(self.store, self.db_path, self.model_id)
        self._index_stamp = None
        return self._index

    # --- nearest units ---------------------------------------------------------------

    def nearest(self, query_vector: np.ndarray, filters: Filters, k: int) -> dict[int, float]:
        """msg id -> cosine of the `k` nearest units the filters allow, best first."""
        with self.store.read():
            sessions = self._allowed_sessions(filters)
            roles = role_codes(filters.roles)
            if (sessions is not None and len(sessions) == 0) or (roles is not None and not roles):
                return {}
            index = self.index()
            scored = self._from_index(index, query_vector, sessions, roles, filters, k * RESCORE_PER_HIT)
            scored.update(self._rescore(query_vector, self._newer_than(index, sessions, roles, filters)))
            return self._allowed(scored, filters, k)

    def cosines(self, query_vector: np.ndarray, msg_ids: list[int]) -> dict[int, float]:
        """The cosine of these messages' vectors (those that have one) with the query."""
        if not msg_ids:
            return {}
        sql = f"SELECT ref, vec, scale FROM vec WHERE kind = ? AND model = ? AND {self.store.sql_in_list('ref')}"
        rows = self.store.rows(sql, (KIND_MESSAGE, self.model_id, self.store.list_param(msg_ids)))
        return row_cosines(query_vector, rows)

    def _allowed_sessions(self, f: Filters) -> np.ndarray | None:
        """`vec_session` numbers of the sessions the filters allow; None: any session."""
        clauses, params = [], []
        if f.project:
            clauses.append("(s.project = ? OR s.cwd = ? OR s.cwd LIKE ? ESCAPE '\\')")
            escaped = f.project.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params += [f.project, f.project, "%/" + escaped]
        for column, value in (("s.id", f.session_id), ("s.agent", f.agent)):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if f.sessions:
            clauses.append(self.store.sql_in_list("s.id"))
            params.append(self.store.list_param(f.sessions))
        if not clauses:
            return None
        sql = f"SELECT v.ord FROM vec_session v JOIN session s ON s.id = v.session_id WHERE {' AND '.join(clauses)}"
        return np.array([int(r[0]) for r in self.store.rows(sql, params)], dtype=np.int64)

    def _from_index(
        self,
        index: scan.ScanIndex | None,
        query_vector: np.ndarray,
        sessions: np.ndarray | None,
        roles: set[int] | None,
        f: Filters,
        k: int,
    ) -> dict[int, float]:
        """msg id -> exact cosine of the units nearest by sign bits among those the mask lets
        through, rescored from the index's own copy of their int8 vectors."""
        if index is None or index.count == 0:
            return {}
        a = index.arrays
        rows = _masked_rows(a, sessions, roles, f.since_ms, f.until_ms)
        columns = index.columns if rows is None else index.columns[:, rows]
        best = smallest(hamming_columns(sign_bits(query_vector, index.mean)[0], columns), k)
        chosen = np.sort(best if rows is None else rows[best])  # in file order: the mapped pages in turn
        scores = int8_scores(query_vector, np.asarray(a["vecs"][chosen]), np.asarray(a["scales"][chosen]))
        return dict(zip(np.asarray(a["refs"])[chosen].tolist(), scores.tolist(), strict=True))

    def _newer_than(
        self, index: scan.ScanIndex | None, sessions: np.ndarray | None, roles: set[int] | None, f: Filters
    ) -> list[int]:
        """`vec` ids written after the index was (another process's, or all of them without one)."""
        after = index.max_id if index is not None else 0
        # `+`: by the rowid range, not by the (kind, ref) index, which would walk every vector (6 ms at 100k)
        sql = "SELECT id FROM vec WHERE +kind = ? AND +model = ? AND id > ?"
        params: list[Any] = [KIND_MESSAGE, self.model_id, after]
        if sessions is not None:
            sql += f" AND {self.store.sql_in_list('sess')}"
            params.append(self.store.list_param(int(s) for s in sessions))
        if roles is not None:
            sql += f" AND {self.store.sql_in_list('role')}"
            params.append(self.store.list_param(sorted(roles)))
        for condition, value in (("ts >= ?", f.since_ms), ("ts < ?", f.until_ms)):
            if value:
                sql += f" AND {condition}"
                params.append(value)
        return [int(r[0]) for r in self.store.rows(sql + " LIMIT ?", [*params, EXTRA_MAX])]

    def _rescore(self, query_vector: np.ndarray, vec_ids: list[int]) -> dict[int, float]:
        """msg id -> exact cosine, for these `vec` rows."""
        if not vec_ids:
            return {}
        sql = f"SELECT ref, vec, scale FROM vec WHERE {self.store.sql_in_list('id')}"
        return row_cosines(query_vector, self.store.rows(sql, (self.store.list_param(vec_ids),)))

    def _allowed(self, scored: dict[int, float], f: Filters, k: int) -> dict[int, float]:
        """The best `k` of the scored messages that every filter allows (echoes, the asking run too)."""
        ranked = sorted(scored, key=lambda i: -scored[i])[: k * CHECK_PER_HIT]
        if not ranked:
            return {}
        where, params = filter_sql(f, self.store)
        sql = f"""SELECT m.id FROM msg m JOIN session s ON s.id = m.session_id
                  WHERE {self.store.sql_in_list("m.id")} AND {where}"""
        if not f.include_echoes:
            sql += " AND m.echo = 0"
        if f.exclude_ids:
            sql += f" AND NOT ({self.store.sql_in_list('m.id')})"
            params = [*params, self.store.list_param(f.exclude_ids)]
        allowed = {int(r[0]) for r in self.store.rows(sql, [self.store.list_param(ranked), *params])}
        return _first(ranked, allowed, scored, k)


def _first(ranked: list[int], allowed: set[int], scored: dict[int, float], k: int) -> dict[int, float]:
    kept: dict[int, float] = {}
    for msg_id in ranked:
        if msg_id in allowed:
            kept[msg_id] = scored[msg_id]
            if len(kept) == k:
                break
    return kept


def row_cosines(query_vector: np.ndarray, rows: list[tuple[Any, ...]]) -> dict[int, float]:
    """msg id -> cosine, from (ref, int8 blob, scale) rows."""
    if not rows:
        return {}
    codes = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.int8).reshape(len(rows), DIM)
    scores = int8_scores(query_vector, codes, np.array([r[2] for r in rows], dtype=np.float32))
    return {int(r[0]): float(s) for r, s in zip(rows, scores, strict=True)}


def role_codes(roles: tuple[str, ...]) -> set[int] | None:
    """The unit roles a roles filter allows (None: all); an empty set: none of them is a unit."""
    if not roles:
        return None
    return {ROLE_CODES[r] for r in roles if r in ROLE_CODES}


def _masked_rows(
    a: dict[str, np.ndarray], sessions: np.ndarray | None, roles: set[int] | None, since: int | None, until: int | None
) -> np.ndarray | None:
    """Row numbers the mask lets through, or None for all (no mask: nothing to compute)."""
    mask: np.ndarray | None = None

    def narrow(more: np.ndarray) -> None:
        nonlocal mask
        mask = more if mask is None else mask & more

    if sessions is not None:
        sess = np.asarray(a["sess"])
        table = np.zeros(max(int(sess.max(initial=0)), int(sessions.max(initial=0))) + 1, dtype=bool)
        table[sessions] = True
        narrow(table[sess])
    if roles is not None:
        narrow(np.isin(np.asarray(a["role"]), sorted(roles)))
    if since:
        narrow(np.asarray(a["ts"]) >= since)
    if until:
        narrow(np.asarray(a["ts"]) < until)
    return None if mask is None else np.flatnonzero(mask)


def session_meaning(groups: dict[str, list[Hit]], nearest: dict[int, float]) -> dict[str, float]:
    """Each session's score on the vector side, on the cosine scale (sessions with no message among
    the nearest units are left out): the background, the median cosine of the nearest units found,
    plus `ranking.session_score` over how far each of its messages stands above it.

    Cosines sit close together (0.8-0.9 for most of a question's nearest units), so over raw cosines
    the bonus `session_score` gives further hits outweighed the best one: a long session of loosely
    similar turns outranked the one holding the answer (bench/quality.py, fit half, semantic session
    R@1 mix-zh-old 0.286 against 0.906 for the turn itself; MemDaily-a 0.820). Above the median:
    0.840 and 0.949, and realtalk-a / long-replies-a 0.496 / 0.461 -> 0.536 / 0.475. The best
    cosine alone (0.920 / 0.956) cost long-replies-a 3 points: there, a session's further turns
    near the question are evidence too."""
    if not nearest:
        return {}
    ordered = sorted(nearest.values())
    background = ordered[len(ordered) // 2]
    return {
        sid: background + ranking.session_score(max(0.0, nearest[h.msg_id] - background) for h in near)
        for sid, g in groups.items()
        if (near := [h for h in g if h.msg_id in nearest])
    }


def fuse_sessions(
    by_keywords: dict[str, float],
    by_meaning: dict[str, float],
    lexical_weight: float | None = None,
    spread: float | None = None,
) -> dict[str, float]:
    """Sessions' keyword and meaning scores fused (`fuse.mix`; the vector side on the sessions' scale,
    `fuse.SESSION_VECTOR_SPREAD`, unless another is given), best first; a session the keyword side
    did not find counts 0 there."""
    keywords = {k: v for k, v in by_keywords.items() if v > 0}
    spread = fuse.SESSION_VECTOR_SPREAD if spread is None else spread
    return dict(fuse.mix(keywords, by_meaning, lexical_weight, spread))


class HybridSearcher:
    """`Searcher.search`'s shape (and `session_rows`, for `rank_sessions`), fused with vectors."""

    def __init__(self, lexical: Searcher, vectors: VectorSearch, mode: str) -> None:
        self.lexical = lexical
        self.vectors = vectors
        self.mode = mode
        self.store = lexical.store
        # the last search's two sides (msg id -> keyword score, msg id -> cosine): `session_scores`
        # (one searcher per search: `Archive.content_searcher` makes a new one each time)
        self._sides: tuple[dict[int, float], dict[int, float]] = ({}, {})

    def session_rows(self, ids: list[str]) -> dict[str, tuple[int, int, str | None]]:
        return self.lexical.session_rows(ids)

    def search(self, query: str, limit: int = 10, filters: Filters | None = None) -> list[Hit]:
        filters = filters or Filters()
        limit = max(1, min(int(limit), MAX_LIMIT))
        pending_vector = self.vectors.embed_query(query, filters)
        lexical: list[Hit] = []
        if self.mode == "hybrid":
            lexical = self.lexical.search(query, limit=max(limit, LEXICAL_DEPTH), filters=filters)
        if filters.current_session and not filters.exclude_ids:
            with self.store.read():
                filters = replace(filters, exclude_ids=self.lexical.current_run_ids(filters.current_session))
        query_vector = pending_vector.result()
        nearest = self.vectors.nearest(query_vector, filters, max(limit, FUSE_DEPTH))
        self._sides = ({h.msg_id: h.score for h in lexical}, nearest)
        if self.mode == "semantic":
            ranked = list(nearest.items())
        else:
            ranked = self._fused(query_vector, lexical, nearest)
        return self._hits(query, ranked[:limit], {h.msg_id: h for h in lexical})

    def session_scores(self, groups: dict[str, list[Hit]]) -> dict[str, float]:
        """Sessions fused as messages are, one level up, with the same keyword weight (`fuse.mix`):
        each session's keyword score (`ranking.session_score` over its keyword hits, as a keyword
        search ranks sessions) mixed with its score on the vector side (`session_meaning`), that on a
        narrower scale than a message's cosine (`fuse.SESSION_VECTOR_SPREAD`). Summing fused message
        scores instead let sessions of many loosely similar messages win.

        The vector side's session score used to be the best cosine, and the keyword side's share was
        fitted apart (0.9); with `session_meaning`, the messages' own weights are the best on the fit half of
        bench/quality.py (session R@1 realtalk-a / long-replies-a / MemDaily-a / mix-zh-old, keyword
        share 0.9 / 0.6 / 0.45 / 0.3: 0.563 / 0.577 / 0.601 / 0.598, 0.539 / 0.569 / 0.566 / 0.569,
        0.931 / 0.940 / 0.948 / 0.958, 0.892 / 0.898 / 0.904 / 0.902; docs/semantic.md)."""
        by_keywords, by_meaning = self.session_sides(groups)
        if self.mode == "semantic":
            return {sid: by_meaning.get(sid, 0.0) for sid in groups}
        fused = fuse_sessions(by_keywords, by_meaning)
        return {sid: fused.get(sid, 0.0) for sid in groups}

    def session_sides(self, groups: dict[str, list[Hit]]) -> tuple[dict[str, float], dict[str, float]]:
        """Each session's keyword score (`ranking.session_score` over its keyword hits) and meaning
        score (`session_meaning`), from the last search's two sides: what `session_scores` fuses
        (bench/quality.py --session-sides records them)."""
        lexical, nearest = self._sides
        by_keywords = {
            sid: ranking.session_score(lexical[h.msg_id] for h in g if h.msg_id in lexical) for sid, g in groups.items()
        }
        return by_keywords, session_meaning(groups, nearest)

    def _fused(
        self, query_vector: np.ndarray, lexical: list[Hit], nearest: dict[int, float]
    ) -> list[tuple[int, float]]:
        """The lexical hits' scores, every candidate's cosine (a lexical hit's is looked up), fused."""
        lex_scores = {h.msg_id: h.score for h in lexical}
        missing = [i for i in lex_scores if i not in nearest]
        with self.store.read():
            cosines = {**self.vectors.cosines(query_vector, missing), **nearest}
        if FUSION == "rrf":
            by_cosine = sorted(nearest, key=lambda i: -nearest[i])
            return fuse.rrf([list(lex_scores), by_cosine])
        return fuse.mix_unjudged_kept(lex_scores, cosines)  # a tool result is never embedded

    def _hits(self, query: str, ranked: list[tuple[int, float]], known: dict[int, Hit]) -> list[Hit]:
        """Hits in fused order: the lexical side's as they were (new score), the others fetched."""
        rows = self._rows([i for i, _ in ranked if i not in known])
        needles = [query_phrases_for_snippet(query), [t.text for t in query_tokens(query)]]
        out = []
        for msg_id, score in ranked:
            if msg_id in known:
                out.append(replace(known[msg_id], score=score))
            elif msg_id in rows:
                out.append(_hit(rows[msg_id], score, needles))
        return out

    def _rows(self, ids: list[int]) -> dict[int, dict[str, Any]]:
        if not ids:
            return {}
        sql = f"""SELECT m.id, m.session_id, m.seq, m.ts, m.role, m.text, s.project, s.cwd, s.name
                  FROM msg m JOIN session s ON s.id = m.session_id WHERE {self.store.sql_in_list("m.id")}"""
        keys = ("id", "session_id", "seq", "ts", "role", "text", "project", "cwd", "name")
        out = {}
        for r in self.store.rows(sql, (self.store.list_param(ids),)):
            row = dict(zip(keys, r, strict=True))
            row["text"] = decode_text(row["text"])
            out[int(r[0])] = row
        return out


def _hit(row: dict[str, Any], score: float, needles: list[list[str]]) -> Hit:
    text = str(row["text"])
    return Hit(
        msg_id=int(row["id"]),
        session_id=str(row["session_id"]),
        seq=int(row["seq"]),
        role=str(row["role"]),
        ts=int(row["ts"]),
        project=str(row["project"]),
        score=score,
        needles=needles,
        cwd=str(row["cwd"]),
        session_name=row["name"],
        text=text,
    )
