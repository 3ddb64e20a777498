"""The archive's schema, in one place: an append-only list of migrations.

Each migration runs in one transaction together with its `PRAGMA user_version`
bump, so a database is always at exactly one version. Shipped migrations are
never edited: a change is a new migration at the end of the list.

Tables
- `session`   one row per agent session (mutable: last_at, name, flags).
- `msg`       one row per archived message: rendered text, role, order, entry id.
              `id` is also the FTS rowid; insertion order is time order.
- `msg_fts`   contentless two-channel FTS5 index (`chars`, `grams`) over the
              rendered text of indexed messages; rows deleted with
              `contentless_delete` when a message is forgotten.
- `entry`     the verbatim copy of every source line (zlib), message or not,
              so anything can be replayed exactly, successful tool output included.
- `source_file` per-file import state (size, mtime, offset) for quick re-imports.
- `counter`   running totals the ranking needs in O(1) (indexed docs, their chars).
"""

from __future__ import annotations

MIGRATIONS: list[tuple[str, str]] = [
    (
        "m001_archive",
        """
        CREATE TABLE session (
          id             TEXT PRIMARY KEY,
          agent          TEXT NOT NULL DEFAULT 'pi',
          cwd            TEXT NOT NULL DEFAULT '',
          project        TEXT NOT NULL DEFAULT '',
          started_at     INTEGER NOT NULL,
          last_at        INTEGER NOT NULL,
          name           TEXT,
          parent_session TEXT,
          source_path    TEXT,
          first_user     TEXT
        );
        CREATE INDEX session_project ON session(project);

        CREATE TABLE msg (
          id         INTEGER PRIMARY KEY,
          session_id TEXT    NOT NULL REFERENCES session(id),
          seq        INTEGER NOT NULL,
          ts         INTEGER NOT NULL,
          role       TEXT    NOT NULL,
          text       TEXT    NOT NULL,
          nchars     INTEGER NOT NULL,
          indexed    INTEGER NOT NULL,
          entry_id   TEXT,
          parent_id  TEXT,
          meta       TEXT,
          hash       TEXT    NOT NULL,
          UNIQUE (session_id, hash)
        );
        -- display order within a session: time, then arrival (parallel tool
        -- results share a millisecond; a gap filled by a later import still
        -- lands in its place)
        CREATE INDEX msg_session_order ON msg(session_id, ts, seq);
        CREATE INDEX msg_entry ON msg(entry_id) WHERE entry_id IS NOT NULL;

        CREATE VIRTUAL TABLE msg_fts USING fts5(
          chars, grams,
          content = '',
          contentless_delete = 1,
          tokenize = "ascii tokenchars '_'",
          detail = 'column'
        );

        CREATE TABLE entry (
          id         INTEGER PRIMARY KEY,
          session_id TEXT NOT NULL,
          entry_key  TEXT NOT NULL,
          entry_id   TEXT,
          type       TEXT NOT NULL,
          ts         INTEGER NOT NULL,
          msg_id     INTEGER,
          raw        BLOB NOT NULL,
          UNIQUE (session_id, entry_key)
        );
        CREATE INDEX entry_msg ON entry(msg_id) WHERE msg_id IS NOT NULL;

        CREATE TABLE source_file (
          path       TEXT PRIMARY KEY,
          session_id TEXT,
          size       INTEGER NOT NULL,
          mtime_ns   INTEGER NOT NULL,
          imported_at INTEGER NOT NULL
        );

        CREATE TABLE counter (
          name  TEXT PRIMARY KEY,
          value INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO counter VALUES ('indexed_docs', 0), ('indexed_chars', 0);
        """,
    ),
    (
        "m002_watch",
        # `watch` follows session files by byte offset: where it stopped (after the
        # last complete line), the line number there, and what identifies the file
        # (inode, hash of its first line) so a rewrite or replacement is noticed.
        # A session whose file disappeared keeps everything and is flagged.
        """
        ALTER TABLE source_file ADD COLUMN read_offset INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE source_file ADD COLUMN line_no INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE source_file ADD COLUMN inode INTEGER;
        ALTER TABLE source_file ADD COLUMN head_hash TEXT;
        ALTER TABLE source_file ADD COLUMN agent TEXT;
        ALTER TABLE session ADD COLUMN source_missing INTEGER NOT NULL DEFAULT 0;
        """,
    ),
]

SCHEMA_VERSION = len(MIGRATIONS)
