"""`pi-memory`, the command line for people: a package with one module per command group.

What it is for: turning a command line into one call of the facade and its
answer into text or `--json`. `shell` holds what every command shares (the
group, `--db`, opening the archive, `answer`: open, call, print); `main` the
archive's own commands and `main()`; `runs`, `memory`, `review`, `services`
and `team` one group each; `examples` the examples under each `--help`.

May import: the facade (`pi_memory.archive`, its presenters in
`pi_memory.archive.present`, the team archive `pi_memory.archive.team`),
`pi_memory.errors`, and the other front ends it starts (bridge, MCP, watch,
web). Never storage, search, runs or ingest directly.
"""

# every command group registers its commands on the `cli` group when imported
from . import memory, review, runs, services, team  # noqa: F401
from .main import EXAMPLES, INTERNAL_COMMANDS, cli, main

__all__ = ["EXAMPLES", "INTERNAL_COMMANDS", "cli", "main"]
