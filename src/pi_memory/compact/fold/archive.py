"""What folding reads from the archive: run addresses of entries, a session's fold records.

The only SQL of the fold package; everything that decides lives in the pure modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core import jsonline
from ...storage.store import decompress
from .records import CUSTOM_TYPE, FoldRecord, parse_records


def addresses_for_entries(store: Any, session_id: str, entry_ids: Sequence[str]) -> dict[str, str]:
    """pi entry id -> `rN/mK` for the entries of one session that are in a run."""
    ids = sorted({str(i) for i in entry_ids if i})
    if not ids:
        return {}
    rows = store.rows(
        f"""SELECT m.entry_id, rm.run_id, rm.pos FROM msg m JOIN run_msg rm ON rm.msg_id = m.id
            WHERE m.session_id = ? AND {store.sql_in_list("m.entry_id")}""",
        (session_id, store.list_param(ids)),
    )
    return {str(e): f"r{r}/m{p}" for e, r, p in rows}


def session_fold_records(store: Any, session_id: str) -> tuple[list[FoldRecord], int]:
    """(the session's fold records in order, how many of them precede its last compaction)."""
    rows = store.rows(
        "SELECT type, raw FROM entry WHERE session_id = ? AND type IN ('custom', 'compaction') ORDER BY ts, id",
        (session_id,),
    )
    folds: list[Any] = []
    compacted = 0
    for kind, blob in rows:
        if kind == "compaction":
            compacted = len(folds)
            continue
        try:
            entry = jsonline.loads(decompress(blob))
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("customType") == CUSTOM_TYPE:
            folds.append(entry)
    return parse_records(folds), compacted
