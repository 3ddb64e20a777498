"""The team archive's PostgreSQL schema: an append-only list of migrations.

Each migration runs in one transaction together with its row in
`schema_version`, under an advisory lock, so concurrent first opens apply it
once. Shipped migrations are never edited: a change is a new one at the end.

The tables mirror the SQLite archive (`schema.py`), with three differences:
- Tokens live in one `tokens tsvector` column (the distinct tokens of both
  channels, made with `array_to_tsvector`, no positions, no dictionary) with a
  GIN index. The SQLite index keeps two channels, but every token's text already
  says its kind (one CJK character, a CJK bigram, a word), and words sit in both
  channels, so one set answers exactly what the two columns answer. A tsvector,
  unlike a `text[]` with `@>`, is matched without rechecking (detoasting) the row.
- Every row says who wrote it: `written_by` is the database role, set by a
  trigger from `current_user` (a client cannot claim another role), `author` a
  display name (`PI_MEMORY_USER`, default the role) and `host` the machine.
- Row-level security: anyone with SELECT reads everything; a row can be
  updated or deleted only by the role that wrote it, or by a member of
  `pi_memory_admin` (superusers and BYPASSRLS roles bypass the policies).
  The owner of the tables bypasses them too: run the team's writers as
  separate roles (see `roles.sql`).
"""

from __future__ import annotations

from ...core.echo import ARCHIVE_TOOLS, ECHO_TOKEN
from ...core.fold_table import SIMPLIFIED_ONLY, TRADITIONAL

ADMIN_ROLE = "pi_memory_admin"

IS_WRITER_OR_ADMIN = f"""(written_by = current_user OR EXISTS (
    SELECT 1 FROM pg_roles r WHERE r.rolname = '{ADMIN_ROLE}' AND pg_has_role(current_user, r.oid, 'MEMBER')))"""


def _owned_table_policies(table: str) -> str:
    return f"""
        ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
        CREATE POLICY {table}_read ON {table} FOR SELECT USING (true);
        CREATE POLICY {table}_insert ON {table} FOR INSERT WITH CHECK (written_by = current_user);
        CREATE POLICY {table}_update ON {table} FOR UPDATE USING {IS_WRITER_OR_ADMIN};
        CREATE POLICY {table}_delete ON {table} FOR DELETE USING {IS_WRITER_OR_ADMIN};
        CREATE TRIGGER {table}_identity BEFORE INSERT ON {table}
          FOR EACH ROW EXECUTE FUNCTION pi_memory_identity();
    """


MIGRATIONS: list[tuple[str, str]] = [
    (
        "m001_team_archive",
        """
        CREATE FUNCTION pi_memory_identity() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          NEW.written_by := current_user;
          NEW.author := coalesce(nullif(NEW.author, ''), current_user);
          RETURN NEW;
        END $$;

        CREATE TABLE session (
          id             text PRIMARY KEY,
          agent          text NOT NULL DEFAULT 'pi',
          cwd            text NOT NULL DEFAULT '',
          project        text NOT NULL DEFAULT '',
          started_at     bigint NOT NULL,
          last_at        bigint NOT NULL,
          name           text,
          parent_session text,
          source_path    text,
          first_user     text,
          written_by     text NOT NULL DEFAULT current_user,
          author         text NOT NULL DEFAULT current_user,
          host           text NOT NULL DEFAULT ''
        );
        CREATE INDEX session_project ON session(project);

        CREATE TABLE msg (
          id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          session_id text    NOT NULL REFERENCES session(id) ON DELETE CASCADE,
          seq        integer NOT NULL,
          ts         bigint  NOT NULL,
          role       text    NOT NULL,
          text       text    NOT NULL,
          nchars     integer NOT NULL,
          indexed    boolean NOT NULL,
          entry_id   text,
          parent_id  text,
          meta       text,
          hash       text    NOT NULL,
          tokens     tsvector NOT NULL DEFAULT '',
          written_by text    NOT NULL DEFAULT current_user,
          author     text    NOT NULL DEFAULT current_user,
          host       text    NOT NULL DEFAULT '',
          UNIQUE (session_id, hash)
        );
        CREATE INDEX msg_session_order ON msg(session_id, ts, seq);
        CREATE INDEX msg_entry ON msg(entry_id) WHERE entry_id IS NOT NULL;
        -- no pending list: a query never scans unsorted recent entries (m011 turns it on: imports)
        CREATE INDEX msg_tokens ON msg USING gin(tokens) WITH (fastupdate = off);
        -- ANALYZE keeps the ~10,000 most common tokens and their frequencies: the document
        -- frequencies of common tokens are read from there instead of counted (pg/search.py)
        ALTER TABLE msg ALTER COLUMN tokens SET STATISTICS 1000;
        CREATE INDEX msg_writer ON msg(written_by);

        CREATE TABLE entry (
          id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          session_id text   NOT NULL REFERENCES session(id) ON DELETE CASCADE,
          entry_key  text   NOT NULL,
          entry_id   text,
          type       text   NOT NULL,
          ts         bigint NOT NULL,
          msg_id     bigint REFERENCES msg(id) ON DELETE CASCADE,
          raw        bytea  NOT NULL,
          written_by text   NOT NULL DEFAULT current_user,
          author     text   NOT NULL DEFAULT current_user,
          host       text   NOT NULL DEFAULT '',
          UNIQUE (session_id, entry_key)
        );
        CREATE INDEX entry_msg ON entry(msg_id) WHERE msg_id IS NOT NULL;

        -- per machine: the same path on two laptops is two files
        CREATE TABLE source_file (
          host        text   NOT NULL,
          path        text   NOT NULL,
          session_id  text,
          size        bigint NOT NULL,
          mtime_ns    bigint NOT NULL,
          imported_at bigint NOT NULL,
          written_by  text   NOT NULL DEFAULT current_user,
          author      text   NOT NULL DEFAULT current_user,
          PRIMARY KEY (host, path)
        );

        -- one row, updated last in each write transaction (row lock held only until commit)
        CREATE TABLE counter (
          only_row      boolean PRIMARY KEY DEFAULT true CHECK (only_row),
          indexed_docs  bigint NOT NULL DEFAULT 0,
          indexed_chars bigint NOT NULL DEFAULT 0
        );
        INSERT INTO counter DEFAULT VALUES;
        """
        + _owned_table_policies("session")
        + _owned_table_policies("msg")
        + _owned_table_policies("entry")
        + _owned_table_policies("source_file"),
    ),
]


def _append_only(table: str) -> str:
    return f"""
        CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
          FOR EACH ROW EXECUTE FUNCTION pi_memory_refuse_change();
        CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
          FOR EACH STATEMENT EXECUTE FUNCTION pi_memory_refuse_change();
        CREATE TRIGGER {table}_identity BEFORE INSERT ON {table}
          FOR EACH ROW EXECUTE FUNCTION pi_memory_identity();
    """


# The memory log (see `pi_memory.memory`): one hash chain per workspace, the newest chain of a
# workspace is its active one; rows are only ever added (the triggers refuse UPDATE, DELETE and
# TRUNCATE, for the owner too). Appends to one workspace are serialized by
# `pg_advisory_xact_lock(hashtext(workspace))`; the primary key (chain, seq) is the last guard.
MIGRATIONS.append(
    (
        "m002_memory_log",
        """
        CREATE FUNCTION pi_memory_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
        END $$;

        CREATE TABLE memory_chain (
          id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          workspace  text   NOT NULL,
          created_at bigint NOT NULL,
          note       text   NOT NULL DEFAULT '',
          written_by text   NOT NULL DEFAULT current_user,
          author     text   NOT NULL DEFAULT current_user,
          host       text   NOT NULL DEFAULT ''
        );
        CREATE INDEX memory_chain_workspace ON memory_chain(workspace, id);

        CREATE TABLE memory_event (
          chain      bigint  NOT NULL REFERENCES memory_chain(id),
          seq        integer NOT NULL,
          prev_hash  text    NOT NULL,
          hash       text    NOT NULL,
          event      text    NOT NULL,
          written_by text    NOT NULL DEFAULT current_user,
          author     text    NOT NULL DEFAULT current_user,
          host       text    NOT NULL DEFAULT '',
          PRIMARY KEY (chain, seq)
        );
        """
        + _append_only("memory_chain")
        + _append_only("memory_event"),
    )
)

# Runs, their navigation summaries and files (see `pi_memory.runs`), the compaction windows of
# pi sessions (`pi_memory.compact.window`), tombstones, and what `watch` keeps, as in the SQLite
# migrations m003-m005. A run's summary tokens are a tsvector column of its own row (the SQLite
# archive keeps them in the `run_fts` index). As there, a run's line is kept once, in its
# `fields` ("line"): `summary` is written empty (rows from before keep their text). Runs are
# derived: they are written by whoever wrote the session's messages, so the same owner policies
# apply. Watch offsets are per host, like the rest of `source_file`.
MIGRATIONS.append(
    (
        "m003_runs_and_windows",
        """
        -- who wrote a row comes from the connection: the role, and the display name and host the
        -- client set for its session (PgStore.connect), so no INSERT has to name them
        CREATE OR REPLACE FUNCTION pi_memory_identity() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          NEW.written_by := current_user;
          -- the column default is current_user: a row that names no author gets the session's
          IF coalesce(NEW.author, '') IN ('', current_user) THEN
            NEW.author := coalesce(nullif(current_setting('pi_memory.author', true), ''), current_user);
          END IF;
          NEW.host := coalesce(nullif(NEW.host, ''), current_setting('pi_memory.host', true), '');
          RETURN NEW;
        END $$;

        ALTER TABLE session ADD COLUMN source_missing integer NOT NULL DEFAULT 0;
        -- where `watch` stopped reading a file of this host (see tail.py)
        ALTER TABLE source_file ADD COLUMN read_offset bigint NOT NULL DEFAULT 0,
                                ADD COLUMN line_no bigint NOT NULL DEFAULT 0,
                                ADD COLUMN inode bigint,
                                ADD COLUMN head_hash text,
                                ADD COLUMN agent text;

        -- tombstones of what was forgotten (see forget.py): a re-import or push does not bring it back
        CREATE TABLE forgotten (
          session_id   text   NOT NULL,
          hash         text   NOT NULL,
          forgotten_at bigint NOT NULL,
          written_by   text   NOT NULL DEFAULT current_user,
          author       text   NOT NULL DEFAULT current_user,
          host         text   NOT NULL DEFAULT '',
          PRIMARY KEY (session_id, hash)
        );
        CREATE INDEX forgotten_hash ON forgotten(hash);
        ALTER TABLE counter ADD COLUMN run_docs bigint NOT NULL DEFAULT 0,
                            ADD COLUMN run_chars bigint NOT NULL DEFAULT 0;

        CREATE TABLE run (
          id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          session_id    text    NOT NULL REFERENCES session(id) ON DELETE CASCADE,
          first_msg     bigint  NOT NULL,
          start_ts      bigint  NOT NULL,
          end_ts        bigint  NOT NULL,
          status        text    NOT NULL,
          n_msgs        integer NOT NULL,
          tool_calls    integer NOT NULL,
          tool_errors   integer NOT NULL,
          summary       text    NOT NULL,
          fields        text    NOT NULL,
          indexed_chars integer NOT NULL DEFAULT -1,
          tokens        tsvector NOT NULL DEFAULT '',
          written_by    text    NOT NULL DEFAULT current_user,
          author        text    NOT NULL DEFAULT current_user,
          host          text    NOT NULL DEFAULT '',
          UNIQUE (session_id, first_msg)
        );
        CREATE INDEX run_start ON run(start_ts);
        CREATE INDEX run_tokens ON run USING gin(tokens) WITH (fastupdate = off);
        -- as for messages: ANALYZE keeps the common tokens' frequencies, read instead of counted
        ALTER TABLE run ALTER COLUMN tokens SET STATISTICS 1000;

        CREATE TABLE run_msg (
          msg_id     bigint  PRIMARY KEY REFERENCES msg(id) ON DELETE CASCADE,
          run_id     bigint  NOT NULL REFERENCES run(id) ON DELETE CASCADE,
          pos        integer NOT NULL,
          written_by text    NOT NULL DEFAULT current_user,
          author     text    NOT NULL DEFAULT current_user,
          host       text    NOT NULL DEFAULT ''
        );
        CREATE INDEX run_msg_run ON run_msg(run_id, pos);

        CREATE TABLE run_file (
          path       text   NOT NULL,
          run_id     bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
          msg_id     bigint NOT NULL,
          action     text   NOT NULL,
          written_by text   NOT NULL DEFAULT current_user,
          author     text   NOT NULL DEFAULT current_user,
          host       text   NOT NULL DEFAULT '',
          PRIMARY KEY (path, msg_id, action)
        );
        CREATE INDEX run_file_run ON run_file(run_id);

        CREATE TABLE compact_window (
          session_id          text    NOT NULL,
          seq                 integer NOT NULL,
          window_id           text    NOT NULL UNIQUE,
          compaction_entry_id text    NOT NULL,
          parent_window_id    text,
          kept_entry_id       text    NOT NULL,
          source_count        integer,
          source_hash         text,
          prev_hash           text,
          hash                text    NOT NULL,
          recorded_at         bigint  NOT NULL,
          compactor           text,
          reason              text,
          plan_ms             double precision,
          checkpoint_chars    integer,
          tokens_before       integer,
          derived_count       integer NOT NULL DEFAULT 0,
          written_by          text    NOT NULL DEFAULT current_user,
          author              text    NOT NULL DEFAULT current_user,
          host                text    NOT NULL DEFAULT '',
          PRIMARY KEY (session_id, seq),
          UNIQUE (session_id, compaction_entry_id)
        );
        CREATE FUNCTION pi_memory_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME;
        END $$;
        CREATE TRIGGER compact_window_immutable BEFORE UPDATE ON compact_window
          FOR EACH ROW EXECUTE FUNCTION pi_memory_refuse_update();
        """
        + _owned_table_policies("run")
        + _owned_table_policies("run_msg")
        + _owned_table_policies("run_file")
        + _owned_table_policies("compact_window")
        + _owned_table_policies("forgotten"),
    )
)

# `pi-memory review link`: which memory addresses which review finding (SQLite m006_review_links)
MIGRATIONS.append(
    (
        "m004_review_links",
        """
        CREATE TABLE review_link (
          workspace  text   NOT NULL,
          memory_id  text   NOT NULL,
          key        text   NOT NULL,
          signature  text   NOT NULL DEFAULT '',
          created_at bigint NOT NULL,
          written_by text   NOT NULL DEFAULT current_user,
          author     text   NOT NULL DEFAULT current_user,
          host       text   NOT NULL DEFAULT '',
          PRIMARY KEY (workspace, memory_id, key)
        );
        """
        + _owned_table_policies("review_link"),
    )
)

# Characters typed in a script that folds to another are lexemes as typed too, `t:構` (SQLite
# m007_surface_chars, `store.TYPED_PREFIX`): new rows get them on insert, this adds them to older rows.
_FOLDABLE_CLASS = "[" + TRADITIONAL + "]"
MIGRATIONS.append(
    (
        "m005_surface_chars",
        f"""
        UPDATE msg SET tokens = tokens || array_to_tsvector(ARRAY(
            SELECT DISTINCT 't:' || found[1] FROM regexp_matches(text, '{_FOLDABLE_CLASS}', 'g') AS found))
        WHERE indexed AND text ~ '{_FOLDABLE_CLASS}';
        """,
    )
)

# `msg.echo` (SQLite m010/m011, `core.echo`): the archive's own output, whose tokens carry the echo
# lexeme a search excludes. Older rows are judged here in SQL as `core.echo.session_echoes` judges
# them: a call to an archive tool (also as `mcp__<server>__<tool>`) or its result, and every user,
# assistant and tool message of a run (from a user message to the next) whose calls all went there.
_ARCHIVE_TOOLS = ", ".join(f"'{name}'" for name in sorted(ARCHIVE_TOOLS))


def _tools_of(meta: str, fallback: str) -> str:
    """The elements of `meta`'s tools array (else of the one-element array `fallback`), as archive-or-not."""
    tools = f"""CASE WHEN jsonb_typeof({meta} -> 'tools') = 'array' THEN {meta} -> 'tools' ELSE {fallback} END"""
    return f"""(SELECT regexp_replace(coalesce(t.name, ''), '^mcp__.*?__', '') IN ({_ARCHIVE_TOOLS}) AS archive
               FROM jsonb_array_elements_text({tools}) AS t(name))"""


_MENTIONS = " OR ".join(f"strpos(meta, '{name}') > 0" for name in sorted(ARCHIVE_TOOLS))
MIGRATIONS.append(
    (
        "m006_echo",
        "ALTER TABLE msg ADD COLUMN echo smallint NOT NULL DEFAULT 0;",
    )
)
MIGRATIONS.append(
    (
        "m007_echo_marks",
        f"""
        WITH calls AS (
          SELECT m.id, m.session_id, m.ts, m.seq, m.role,
                 m.role = 'assistant' AND coalesce((SELECT bool_or(archive)
                   FROM {_tools_of("m.meta::jsonb", "'[]'::jsonb")} a), false) AS asks,
                 m.role = 'assistant' AND coalesce((SELECT bool_or(NOT archive)
                   FROM {_tools_of("m.meta::jsonb", "'[]'::jsonb")} a), false) AS works,
                 m.role IN ('tool_result', 'tool_error') AND coalesce((SELECT bool_and(archive)
                   FROM {_tools_of("m.meta::jsonb", "jsonb_build_array(m.meta::jsonb -> 'tool')")} a), false) AS answer
          FROM msg m
          WHERE m.session_id IN (SELECT DISTINCT session_id FROM msg WHERE meta IS NOT NULL AND ({_MENTIONS}))
        ), numbered AS (
          SELECT c.*, count(*) FILTER (WHERE c.role = 'user') OVER (PARTITION BY c.session_id ORDER BY c.ts, c.seq)
                        AS run_no
          FROM calls c
        ), runs AS (
          SELECT session_id, run_no, bool_or(asks) AS asked, bool_or(works) AS worked
          FROM numbered GROUP BY session_id, run_no
        ), judged AS (
          SELECT n.id FROM numbered n JOIN runs r ON r.session_id = n.session_id AND r.run_no = n.run_no
          WHERE n.asks OR n.answer
             OR (r.asked AND NOT r.worked AND n.role IN ('user', 'assistant', 'tool_result', 'tool_error'))
        )
        UPDATE msg SET echo = 1,
                       tokens = CASE WHEN msg.indexed THEN msg.tokens || array_to_tsvector(ARRAY['{ECHO_TOKEN}'])
                                     ELSE msg.tokens END
        FROM judged WHERE msg.id = judged.id;
        """,
    )
)
# Usage and cost per model request, their quarter-hour sums, and the context ledger's own events
# (SQLite m012_usage). Rows carry who wrote them like every table; the requests of sessions archived
# before are filled by `PgStore.migrate` after it (`UsageStore.backfill_usage`, from the verbatim lines).
MIGRATIONS.append(
    (
        "m008_usage",
        """
        CREATE TABLE usage (
          key         text    PRIMARY KEY,
          session_id  text    NOT NULL REFERENCES session(id) ON DELETE CASCADE,
          ts          bigint  NOT NULL,
          provider    text    NOT NULL,
          model       text    NOT NULL,
          input       bigint  NOT NULL,
          output      bigint  NOT NULL,
          cache_read  bigint  NOT NULL,
          cache_write bigint  NOT NULL,
          reasoning   bigint  NOT NULL DEFAULT 0,
          cost        double precision,
          cost_source text,
          priced_at   bigint,
          written_by  text    NOT NULL DEFAULT current_user,
          author      text    NOT NULL DEFAULT current_user,
          host        text    NOT NULL DEFAULT ''
        );
        CREATE INDEX usage_session ON usage(session_id, ts);
        CREATE TABLE usage_sum (
          bucket      bigint  NOT NULL,
          session_id  text    NOT NULL REFERENCES session(id) ON DELETE CASCADE,
          provider    text    NOT NULL,
          model       text    NOT NULL,
          requests    bigint  NOT NULL,
          input       bigint  NOT NULL,
          output      bigint  NOT NULL,
          cache_read  bigint  NOT NULL,
          cache_write bigint  NOT NULL,
          cost        double precision NOT NULL,
          unpriced    bigint  NOT NULL,
          written_by  text    NOT NULL DEFAULT current_user,
          author      text    NOT NULL DEFAULT current_user,
          host        text    NOT NULL DEFAULT '',
          PRIMARY KEY (bucket, session_id, provider, model)
        );
        CREATE INDEX usage_sum_session ON usage_sum(session_id);
        CREATE TABLE context_ledger (
          id          bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          session_id  text    NOT NULL,
          ts          bigint  NOT NULL,
          kind        text    NOT NULL,
          chars       bigint  NOT NULL,
          tokens      bigint  NOT NULL,
          detail      text,
          written_by  text    NOT NULL DEFAULT current_user,
          author      text    NOT NULL DEFAULT current_user,
          host        text    NOT NULL DEFAULT ''
        );
        CREATE INDEX context_ledger_session ON context_ledger(session_id, ts);
        """
        + _owned_table_policies("usage")
        + _owned_table_policies("usage_sum")
        + _owned_table_policies("context_ledger"),
    )
)

# Edits as data (SQLite m014_edits, see `pi_memory.provenance`): derived from the archived lines by
# whoever wrote the messages, so the owner policies apply; `provenance_state` holds archive-wide
# flags (no owner: any writer may set them, like the counter row).
MIGRATIONS.append(
    (
        "m009_edits",
        """
        CREATE TABLE edit (
          id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          session_id  text    NOT NULL,  -- no foreign key: a file's edits are written before its messages
          call_hash   text    NOT NULL,
          result_hash text,
          call_id     text    NOT NULL,
          part        integer NOT NULL,
          tool        text    NOT NULL,
          kind        text    NOT NULL,
          path        text    NOT NULL,
          from_path   text,
          ts          bigint  NOT NULL,
          old_hash    text,
          new_hash    text,
          old_lines   integer NOT NULL DEFAULT 0,
          new_lines   integer NOT NULL DEFAULT 0,
          line        integer,
          written_by  text    NOT NULL DEFAULT current_user,
          author      text    NOT NULL DEFAULT current_user,
          host        text    NOT NULL DEFAULT '',
          UNIQUE (session_id, call_id, part)
        );
        CREATE INDEX edit_path ON edit(path, ts);
        CREATE INDEX edit_call ON edit(session_id, call_hash);

        CREATE TABLE edit_observed (
          session_id  text   NOT NULL,
          call_id     text   NOT NULL,
          path        text   NOT NULL,
          before_hash text,
          after_hash  text,
          git_commit  text,
          observed_at bigint NOT NULL,
          before_text bytea,
          written_by  text   NOT NULL DEFAULT current_user,
          author      text   NOT NULL DEFAULT current_user,
          host        text   NOT NULL DEFAULT '',
          PRIMARY KEY (session_id, call_id, path)
        );
        CREATE INDEX edit_observed_path ON edit_observed(path, observed_at);

        CREATE TABLE provenance_state (
          name  text PRIMARY KEY,
          value bigint NOT NULL
        );
        INSERT INTO provenance_state VALUES ('backfilled', CASE WHEN EXISTS (SELECT 1 FROM msg) THEN 0 ELSE 1 END);
        """
        + _owned_table_policies("edit")
        + _owned_table_policies("edit_observed"),
    )
)

# The characters others fold to, as typed, for rows written in a script that folds to another
# (`text.typed_targets`, SQLite m015_typed_targets): `t:发` beside `t:發` in a traditional text.
_TARGET_CLASS = "[" + SIMPLIFIED_ONLY + "]"
MIGRATIONS.append(
    (
        "m010_typed_targets",
        f"""
        UPDATE msg SET tokens = tokens || array_to_tsvector(ARRAY(
            SELECT DISTINCT 't:' || found[1] FROM regexp_matches(text, '{_TARGET_CLASS}', 'g') AS found))
        WHERE indexed AND text ~ '{_FOLDABLE_CLASS}';
        """,
    )
)

# The token indexes keep a pending list (issue 43): with `fastupdate = off` every inserted row
# descended the GIN tree once per distinct token (~130 here: 1 ms a message, 10.6 s for 10,000
# rows); appended to the pending list and merged in sorted batches, the same rows cost 2.7-3.5 s.
# A query reads the pending list whole, so it stays short: `gin_pending_list_limit` (4 MB by
# default, ~1,000 messages) makes the insert that passes it merge the list, autovacuum merges it
# too, and a bulk writer merges it at its end through `pi_memory_flush_tokens()`, which runs as the
# tables' owner (`gin_clean_pending_list` asks for the index's owner) so any writer may call it.
MIGRATIONS.append(
    (
        "m011_token_pending_lists",
        """
        ALTER INDEX msg_tokens SET (fastupdate = on);
        ALTER INDEX run_tokens SET (fastupdate = on);
        DO $outer$ BEGIN
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_flush_tokens() RETURNS bigint LANGUAGE sql SECURITY DEFINER
              SET search_path = %I, pg_temp AS
            $body$ SELECT gin_clean_pending_list('msg_tokens'::regclass)
                        + gin_clean_pending_list('run_tokens'::regclass) $body$
          $fn$, current_schema());
        END $outer$;
        """,
    )
)

# A message's and a run summary's length for BM25 (`ranking.doc_tokens`: tokens in the `grams`
# channel), kept at write time as SQLite's FTS5 keeps it in its docsize: the searchers read it
# instead of counting the candidates' texts again (the summary track counted ~45 a query, and used
# no mean length at all). NULL on older rows, which are counted from their text as before.
MIGRATIONS.append(
    (
        "m012_token_counts",
        """
        ALTER TABLE msg ADD COLUMN ntokens integer;
        ALTER TABLE run ADD COLUMN ntokens integer;

        -- tokens kept in the row (compressed), not in the TOAST table: the plans that read a row's
        -- tokens (the recent track's walk back along the ids, a frequent token's count among the
        -- newest ids) decompress them in place instead of fetching their chunks (30k messages, a
        -- token in 87% of the newest 10,000: 26 -> 10 ms; the text goes out of line first). Rows
        -- written from now on.
        ALTER TABLE msg ALTER COLUMN tokens SET STORAGE MAIN;
        ALTER TABLE run ALTER COLUMN tokens SET STORAGE MAIN;
        """,
    )
)

# semantic recall's tables, as in the SQLite archive (m016_vectors): a team archive embeds nothing yet
# (no pgvector scan: search there stays lexical, and `status` says so), but `forget` deletes from them
# through the shared SQL, so they exist
MIGRATIONS.append(
    (
        "m013_vectors",
        """
        CREATE TABLE IF NOT EXISTS vec (
          id    bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          kind  integer NOT NULL,
          ref   bigint  NOT NULL,
          sess  integer NOT NULL,
          ts    bigint  NOT NULL,
          role  integer NOT NULL,
          hash  text    NOT NULL,
          model text    NOT NULL,
          vec   bytea   NOT NULL,
          scale real    NOT NULL,
          UNIQUE (kind, ref)
        );
        CREATE TABLE IF NOT EXISTS vec_session (
          ord        integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          session_id text    NOT NULL UNIQUE
        );
        """,
    )
)

# Semantic recall on a team archive, where the server offers pgvector (`pg_available_extensions`):
# each vector also as the extension's `vector` (the model's float vector, unit length) in `vec.emb`,
# beside the int8 copy the shared code rescores and counts, so a search asks the server for the
# nearest units (`vectors.pg`). pgvector is not a trusted extension: the owner creates it only as a
# superuser; otherwise an administrator does (`CREATE EXTENSION vector`), and `pi-memory embed` adds
# the column then (`PgVectors.enable_vectors`, the same block). A server without it: nothing here,
# and search stays lexical. The type is named with the extension's schema, which the archive's own
# `search_path` may not hold. 384: multilingual-e5-small's dimensions (`vectors.model.DIM`).
PGVECTOR_COLUMN = """
DO $$
DECLARE home text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
    RETURN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
    BEGIN
      CREATE EXTENSION vector;
    EXCEPTION WHEN insufficient_privilege THEN
      RETURN;
    END;
  END IF;
  SELECT n.nspname INTO home FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
  EXECUTE format('ALTER TABLE vec ADD COLUMN IF NOT EXISTS emb %I.vector(384)', home);
  -- messages' vectors for a search without filters (bench/pg_vector_scan.py, docs/semantic.md);
  -- pgvector before 0.5 has no HNSW: every search scans exactly then
  BEGIN
    EXECUTE format('CREATE INDEX IF NOT EXISTS vec_emb ON vec USING hnsw (emb %I.vector_cosine_ops) WHERE kind = 1', home);
  EXCEPTION WHEN undefined_object THEN
    NULL;
  END;
END $$;
"""
MIGRATIONS.append(("m014_pgvector", PGVECTOR_COLUMN))

# A project filter is `s.project = ? OR s.cwd = ?` (`runs.table.run_filters`), as in the SQLite
# archive (m017_session_cwd): both columns indexed, the filter starts from the project's sessions
MIGRATIONS.append(("m015_session_cwd", "CREATE INDEX IF NOT EXISTS session_cwd ON session(cwd);"))

# Document frequencies shared by every searcher of the archive (`PgStore.capped_counts`,
# `PgStore.estimate_dfs_from_window`, `PgStore.kept_dfs`) and the mean lengths BM25 divides by
# (`PgStore.mean_length`). A count costs a heap page per posting here (up to the 5,000 of the cap;
# docs/team-archive.md), a mean length 500 spread rows, and each process made them again: a CLI
# search is a fresh process every time. The server now keeps each with the archive's size when it
# was made, and a searcher takes it while the archive is within the staleness share of that size
# (the per-process rule, `core.ranking.DF_STALE_GROWTH`), so a token counted by anyone is not
# counted again. The table is a cache (UNLOGGED: lost in a crash, rebuilt by the next searches)
# written only by the functions below, which count for themselves: a client cannot store a number
# of its own (and `how`, the cap, window or sample a value was made with, is part of the key). A
# searcher that cannot get a key's advisory lock at once, or a read-only transaction (a standby),
# keeps nothing: a search never waits on another's cache write. `jit = off`: a search turns
# `enable_seqscan` off, which prices the one-row `counter` table's only plan past `jit_above_cost`,
# and compiling it took 5-80 ms a call (a kept count: 35 ms with JIT, 0.3 ms without).
MIGRATIONS.append(
    (
        "m016_shared_document_frequencies",
        """
        CREATE UNLOGGED TABLE IF NOT EXISTS token_df (
          tab     text    NOT NULL,
          how     text    NOT NULL,
          lexeme  text    NOT NULL,
          value   float8  NOT NULL,
          at_docs bigint  NOT NULL,
          PRIMARY KEY (tab, how, lexeme)
        );
        DO $outer$ BEGIN
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_docs(p_tab text) RETURNS bigint LANGUAGE sql STABLE
              SET search_path = %I, pg_temp SET jit = off AS
            $body$ SELECT CASE p_tab WHEN 'msg' THEN indexed_docs ELSE run_docs END FROM counter $body$
          $fn$, current_schema());
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_kept(p_tab text, p_how text, p_lexeme text, p_docs bigint, p_stale float8)
              RETURNS float8 LANGUAGE sql STABLE SET search_path = %I, pg_temp SET jit = off AS
            $body$ SELECT value FROM token_df WHERE tab = p_tab AND how = p_how AND lexeme = p_lexeme
                     AND abs(p_docs - at_docs) <= p_stale * greatest(at_docs, 1) $body$
          $fn$, current_schema());
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_keep(p_tab text, p_how text, p_lexeme text, p_value float8, p_docs bigint)
              RETURNS void LANGUAGE plpgsql SET search_path = %I, pg_temp SET jit = off AS
            $body$ BEGIN
              IF current_setting('transaction_read_only') = 'on'
                 OR NOT pg_try_advisory_xact_lock(hashtext('pi_memory.token_df'), hashtext(p_tab || p_how || p_lexeme)) THEN
                RETURN;
              END IF;
              INSERT INTO token_df VALUES (p_tab, p_how, p_lexeme, p_value, p_docs)
                ON CONFLICT (tab, how, lexeme) DO UPDATE SET value = EXCLUDED.value, at_docs = EXCLUDED.at_docs;
            END $body$
          $fn$, current_schema());
          -- each lexeme's kept document frequency as SQLite makes it (its count when within the cap,
          -- else its window estimate), NULL where nothing is kept: a search that finds them all
          -- counts nothing and reads no statistics
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_kept_dfs(p_tab text, p_lexemes text[], p_cap integer, p_window integer,
                                               p_floor bigint, p_stale float8)
              RETURNS bigint[] LANGUAGE sql STABLE SECURITY DEFINER SET search_path = %I, pg_temp SET jit = off AS
            $body$ SELECT coalesce(array_agg(CASE WHEN c.v <= p_cap THEN c.v ELSE w.v END ORDER BY u.k), '{}')::bigint[]
                   FROM (SELECT pi_memory_docs(p_tab)) d(docs)
                   CROSS JOIN unnest(p_lexemes) WITH ORDINALITY AS u(q, k)
                   CROSS JOIN LATERAL (SELECT pi_memory_kept(p_tab, 'count:' || p_cap, u.q, d.docs, p_stale)) c(v)
                   CROSS JOIN LATERAL (SELECT pi_memory_kept(p_tab, 'window:' || p_window || ':' || p_floor, u.q,
                                                             d.docs, p_stale)) w(v) $body$
          $fn$, current_schema());
          -- rows of p_tab holding each lexeme, counted up to p_cap + 1
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_capped_counts(p_tab text, p_lexemes text[], p_cap integer, p_stale float8)
              RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp SET jit = off AS
            $body$ DECLARE
              docs bigint := pi_memory_docs(p_tab);
              how text := 'count:' || p_cap;
              out bigint[] := '{}';
              q text;
              n bigint;
            BEGIN
              IF p_tab NOT IN ('msg', 'run') THEN RAISE EXCEPTION 'no token index on %%', p_tab; END IF;
              FOREACH q IN ARRAY p_lexemes LOOP
                n := pi_memory_kept(p_tab, how, q, docs, p_stale);
                IF n IS NULL THEN
                  EXECUTE format('SELECT count(*) FROM (SELECT FROM %%I WHERE tokens @@ $1::tsquery LIMIT $2) c', p_tab)
                    INTO n USING q, p_cap + 1;
                  PERFORM pi_memory_keep(p_tab, how, q, n, docs);
                END IF;
                out := out || n;
              END LOOP;
              RETURN out;
            END $body$
          $fn$, current_schema());
          -- a frequent lexeme's rows: its density among the newest p_window ids, scaled to the
          -- archive, at least p_floor (SQLite's `Searcher._estimate_df`); one walk for all of them
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_window_dfs(p_tab text, p_lexemes text[], p_window integer, p_floor bigint, p_stale float8)
              RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp SET jit = off AS
            $body$ DECLARE
              docs bigint := pi_memory_docs(p_tab);
              how text := 'window:' || p_window || ':' || p_floor;
              top bigint;
              low bigint;
              in_window bigint;
              out bigint[] := '{}';
              missing text[] := '{}';
              counts bigint[];
              q text;
              n bigint;
              k integer := 0;
            BEGIN
              IF p_tab NOT IN ('msg', 'run') THEN RAISE EXCEPTION 'no token index on %%', p_tab; END IF;
              FOREACH q IN ARRAY p_lexemes LOOP
                n := pi_memory_kept(p_tab, how, q, docs, p_stale);
                out := out || n;
                IF n IS NULL THEN missing := missing || q; END IF;
              END LOOP;
              IF cardinality(missing) = 0 THEN RETURN out; END IF;
              EXECUTE format('SELECT coalesce(max(id), 0) FROM %%I', p_tab) INTO top;
              low := greatest(0, top - p_window);
              EXECUTE format('SELECT ARRAY[%%s]::bigint[] FROM %%I WHERE id > $1',
                (SELECT string_agg(format('count(*) FILTER (WHERE tokens @@ %%L::tsquery)', m), ', ') FROM unnest(missing) m),
                p_tab) INTO counts USING low;
              in_window := greatest(1, trunc(docs::float8 * (top - low) / greatest(top, 1)));
              FOR i IN 1 .. cardinality(out) LOOP
                IF out[i] IS NULL THEN
                  k := k + 1;
                  n := greatest(p_floor, least(docs, trunc(docs::float8 * counts[k] / in_window)));
                  out[i] := n;
                  PERFORM pi_memory_keep(p_tab, how, p_lexemes[i], n, docs);
                END IF;
              END LOOP;
              RETURN out;
            END $body$
          $fn$, current_schema());
          -- the mean length (`ntokens`) of p_n rows spread evenly over the ids, as the searchers
          -- sample it (`Searcher._sampled_length`: indexed messages, the newest p_n when fewer than a
          -- quarter of the spread ids are left; `run_token_sample`: runs with a summary); NULL when a
          -- sampled message has no kept length (a row older than m012: the client counts its text)
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_mean_length(p_tab text, p_n integer, p_stale float8)
              RETURNS float8 LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp SET jit = off AS
            $body$ DECLARE
              docs bigint := pi_memory_docs(p_tab);
              how text := 'mean:' || p_n;
              kept float8 := pi_memory_kept(p_tab, how, '', docs, p_stale);
              low bigint;
              high bigint;
              step float8;
              wanted bigint[];
              ids bigint[];
              n bigint;
              lengths bigint;
              total bigint;
              mean float8;
            BEGIN
              IF p_tab NOT IN ('msg', 'run') THEN RAISE EXCEPTION 'no token index on %%', p_tab; END IF;
              IF kept IS NOT NULL THEN RETURN kept; END IF;
              IF p_tab = 'msg' THEN
                SELECT coalesce(min(id), 0), coalesce(max(id), 0) INTO low, high FROM msg;
              ELSE
                SELECT coalesce(min(id), 0), coalesce(max(id), 0) INTO low, high FROM run WHERE ntokens IS NOT NULL;
              END IF;
              step := greatest(1.0, (high - low + 1)::float8 / greatest(p_n, 1));
              SELECT array_agg(DISTINCT least(high, low + trunc(k * step)::bigint)) INTO wanted
                FROM generate_series(0, p_n - 1) k;
              IF p_tab = 'msg' THEN
                SELECT array_agg(id) INTO ids FROM msg WHERE id = ANY(wanted) AND indexed;
                IF coalesce(cardinality(ids), 0) < p_n / 4 THEN
                  SELECT array_agg(id) INTO ids FROM (SELECT id FROM msg WHERE indexed ORDER BY id DESC LIMIT p_n) x;
                END IF;
                SELECT count(*), count(ntokens), sum(ntokens) INTO n, lengths, total FROM msg WHERE id = ANY(ids);
                IF lengths < n THEN RETURN NULL; END IF;
                mean := CASE WHEN n = 0 THEN 1.0 ELSE total::float8 / n END;
              ELSE
                SELECT count(*), sum(ntokens) INTO n, total FROM run WHERE id = ANY(wanted) AND ntokens IS NOT NULL;
                mean := CASE WHEN n = 0 THEN 0.0 ELSE total::float8 / n END;
              END IF;
              PERFORM pi_memory_keep(p_tab, how, '', mean, docs);
              RETURN mean;
            END $body$
          $fn$, current_schema());
        END $outer$;
        """,
    )
)

# A run that only asked the archive (`core.echo`: its summary's tokens carry the echo lexeme) as a
# column the server keeps from the tokens, as `msg.echo` is kept: the summary track leaves echoes out
# by it, and each term stays one positive GIN term. A `!` in the tsquery made every match a recheck
# (the run's tokens read and decompressed): the summary track's statements of the bench's 24
# queries, 300k messages, warm: 272 -> 145 ms in all.
MIGRATIONS.append(
    (
        "m017_run_echo",
        "ALTER TABLE run ADD COLUMN IF NOT EXISTS echo boolean "
        f"GENERATED ALWAYS AS (tokens @@ $q$'{ECHO_TOKEN}'$q$::tsquery) STORED;",
    )
)

# Every message's words counted once, then kept up to date from the rows added since
# (docs/team-archive.md, "Every count kept, up to a mark"). A document frequency is a heap page per
# posting on this server (up to the 5,000 of the cap), so counting a word nobody asked about before
# was half of a long-lived searcher's time on realistic questions; m016 kept a count only until the
# archive grew 2%. Now a count is kept with the newest message id it covers (`at_id`) and the
# generation of the archive's tokens (`counter.token_generation`), and brought up to date by counting
# only the rows after `at_id`: a walk along the newest ids, or the word's postings past `at_id`.
# That is exact because
# - a writer takes the counter row's lock before its messages get their ids and holds it until it
#   commits (`PgWrites._write_txn`): ids are given in commit order, so every row up to the newest
#   id a statement sees is committed and visible to every later statement;
# - a message's tokens never change once written, but for the echo lexeme (never kept); a delete
#   (`forget`) or any other change of its tokens moves the generation (triggers below), and a count
#   of another generation is no count.
# `pi_memory_count_words` (a bridge or `watch` at idle, on a connection of its own) counts every word
# of the rows up to a mark in one statement and moves the mark on later: a word with no kept count
# then has none in the rows up to the mark. Counts it makes follow the mark (`at_id` NULL); a
# search that brings one up to date keeps its own `at_id`. Searches never wait for it: while it
# runs they keep nothing (its advisory lock), and it never starts while one is keeping.
MSG_COUNT_WALK = 10_000  # a kept count behind by at most this many ids is brought up in one walk
QUOTED_LEXEME = "'''' || replace(replace(l, E'\\\\', E'\\\\\\\\'), '''', '''''') || ''''"  # `sql.tsquery`'s text
MIGRATIONS.append(
    (
        "m018_counts_up_to_a_mark",
        f"""
        ALTER TABLE counter ADD COLUMN IF NOT EXISTS token_generation bigint NOT NULL DEFAULT 0;
        TRUNCATE token_df;
        ALTER TABLE token_df ADD COLUMN IF NOT EXISTS at_id bigint, ADD COLUMN IF NOT EXISTS gen bigint;
        -- m016's counting and keeping, kept for run summaries under other names; the names serve both
        -- tables again (below)
        ALTER FUNCTION pi_memory_capped_counts(text, text[], integer, float8) RENAME TO pi_memory_capped_counts_by_size;
        ALTER FUNCTION pi_memory_kept_dfs(text, text[], integer, integer, bigint, float8) RENAME TO pi_memory_kept_dfs_by_size;
        ALTER FUNCTION pi_memory_keep(text, text, text, float8, bigint) RENAME TO pi_memory_keep_entry;
        DO $outer$ BEGIN
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_tokens_changed() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
              SET search_path = %I, pg_temp AS
            $body$ BEGIN
              UPDATE counter SET token_generation = token_generation + 1;
              RETURN NULL;
            END $body$
          $fn$, current_schema());
          -- after a DELETE statement on `msg`, only when it deleted a row
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_msgs_deleted() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
              SET search_path = %I, pg_temp AS
            $body$ BEGIN
              IF EXISTS (SELECT FROM gone) THEN
                UPDATE counter SET token_generation = token_generation + 1;
              END IF;
              RETURN NULL;
            END $body$
          $fn$, current_schema());
          -- keep a count of `msg` up to date at p_top (skipped, never waited for, as `pi_memory_keep`)
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_keep_count(p_lexeme text, p_cap integer, p_value bigint, p_docs bigint,
                                                 p_top bigint, p_gen bigint)
              RETURNS void LANGUAGE plpgsql SET search_path = %I, pg_temp SET jit = off AS
            $body$ BEGIN
              IF current_setting('transaction_read_only') = 'on'
                 OR NOT pg_try_advisory_xact_lock_shared(hashtext('pi_memory.count_words'), hashtext(current_schema()))
                 OR NOT pg_try_advisory_xact_lock(hashtext('pi_memory.token_df'),
                                                  hashtext('msg' || 'count:' || p_cap || p_lexeme)) THEN
                RETURN;
              END IF;
              INSERT INTO token_df VALUES ('msg', 'count:' || p_cap, p_lexeme, p_value, p_docs, p_top, p_gen)
                ON CONFLICT (tab, how, lexeme) DO UPDATE
                  SET value = EXCLUDED.value, at_docs = EXCLUDED.at_docs, at_id = EXCLUDED.at_id, gen = EXCLUDED.gen
                  WHERE coalesce(token_df.gen, -1) < EXCLUDED.gen
                     OR (token_df.gen = EXCLUDED.gen AND coalesce(token_df.at_id, -1) < EXCLUDED.at_id);
            END $body$
          $fn$, current_schema());
          -- rows of `msg` holding each lexeme (a tsquery text), counted up to p_cap + 1, from what is
          -- kept, brought up to date from the rows after it (those behind by at most p_walk ids in
          -- one walk of the newest rows, the others by their postings); NULL where nothing is kept,
          -- unless p_count (then counted in full and kept)
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_msg_counts(p_lexemes text[], p_cap integer, p_count boolean, p_walk integer)
              RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp SET jit = off AS
            $body$ DECLARE
              v_how text := 'count:' || p_cap;
              top bigint;
              g bigint;
              docs bigint;
              mark bigint;
              vals bigint[];
              ats bigint[];
              gens bigint[];
              out bigint[] := '{{}}';
              walk_k integer[] := '{{}}';
              counts bigint[];
              v bigint;
              a bigint;
              n bigint;
            BEGIN
              IF cardinality(p_lexemes) = 0 THEN RETURN out; END IF;
              -- one statement, one snapshot: the newest id, the generation, the mark and the kept
              -- counts, each looked up by its key (joined, they were hashed from the whole table while
              -- the one-row counter's statistics still counted an import's dead versions: 70 ms a call)
              SELECT (SELECT coalesce(max(id), 0) FROM msg), c.token_generation, c.indexed_docs,
                     (SELECT k.at_id FROM token_df k WHERE k.tab = 'msg' AND k.how = 'mark:' || p_cap
                        AND k.lexeme = '' AND k.gen = c.token_generation),
                     kept.vals, kept.ats, kept.gens
                INTO top, g, docs, mark, vals, ats, gens
                FROM counter c,
                     (SELECT array_agg(x.value ORDER BY u.k) AS vals, array_agg(x.at_id ORDER BY u.k) AS ats,
                             array_agg(coalesce(x.gen, -1) ORDER BY u.k) AS gens
                        FROM unnest(p_lexemes) WITH ORDINALITY AS u(q, k)
                        LEFT JOIN LATERAL (SELECT e.value::bigint AS value, e.at_id, e.gen FROM token_df e
                                           WHERE e.tab = 'msg' AND e.how = v_how AND e.lexeme = u.q LIMIT 1) x
                          ON true) kept;
              FOR i IN 1 .. cardinality(p_lexemes) LOOP
                v := vals[i];
                a := coalesce(ats[i], mark);
                IF v IS NOT NULL AND (gens[i] <> g OR a IS NULL) THEN
                  v := NULL;  -- another generation's, or following a mark of another generation
                ELSIF v IS NULL AND mark IS NOT NULL THEN
                  v := 0;  -- nothing kept after a pass: none in the rows up to the mark
                  a := mark;
                END IF;
                IF p_lexemes[i] = $q$'{ECHO_TOKEN}'$q$ OR v IS NULL THEN
                  v := NULL;
                ELSIF v > p_cap OR a >= top THEN
                  NULL;  -- past the cap for good (within a generation rows are only added), or up to date
                ELSIF top - a <= p_walk THEN
                  walk_k := walk_k || i;
                ELSE  -- far behind: the word's postings after `a`
                  EXECUTE 'SELECT count(*) FROM (SELECT FROM msg WHERE tokens @@ $1::tsquery AND id > $2 AND id <= $3 LIMIT $4) c'
                    INTO n USING p_lexemes[i], a, top, p_cap + 1 - v;
                  v := v + n;
                  PERFORM pi_memory_keep_count(p_lexemes[i], p_cap, v, docs, top, g);
                END IF;
                out := out || v;
                ats[i] := a;
              END LOOP;
              IF cardinality(walk_k) > 0 THEN  -- the newest rows read once, every word behind tested on each
                EXECUTE format('SELECT ARRAY[%%s]::bigint[] FROM msg WHERE id > $1 AND id <= $2',
                  (SELECT string_agg(format('count(*) FILTER (WHERE id > %%s AND tokens @@ %%L::tsquery)',
                                            ats[k], p_lexemes[k]), ', ' ORDER BY k)
                     FROM unnest(walk_k) k))
                  INTO counts USING (SELECT min(ats[k]) FROM unnest(walk_k) k), top;
                FOR j IN 1 .. cardinality(walk_k) LOOP
                  out[walk_k[j]] := least(out[walk_k[j]] + counts[j], p_cap + 1);
                  PERFORM pi_memory_keep_count(p_lexemes[walk_k[j]], p_cap, out[walk_k[j]], docs, top, g);
                END LOOP;
              END IF;
              IF p_count THEN  -- nothing kept: counted in full, the rows up to the same newest id
                FOR i IN 1 .. cardinality(p_lexemes) LOOP
                  IF out[i] IS NULL THEN
                    EXECUTE 'SELECT count(*) FROM (SELECT FROM msg WHERE tokens @@ $1::tsquery AND id <= $2 LIMIT $3) c'
                      INTO n USING p_lexemes[i], top, p_cap + 1;
                    out[i] := n;
                    IF p_lexemes[i] <> $q$'{ECHO_TOKEN}'$q$ THEN
                      PERFORM pi_memory_keep_count(p_lexemes[i], p_cap, n, docs, top, g);
                    END IF;
                  END IF;
                END LOOP;
              END IF;
              RETURN out;
            END $body$
          $fn$, current_schema());
          -- counts of `msg` as above; of `run` (whose summaries are rewritten as runs grow) by m016's
          -- functions, renamed (below): kept while the archive is within p_stale of its size
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_capped_counts(p_tab text, p_lexemes text[], p_cap integer, p_stale float8)
              RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp SET jit = off AS
            $body$ BEGIN
              IF p_tab = 'msg' THEN RETURN pi_memory_msg_counts(p_lexemes, p_cap, true, {MSG_COUNT_WALK}); END IF;
              RETURN pi_memory_capped_counts_by_size(p_tab, p_lexemes, p_cap, p_stale);
            END $body$
          $fn$, current_schema());
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_kept_dfs(p_tab text, p_lexemes text[], p_cap integer, p_window integer,
                                               p_floor bigint, p_stale float8)
              RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp SET jit = off AS
            $body$ BEGIN
              IF p_tab <> 'msg' THEN
                RETURN pi_memory_kept_dfs_by_size(p_tab, p_lexemes, p_cap, p_window, p_floor, p_stale);
              END IF;
              RETURN (SELECT coalesce(array_agg(CASE WHEN c.n <= p_cap THEN c.n
                        ELSE pi_memory_kept('msg', 'window:' || p_window || ':' || p_floor, p_lexemes[c.k],
                                            pi_memory_docs('msg'), p_stale)
                        END ORDER BY c.k), '{{}}')::bigint[]
                      FROM unnest(pi_memory_msg_counts(p_lexemes, p_cap, false, {MSG_COUNT_WALK})) WITH ORDINALITY AS c(n, k));
            END $body$
          $fn$, current_schema());
          -- the window estimates (as `pi_memory_window_dfs` makes them, the newest p_top) of the
          -- words an idle count found past the cap: of p_gen, or (runs) counted at p_docs. No nested
          -- loop: misjudging the kept counts as few, the planner ran the window's count once per
          -- word past the cap (150k runs: 53 s, against 1 s hashed)
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_estimate_past_cap(p_tab text, p_cap integer, p_window integer, p_floor bigint,
                                                        p_top bigint, p_docs bigint, p_gen bigint)
              RETURNS void LANGUAGE plpgsql SET search_path = %I, pg_temp SET jit = off SET enable_nestloop = off AS
            $body$ DECLARE
              low bigint := greatest(0, p_top - p_window);
              in_window bigint := greatest(1, trunc(p_docs::float8 * (p_top - low) / greatest(p_top, 1)));
            BEGIN
              IF p_tab NOT IN ('msg', 'run') THEN RAISE EXCEPTION 'no token index on %%', p_tab; END IF;
              EXECUTE format($q$
                INSERT INTO token_df
                  SELECT %%L, 'window:' || $1 || ':' || $2, k.lexeme,
                         greatest($2, least($5, trunc($5::float8 * coalesce(w.n, 0) / $6))), $5, NULL, NULL
                  FROM token_df k
                  LEFT JOIN (SELECT {QUOTED_LEXEME} AS lexeme, count(*) AS n
                             FROM %%I, unnest(tsvector_to_array(tokens)) AS l WHERE id > $3 AND id <= $4 GROUP BY l) w
                    ON w.lexeme = k.lexeme
                  WHERE k.tab = %%L AND k.how = 'count:' || $7 AND k.value > $7 AND coalesce(k.gen = $8, k.at_docs = $5)
                ON CONFLICT (tab, how, lexeme) DO UPDATE SET value = EXCLUDED.value, at_docs = EXCLUDED.at_docs$q$,
                p_tab, p_tab, p_tab) USING p_window, p_floor, low, p_top, p_docs, in_window, p_cap, p_gen;
            END $body$
          $fn$, current_schema());
          -- every word of the messages after the mark counted in one statement and the mark moved
          -- to the newest id (the first time, or in another generation: every row, from nothing),
          -- once at least p_min_rows were added; the estimates of the words past the cap made as
          -- `pi_memory_window_dfs` makes them. Run summaries are rewritten as their runs grow, so
          -- their words are counted as a searcher counts them (m016: kept while the number of runs
          -- is within p_stale of it), all at once when the last count is stale: only the words of
          -- at least `run_from` runs (those a searcher's count would read that many heap pages for).
          -- The words counted; -1 when the lock is taken.
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_count_words(p_cap integer, p_window integer, p_floor bigint, p_stale float8,
                                                  p_min_rows integer)
              RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp SET jit = off
              SET work_mem = '256MB' AS
            $body$ DECLARE
              run_from constant integer := 20;
              v_how text := 'count:' || p_cap;
              v_mark text := 'mark:' || p_cap;
              top bigint;
              g bigint;
              docs bigint;
              mark bigint;
              n bigint;
              words bigint := 0;
            BEGIN
              IF current_setting('transaction_read_only') = 'on'
                 OR NOT pg_try_advisory_xact_lock(hashtext('pi_memory.count_words'), hashtext(current_schema())) THEN
                RETURN -1;
              END IF;
              SELECT (SELECT coalesce(max(id), 0) FROM msg), c.token_generation, c.indexed_docs,
                     (SELECT k.at_id FROM token_df k WHERE k.tab = 'msg' AND k.how = v_mark AND k.lexeme = ''
                        AND k.gen = c.token_generation)
                INTO top, g, docs, mark FROM counter c;
              IF mark IS NULL OR top - mark >= p_min_rows THEN
                IF mark IS NULL THEN
                  DELETE FROM token_df WHERE tab = 'msg' AND how IN (v_how, v_mark);
                END IF;
                INSERT INTO token_df
                  SELECT 'msg', v_how, {QUOTED_LEXEME}, least(count(*), p_cap + 1), docs, NULL, g
                  FROM msg, unnest(tsvector_to_array(tokens)) AS l
                  WHERE id > coalesce(mark, 0) AND id <= top AND l <> '{ECHO_TOKEN}'
                  GROUP BY l
                ON CONFLICT (tab, how, lexeme) DO UPDATE
                  SET value = least(token_df.value + EXCLUDED.value, p_cap + 1)
                  WHERE token_df.at_id IS NULL AND token_df.gen = EXCLUDED.gen;
                GET DIAGNOSTICS n = ROW_COUNT;
                words := words + n;
                PERFORM pi_memory_estimate_past_cap('msg', p_cap, p_window, p_floor, top, docs, g);
                INSERT INTO token_df VALUES ('msg', v_mark, '', top, docs, top, g)
                  ON CONFLICT (tab, how, lexeme) DO UPDATE
                    SET value = EXCLUDED.value, at_docs = EXCLUDED.at_docs, at_id = EXCLUDED.at_id, gen = EXCLUDED.gen;
              END IF;
              SELECT (SELECT coalesce(max(id), 0) FROM run), c.run_docs,
                     (SELECT k.at_docs FROM token_df k WHERE k.tab = 'run' AND k.how = v_mark AND k.lexeme = '')
                INTO top, docs, mark FROM counter c;
              IF mark IS NULL OR abs(docs - mark) > p_stale * greatest(mark, 1) THEN
                INSERT INTO token_df
                  SELECT 'run', v_how, {QUOTED_LEXEME}, least(count(*), p_cap + 1), docs, NULL, NULL
                  FROM run, unnest(tsvector_to_array(tokens)) AS l
                  WHERE l <> '{ECHO_TOKEN}'
                  GROUP BY l HAVING count(*) >= run_from
                ON CONFLICT (tab, how, lexeme) DO UPDATE SET value = EXCLUDED.value, at_docs = EXCLUDED.at_docs;
                GET DIAGNOSTICS n = ROW_COUNT;
                words := words + n;
                PERFORM pi_memory_estimate_past_cap('run', p_cap, p_window, p_floor, top, docs, NULL);
                INSERT INTO token_df VALUES ('run', v_mark, '', docs, docs, NULL, NULL)
                  ON CONFLICT (tab, how, lexeme) DO UPDATE SET value = EXCLUDED.value, at_docs = EXCLUDED.at_docs;
              END IF;
              RETURN words;
            END $body$
          $fn$, current_schema());
          -- m016's keeping, now also skipped while the words are being counted (never waited for)
          EXECUTE format($fn$
            CREATE FUNCTION pi_memory_keep(p_tab text, p_how text, p_lexeme text, p_value float8, p_docs bigint)
              RETURNS void LANGUAGE plpgsql SET search_path = %I, pg_temp SET jit = off AS
            $body$ BEGIN
              IF pg_try_advisory_xact_lock_shared(hashtext('pi_memory.count_words'), hashtext(current_schema())) THEN
                PERFORM pi_memory_keep_entry(p_tab, p_how, p_lexeme, p_value, p_docs);
              END IF;
            END $body$
          $fn$, current_schema());
        END $outer$;
        CREATE TRIGGER msg_forgotten AFTER DELETE ON msg REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
          EXECUTE FUNCTION pi_memory_msgs_deleted();
        CREATE TRIGGER msg_tokens_changed AFTER UPDATE OF tokens ON msg FOR EACH ROW
          WHEN (ts_delete(OLD.tokens, '{ECHO_TOKEN}') IS DISTINCT FROM ts_delete(NEW.tokens, '{ECHO_TOKEN}'))
          EXECUTE FUNCTION pi_memory_tokens_changed();
        """,
    )
)

SCHEMA_VERSION = len(MIGRATIONS)

CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
  version    integer PRIMARY KEY,
  name       text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)"""
