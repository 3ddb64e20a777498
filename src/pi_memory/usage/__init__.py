"""Token usage and cost per request, session, project, model and day, and the context ledger:
what pi-memory itself adds to a session's requests and what its folding and compaction remove.

`report` (the `pi-memory usage` views), `ledger` (`pi-memory usage ledger SESSION`), `present`
(their text). Reads `usage`, `usage_sum` and `context_ledger` (written by the storage layer's
write path, `storage.usage`), the fold records and compactions a session archived.
"""
