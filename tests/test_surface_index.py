"""Characters typed in a script that folds to another are indexed as typed: new messages, and
archives written before, once upgraded (SQLite m007_surface_chars, PostgreSQL m005_surface_chars)."""

from __future__ import annotations

from pi_memory import Archive
from pi_memory.core.text import QueryToken, surface_chars, surface_tokens
from test_search_ranking import _fill

OLD = "人之構造，與天地相參。"
NEWER = [f"第{i}个组件的结构和构造函数需要重构" for i in range(120)]


def test_a_text_in_traditional_script_has_each_folded_character_once_as_typed():
    assert surface_chars("構造，構造，發現") == ["構", "現", "發"]  # sorted by code point
    assert surface_chars("构造 plain ascii") == []
    assert surface_tokens("構造 构") == [QueryToken("構", "surface")]


def _as_before_the_upgrade(archive: Archive, target: str) -> None:
    """The archive as an older pi-memory left it: no characters as typed, the migration not run."""
    store = archive.store
    with store.write():
        if target.startswith("postgresql"):
            store.conn.execute(
                "UPDATE msg SET tokens = ts_delete(tokens, ARRAY(SELECT lexeme FROM unnest(tokens) WHERE lexeme LIKE 't:%'))"
            )
            # m005 and every later migration, undone (m006: the echo flag)
            store.conn.execute("ALTER TABLE msg DROP COLUMN echo")
            store.conn.execute(
                "DELETE FROM schema_version WHERE version >= (SELECT version FROM schema_version "
                "WHERE name = 'm005_surface_chars')"
            )
        else:  # m007 and every later migration, undone (m010: the echo flag)
            store.conn.execute("DROP TABLE msg_typed")
            store.conn.execute("ALTER TABLE msg DROP COLUMN echo")
            store.conn.execute("PRAGMA user_version = 6")


def test_an_archive_written_before_finds_a_character_as_typed_once_upgraded(archive: Archive, archive_target: str):
    ids = _fill(archive, {"old": [OLD], "new": NEWER})
    simplified = [(h.msg_id, h.score) for h in archive.search("构造函数", limit=10)]
    _as_before_the_upgrade(archive, archive_target)
    archive.close()
    with Archive.open(archive_target) as upgraded:
        assert upgraded.search("構", limit=10)[0].msg_id == ids[OLD]
        # the folded tokens and the lengths the scores use are as they were
        assert [(h.msg_id, h.score) for h in upgraded.search("构造函数", limit=10)] == simplified
        assert upgraded.stats().messages == 1 + len(NEWER)
