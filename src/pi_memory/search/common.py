"""What both tracks of a search share (messages, `messages`; run summaries, `runs`): the rare track's
choice of tokens, and the document frequencies a process keeps."""

from __future__ import annotations

from collections import OrderedDict

from ..core.ranking import DF_STALE_GROWTH
from ..core.text import QueryToken

DF_CACHE_SIZE = 20_000


def rarest_within(present: list[QueryToken], df: dict[str, int], budget: int) -> list[QueryToken]:
    """The rarest tokens (`present` is ordered by df) whose postings together fit the budget."""
    rare: list[QueryToken] = []
    for t in present:
        if df[t.text] > budget:
            break
        rare.append(t)
        budget -= df[t.text]
    return rare


class DfCache:
    """token -> document frequency, dropped wholesale when the archive grows > 2%."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, int] = OrderedDict()
        self._at_docs = -1
        self.generation = 0  # bumped on every reset, so other per-archive caches can follow

    def check(self, n_docs: int) -> None:
        if self._at_docs < 0 or abs(n_docs - self._at_docs) > DF_STALE_GROWTH * max(self._at_docs, 1):
            self._items.clear()
            self._at_docs = n_docs
            self.generation += 1

    def get(self, key: str) -> int | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: str, value: int) -> None:
        self._items[key] = value
        if len(self._items) > DF_CACHE_SIZE:
            self._items.popitem(last=False)
