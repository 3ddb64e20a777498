"""Deterministic compaction takeover for pi: safe boundary, checkpoint, window manifest, derived memories.

Design idea: pi decides *when* to compact and *where* roughly; we decide whether
the cut is safe and write the summary ourselves, with no model call: a
checkpoint of pointers, counts, a source hash and rule-extracted excerpts with
entry ids, so every detail stays reachable in the archive. The planning core
is pure (same input, same bytes); storage happens only after pi commits.

`fold/` is the in-session folding of spec 004 (pure, plus its archive reads).

May import: the core, the storage layer, `runs`, `memory` (derived memories)
and `pi_memory.errors`. Never recall, review, the facade or a front end.
"""

from __future__ import annotations

from .boundary import Boundary, choose_boundary, pairing_problems
from .config import Settings, load_settings, normalize
from .plan import compact_plan, timed_plan

__all__ = [
    "Boundary",
    "Settings",
    "choose_boundary",
    "compact_plan",
    "load_settings",
    "normalize",
    "pairing_problems",
    "timed_plan",
]
