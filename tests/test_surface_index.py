"""Characters typed in a script that folds to another are indexed as typed: new messages, and
archives written before, once upgraded (SQLite m007_surface_chars, PostgreSQL m005_surface_chars)."""

from __future__ import annotations

from pi_memory import Archive
from pi_memory.core.text import QueryToken, surface_chars, surface_tokens
from pi_memory.storage.pg.schema import MIGRATIONS as PG_MIGRATIONS
from pi_memory.storage.schema import MIGRATIONS
from test_search_ranking import _fill

OLD = "人之構造，與天地相參。"
NEWER = [f"第{i}个组件的结构和构造函数需要重构" for i in range(120)]


def test_a_text_in_traditional_script_has_each_folded_character_once_as_typed():
    assert surface_chars("構造，構造，發現") == ["構", "現", "發"]  # sorted by code point
    assert surface_chars("构造 plain ascii") == []
    assert surface_tokens("構造 构") == [QueryToken("構", "surface")]


def _as_before_the_upgrade(archive: Archive, target: str) -> None:
    """The archive as an older pi-memory left it: no characters as typed."""
    store = archive.store
    with store.write():
        if target.startswith("postgresql"):
            store.conn.execute(
                "UPDATE msg SET tokens = ts_delete(tokens, ARRAY(SELECT lexeme FROM unnest(tokens) WHERE lexeme LIKE 't:%'))"
            )
        else:
            store.conn.execute("DROP TABLE msg_typed")


def _upgrade(archive: Archive, target: str) -> None:
    """The migration that adds them, as `migrate` runs it (PostgreSQL m005_surface_chars, SQLite m007's
    SQL and data step)."""
    store = archive.store
    if target.startswith("postgresql"):
        with store.write():
            store.conn.execute(dict(PG_MIGRATIONS)["m005_surface_chars"].encode())
    else:
        with store.write():
            store.conn.execute(dict(MIGRATIONS)["m007_surface_chars"])
        store.index_surface_chars()


def test_an_archive_written_before_finds_a_character_as_typed_once_upgraded(archive: Archive, archive_target: str):
    ids = _fill(archive, {"old": [OLD], "new": NEWER})
    simplified = [(h.msg_id, h.score) for h in archive.search("构造函数", limit=10)]
    _as_before_the_upgrade(archive, archive_target)
    _upgrade(archive, archive_target)
    archive.close()
    with Archive.open(archive_target) as upgraded:
        assert upgraded.search("構", limit=10)[0].msg_id == ids[OLD]
        # the folded tokens and the lengths the scores use are as they were
        assert [(h.msg_id, h.score) for h in upgraded.search("构造函数", limit=10)] == simplified
        assert upgraded.stats().messages == 1 + len(NEWER)
