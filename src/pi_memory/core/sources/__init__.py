"""Session file parsers, one module per agent (pi, Claude Code, Codex): lines in, records out.

Every parser is pure and returns the same records (`sources.pi.ParsedSession`), so the
importer, the watcher and the tests treat all agents alike; `readers` picks the parser for a file.

Part of the pure core. May import: `pi_memory.core` (`render`, `text`) and `pi_memory.errors`.
"""
