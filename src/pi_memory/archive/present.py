"""Presenters: the text a person or a model reads for each answer of the facade.

They take the facade's values and return strings (pure, tested without a
database). Each lives beside the component whose results it shows; this module
is the one place a front end imports them from.
"""

from collections.abc import Callable

from ..compact.recall import format_entries
from ..compact.status import format_status
from ..core.format import EVIDENCE_HEADER, plural
from ..core.text import HIT_CLOSE, HIT_OPEN
from ..memory.present import (
    chain_warning,
    format_record,
    format_report,
    format_write,
)
from ..memory.present import (
    format_listing as format_memories,
)
from ..provenance.present import format_blame, format_files, format_history
from ..recall import format_recall
from ..review import format_report as format_review
from ..runs.catalog import format_listing as format_session_list
from ..usage.present import dollars, format_ledger, format_statusline, format_usage, rate, tokens
from .messageview import format_read, format_search, format_sessions, format_stats
from .runview import format_detail, format_run_list, format_run_show, format_run_window, format_summary_hits

# the usage page's cell formats (the web viewer's template calls them)
usage_cells: dict[str, Callable[..., str]] = {"tokens": tokens, "dollars": dollars, "rate": rate}

__all__ = [
    "EVIDENCE_HEADER",
    "HIT_CLOSE",
    "HIT_OPEN",
    "chain_warning",
    "format_blame",
    "format_files",
    "format_history",
    "format_detail",
    "format_entries",
    "format_ledger",
    "format_memories",
    "format_read",
    "format_recall",
    "format_record",
    "format_report",
    "format_review",
    "format_run_list",
    "format_run_show",
    "format_run_window",
    "format_search",
    "format_session_list",
    "format_sessions",
    "format_statusline",
    "format_stats",
    "format_status",
    "format_summary_hits",
    "format_usage",
    "format_write",
    "plural",
    "usage_cells",
]
