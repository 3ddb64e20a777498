"""PostgreSQL fixtures: a real server named by PI_MEMORY_TEST_PG (see scripts/ci-postgres.sh).

Each test gets its own schema (selected through the URL's `options=-csearch_path=...`),
dropped afterwards; roles are cluster-wide, so test roles get unique names and are dropped too.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

NO_PG_REASON = 'PostgreSQL variant: PI_MEMORY_TEST_PG is not set (start a throw-away server with `eval "$(scripts/ci-postgres.sh start)"`, or run .ci/run)'


def admin_url() -> str:
    url = os.environ.get("PI_MEMORY_TEST_PG")
    if not url:
        pytest.skip(NO_PG_REASON)
    return url


def with_schema(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


def as_role(url: str, role: str, password: str) -> str:
    """The same server, database and options, logged in as another role."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{quote(role)}:{quote(password)}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def connect(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(url, autocommit=True)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A URL whose tables live in a fresh schema of the test server."""
    base = admin_url()
    schema = "t_" + uuid.uuid4().hex[:12]
    with connect(base) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield with_schema(base, schema)
    with connect(base) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def make_role(pg_url: str) -> Iterator[object]:
    """make_role(*groups) -> URL logged in as a new LOGIN role that is a member of the groups."""
    created: list[str] = []

    def make(*groups: str) -> str:
        name = "pi_t_" + uuid.uuid4().hex[:10]
        password = uuid.uuid4().hex
        with connect(pg_url) as conn:
            conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
            for group in groups:
                conn.execute(f"GRANT {group} TO {name}")
        created.append(name)
        return as_role(pg_url, name, password)

    yield make
    with connect(pg_url) as conn:
        for name in created:
            conn.execute(f"DROP ROLE IF EXISTS {name}")
