"""The archive's schema, in one place: an append-only list of migrations.

Each migration runs in one transaction together with its `PRAGMA user_version`
bump, so a database is always at exactly one version. Shipped migrations are
never edited: a change is a new migration at the end of the list.

Tables
- `session`   one row per agent session (mutable: last_at, name, flags).
- `msg`       one row per archived message: rendered text, role, order, entry id.
              `id` is also the FTS rowid; insertion order is time order. `text` holds a BLOB
              (format byte + zstd with the archive's dictionary, `codec.encode_text`, since m009;
              format 1, deflate, before) or TEXT (older rows); `codec.decode_text` reads all
              (no migration rewrites them).
              `indexed` is 0, 1, or 2 (`store.INDEX_PENDING`, m008): a live message whose index
              entry waits for its writer's idle moment (found through `msg_index_pending`).
- `msg_fts`   contentless two-channel FTS5 index (`chars`, `grams`) over the
              rendered text of indexed messages; rows deleted with
              `contentless_delete` when a message is forgotten. `detail = 'none'` in archives
              created since m008 (`COMPACT_FTS`), `'column'` in older ones: both are queried alike.
- `msg_typed` contentless FTS5 index of the characters a message holds in a script that
              folds to another, as typed (`構` where msg_fts has `构`), for messages that have any.
- `entry`     the verbatim copy of every source line (zlib), message or not,
              so anything can be replayed exactly, successful tool output included. A message's
              line is compressed against its message's text (format 2: `store.decompress(raw, text)`).
- `source_file` per-file import state (size, mtime, offset) for quick re-imports.
- `counter`   running totals the ranking needs in O(1) (indexed docs, their chars).
- `memory_chain`  the long-term memory chains: one per workspace (normalized cwd),
              a new one only when a broken chain is repaired; the newest is active.
- `memory_event`  the memory log: one canonical JSON event per row, hash-chained
              per chain (seq from 1, prev_hash, hash). Both memory tables are
              append-only: triggers refuse UPDATE and DELETE (see `memory/log.py`).
- `memory_seal`   each memory event's keyed seal (`memory/seal.py`), append-only too.
- `compact_window` one row per committed pi compaction (window manifest): a hash
              chain per session; rows are immutable (a trigger refuses UPDATE).
- `run`       one row per run (a user message through the final reply), derived from `msg`
              by `runs.py`: status, counts, navigation summary line and its fields (JSON; packed
              like `msg.text` since the compressed store). The line is kept once, as the fields'
              "line": `summary` is written empty since then (rows from before keep their text
              there, and the reader takes whichever is filled). The fields of a run an import
              planned count their message ids from `first_msg` (`"rel": 1`; `runs.table.load_fields`
              adds it back); other rows hold the ids themselves.
              `AUTOINCREMENT`: a forgotten run's id is never reused.
- `run_msg`   msg -> (run, 1-based position): the address `r<N>/m<K>`.
- `run_file`  paths a run read or changed, per message, for the path filter.
- `run_fts`   contentless two-channel FTS5 index over run summaries (the summary track).
- `forgotten` tombstones: (session, message hash) pairs the user forgot, `*` for a whole
              session, so a re-import does not bring them back.
- `codec_dict` the zstd dictionaries packed text is compressed with (`codec.py` format 2), by id:
              trained once from the archive's first messages (`Store.text_codec`).
- `usage`     one row per model request a session file recorded (`core.usage`): its tokens (input,
              output, cache read, cache write, reasoning), provider, model, and its cost in USD with
              where that came from (`cost_source`: `session`, or the price table `genai-prices X.Y.Z`,
              priced at `priced_at`; NULL cost: unknown, never 0). `key` is unique across the
              archive (a fork's copied request is billed once). Filled by every write path; the
              data step of m010 fills it for archives made before, from the verbatim lines.
- `usage_sum` the same summed per (quarter hour, session, provider, model), kept by the writes:
              what `pi-memory usage` reads (a 1M-message archive's daily view in milliseconds).
- `context_ledger` what pi-memory itself put into a session's requests that no session file
              records (the long-term memories appended to the system prompt): per event, chars and
              estimated tokens (`usage.ledger` adds the folds, compactions and recall results).
- `review_link` which memory of a workspace addresses which review finding (`pi-memory review
              link`): the finding's key (`sig_` + 8 hex of its signature) and the signature typed.
- `edit`      one row per file change a session's tool call made and its result confirmed
              (`provenance/record.py`): the call's message (by its hash, so a file's edits can be
              written before its messages) and id, which change of the call
              (`part`), the path (absolute, resolved against the session's cwd), hashes and line
              counts of the text before and after, the first changed line when the tool said.
              Derived from the archived lines, which keep the texts: blame reads them back.
- `edit_observed` what pi's extension saw of a change as it ran: the file's hash before and after
              the tool, the git commit it was on, and the whole file before the change when it
              differed from what the archive knew (zlib; at most `record.SNAPSHOT_MAX` bytes).
- `provenance_state` named flags of the provenance tables (`backfilled`: the edits of the
              messages archived before m010 were read; mutable).
- `vec`       semantic recall's embeddings (m016, `vectors/`): one per unit (a user message, a reply
              calling no tool, a run summary, a memory) and model, int8 with a scale. Derived: `pi-memory
              embed` writes them, `forget` deletes them with their messages; the scan index beside
              the file (`<name>.vectors/`) is rebuilt from here. `vec_session` numbers their sessions.
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
        "m002_memory",
        """
        CREATE TABLE memory_chain (
          id         INTEGER PRIMARY KEY,
          workspace  TEXT    NOT NULL,
          created_at INTEGER NOT NULL,
          note       TEXT    NOT NULL DEFAULT ''
        );
        CREATE INDEX memory_chain_workspace ON memory_chain(workspace, id);

        CREATE TABLE memory_event (
          chain     INTEGER NOT NULL REFERENCES memory_chain(id),
          seq       INTEGER NOT NULL,
          prev_hash TEXT    NOT NULL,
          hash      TEXT    NOT NULL,
          event     TEXT    NOT NULL,
          PRIMARY KEY (chain, seq)
        ) WITHOUT ROWID;

        CREATE TRIGGER memory_event_no_update BEFORE UPDATE ON memory_event
        BEGIN SELECT RAISE(ABORT, 'memory_event is append-only'); END;
        CREATE TRIGGER memory_event_no_delete BEFORE DELETE ON memory_event
        BEGIN SELECT RAISE(ABORT, 'memory_event is append-only'); END;
        CREATE TRIGGER memory_chain_no_update BEFORE UPDATE ON memory_chain
        BEGIN SELECT RAISE(ABORT, 'memory_chain is append-only'); END;
        CREATE TRIGGER memory_chain_no_delete BEFORE DELETE ON memory_chain
        BEGIN SELECT RAISE(ABORT, 'memory_chain is append-only'); END;
        """,
    ),
    (
        "m003_compact_window",
        """
        CREATE TABLE compact_window (
          session_id          TEXT    NOT NULL,
          seq                 INTEGER NOT NULL,  -- 1, 2, ... per session: the chain order
          window_id           TEXT    NOT NULL UNIQUE,
          compaction_entry_id TEXT    NOT NULL,
          parent_window_id    TEXT,              -- the previous compaction on the same branch
          kept_entry_id       TEXT    NOT NULL,
          source_count        INTEGER,
          source_hash         TEXT,
          prev_hash           TEXT,              -- hash of the session's previous window
          hash                TEXT    NOT NULL,
          recorded_at         INTEGER NOT NULL,
          -- stats of the plan, for `status` (from the committed entry's details)
          compactor           TEXT,
          reason              TEXT,
          plan_ms             REAL,
          checkpoint_chars    INTEGER,
          tokens_before       INTEGER,
          derived_count       INTEGER NOT NULL DEFAULT 0,
          PRIMARY KEY (session_id, seq),
          UNIQUE (session_id, compaction_entry_id)
        ) WITHOUT ROWID;
        CREATE TRIGGER compact_window_immutable BEFORE UPDATE ON compact_window
        BEGIN SELECT RAISE(ABORT, 'compact_window rows are immutable'); END;
        """,
    ),
    (
        "m004_runs",
        """
        CREATE TABLE run (
          id            INTEGER PRIMARY KEY AUTOINCREMENT,
          session_id    TEXT    NOT NULL,
          first_msg     INTEGER NOT NULL,
          start_ts      INTEGER NOT NULL,
          end_ts        INTEGER NOT NULL,
          status        TEXT    NOT NULL,
          n_msgs        INTEGER NOT NULL,
          tool_calls    INTEGER NOT NULL,
          tool_errors   INTEGER NOT NULL,
          summary       TEXT    NOT NULL,
          fields        TEXT    NOT NULL,
          indexed_chars INTEGER NOT NULL DEFAULT -1,
          UNIQUE (session_id, first_msg)
        );
        CREATE INDEX run_start ON run(start_ts);

        CREATE TABLE run_msg (
          msg_id INTEGER PRIMARY KEY,
          run_id INTEGER NOT NULL,
          pos    INTEGER NOT NULL
        );
        CREATE INDEX run_msg_run ON run_msg(run_id, pos);

        CREATE TABLE run_file (
          path   TEXT    NOT NULL,
          run_id INTEGER NOT NULL,
          msg_id INTEGER NOT NULL,
          action TEXT    NOT NULL,
          PRIMARY KEY (path, msg_id, action)
        ) WITHOUT ROWID;
        CREATE INDEX run_file_run ON run_file(run_id);

        CREATE VIRTUAL TABLE run_fts USING fts5(
          chars, grams,
          content = '',
          contentless_delete = 1,
          tokenize = "ascii tokenchars '_'",
          detail = 'column'
        );

        CREATE TABLE forgotten (
          session_id   TEXT    NOT NULL,
          hash         TEXT    NOT NULL,
          forgotten_at INTEGER NOT NULL,
          PRIMARY KEY (session_id, hash)
        ) WITHOUT ROWID;
        CREATE INDEX forgotten_hash ON forgotten(hash);

        INSERT INTO counter VALUES ('run_docs', 0), ('run_chars', 0);
        """,
    ),
    (
        "m005_watch",
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
    (
        "m006_review_links",
        # `pi-memory review link MEM_ID SIGNATURE`: the ledger's explicit links (see review/)
        """
        CREATE TABLE review_link (
          workspace  TEXT    NOT NULL,
          memory_id  TEXT    NOT NULL,
          key        TEXT    NOT NULL,
          signature  TEXT    NOT NULL DEFAULT '',
          created_at INTEGER NOT NULL,
          PRIMARY KEY (workspace, memory_id, key)
        ) WITHOUT ROWID;
        """,
    ),
    (
        "m007_surface_chars",
        # The characters of a message typed in a script that folds to another (`構`, whose `构`
        # is in msg_fts), as typed (`text.surface_chars`): typing one finds the messages that
        # hold it as typed. One row per message that has any; one token per distinct character,
        # no positions (only "which messages" is asked). The data step fills it for the messages
        # archived before.
        """
        CREATE VIRTUAL TABLE IF NOT EXISTS msg_typed USING fts5(
          typed,
          content = '',
          contentless_delete = 1,
          tokenize = "ascii",
          detail = 'none'
        );
        """,
    ),
    (
        "m008_index_pending",
        # live capture writes a message `indexed = 2` and indexes it when idle (`store.INDEX_PENDING`):
        # the rows still waiting, found without a scan by whichever process opens the archive next
        """
        CREATE INDEX IF NOT EXISTS msg_index_pending ON msg(id) WHERE indexed = 2;
        """,
    ),
    (
        "m009_codec_dict",
        # the zstd dictionaries `msg.text` and run fields are packed with (format 2, `codec.py`):
        # trained from the archive's first messages, never changed or deleted while a row names it
        """
        CREATE TABLE IF NOT EXISTS codec_dict (
          id         INTEGER PRIMARY KEY,  -- `codec.dictionary_id(data)`, the id rows carry
          created_at INTEGER NOT NULL,
          data       BLOB    NOT NULL
        );
        """,
    ),
    (
        "m010_echo",
        # `msg.echo`: 1 for what the archive's own tools put into a session (`core.echo`: a call to
        # `session_search` and the like, its result, and every message of a run that only asked the
        # archive). Such a message's index entries carry `echo.ECHO_TOKEN`, so a search leaves it
        # out inside the index (and a run summary's, for a run that only asked the archive).
        """
        ALTER TABLE msg ADD COLUMN echo INTEGER NOT NULL DEFAULT 0;
        """,
    ),
    (
        "m011_echo_marks",
        # the data step: the echoes archived before m010, marked and their index entries rewritten
        "",
    ),
]

MIGRATIONS.append(
    (
        "m012_usage",
        """
        CREATE TABLE IF NOT EXISTS usage (
          key         TEXT    PRIMARY KEY,
          session_id  TEXT    NOT NULL,
          ts          INTEGER NOT NULL,
          provider    TEXT    NOT NULL,
          model       TEXT    NOT NULL,
          input       INTEGER NOT NULL,
          output      INTEGER NOT NULL,
          cache_read  INTEGER NOT NULL,
          cache_write INTEGER NOT NULL,
          reasoning   INTEGER NOT NULL DEFAULT 0,
          cost        REAL,
          cost_source TEXT,
          priced_at   INTEGER
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS usage_session ON usage(session_id, ts);
        CREATE TABLE IF NOT EXISTS usage_sum (
          bucket      INTEGER NOT NULL,  -- ts // 900000: a quarter hour, so any time zone's days add up
          session_id  TEXT    NOT NULL,
          provider    TEXT    NOT NULL,
          model       TEXT    NOT NULL,
          requests    INTEGER NOT NULL,
          input       INTEGER NOT NULL,
          output      INTEGER NOT NULL,
          cache_read  INTEGER NOT NULL,
          cache_write INTEGER NOT NULL,
          cost        REAL    NOT NULL,  -- of the priced requests
          unpriced    INTEGER NOT NULL,  -- requests whose cost is unknown
          PRIMARY KEY (bucket, session_id, provider, model)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS usage_sum_session ON usage_sum(session_id);
        CREATE TABLE IF NOT EXISTS context_ledger (
          id         INTEGER PRIMARY KEY,
          session_id TEXT    NOT NULL,
          ts         INTEGER NOT NULL,
          kind       TEXT    NOT NULL,  -- 'memory': the memories appended to the system prompt of a run
          chars      INTEGER NOT NULL,
          tokens     INTEGER NOT NULL,
          detail     TEXT
        );
        CREATE INDEX IF NOT EXISTS context_ledger_session ON context_ledger(session_id, ts);
        """,
    )
)

MIGRATIONS.append(
    (
        "m013_memory_seals",
        # each memory event's keyed seal (`memory/seal.py`): an HMAC under a key kept outside the
        # archive, so a writer of this file cannot append or rewrite an event that verifies;
        # append-only like the events
        """
        CREATE TABLE IF NOT EXISTS memory_seal (
          chain INTEGER NOT NULL,
          seq   INTEGER NOT NULL,
          seal  TEXT    NOT NULL,
          PRIMARY KEY (chain, seq)
        ) WITHOUT ROWID;
        CREATE TRIGGER IF NOT EXISTS memory_seal_no_update BEFORE UPDATE ON memory_seal
        BEGIN SELECT RAISE(ABORT, 'memory_seal is append-only'); END;
        CREATE TRIGGER IF NOT EXISTS memory_seal_no_delete BEFORE DELETE ON memory_seal
        BEGIN SELECT RAISE(ABORT, 'memory_seal is append-only'); END;
        """,
    )
)

MIGRATIONS.append(
    (
        "m014_edits",
        # edits as data (see provenance/): one row per change a tool call made, read off the archived
        # lines; what pi saw live beside it; an archive that holds messages already reads theirs
        # the first time provenance is asked for (`provenance.record.backfill`), not here
        """
        CREATE TABLE IF NOT EXISTS edit (
          id          INTEGER PRIMARY KEY,
          session_id  TEXT    NOT NULL,
          call_hash   TEXT    NOT NULL,  -- the assistant message that made the call (msg.hash)
          result_hash TEXT,              -- its tool result's
          call_id     TEXT    NOT NULL,
          part        INTEGER NOT NULL,  -- which change of the call (edits[] index, patch section)
          tool        TEXT    NOT NULL,
          kind        TEXT    NOT NULL,  -- write | edit | delete | move
          path        TEXT    NOT NULL,
          from_path   TEXT,              -- a move's old path
          ts          INTEGER NOT NULL,  -- when the tool ran (its result's time)
          old_hash    TEXT,
          new_hash    TEXT,
          old_lines   INTEGER NOT NULL DEFAULT 0,
          new_lines   INTEGER NOT NULL DEFAULT 0,
          line        INTEGER,           -- the first changed line, when the tool reported it
          UNIQUE (session_id, call_id, part)
        );
        CREATE INDEX IF NOT EXISTS edit_path ON edit(path, ts);
        CREATE INDEX IF NOT EXISTS edit_call ON edit(session_id, call_hash);

        CREATE TABLE IF NOT EXISTS edit_observed (
          session_id  TEXT    NOT NULL,
          call_id     TEXT    NOT NULL,
          path        TEXT    NOT NULL,
          before_hash TEXT,
          after_hash  TEXT,
          git_commit  TEXT,
          observed_at INTEGER NOT NULL,
          before_text BLOB,
          PRIMARY KEY (session_id, call_id, path)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS edit_observed_path ON edit_observed(path, observed_at);

        CREATE TABLE IF NOT EXISTS provenance_state (
          name  TEXT PRIMARY KEY,
          value INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT OR IGNORE INTO provenance_state VALUES ('backfilled', NOT EXISTS (SELECT 1 FROM msg));
        """,
    )
)

# Migrations with a data step: `Store.migrate` runs their SQL, then the named `Store` method in
# short transactions (a live writer never waits long), then the version bump. Both the SQL and
# the step are idempotent, so an interrupted upgrade simply runs them again.
MIGRATIONS.append(
    (
        "m015_typed_targets",
        # the data step: `msg_typed` of the messages written in a script that folds to another
        # gains the characters they hold that others fold to (`text.typed_targets`), so a character
        # typed in the folded script finds the one such text that holds it as typed
        "",
    )
)

MIGRATIONS.append(
    (
        "m016_vectors",
        # semantic recall (`vectors/`, the `semantic` extra): one embedding per unit a question is
        # answered from (a user message, a reply that calls no tool, a run summary, a memory), int8
        # with its scale, under the model that made it; written by `pi-memory embed` or at idle, never
        # on the import or live-write path. `sess` is the unit's session as a small number
        # (`vec_session`), so the scan index can filter by project without a join.
        """
        CREATE TABLE IF NOT EXISTS vec (
          id    INTEGER PRIMARY KEY,  -- the scan index's key
          kind  INTEGER NOT NULL,     -- 1 message, 2 run summary, 3 memory
          ref   INTEGER NOT NULL,     -- msg.id, run.id; a memory: its text's hash as a number
          sess  INTEGER NOT NULL,     -- vec_session.ord (0: none)
          ts    INTEGER NOT NULL,     -- the unit's time (unix ms)
          role  INTEGER NOT NULL,     -- 1 user, 2 assistant, 0 other
          hash  TEXT    NOT NULL,     -- of the text embedded, as cut: a changed text is embedded again
          model TEXT    NOT NULL,     -- `vectors.model.model_id()`: another model's rows are embedded again
          vec   BLOB    NOT NULL,     -- int8 x dim
          scale REAL    NOT NULL,     -- vec * scale ~ the unit-length embedding
          UNIQUE (kind, ref)
        );
        CREATE TABLE IF NOT EXISTS vec_session (
          ord        INTEGER PRIMARY KEY,
          session_id TEXT    NOT NULL UNIQUE
        );
        INSERT OR IGNORE INTO counter VALUES ('vec_generation', 0);
        """,
    )
)

MIGRATIONS.append(
    (
        "m017_session_cwd",
        # A project filter is `s.project = ? OR s.cwd = ?` (`runs.table.run_filters`): with only
        # `project` indexed, SQLite read every run to apply it (the hybrid summary track's allowed
        # runs in one project of 3,481: 31 ms of its 38 ms p95, bench/summary_quality.py); with both
        # indexed it starts from the project's few sessions
        """
        CREATE INDEX IF NOT EXISTS session_cwd ON session(cwd);
        """,
    )
)

DATA_STEPS: dict[str, str] = {
    "m007_surface_chars": "index_surface_chars",
    "m011_echo_marks": "mark_archived_echoes",
    "m012_usage": "backfill_usage",
    "m015_typed_targets": "index_typed_targets",
}

SCHEMA_VERSION = len(MIGRATIONS)

# The full-text indexes of a new archive keep no column lists (`detail = 'none'`): half the bytes
# of `detail = 'column'` (~0.75 instead of ~1.45 KB per message on bench/import_bench.py's mix) and
# less work per insert. Nothing needs them: which channel holds a token follows from its shape (one
# CJK character: `chars`, two: `grams`, a word: both, a part of an identifier: `chars`), so queries
# carry no column filter (`text.QueryToken.fts`), and the per-column token counts that give a
# message's length (`store.LENGTH_CHANNEL`) are kept either way (`columnsize`). Applied with the last
# migration (a plain one: see `Store.migrate`) to an archive that holds no message and no run yet;
# an older archive keeps its indexes,
# which answer every query with the same rows (rebuilding them means tokenizing every message again).
# Their segments are merged two at a time (`automerge = 2`, FTS5's default is 4): fewer, larger
# segments, ~55 bytes per message less on the 625-char mix (msg_fts 701 -> 645, `dbstat`), the
# same hits and no slower searches (fewer segments to read); the importer spends ~3% more CPU on
# short sessions merging (bench/results/import.json, import-rerun.json).
COMPACT_FTS = """
DROP TABLE msg_fts;
CREATE VIRTUAL TABLE msg_fts USING fts5(
  chars, grams,
  content = '',
  contentless_delete = 1,
  tokenize = "ascii tokenchars '_'",
  detail = 'none'
);
DROP TABLE run_fts;
CREATE VIRTUAL TABLE run_fts USING fts5(
  chars, grams,
  content = '',
  contentless_delete = 1,
  tokenize = "ascii tokenchars '_'",
  detail = 'none'
);
INSERT INTO msg_fts(msg_fts, rank) VALUES ('automerge', 2);
INSERT INTO run_fts(run_fts, rank) VALUES ('automerge', 2);
INSERT INTO msg_typed(msg_typed, rank) VALUES ('automerge', 2);
"""
