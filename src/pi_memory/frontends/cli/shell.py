"""What every command shares: the `pi-memory` group, `--db`, opening the archive, printing.

Design idea: a command is "open the archive, call one `Archive` method, print
the answer as text or `--json`". That shape lives here once (`answer`), with
the one place that turns library errors into a line on stderr and an exit
code: 2 for a usage error (a bad option or value, like click's own), 1 for
anything else, never a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import apsw
import click

from ... import __version__
from ...archive import KINDS, Archive, move_aside
from ...core.outward import for_terminal
from ...core.text import HIT_CLOSE, HIT_OPEN
from ...errors import ArchiveError, BadInput
from .examples import EXAMPLES

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

# Run by the pi extension, MCP clients and database owners rather than typed by people: the
# top-level help lists them apart. Every other command (new ones too) is listed as a user command.
INTERNAL_COMMANDS = frozenset({"bridge", "entries", "mcp", "pg-roles"})

AGENT_CHOICE = click.Choice(["pi", "claude", "codex"])
KIND_CHOICE = click.Choice(list(KINDS))  # one vocabulary for search and recall


DISK_FULL = (
    "the disk is full: the write under way was undone and everything written before it is kept; "
    "free some space and run the command again (an import goes on where it stopped)"
)


class UsageProblem(click.ClickException):
    """A bad option or value the library found (a date, a kind, an ambiguous id): exit 2, like click's."""

    exit_code = 2


class Grouped(click.Group):
    """Top-level help in two groups, each description whole (click cuts them at ~45 characters);
    each command's help ends with its examples (EXAMPLES)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        path = " ".join([*ctx.command_path.split()[1:], cmd_name])  # `memory verify`: EXAMPLES key by path
        if command is not None and not command.epilog and path in EXAMPLES:
            command.epilog = "\b\nExamples:\n" + "\n".join("  " + line for line in EXAMPLES[path])
        return command

    def invoke(self, ctx: click.Context) -> Any:
        """A refusal's one line may quote archived text (an ambiguous id's candidates): shown safely.
        A full disk, met by any command, is one line too (its traceback was ~40)."""
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            setattr(exc, "message", for_terminal(exc.message))  # noqa: B010  (click declares it Final)
            raise
        except (apsw.FullError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno != errno.ENOSPC:
                raise
            raise click.ClickException(DISK_FULL) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: dict[bool, list[tuple[str, str]]] = {False: [], True: []}
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows[name in INTERNAL_COMMANDS].append((name, command.get_short_help_str(limit=1000)))
        titles = {False: "Commands", True: "Internal commands (run by the pi extension, MCP clients, database owners)"}
        for internal in (False, True):
            if rows[internal]:
                with formatter.section(titles[internal]):
                    formatter.write_dl(rows[internal])


@click.group(
    cls=Grouped,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Exit codes: 0 done, 1 failed (not found, damaged or busy archive), 2 usage error. "
    "`pi-memory COMMAND --help` shows each command's options and examples.",
)
@click.option(
    "--db",
    "db",
    type=str,  # a file path or a postgresql:// URL
    envvar="PI_MEMORY_DB",
    help="Archive file or postgresql:// URL (default ~/.pi/memory/sessions.db, or $PI_MEMORY_DB).",
)
@click.version_option(version=__version__, prog_name="pi-memory")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """pi-memory: a local black box and long-term memory for coding agents."""
    ctx.obj = {"db": db}


def db_of(ctx: click.Context) -> Any:
    """The --db given on the group or the command: a path, a postgresql:// URL, or None (the default)."""
    obj = ctx.find_object(dict)
    return obj.get("db") if obj else None


@contextmanager
def open_archive(ctx: click.Context, warn: bool = True) -> Iterator[Archive]:
    """Open the archive named by --db (on the group or the command), reporting errors as one line;
    `warn`: say on stderr that a damaged archive was moved aside (`check` says it itself)."""
    try:
        archive = Archive.open(db_of(ctx))
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None
    if archive.recovered_from is not None and warn:
        echo(
            f"warning: the archive was damaged ({archive.recovery_reason}); it was moved to "
            f"{archive.recovered_from} and a fresh one was created: run `pi-memory import` to fill it again",
            err=True,
        )
    try:
        yield archive
    except BadInput as exc:
        raise UsageProblem(str(exc)) from None
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None
    except apsw.CorruptError as exc:
        archive.close()
        moved = move_aside(archive.path)
        raise click.ClickException(
            f"the archive is damaged ({exc}); it was moved to {moved}: run `pi-memory import` to rebuild it"
        ) from None
    except apsw.BusyError:
        raise click.ClickException("the archive is busy (another process holds a long write); try again") from None
    finally:
        try:
            archive.close()
        except apsw.Error:
            pass


def answer(
    ctx: click.Context,
    call: Callable[[Archive], T],
    as_json: bool,
    text: Callable[[T], str],
    *,
    to_json: Callable[[T], Any] | None = None,
    marked: bool = False,
) -> T:
    """The shape of most commands: open the archive, call one method, print JSON or text.

    `to_json` defaults to the value's own `to_dict()`; `marked` text has ⟦hits⟧ to colour.
    """
    with open_archive(ctx) as archive:
        value = call(archive)
    if as_json:
        emit_json(to_json(value) if to_json is not None else value.to_dict())  # type: ignore[attr-defined]
    elif marked:
        echo_marked(text(value))
    else:
        echo(text(value))
    return value


def pass_db(fn: F) -> F:
    """Accept --db after the command name too (`pi-memory search x --db f`)."""

    def set_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value is not None:
            ctx.ensure_object(dict)["db"] = value

    return click.option(
        "--db",
        type=str,  # a file path or a postgresql:// URL
        expose_value=False,
        callback=set_db,
        is_eager=True,
        help="Archive file (same as the global --db).",
    )(fn)


def cwd_option(help: str = "The workspace (default: here).") -> Callable[[F], F]:
    """`--cwd`: the workspace (memories, settings) a command is about; default the current directory."""
    return click.option("--cwd", "cwd", type=click.Path(file_okay=False, path_type=Path), default=None, help=help)


def echo(message: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Every line the CLI prints: archived text's control characters shown, never obeyed (`outward`)."""
    click.echo(for_terminal(message), err=err, nl=nl)


def emit_json(value: Any) -> None:
    echo(json.dumps(value, ensure_ascii=False, indent=None))  # C1 controls and lone surrogates as \u escapes


def _colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def echo_marked(text: str) -> None:
    """Print text whose hits are marked ⟦like this⟧: in colour instead on a terminal (unless NO_COLOR)."""
    text = for_terminal(text)  # before our own colour codes go in
    if _colour():
        text = text.replace(HIT_OPEN, "\x1b[1;31m").replace(HIT_CLOSE, "\x1b[0m")
    click.echo(text)


def say_err(line: str) -> None:
    echo(line, err=True)


def _interactive() -> bool:
    return sys.stdin.isatty()


def confirm(question: str, refusal: str) -> None:
    """Ask on the terminal (abort on no); without one, refuse with `refusal` (a usage error)."""
    if not _interactive():
        raise UsageProblem(refusal)
    click.confirm(question, abort=True)
