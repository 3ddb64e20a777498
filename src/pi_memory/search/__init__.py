"""Search: finding messages (`messages`) and runs (`runs`) by keywords, on SQLite and PostgreSQL (`pg`).

What it is for: anchors and document frequencies, candidate fetch from the
index, the exact re-rank (`core.scoring`), grouping into sessions; the same
for run summaries. Bounded in time as the archive grows.

May import: `pi_memory.core`, `pi_memory.storage`, `pi_memory.runs`, `pi_memory.errors`.
"""
