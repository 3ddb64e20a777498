"""Answers from the `edit` rows: `blame` (who wrote each line of a file now), `files` (what a
session or run changed), `history` (every run that touched a file).

Design idea: the rows say which change happened where and when; the texts stay in the archived
lines and are read back only for the file asked about (one index lookup by path, then the few
source lines its edits came from). Each edit is shown by the address of the message that made
the call (`r12/m3`, what `read` opens), its session and date, and the user's ask of its run
(the run's goal), so "which run wrote src/auth.ts:40?" is answered with the evidence to check.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.format import short_id
from ..errors import BadInput, NotFound
from ..runs.table import get_run
from ..storage.store import Store, decode_text, decompress
from .blame import Event, Line, blame_lines, replay, split_lines
from .extract import MOVE, changes, source_lines, tool_calls, tool_outcomes

NOT_ARCHIVED = "not written by an archived session"
ASK_MAX = 200  # characters of the user's ask shown with a run (its summary's goal field is as long)
_EDIT_COLUMNS = """e.id, e.session_id, e.call_id, e.part, e.tool, e.kind, e.path, e.from_path, e.ts, e.old_lines,
                   e.new_lines, e.line, m.id, rm.run_id, rm.pos, s.agent, s.cwd, o.git_commit"""
_EDIT_FROM = """edit e JOIN msg m ON m.session_id = e.session_id AND m.hash = e.call_hash
                JOIN session s ON s.id = e.session_id
                LEFT JOIN run_msg rm ON rm.msg_id = m.id
                LEFT JOIN edit_observed o ON o.session_id = e.session_id AND o.call_id = e.call_id AND o.path = e.path"""


@dataclass
class EditInfo:
    """One change, as shown: what it did, where, and the message that made it."""

    id: int
    session_id: str
    call_id: str
    part: int
    tool: str
    kind: str
    path: str
    from_path: str | None
    ts: int
    old_lines: int
    new_lines: int
    line: int | None
    msg_id: int
    run_id: int | None
    pos: int | None
    agent: str
    cwd: str
    commit: str | None
    ask: str = ""  # the user's request of its run (the run's goal)

    @property
    def address(self) -> str:
        return f"r{self.run_id}/m{self.pos}" if self.run_id is not None else f"msg {self.msg_id}"

    @property
    def run(self) -> str | None:
        return f"r{self.run_id}" if self.run_id is not None else None

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out.update(address=self.address, run=self.run, session=short_id(self.session_id))
        return out


def _info(row: tuple[Any, ...]) -> EditInfo:
    (eid, sid, call_id, part, tool, kind, path, from_path, ts, old_n, new_n, line, msg_id, run_id, pos, agent, cwd,
     commit) = row  # fmt: skip
    return EditInfo(
        int(eid), str(sid), str(call_id), int(part), str(tool), str(kind), str(path), from_path, int(ts),
        int(old_n), int(new_n), line, int(msg_id), None if run_id is None else int(run_id),
        None if pos is None else int(pos), str(agent), str(cwd), commit,
    )  # fmt: skip


def edits_at(store: Store, paths: Iterable[str], until_ts: int | None = None) -> list[EditInfo]:
    """The changes of these paths, oldest first (then in call order)."""
    names = list(dict.fromkeys(paths))
    sql = f"SELECT {_EDIT_COLUMNS} FROM {_EDIT_FROM} WHERE {store.sql_in_list('e.path')}"
    params: list[Any] = [store.list_param(names)]
    if until_ts is not None:
        sql += " AND e.ts <= ?"
        params.append(until_ts)
    rows = store.rows(sql + " ORDER BY e.ts, m.id, e.part", params)
    return [_info(r) for r in rows]


def with_asks(store: Store, infos: list[EditInfo]) -> list[EditInfo]:
    """Each change with the user's ask of its run: the run's first message, clipped (one query for all
    the runs; their summary fields are not decoded)."""
    runs = list({i.run_id for i in infos if i.run_id is not None})
    asks: dict[int, str] = {}
    if runs:
        rows = store.rows(
            f"""SELECT r.id, m.role, m.text FROM run r JOIN msg m ON m.id = r.first_msg
                WHERE {store.sql_in_list("r.id")}""",
            (store.list_param(runs),),
        )
        asks = {int(rid): _ask(decode_text(text)) for rid, role, text in rows if role == "user"}
    for info in infos:
        info.ask = asks.get(info.run_id, "") if info.run_id is not None else ""
    return infos


def _ask(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= ASK_MAX else flat[: ASK_MAX - 1] + "…"


# --- the texts, read back ------------------------------------------------------------------------


def _lines_of(store: Store, msg_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    rows = store.rows(
        f"""SELECT m.id, e.raw, m.text FROM msg m JOIN entry e ON e.msg_id = m.id
            WHERE {store.sql_in_list("m.id")}""",
        (store.list_param(msg_ids),),
    )
    return {int(mid): list(source_lines(decompress(raw, text))) for mid, raw, text in rows}


def _results_of(store: Store, infos: list[EditInfo]) -> dict[tuple[str, str], str | None]:
    """The file before each change, where its result reported it (Claude Code's `originalFile`)."""
    wanted = [i for i in infos if i.agent == "claude"]
    if not wanted:
        return {}
    keys = {(i.session_id, i.call_id) for i in wanted}
    rows = store.rows(
        f"""SELECT DISTINCT m.id FROM edit e JOIN msg m ON m.session_id = e.session_id AND m.hash = e.result_hash
            WHERE {store.sql_in_list("e.id")}""",
        (store.list_param([i.id for i in wanted]),),
    )
    found: dict[tuple[str, str], str | None] = {}
    session_of = {i.call_id: i.session_id for i in wanted}
    for lines in _lines_of(store, [int(r[0]) for r in rows]).values():
        for line in lines:
            for outcome in tool_outcomes(line):
                key = (session_of.get(outcome.call_id, ""), outcome.call_id)
                if key in keys and outcome.before is not None:
                    found[key] = outcome.before
    return found


def _snapshots(store: Store, infos: list[EditInfo]) -> dict[tuple[str, str, str], str]:
    """The file before a change as pi's extension saw it, where that was kept."""
    paths = list({i.path for i in infos})
    rows = store.rows(
        f"""SELECT session_id, call_id, path, before_text FROM edit_observed
            WHERE before_text IS NOT NULL AND {store.sql_in_list("path")}""",
        (store.list_param(paths),),
    )
    return {(str(s), str(c), str(p)): zlib.decompress(bytes(b)).decode("utf-8", "replace") for s, c, p, b in rows}


def events_of(store: Store, infos: list[EditInfo]) -> list[Event]:
    """Each change as blame replays it: its texts from the call's source line, the file before it
    where that is known. A change whose call cannot be read back any more is left out."""
    lines = _lines_of(store, list({i.msg_id for i in infos}))
    befores = _results_of(store, infos)
    snaps = _snapshots(store, infos)
    events = []
    for info in infos:
        change = _change(lines.get(info.msg_id, []), info)
        if change is None:
            continue
        before = snaps.get((info.session_id, info.call_id, info.path), befores.get((info.session_id, info.call_id)))
        events.append(
            Event(info.id, change.kind, change.old, change.new, change.replace_all, change.lines, info.line, before)
        )
    return events


def _change(lines: list[dict[str, Any]], info: EditInfo) -> Any:
    for line in lines:
        for call in tool_calls(line):
            if call.call_id == info.call_id:
                found = changes(call)
                return found[info.part] if info.part < len(found) else None
    return None


# --- blame --------------------------------------------------------------------------------------


@dataclass
class BlameLine:
    number: int
    text: str
    edit: EditInfo | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"line": self.number, "text": self.text}
        e = self.edit
        if e is None:
            return {**out, "written_by": None, "note": NOT_ARCHIVED}
        written = {"address": e.address, "run": e.run, "session_id": e.session_id, "agent": e.agent, "ts": e.ts}
        return {**out, "written_by": {**written, "tool": e.tool, "commit": e.commit, "ask": e.ask}}


@dataclass
class Blame:
    path: str
    lines: list[BlameLine]
    total_lines: int
    edits: list[EditInfo] = field(default_factory=list)  # the changes the shown lines came from
    considered: int = 0  # changes of the file replayed
    matched_by: str = "path"  # or "repository": the file's path inside its git repository

    @property
    def attributed(self) -> int:
        return sum(1 for line in self.lines if line.edit is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "total_lines": self.total_lines,
            "considered": self.considered,
            "attributed": self.attributed,
            "matched_by": self.matched_by,
            "lines": [line.to_dict() for line in self.lines],
            "edits": [e.to_dict() for e in self.edits],
        }


def parse_target(target: str, cwd: str) -> tuple[str, int | None, int | None]:
    """`PATH[:LINE[-LINE]]` -> (absolute path, first, last line)."""
    path, first, last = target, None, None
    head, sep, tail = target.rpartition(":")
    if sep and head and tail and tail.replace("-", "", 1).isdigit():
        start, _dash, end = tail.partition("-")
        path, first = head, int(start)
        last = int(end) if end else first
        if first < 1 or last < first:
            raise BadInput(f"bad line range {tail!r}: use LINE or FIRST-LAST, from 1")
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(path))), first, last


def read_file(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        raise NotFound(f"no such file: {path}") from None
    except IsADirectoryError:
        raise BadInput(f"{path} is a folder: blame takes a file") from None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None


def _names_of(store: Store, path: str) -> tuple[list[str], str]:
    """The paths this file was archived under: as given and with links resolved; else (a clone or a
    moved checkout) the archived paths that end with its path inside its git repository."""
    names = list(dict.fromkeys([path, os.path.realpath(path)]))
    if store.scalar(f"SELECT 1 FROM edit WHERE {store.sql_in_list('path')} LIMIT 1", (store.list_param(names),)):
        return names, "path"
    inside = _repository_path(path)
    if inside is None:
        return names, "path"
    escaped = inside.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    found = store.rows("SELECT DISTINCT path FROM edit WHERE path LIKE ? ESCAPE '\\'", ("%/" + escaped,))
    return ([str(r[0]) for r in found], "repository") if found else (names, "path")


def _repository_path(path: str) -> str | None:
    folder = os.path.dirname(path)
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return os.path.relpath(path, folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def blame(store: Store, target: str, cwd: str, require_edits: bool = False) -> Blame:
    """`require_edits`: only a file an archived session changed is read (the web viewer's rule)."""
    path, first, last = parse_target(target, cwd)
    with store.read():
        names, matched_by = _names_of(store, path)
        infos = edits_at(store, names)
        if require_edits and not infos:
            raise NotFound(f"no archived session changed {path}")
        model = _moved_in(store, infos)
        events = events_of(store, infos)
    current = split_lines(read_file(path))
    who = blame_lines(current, events, model)
    by_id = {i.id: i for i in infos}
    lo, hi = (first or 1), min(last or len(current), len(current))
    if first is not None and first > len(current):
        raise BadInput(f"{path} has {len(current)} lines, not {first}")
    shown = [BlameLine(n, current[n - 1], _writer(by_id, who[n - 1])) for n in range(lo, hi + 1)]
    used = {line.edit.id: line.edit for line in shown if line.edit is not None}
    with store.read():
        edits = with_asks(store, sorted(used.values(), key=lambda e: (e.ts, e.id)))
    return Blame(path, shown, len(current), edits, len(events), matched_by)


def _writer(by_id: dict[int, EditInfo], key: int | None) -> EditInfo | None:
    return by_id.get(key) if key is not None else None


def _moved_in(store: Store, infos: list[EditInfo]) -> list[Line] | None:
    """A file that a session moved here starts as the model of where it came from."""
    moves = [i for i in infos if i.kind == MOVE and i.from_path]
    if not moves:
        return None
    move = moves[0]
    earlier = [i for i in edits_at(store, [str(move.from_path)], move.ts) if i.ts <= move.ts and i.kind != MOVE]
    return replay(events_of(store, earlier)) if earlier else None


# --- files and history ------------------------------------------------------------------------


@dataclass
class FileChanges:
    """The changes of one file, in order."""

    path: str
    edits: list[EditInfo]

    @property
    def added(self) -> int:
        return sum(e.new_lines for e in self.edits)

    @property
    def removed(self) -> int:
        return sum(e.old_lines for e in self.edits)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "changes": len(self.edits),
            "lines_written": self.added,
            "lines_replaced": self.removed,
            "edits": [e.to_dict() for e in self.edits],
        }


@dataclass
class ChangedFiles:
    """What a session or a run changed."""

    target: str  # the session id or run address asked about
    files: list[FileChanges]

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "files": [f.to_dict() for f in self.files]}


def _group(infos: list[EditInfo]) -> list[FileChanges]:
    by_path: dict[str, list[EditInfo]] = {}
    for info in infos:
        by_path.setdefault(info.path, []).append(info)
    return [FileChanges(p, e) for p, e in sorted(by_path.items())]


def session_files(store: Store, session_id: str) -> ChangedFiles:
    with store.read():
        rows = store.rows(
            f"SELECT {_EDIT_COLUMNS} FROM {_EDIT_FROM} WHERE e.session_id = ? ORDER BY e.ts, m.id, e.part",
            (session_id,),
        )
        infos = with_asks(store, [_info(r) for r in rows])
    return ChangedFiles(session_id, _group(infos))


def run_files(store: Store, run_id: int) -> ChangedFiles:
    with store.read():
        get_run(store, run_id)
        rows = store.rows(
            f"SELECT {_EDIT_COLUMNS} FROM {_EDIT_FROM} WHERE rm.run_id = ? ORDER BY e.ts, m.id, e.part", (run_id,)
        )
        infos = with_asks(store, [_info(r) for r in rows])
    return ChangedFiles(f"r{run_id}", _group(infos))


@dataclass
class RunTouch:
    """One run's changes of a file."""

    run: str | None
    session_id: str
    agent: str
    first_ts: int
    ask: str
    edits: list[EditInfo]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "session_id": self.session_id,
            "session": short_id(self.session_id),
            "agent": self.agent,
            "ts": self.first_ts,
            "ask": self.ask,
            "changes": len(self.edits),
            "lines_written": sum(e.new_lines for e in self.edits),
            "addresses": [e.address for e in self.edits],
            "commits": sorted({e.commit for e in self.edits if e.commit}),
        }


@dataclass
class History:
    path: str
    runs: list[RunTouch]
    matched_by: str = "path"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "matched_by": self.matched_by, "runs": [r.to_dict() for r in self.runs]}


def history(store: Store, target: str, cwd: str) -> History:
    path, _first, _last = parse_target(target, cwd)
    with store.read():
        names, matched_by = _names_of(store, path)
        infos = with_asks(store, edits_at(store, names))
    runs: dict[tuple[str, int | None], RunTouch] = {}
    for info in infos:
        key = (info.session_id, info.run_id)
        if key not in runs:
            runs[key] = RunTouch(info.run, info.session_id, info.agent, info.ts, info.ask, [])
        runs[key].edits.append(info)
    return History(path, list(runs.values()), matched_by)
