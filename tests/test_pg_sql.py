"""The shared `?`-style SQL, as PostgreSQL's driver takes it (a pure function, no server needed)."""

from __future__ import annotations

import pytest

from pi_memory.storage.pg.store import pg_sql


@pytest.mark.parametrize(
    ("shared", "for_psycopg"),
    [
        ("SELECT ? FROM t WHERE a = ?", "SELECT %s FROM t WHERE a = %s"),
        ("SELECT '?', ?", "SELECT '?', %s"),
        ("SELECT 'it''s ?', ?", "SELECT 'it''s ?', %s"),
        ("x LIKE '%/' || col AND y = ?", "x LIKE '%%/' || col AND y = %s"),
        ("a = %s AND b = ?", "a = %s AND b = %s"),
        ("SELECT 1 -- the run's ? here\nWHERE a = ?", "SELECT 1 -- the run's ? here\nWHERE a = %s"),
        ("mod % 2", "mod %% 2"),
    ],
    ids=["placeholders", "quoted-question-mark", "doubled-quote", "like-percent", "psycopg-style", "comment", "modulo"],
)
def test_placeholders_become_psycopg_ones_and_literals_stay_literal(shared: str, for_psycopg: str) -> None:
    assert pg_sql(shared).decode() == for_psycopg
