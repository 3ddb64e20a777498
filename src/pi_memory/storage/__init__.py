"""Storage: the one database connection per process, the schema and its migrations.

What it is for: `store` is the SQLite archive (apsw, WAL, one short transaction
per write, the read and write primitives every component uses); `shared` the
store calls written once for both backends (`?` placeholders); `rows` the values
a write carries, `codec` how bytes are stored (compressed lines, packed text),
`runindex` the run summaries' FTS5 index; `echoes` which messages are the archive's
own output (marked in the index, left out of ranking); `schema` the tables and append-only
migrations (`PRAGMA user_version`); `writes` the one write path (packed short
transactions, then the after-write hooks); `pg/` the same store calls over a
PostgreSQL team archive (`PgStore`, its SQL helpers, write path, schema, roles).

May import: `pi_memory.core` and `pi_memory.errors`. Nothing above it: the
work that follows a write (runs) registers itself in `writes.AFTER_WRITE`.
"""
