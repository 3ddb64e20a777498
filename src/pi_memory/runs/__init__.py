"""Runs and messages as stored: run segmentation and listing, addressed reads, forgetting, the session list.

What it is for: a run is one user message to the final reply (`r12`, `r12/m3`).
`table` segments sessions into runs and keeps their summaries (the rules are
the pure `core.summary`), `detail` reads a run or one message in full by its
address, `forget` deletes a session, run or message for good (and keeps the
tombstones that stop a re-import from bringing it back), `catalog` lists
sessions.

May import: `pi_memory.core`, the storage layer (`store`, `schema`) and
`pi_memory.errors`. Never search, ingest or anything above.
"""
