"""`pi-memory bridge`: newline-delimited JSON over stdio for the pi extension.

`server` is the loop (one request line in, one response line out, never a
traceback); `protocol` the method registry and the params checks; `methods`
the archive's own methods; `compact` and `fold` those of compaction and
folding; the memory and review methods come from `frontends.tools`.

May import: the facade, its presenters, `frontends.tools`, `pi_memory.errors`.
"""
