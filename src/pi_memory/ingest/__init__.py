"""Ingest: every way a message gets into the archive.

What it is for: `importer` reads session files (in parallel parse workers,
`python -m pi_memory.parse_worker`) and writes them in short batches, then runs
the after-write hooks (run segmentation); `capture` takes live messages from a
host (the pi bridge); `tail` follows growing session files (the watcher);
`retention` warns about agent sessions that may be deleted before they are
archived; `push` copies a local archive to the team archive.

May import: `pi_memory.core`, `pi_memory.storage`, `pi_memory.runs`,
`pi_memory.errors`, and `pi_memory.parse_worker` (the worker's entry point).
"""
