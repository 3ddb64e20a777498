"""What a long-lived process keeps of the memory log between calls, bounded by what it holds.

Design idea: every read and write of a workspace's memories verifies and replays its whole chain
and a search scores every memory, so a process that serves many calls (the bridge, `watch`, the
MCP server) keeps the pure results (a row's checks, a body's tokens, a replayed state) under keys
that name their inputs exactly. A memory body may hold 8,000 characters and its tokens take ~270
bytes a Chinese character, so these caches are bounded by the size of what they hold (characters,
records), not by how many entries: the least recently used go first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """Least recently used out first, once the entries' total cost passes `budget`; thread-safe."""

    def __init__(self, budget: int, cost: Callable[[K, V], int]) -> None:
        self.budget = budget
        self.cost = cost
        self.held = 0
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        # no lock: it is asked for every row of a chain on every call; a `put` in another thread
        # may drop the entry between the two steps, which only leaves it where it was
        found = self._entries.get(key)
        if found is None:
            return None
        try:
            self._entries.move_to_end(key)
        except KeyError:
            pass
        return found[0]

    def remembered(self, key: K, make: Callable[[K], V]) -> V:
        """The value kept for `key`, else `make(key)`, kept from now on."""
        found = self.get(key)
        if found is None:
            found = make(key)
            self.put(key, found)
        return found

    def put(self, key: K, value: V) -> None:
        cost = self.cost(key, value)
        if cost > self.budget:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.held -= old[1]
            self._entries[key] = (value, cost)
            self.held += cost
            while self.held > self.budget:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.held -= dropped

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.held = 0
