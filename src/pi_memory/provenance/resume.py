"""How to continue an archived session in its own agent: `pi --session FILE`, `claude --resume ID`,
`codex resume ID`, run in the session's folder.

Design idea: the archive only says which command the agent itself takes; the agent resumes from
its own session file, so the command is offered only while that file is still where the agent
keeps it (the archive keeps everything else: `export` gives the history when the file is gone).
A sub-agent's transcript (Claude Code's `agent-*` files) is resumed through its parent session.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any

from ..errors import NotFound
from ..storage.store import Store

SUBAGENT_MARK = "/agent-"


@dataclass
class Resume:
    session_id: str
    agent: str
    cwd: str
    source_path: str | None
    argv: list[str]  # the agent's own command (empty: it cannot resume this session)
    available: bool
    reason: str = ""  # why not, when not

    @property
    def command(self) -> str:
        """The command line to paste into a shell: into the session's folder, then the agent."""
        if not self.argv:
            return ""
        line = shlex.join(self.argv)
        return f"cd {shlex.quote(self.cwd)} && {line}" if self.cwd else line

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "command": self.command}


def argv_for(agent: str, session_id: str, source_path: str | None) -> list[str]:
    """The agent's command that continues a session (pi opens the file, the others take the id)."""
    if agent == "pi":
        return ["pi", "--session", source_path] if source_path else []
    parent = session_id.split(SUBAGENT_MARK, 1)[0]
    if agent == "claude":
        return ["claude", "--resume", parent]
    if agent == "codex":
        return ["codex", "resume", parent]
    return []


def resume(store: Store, session_id: str) -> Resume:
    rows = store.rows("SELECT agent, cwd, source_path, source_missing FROM session WHERE id = ?", (session_id,))
    if not rows:
        raise NotFound(f"no session {session_id!r}")
    agent, cwd, source_path, missing = str(rows[0][0]), str(rows[0][1] or ""), rows[0][2], bool(rows[0][3])
    source = _existing_source(store, session_id, source_path)
    argv = argv_for(agent, session_id, source)
    if not argv and agent != "pi":
        return Resume(session_id, agent, cwd, source_path, [], False, f"pi-memory cannot resume {agent} sessions")
    if source is None or missing:
        where = f" ({source_path})" if source_path else ""
        why = f"the {agent} session file is gone{where}: the agent cannot resume it; `pi-memory export` has its history"
        return Resume(session_id, agent, cwd, source_path, argv if agent != "pi" else [], False, why)
    return Resume(session_id, agent, cwd, source, argv, True)


def _existing_source(store: Store, session_id: str, source_path: Any) -> str | None:
    """The session's file where the agent keeps it: the (resolved) path it was imported from, else the
    path the live extension gave (a relative one, as a command line gave it to `import`, says nothing)."""
    candidates = [str(r[0]) for r in store.rows("SELECT path FROM source_file WHERE session_id = ?", (session_id,))]
    candidates += [str(source_path)] if source_path and os.path.isabs(str(source_path)) else []
    return next((path for path in candidates if os.path.isfile(path)), None)
