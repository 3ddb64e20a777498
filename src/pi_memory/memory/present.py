"""Memories as text for people: CLI output and the pi commands' notifications (pure)."""

from __future__ import annotations

from datetime import datetime, timezone

from ..core.format import plural
from ..core.text import clip
from .chain import ChainReport
from .model import MemoryRecord
from .service import Listing, WriteResult

LINE_BODY_CHARS = 160
VERBS = {
    "created": "remembered",
    "superseded": "remembered (superseding {old})",
    "confirmed": "confirmed",
    "pinned": "pinned",
    "unpinned": "unpinned",
    "resolved": "forgot",
    "edited": "edited",
    "unchanged": "already remembered",
}


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d")


def tags(record: MemoryRecord) -> str:
    parts = ["pinned" if record.pinned else "", record.kind, record.status, record.scope, record.author]
    if record.confirmed:
        parts.append("confirmed")
    return ", ".join(p for p in parts if p)


def record_line(record: MemoryRecord) -> str:
    body, _ = clip(" ".join(record.body.split()), LINE_BODY_CHARS, "…")
    return f"{record.id}  [{tags(record)}]  {_day(record.created_ts)}  {body}"


def format_listing(listing: Listing) -> str:
    what = f"status {listing.status}" if listing.status else "pinned, active and provisional"
    count = len(listing.found)
    head = f"{count} {'memory' if count == 1 else 'memories'} ({what}) in {listing.workspace}"
    if listing.query:
        head += f" matching {listing.query!r}"
    lines = [head + ":" if listing.found else head]
    lines += [record_line(f.record) for f in listing.found]
    warning = chain_warning(listing.chain)
    if warning:
        lines.append(warning)
    return "\n".join(lines)


def chain_warning(report: ChainReport) -> str:
    if report.ok:
        return ""
    return (
        f"warning: the memory log is broken at event {report.broken_at} ({report.reason}); "
        f"only the first {report.trusted} events are shown: see `pi-memory memory verify`"
    )


def format_write(result: WriteResult) -> str:
    verb = VERBS.get(result.action, result.action).format(old=result.record.supersedes)
    text = f"{verb} {result.record.id} [{tags(result.record)}]"
    if result.sources is not None and result.sources.truncated:
        text += f" (source entry ids: kept {len(result.sources.ids)}, dropped {result.sources.dropped})"
    return text


def format_record(record: MemoryRecord) -> str:
    lines = [f"{record.id}  [{tags(record)}]  priority {record.priority}  created {_day(record.created_ts)}"]
    if record.supersedes:
        lines.append(f"supersedes {record.supersedes}")
    if record.superseded_by:
        lines.append(f"superseded by {record.superseded_by}")
    if record.source_entry_ids:
        lines.append("sources: " + ", ".join(record.source_entry_ids))
    return "\n".join(lines) + "\n\n" + record.body


def format_report(workspace: str, report: ChainReport) -> str:
    if report.ok:
        sealed = (
            ", sealed" + (" and pinned" if report.pinned else "")
            if report.sealed
            else (", not sealed yet (written before seals: sealed at the next write)" if report.rows else "")
        )
        return f"ok: {workspace}: {plural(report.rows, 'event')}, chain intact{sealed} (head {report.head_hash[:16]})"
    return f"BROKEN: {workspace}: " + chain_warning(report).removeprefix("warning: ")


def health(reports: list[tuple[str, ChainReport]]) -> tuple[str, list[str]]:
    """`doctor`'s line on the memory logs, and a warning per workspace whose log is not trusted in
    full (its memories are then partly or not at all injected: a missing key is the usual cause,
    after the archive was copied to another machine)."""
    events = sum(r.rows for _, r in reports)
    broken = [(w, r) for w, r in reports if not r.ok]
    line = f"memory: {plural(len(reports), 'workspace')}, {plural(events, 'event')}"
    line += f", {len(broken)} not trusted in full" if broken else (", every log intact" if reports else "")
    warnings = [
        f"memory log of {w}: trusted up to event {r.trusted} of {r.rows}: {r.reason} (`pi-memory memory verify --cwd {w}`)"
        for w, r in broken
    ]
    return line, warnings
