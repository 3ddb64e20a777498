"""A memory search with vectors: the memories' BM25 scores fused with their cosines.

Design idea: a memory search scores every memory a session may see (tens, at most a few hundred:
`memory.find.search`), so the vector side needs no index either: the vectors of exactly those
memories' texts are looked up by key (`keyed.memory_ref`) and scored. The fusion is the message
search's (`fuse.mix`, the same weights); what the vector side adds is its `MEMORY_NEAREST` nearest
memories (a handful: a workspace's memories are all close to each other next to an archive's
messages, and without a cut every memory would be listed for every question), the lexical hits
keep their place in the mix, and a memory no side found is not listed. A memory whose text has no
vector yet keeps its lexical share on both sides, as a tool result does in the message search.

Also the hook that removes a retired text's vector right after the write that retired it
(`memory.service.Memories` calls `retired`). NumPy and the model load only when a search has
vectors to compare.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..memory.caches import BoundedCache
from ..memory.find import Found, body_snippet
from ..memory.model import MemoryRecord
from ..storage.store import Store
from . import fuse
from .keyed import KIND_MEMORY, memory_ref, sweep_memories
from .model import DIM, squeeze, text_hash

# vector-only memories a hybrid search adds (unmeasured: no question set of memories exists yet)
MEMORY_NEAREST = 5


class MemoryVectors:
    """What `Memories` asks of semantic recall: `rerank` a search, `retired` after a write."""

    def __init__(
        self, store: Store, model_id: Callable[[], str | None], load: Callable[[], Any], mode: str = "hybrid"
    ) -> None:
        self.store = store
        self.model_id = model_id  # None: semantic recall cannot answer (not installed, broken)
        self.load = load
        self.mode = mode

    def retired(self) -> None:
        sweep_memories(self.store)

    def rerank(self, query: str, records: list[MemoryRecord], found: list[Found]) -> list[Found]:
        """`found` (the lexical hits among `records`) fused with the records' cosines; `found` as it
        is when none of the records' texts has a vector."""
        model = self.model_id()
        if model is None or not query.strip() or not records:
            return found
        stored = self._vectors(model, records)
        if not stored:
            return found
        import numpy as np

        from .codes import int8_scores

        query_vector = np.asarray(self.load().query(query), dtype=np.float32)
        refs = list(stored)
        codes = np.frombuffer(b"".join(stored[r][0] for r in refs), dtype=np.int8).reshape(len(refs), DIM)
        scores = int8_scores(query_vector, codes, np.array([stored[r][1] for r in refs], dtype=np.float32))
        by_ref = dict(zip(refs, scores.tolist(), strict=True))
        refs_of = {r.id: _ref_and_hash(r.body)[0] for r in records}
        cosines = {i: by_ref[ref] for i, ref in refs_of.items() if ref in by_ref}
        return self._fused(query, records, found, cosines)

    def _vectors(self, model: str, records: list[MemoryRecord]) -> dict[int, tuple[bytes, float]]:
        """ref -> (int8 vector, scale) of the records' texts that have one of `model` (their text's
        full hash checked, not only the key's 60 bits)."""
        wanted = dict(_ref_and_hash(r.body) for r in records)
        sql = f"""SELECT ref, hash, vec, scale FROM vec
                  WHERE kind = ? AND model = ? AND {self.store.sql_in_list("ref")}"""
        rows = self.store.rows(sql, (KIND_MEMORY, model, self.store.list_param(sorted(wanted))))
        return {int(ref): (bytes(vec), float(scale)) for ref, h, vec, scale in rows if wanted.get(int(ref)) == h}

    def _fused(
        self, query: str, records: list[MemoryRecord], found: list[Found], cosines: dict[str, float]
    ) -> list[Found]:
        nearest = dict(sorted(cosines.items(), key=lambda kv: -kv[1])[:MEMORY_NEAREST])
        lexical = {} if self.mode == "semantic" else {f.record.id: f.score for f in found}
        vector = {**{i: cosines[i] for i in lexical if i in cosines}, **nearest}
        fused = dict(fuse.mix_unjudged_kept(lexical, vector))
        by_id = {r.id: r for r in records}
        snippets = {f.record.id: f.snippet for f in found}
        out = [
            Found(by_id[i], score, snippets.get(i) or body_snippet(by_id[i].body, query))
            for i, score in fused.items()
            if score > 0
        ]
        out.sort(key=lambda f: -f.score)  # stable: ties keep the lexical order
        return out


# every search of a workspace asks it of all its memories: kept for ~1M characters of bodies
_REFS: BoundedCache[str, tuple[int, str]] = BoundedCache(1_000_000, lambda body, _: len(body) + 100)


def _ref_and_hash(body: str) -> tuple[int, str]:
    """A memory's vector key and the full hash of its text."""
    return _REFS.remembered(body, lambda text: (memory_ref(text), text_hash(squeeze(text))))
