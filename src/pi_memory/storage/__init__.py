"""Storage: the one database connection per process, the schema and its migrations.

What it is for: `store` is the SQLite archive (apsw, WAL, one short transaction
per write, the read and write primitives every component uses, the shared SQL
written once with `?` placeholders); `schema` its tables and append-only
migrations (`PRAGMA user_version`); `pg/` the same store calls over a
PostgreSQL team archive (`PgStore`, its schema and roles); `writes` the one
write path (packed short transactions, then the after-write hooks).

May import: `pi_memory.core` and `pi_memory.errors`. Nothing above it: the
work that follows a write (runs) registers itself in `writes.AFTER_WRITE`.
"""
