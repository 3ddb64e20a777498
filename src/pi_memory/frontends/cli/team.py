"""The team archive on PostgreSQL: `pg-roles` (the roles' SQL) and `push` (copy a local archive there)."""

from __future__ import annotations

from pathlib import Path

import click

from ...archive import Archive
from ...errors import ArchiveError
from .shell import cli, echo, emit_json


@cli.command("pg-roles")
def pg_roles() -> None:
    """Print the SQL that creates the team archive's reader, writer and admin roles."""
    from ...archive import roles_sql

    echo(roles_sql(), nl=False)


@cli.command()
@click.option("--from", "source", help="Local SQLite archive to copy (default ~/.pi/memory/sessions.db).")
@click.option("--to", "target", required=True, help="The team archive: a postgresql:// URL.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def push(source: str | None, target: str, as_json: bool) -> None:
    """Copy a local archive to the team archive (idempotent; an interrupted push resumes)."""
    from ...archive import default_db_path, pg_url
    from ...archive.present import plural
    from ...archive.team import PgArchive

    if pg_url(target) is None:
        raise click.ClickException("--to must be a postgresql:// URL")
    local_path = source or (None if pg_url(None) else str(default_db_path()))
    if local_path is None:
        raise click.ClickException("PI_MEMORY_DB is a URL: name the local archive with --from PATH")
    if not Path(local_path).expanduser().is_file():
        raise click.ClickException(f"no local archive at {local_path}")
    try:
        with Archive.open(local_path) as local, Archive.open(target) as team:
            assert isinstance(team, PgArchive)
            report = team.push_from(local)
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        emit_json(report.to_dict())
        return
    echo(
        f"{plural(report.sessions, 'session')} ({report.unchanged} already complete): "
        f"{plural(report.added, 'message')} added, {report.skipped} already on the team archive"
    )
    if report.words_counted:
        echo(f"{plural(report.words_counted, 'word')} counted on the server for search")
