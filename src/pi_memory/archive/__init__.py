"""The facade: `Archive`, the one object every front end uses, and the presenters of its answers.

What it is for: a front end (CLI, bridge, MCP, watch, web) opens an `Archive`,
calls one method and renders what comes back with a presenter (`present`); it
holds no SQL and no rules of its own. The facade composes the components
below it; `team` is the same API over a PostgreSQL team archive.

May import: every component below it (core, storage, runs, search, ingest,
memory, compact, recall, review). Never a front end.
"""

from ..ingest.importer import discover, find_files
from ..ingest.tail import Follower, SyncResult
from ..runs.detail import PAGE_BYTES, MessageDetail, RunWindow, page
from ..search.messages import Hit, SessionHit, timed
from ..search.runs import KINDS
from ..storage.pg import pg_url, roles_sql
from ..storage.store import default_db_path, tune_own_process
from .api import REVIEW_MIN_COUNT, Archive, move_aside, open_team_with
from .model import Stats, Window
from .overview import OVERVIEW_DAYS, Overview

__all__ = [
    "KINDS",
    "OVERVIEW_DAYS",
    "PAGE_BYTES",
    "REVIEW_MIN_COUNT",
    "Archive",
    "Follower",
    "SyncResult",
    "Hit",
    "MessageDetail",
    "Overview",
    "RunWindow",
    "SessionHit",
    "Stats",
    "Window",
    "default_db_path",
    "discover",
    "find_files",
    "move_aside",
    "page",
    "pg_url",
    "roles_sql",
    "timed",
    "tune_own_process",
]


def _open_team(url: str) -> Archive:
    from .team import PgArchive  # only for a URL: the driver (psycopg) is the pg extra's

    return PgArchive.connect(url)


open_team_with(_open_team)
