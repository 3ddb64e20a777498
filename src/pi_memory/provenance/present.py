"""Text for people and models: blame, a session's or run's changed files, a file's history (pure).

Each line that a session wrote is shown with the address of the message that wrote it, which
`pi-memory read` opens; the runs those lines came from are listed once below, with the user's
ask, so the answer carries its own evidence.
"""

from __future__ import annotations

from ..core.format import EVIDENCE_HEADER, local_time, plural, short_id
from .query import NOT_ARCHIVED, Blame, ChangedFiles, EditInfo, History

ASK_CLIP = 100
UNKNOWN_MARK = "·"


def _clip(text: str, limit: int = ASK_CLIP) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _who(edit: EditInfo) -> str:
    return f"{edit.address} {local_time(edit.ts)} {edit.agent} …{short_id(edit.session_id)}"


def format_blame(b: Blame, evidence: bool = False) -> str:
    head = (
        f"{b.path}: {plural(b.total_lines, 'line')}; of the {plural(len(b.lines), 'line')} shown, "
        f"{b.attributed} written by archived sessions ({plural(b.considered, 'change')} of the file replayed)"
    )
    if b.matched_by == "repository":
        head += "; matched by its path inside the repository"
    out = [EVIDENCE_HEADER, head] if evidence else [head]
    width = max((len(_who(line.edit)) for line in b.lines if line.edit), default=len(UNKNOWN_MARK))
    number = len(str(b.lines[-1].number)) if b.lines else 1
    for line in b.lines:
        who = _who(line.edit) if line.edit else UNKNOWN_MARK
        out.append(f"{line.number:>{number}} {who:<{width}} │ {line.text}")
    if any(line.edit is None for line in b.lines):
        out.append(f"{UNKNOWN_MARK} = {NOT_ARCHIVED} (there before, typed by hand, or written by a command)")
    if b.edits:
        out.append("Runs:")
        out += [_run_line(e) for e in _by_run(b.edits)]
    return "\n".join(out)


def _by_run(edits: list[EditInfo]) -> list[EditInfo]:
    seen: dict[tuple[str, int | None], EditInfo] = {}
    for e in edits:
        seen.setdefault((e.session_id, e.run_id), e)
    return list(seen.values())


def _run_line(e: EditInfo) -> str:
    commit = f" on commit {e.commit[:10]}" if e.commit else ""
    ask = f": {_clip(e.ask)}" if e.ask else ""
    return f"  {e.run or e.address} {local_time(e.ts, with_time=True)} {e.agent} session …{short_id(e.session_id)}{commit}{ask}"


def _change(e: EditInfo) -> str:
    where = f":{e.line}" if e.line else ""
    what = {"write": "wrote", "edit": "edited", "delete": "deleted", "move": "moved here"}.get(e.kind, e.kind)
    size = (
        f" +{e.new_lines} -{e.old_lines}"
        if e.kind == "edit"
        else f" {plural(e.new_lines, 'line')}"
        if e.kind == "write"
        else ""
    )
    return f"{e.address}{where} {what}{size} ({e.tool})"


def format_files(c: ChangedFiles) -> str:
    target = c.target if c.target.startswith("r") and c.target[1:].isdigit() else f"session {short_id(c.target)}"
    if not c.files:
        return f"{target}: no file changes archived (edits and writes of its tool calls)"
    out = [f"{target}: {plural(len(c.files), 'file')} changed"]
    for f in c.files:
        out.append(f"{f.path}  {plural(len(f.edits), 'change')}, {f.added} lines written, {f.removed} replaced")
        out += ["  " + _change(e) for e in f.edits]
    asks = _by_run([e for f in c.files for e in f.edits])
    if asks and any(e.ask for e in asks):
        out.append("Runs:")
        out += [_run_line(e) for e in asks]
    return "\n".join(out)


def format_history(h: History, evidence: bool = False) -> str:
    head = f"{h.path}: {plural(len(h.runs), 'run')} changed it"
    if h.matched_by == "repository":
        head += " (matched by its path inside the repository)"
    out = [EVIDENCE_HEADER, head] if evidence else [head]
    if not h.runs:
        out.append("no archived session changed this file")
    for r in h.runs:
        commits = sorted({e.commit[:10] for e in r.edits if e.commit})
        on = f" on {', '.join(commits)}" if commits else ""
        ask = f": {_clip(r.ask)}" if r.ask else ""
        out.append(
            f"{r.run or '-'} {local_time(r.first_ts, with_time=True)} {r.agent} session …{short_id(r.session_id)}{on}{ask}"
        )
        out += ["  " + _change(e) for e in r.edits]
    return "\n".join(out)
