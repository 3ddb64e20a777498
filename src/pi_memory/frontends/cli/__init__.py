"""`pi-memory`, the command line for people: a package with one module per command group.

What it is for: turning a command line into one call of the facade and its
answer into text or `--json`. `shell` holds what every command shares (the
group, `--db`, opening the archive, `answer`: open, call, print); `main` the
archive's own commands and `main()`; `runs`, `memory`, `review`, `services`,
`team`, `demo` and `provenance` (blame, files, history, export, resume) one group each; `examples` the examples under each `--help`.

May import: the facade (`pi_memory.archive`, its presenters in
`pi_memory.archive.present`, the team archive `pi_memory.archive.team`),
`pi_memory.errors`, and the other front ends it starts (bridge, MCP, watch,
web). Never storage, search, runs or ingest directly.
"""

import os

# NumPy's OpenBLAS starts a thread per core when imported, and they spin: ~0.12 s of CPU taken from
# whatever the process does next (an import's writer, a first search). Nothing here multiplies
# matrices large enough to want them. Set before anything imports NumPy; a caller's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# every command group registers its commands on the `cli` group when imported
from . import demo, memory, provenance, review, runs, semantic, services, team, usage  # noqa: E402, F401
from .main import EXAMPLES, INTERNAL_COMMANDS, cli, main  # noqa: E402

__all__ = ["EXAMPLES", "INTERNAL_COMMANDS", "cli", "main"]
