"""The facade's usage methods: token and cost views, the statusline, the context ledger.

A mixin of `Archive`, in its own file so the facade reads by topic (see `pi_memory.usage`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..core.tokens import estimate_tokens, family_of
from ..storage.store import Store
from ..usage import ledger as ledgers
from ..usage import report as reports
from ..usage.ledger import Ledger
from ..usage.report import UsageLine, UsageReport


class UsageMethods:
    """`pi-memory usage` and its statusline and ledger, the session-cost tool, the ledger's events."""

    store: Store

    if TYPE_CHECKING:

        def resolve_session(self, ref: str) -> str: ...

    def usage(
        self,
        view: str = "daily",
        since: str | None = None,
        until: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        session: str | None = None,
        tz: str | None = None,
    ) -> UsageReport:
        """Tokens, cache-hit rate and dollars per day, week, month, session, model or project."""
        sid = self.resolve_session(session) if session else None
        with self.store.read():
            return reports.report(self.store, view, since, until, agent, project, sid, tz)

    def usage_today(self, tz: str | None = None) -> UsageLine:
        with self.store.read():
            return reports.today_line(self.store, tz)

    def usage_ledger(self, session: str) -> Ledger:
        """What pi-memory added to one session's requests and what it removed, priced."""
        sid = self.resolve_session(session)
        with self.store.read():
            return ledgers.session_ledger(self.store, sid)

    def record_context_event(self, session_id: str, kind: str, text: str, model: str | None = None) -> None:
        """Something pi-memory put into a session's context that its file will not show (the
        memories appended to the system prompt): kept for the ledger."""
        if not session_id or not text:
            return
        tokens = estimate_tokens(text, family_of(model))
        with self.store.write():
            self.store.add_ledger_event(session_id, int(time.time() * 1000), kind, len(text), tokens, kind)
