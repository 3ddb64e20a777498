"""The pure core: values in, values out, no database, no files written, no clock.

What it is for: everything that can be decided without the archive: normalizing
and tokenizing text (`text`, `fold_table`), the ranking weights and the exact
re-rank (`ranking`, `scoring`), a message to its indexed markdown (`render`),
the run summaries (`summary`), the pure text helpers of every presenter
(`format`), and the session-file parsers of each agent (`sources/`). Tested
without a database.

May import: nothing of the project but `pi_memory.errors` (and its own modules).
"""
