"""What `status` and `doctor` say about semantic recall: off and how to turn it on, or how far along.

Design idea: one line a person can act on. Off: the command that turns it on. Installed but not
embedded: the command that embeds. On: how many units have vectors (of each kind: messages, run
summaries, memories), under which model, and that searches are hybrid. A team archive (PostgreSQL)
without pgvector says once that it is searched lexically; with it, it says what a file says (its
vectors are written by `pi-memory embed`, or at idle by any member's bridge or `watch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.format import plural
from .model import INSTALL_HINT


@dataclass
class SemanticState:
    installed: bool
    model: str | None = None
    team: bool = False  # a team archive without pgvector: searched lexically
    units: int = 0  # units of the archive (user messages, replies that call no tool, run summaries, memories)
    embedded: int = 0  # of them, with a vector of this model
    other_model: int = 0  # message vectors another model made (embedded again by the next pass)
    reason: str | None = None  # why the model cannot be used, when installed but broken
    # (units, embedded) of each kind: "messages", "run summaries", "memories"
    kinds: dict[str, tuple[int, int]] = field(default_factory=dict)
    pgvector: bool = False  # a team archive whose server has pgvector

    @property
    def on(self) -> bool:
        """Whether a search fuses vectors by default."""
        return self.installed and not self.team and self.embedded > 0 and self.reason is None

    @property
    def line(self) -> str:
        if self.team:
            return "semantic recall: off on a team archive (PostgreSQL has no vector scan here): search is lexical"
        if not self.installed:
            return f"semantic recall: off ({INSTALL_HINT}, then `pi-memory embed`)"
        if self.reason is not None:
            return f"semantic recall: off, the model does not load ({self.reason}): search is lexical"
        left = max(0, self.units - self.embedded)
        if not self.embedded:
            return (
                f"semantic recall: installed, nothing embedded yet ({plural(left, 'unit')} to do): run "
                "`pi-memory embed`, or leave a bridge or `pi-memory watch` running; search is lexical until then"
            )
        done = f"{self.embedded:,} of {self.units:,} units embedded" if left else f"all {self.units:,} units embedded"
        return f"semantic recall: on, {done}{self._by_kind()} ({self.model}); searches are hybrid"

    def _by_kind(self) -> str:
        """`: 900 of 1,000 messages, 40 of 40 run summaries, 3 of 3 memories` (nothing without kinds)."""
        if not self.kinds:
            return ""
        return ": " + ", ".join(f"{done:,} of {n:,} {kind}" for kind, (n, done) in self.kinds.items())

    def to_dict(self) -> dict[str, Any]:
        return {
            "on": self.on,
            "installed": self.installed,
            "model": self.model,
            "team": self.team,
            "pgvector": self.pgvector,
            "units": self.units,
            "embedded": self.embedded,
            "other_model": self.other_model,
            "reason": self.reason,
            "kinds": {kind: {"units": n, "embedded": done} for kind, (n, done) in self.kinds.items()},
            "line": self.line,
        }
