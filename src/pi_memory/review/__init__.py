"""Self-review over the archive: recurring mistakes found by rules, draft rules, and a ledger.

The agent's track record is in the archive as facts (`r12/m3`), not as its own
retelling, so it can be reviewed by rules, without an LLM: failing commands and
tool errors grouped by a normalized signature, user corrections grouped by what
they were about, the cost of the work, and draft rules for what recurs. The
ledger makes self-improvement checkable: for each memory of the workspace and
each finding it addresses, how often the finding happened per 100 runs before
and after the memory was written.

Parts, bottom to top:
- `signature`    what makes two failures the same (pure)
- `corrections`  cue phrases of user pushback, Chinese and English (pure)
- `collect`      the accumulator runs are fed through, in time order (pure)
- `rules`        draft rules from findings (pure)
- `ledger`       before/after arithmetic and suggested links by shared words (pure)
- `report`       the report's JSON shape, its text, and the `/dream` prompt (pure)
- `reader`       bounded pages of runs from the archive, addresses, links (the SQL)

May import: the core, the storage layer, `runs`, and `pi_memory.errors`.
Its bridge commands are a front end's (`frontends.tools.review`).
"""

from .collect import Collector, Finding, RunRow
from .reader import Scope, add_link, link_key, links, review
from .report import Link, MemoryInfo, Report, dream_prompt, format_report
from .signature import command_signature, finding_key, normalize_command, normalize_error, tool_error_signature

__all__ = [
    "Collector",
    "Finding",
    "Link",
    "MemoryInfo",
    "Report",
    "RunRow",
    "Scope",
    "add_link",
    "command_signature",
    "dream_prompt",
    "finding_key",
    "format_report",
    "link_key",
    "links",
    "normalize_command",
    "normalize_error",
    "review",
    "tool_error_signature",
]
