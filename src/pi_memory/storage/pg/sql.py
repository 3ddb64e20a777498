"""The PostgreSQL store's pure pieces: SQL text in psycopg's style, tsvector lexemes and tsqueries, text PostgreSQL accepts.

Shared by `store` (the connection and reads) and `writes` (the write path).
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Any, TypeVar

from ...core.text import QueryToken
from ...errors import ArchiveError

DEADLOCK_RETRIES = 5
T = TypeVar("T")


class PermissionDenied(ArchiveError):
    pass


def driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ArchiveError("a PostgreSQL archive needs the psycopg driver: pip install 'pi-memory[pg]'") from None
    # psycopg logs a warning when a failed `executemany` (pipeline mode) is torn down after its error
    # was raised; without a handler Python prints it to stderr beside our one-line error
    logging.getLogger("psycopg").addHandler(_QUIET)
    return psycopg


_QUIET = logging.NullHandler()  # added once: `addHandler` ignores a handler it already has


def pg_text(value: str) -> str:
    """PostgreSQL text cannot hold NUL; the content hash (computed before) still names the original."""
    return value.replace("\x00", "\ufffd")


MAX_LEXEME_BYTES = 2000  # PostgreSQL refuses longer tsvector lexemes (a pasted blob without separators)


def indexable(token: str) -> bool:
    return len(token.encode()) <= MAX_LEXEME_BYTES


def token_text(tokens: str | bytes) -> str:
    """Tokens as text: a parse worker sends them as UTF-8 (`ingest.prepare.MessageLine`)."""
    return tokens.decode() if isinstance(tokens, bytes) else tokens


def meta_json(meta: dict[str, Any]) -> str | None:
    # json.dumps escapes NUL as \u0000, so the text column accepts it
    return json.dumps(meta, ensure_ascii=False, separators=(",", ":"), default=str) if meta else None


# A lexeme for a character as typed in a script that folds to another (`t:構`): apart from the
# folded tokens, as SQLite keeps them in their own index (`msg_typed`).
TYPED_PREFIX = "t:"


def lexeme(token: QueryToken) -> str:
    return TYPED_PREFIX + token.text if token.kind == "surface" else token.text


def tsquery(tokens: list[QueryToken], op: str = "&") -> str:
    """A tsquery of quoted lexemes: tokens are matched exactly, never parsed as query syntax."""
    quoted = ["'" + lexeme(t).replace("\\", "\\\\").replace("'", "''") + "'" for t in tokens]
    return f" {op} ".join(quoted)


@lru_cache(maxsize=512)
def pg_sql(sql: str) -> bytes:
    """The shared `?`-style SQL as psycopg takes it: `?` outside quotes becomes `%s`, a literal `%` `%%`.

    `%s` already written for psycopg passes through unchanged (PostgreSQL-only SQL in this package).
    Quoted strings and `--` comments are copied as they are, but for `%`.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch == "'" or sql.startswith("--", i):
            end = sql.find("'", i + 1) if ch == "'" else sql.find("\n", i)
            end = n if end < 0 else end + (1 if ch == "'" else 0)
            out.append(sql[i:end].replace("%", "%%"))
            i = end
            continue
        if ch == "?":
            out.append("%s")
        elif ch == "%" and not sql.startswith("%s", i):
            out.append("%%")
        else:
            out.append(ch)
        i += 1
    return "".join(out).encode()


def weighted_matches(table: str, condition: str = "TRUE") -> str:
    """The rows of `table` (`msg`, `run`) matching any of a list of tsqueries, each match worth its
    query's weight, summed per row (`id`, `s`): the rare track's candidates. Its parameters are the
    tsqueries and their weights (`ranking.candidate_weight`: integers) as two arrays, then
    `condition`'s.

    One statement text whatever the number of terms: psycopg prepares it once per connection and
    the server plans it once (a lateral bitmap scan of the GIN index per term). A UNION ALL of one
    part per term was a new statement for every query shape, planned again at each search (300k
    messages, the rare statements of the bench's 24 queries, warm: 320 -> 159 ms in all)."""
    return (
        "SELECT m.id, sum(q.w) AS s FROM unnest(%s::text[], %s::bigint[]) AS q(t, w) "
        f"CROSS JOIN LATERAL (SELECT id FROM {table} WHERE tokens @@ q.t::tsquery AND {condition}) m "
        "GROUP BY m.id"
    )
