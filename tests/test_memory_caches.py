"""The memory log's caches (`memory/caches.py`): bounded by what they hold, least recently used out first."""

from __future__ import annotations

from pi_memory.memory import clear_caches
from pi_memory.memory.caches import BoundedCache
from pi_memory.memory.chain import make_row, row_problem


def by_length() -> BoundedCache[str, int]:
    return BoundedCache(10, lambda key, _: len(key))


def test_the_least_recently_used_entries_go_once_the_budget_is_passed() -> None:
    cache = by_length()
    cache.put("aaaa", 1)
    cache.put("bbbb", 2)
    assert cache.get("aaaa") == 1  # now the most recent
    cache.put("cccc", 3)
    assert cache.get("bbbb") is None and cache.get("aaaa") == 1 and cache.get("cccc") == 3
    assert cache.held == 8


def test_an_entry_bigger_than_the_whole_budget_is_not_kept_and_evicts_nothing() -> None:
    cache = by_length()
    cache.put("aaaa", 1)
    cache.put("x" * 11, 2)
    assert cache.get("x" * 11) is None and cache.get("aaaa") == 1


def test_putting_a_key_again_replaces_it_and_counts_it_once() -> None:
    cache = by_length()
    cache.put("aaaa", 1)
    cache.put("aaaa", 2)
    assert cache.get("aaaa") == 2 and cache.held == 4 and len(cache) == 1


def test_a_checked_row_handed_out_twice_is_two_copies() -> None:
    clear_caches()
    row = make_row(1, "0" * 64, {"type": "create", "id": "mem_1", "body": "x"})
    _, first = row_problem(row, 1, "0" * 64)
    assert first is not None
    first["body"] = "changed by a caller"
    _, second = row_problem(row, 1, "0" * 64)
    assert second is not None and second["body"] == "x"


def test_remembered_makes_a_value_once_and_then_hands_back_the_kept_one() -> None:
    cache, made = by_length(), []

    def make(key: str) -> int:
        made.append(key)
        return len(made)

    assert cache.remembered("aaaa", make) == 1
    assert cache.remembered("aaaa", make) == 1 and made == ["aaaa"]
