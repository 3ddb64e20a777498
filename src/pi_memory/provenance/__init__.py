"""Provenance: which run wrote which lines (blame), a session's changes, export and resume.

What it is for: connecting history to code and back. Every edit or write a session made
(pi's `edit` and `write`, Claude Code's Edit/MultiEdit/Write, Codex's `apply_patch`) is kept
as a row of the `edit` table (`record`), read off the archived tool calls and their results
(`extract`, pure); pi's extension adds what only the live agent sees: the file's hash before
and after the tool ran, the git commit it was on, and the file as it was when something else
had changed it (`edit_observed`). `blame` (pure) replays a file's edits and lines up the result
with the file as it is now; `query` loads what it needs and answers `blame`, `files` and
`history`; `export` writes a session or run as Markdown, HTML or JSON, and `resume` says how to
continue a session in its own agent.

May import: `pi_memory.runs`, `pi_memory.storage`, `pi_memory.core` and `pi_memory.errors`.
Never search, ingest or anything above (ingest imports this package to plan the edits of the
files it reads, as it plans their runs).
"""
