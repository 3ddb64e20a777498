"""`status`: the effective settings, archive and memory sizes, and the last compaction (read-only).

Design idea: everything shown is read from what already exists (the settings
files, the archive, the memory log, the window manifest); the last
compaction's reason, plan time and checkpoint size travel inside pi's own
compaction entry (`details`) and are copied into its window row at commit
time, so no process-local counters are needed and any process can report them.
"""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.format import plural
from .config import Settings, load_settings
from .window import WindowRecord, last_window, list_windows, verify_chain


@dataclass
class CompactStatus:
    cwd: str
    settings: Settings
    archive: dict[str, Any]
    memory: dict[str, Any] | None  # None until the memory log exists in this build
    last: WindowRecord | None
    windows: int
    chain_problems: list[str]
    fold: dict[str, Any] | None = None  # the session's in-session folds (pi_memory.fold), when one is named
    semantic: dict[str, Any] | None = None  # semantic recall's state (`vectors.state`), filled by the facade

    def to_dict(self) -> dict[str, Any]:
        return {
            "cwd": self.cwd,
            "settings": self.settings.to_dict(),
            "takeover": self.settings.takeover,
            "archive": self.archive,
            "memory": self.memory,
            "last_compaction": self.last.to_dict() if self.last else None,
            "windows": self.windows,
            "chain_ok": not self.chain_problems,
            "chain_problems": self.chain_problems,
            "fold": self.fold,
            "semantic": self.semantic,
        }


def memory_counts(archive: Any, cwd: str) -> dict[str, Any] | None:
    """Record counts by status in this workspace's memory log, if the memory module is present."""
    try:
        memory = importlib.import_module("pi_memory.memory")
    except ImportError:
        return None
    workspace, state, report = memory.Memories(archive.store).state(cwd)
    by_status = Counter(r.status for r in state.records.values())
    by_author = Counter(r.author for r in state.records.values())
    return {
        "workspace": workspace,
        "records": len(state.records),
        "by_status": dict(sorted(by_status.items())),
        "by_author": dict(sorted(by_author.items())),
        "chain_ok": bool(report.ok),
    }


def compact_status(archive: Any, cwd: str | Path, session_id: str | None = None) -> CompactStatus:
    stats = archive.stats()
    last = last_window(archive.store, session_id)
    chain_session = session_id or (last.session_id if last else None)
    windows = list_windows(archive.store, chain_session) if chain_session else []
    return CompactStatus(
        fold=session_folds(archive, chain_session) if chain_session else None,
        cwd=str(cwd),
        settings=load_settings(cwd),
        archive={
            "path": stats.path,
            "db_bytes": stats.db_bytes,
            "messages": stats.messages,
            "sessions": stats.sessions,
        },
        memory=memory_counts(archive, str(cwd)),
        last=last,
        windows=len(windows),
        chain_problems=verify_chain(windows),
    )


def session_folds(archive: Any, session_id: str) -> dict[str, Any]:
    from .fold.archive import session_fold_records
    from .fold.status import fold_status

    records, compacted = session_fold_records(archive.store, session_id)
    return dict(fold_status(records, compacted).to_dict(), session_id=session_id)


def _fold_line(st: CompactStatus) -> list[str]:
    from .fold.status import FoldStatus, format_fold_status

    f = st.settings.values["fold"]
    if st.fold is None:
        return [
            f"folding: {'on' if f['enabled'] else 'off'} (auto {'on' if f['auto'] else 'off'}, "
            f"afterRuns={f['afterRuns']}, budgetTokens={f['budgetTokens']}, mergeTokens={f['mergeTokens']})"
        ]
    d = st.fold
    fs = FoldStatus(
        records=d["records"],
        stubs=d["stubs"],
        blocks={int(k): v for k, v in d["blocks"].items()},
        saved_chars=d["saved_chars"],
        saved_tokens=d["saved_tokens"],
        compacted=d["compacted"],
        last=d["last"],
    )
    return [format_fold_status(fs, f["enabled"], f["auto"]) + f" (session {d['session_id']})"]


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _settings_lines(s: Settings) -> list[str]:
    where = {"project": f"project file {s.path}", "global": f"global file {s.path}", "defaults": "defaults"}[s.source]
    v = s.values
    lines = [
        f"settings: from {where}",
        f"  compaction takeover: {'on' if s.takeover else 'off (pi writes its own summary)'}"
        f" (enabled={v['enabled']}, overrideDefaultCompaction={v['overrideDefaultCompaction']})",
        f"  checkpoint budget: {v['summaryMaxChars']} chars, working summary {v['sessionSummary']['maxChars']} chars",
        f"  memory: enabled={v['memory']['enabled']}, deriveOnCompact={v['memory']['deriveOnCompact']}, "
        f"hintMaxChars={v['memory']['hintMaxChars']}; window manifest={v['window']['manifest']}",
    ]
    return lines + [f"  note: {n}" for n in s.notes]


def _last_lines(st: CompactStatus) -> list[str]:
    w = st.last
    if w is None:
        return ["last compaction: none recorded"]
    ms = f"{w.plan_ms:.1f} ms" if w.plan_ms is not None else "unknown"
    chain = "ok" if not st.chain_problems else f"BROKEN ({st.chain_problems[0]})"
    return [
        f"last compaction: {_when(w.recorded_at)}, session {w.session_id}, entry {w.compaction_entry_id} by {w.compactor}",
        f"  reason {w.reason or 'unknown'}, plan time {ms}, {w.source_count if w.source_count is not None else '?'} "
        f"records compacted, checkpoint {w.checkpoint_chars if w.checkpoint_chars is not None else '?'} chars, "
        f"{w.derived_count} derived memories",
        f"  windows in this session: {st.windows}, hash chain {chain}",
    ]


def format_status(st: CompactStatus) -> str:
    a = st.archive
    lines = _settings_lines(st.settings)
    lines.append(
        f"archive: {a['path']}, {a['db_bytes']:,} bytes, {plural(a['messages'], 'message')} in {plural(a['sessions'], 'session')}"
    )
    if st.semantic is not None:
        lines.append(str(st.semantic["line"]))
    if st.memory is None:
        lines.append("memory: not available in this build")
    else:
        counts = ", ".join(f"{n} {k}" for k, n in st.memory["by_status"].items()) or "none"
        lines.append(f"memory ({st.memory['workspace']}): {plural(st.memory['records'], 'record')} ({counts})")
    return "\n".join(lines + _last_lines(st) + _fold_line(st))
