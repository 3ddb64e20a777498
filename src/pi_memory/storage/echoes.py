"""Keeping `msg.echo` and the index's echo token true as a session grows (`core.echo`).

A call to the archive's tools and its result are echoes by themselves, known when they are
written (`NewMessage.echo`). Whether the rest of a run is, its prompt and reply, depends on what
the run does later: a run that only asked the archive is an echo in full, but becomes evidence
again the moment the model does other work in it. A parse worker sees whole sessions and says so
as it writes them; for everything else (live capture, an import that adds to a session) the
after-write hook re-judges the run the new messages fall in, and only when they can change it: a
new call to the archive, or a run already marked that grows. What changed is rewritten: the flag,
and the index entries with or without `ECHO_TOKEN` (each backend its way: `_rewrite_echo_entries`).

`EchoMarks` is a mixin of both stores (`rows`, `scalar`, `write`, `list_param`, `sql_in_list`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..core.echo import ARCHIVE_TOOLS, session_echoes

if TYPE_CHECKING:
    from .store import Store

# a message of the session's tail as the judgement needs it: (id, role, meta, echo, indexed, text)
TailRow = tuple[int, str, dict[str, Any], bool, int, Any]


class EchoMarks:
    """`reconcile_echoes`, `echoes_after_write` and the data step `mark_archived_echoes`."""

    if TYPE_CHECKING:

        def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

        def write(self) -> AbstractContextManager[None]: ...

        def read(self) -> AbstractContextManager[None]: ...

        def sql_in_list(self, expr: str) -> str: ...

        def list_param(self, values: Any) -> Any: ...

    def _rewrite_echo_entries(self, changed: list[tuple[int, bool, int, Any]]) -> None:
        """(msg id, echo, indexed, stored text) of messages whose flag changed: the flag and their index
        entries rewritten (inside a write transaction)."""
        raise NotImplementedError

    def echoes_after_write(self, added: dict[str, list[int]]) -> None:
        """The after-write hook: judge again the runs the new messages fall in, where they can change."""
        for session_id, start in self._runs_to_judge(added).items():
            self.reconcile_echoes(session_id, start)

    def _runs_to_judge(self, added: dict[str, list[int]]) -> dict[str, tuple[int, int]]:
        """session -> (ts, seq) of its earliest new message, for the sessions where a new message is an
        echo or the run before them is marked (it may no longer be one)."""
        ids = [i for new in added.values() for i in new]
        if not ids:
            return {}
        earliest: dict[str, tuple[int, int]] = {}
        echoes: set[str] = set()
        with self.read():
            sql = f"SELECT session_id, ts, seq, echo FROM msg WHERE {self.sql_in_list('id')}"
            for session_id, ts, seq, echo in self.rows(sql, (self.list_param(ids),)):
                sid, at = str(session_id), (int(ts), int(seq))
                earliest[sid] = min(earliest.get(sid, at), at)
                if echo:
                    echoes.add(sid)
            return {sid: at for sid, at in earliest.items() if sid in echoes or self._prompt_marked(sid, at)}

    def _prompt_marked(self, session_id: str, start: tuple[int, int]) -> bool:
        """Whether the user message that opens the run at `start` is marked as an echo."""
        return bool(
            self.scalar(
                """SELECT echo FROM msg WHERE session_id = ? AND role = 'user' AND (ts < ? OR (ts = ? AND seq <= ?))
                   ORDER BY ts DESC, seq DESC LIMIT 1""",
                (session_id, start[0], start[0], start[1]),
            )
        )

    def reconcile_echoes(self, session_id: str, start: tuple[int, int] | None = None) -> int:
        """Judge the session's runs from the one holding `start` (None: all) and rewrite what changed;
        returns how many messages changed."""
        with self.read():
            tail = self._tail_rows(session_id, start)
        wanted = session_echoes([(role, meta) for _i, role, meta, _e, _x, _t in tail])
        changed = [
            (i, want, indexed, text) for (i, _r, _m, echo, indexed, text), want in zip(tail, wanted, strict=True)
        ]
        changed = [c for c, (_i, _r, _m, echo, _x, _t) in zip(changed, tail, strict=True) if c[1] != echo]
        if changed:
            with self.write():
                self._rewrite_echo_entries(changed)
        return len(changed)

    def _tail_rows(self, session_id: str, start: tuple[int, int] | None) -> list[TailRow]:
        """The session's messages in display order from the run holding `start` (its user message) on."""
        sql = "SELECT id, role, meta, echo, indexed, text FROM msg WHERE session_id = ?"
        params: list[Any] = [session_id]
        opening = self._run_start(session_id, start) if start is not None else None
        if opening is not None:
            sql += " AND (ts > ? OR (ts = ? AND seq >= ?))"
            params += [opening[0], opening[0], opening[1]]
        rows = self.rows(sql + " ORDER BY ts, seq", params)
        return [(int(i), str(role), _meta(meta), bool(echo), int(ix), text) for i, role, meta, echo, ix, text in rows]

    def _run_start(self, session_id: str, start: tuple[int, int]) -> tuple[int, int] | None:
        rows = self.rows(
            """SELECT ts, seq FROM msg WHERE session_id = ? AND role = 'user' AND (ts < ? OR (ts = ? AND seq <= ?))
               ORDER BY ts DESC, seq DESC LIMIT 1""",
            (session_id, start[0], start[0], start[1]),
        )
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def mark_archived_echoes(self) -> None:
        """m011's data step: judge every session that ever called one of the archive's tools (idempotent)."""
        mentions = " OR ".join(f"instr(meta, '{name}') > 0" for name in sorted(ARCHIVE_TOOLS))
        sessions = [
            str(r[0])
            for r in self.rows(
                f"SELECT DISTINCT session_id FROM msg WHERE meta IS NOT NULL AND role IN ('assistant', 'tool_result', 'tool_error') AND ({mentions})"
            )
        ]
        for session_id in sessions:  # each in its own short transaction
            self.reconcile_echoes(session_id)


def _meta(value: str | None) -> dict[str, Any]:
    loaded = json.loads(value) if value else {}
    return loaded if isinstance(loaded, dict) else {}


def echoes_after_write(store: Store, added: dict[str, list[int]]) -> None:
    """`storage.writes.AFTER_WRITE`'s entry for echoes (see `EchoMarks.echoes_after_write`)."""
    store.echoes_after_write(added)
