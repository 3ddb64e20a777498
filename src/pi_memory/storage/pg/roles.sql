-- Roles for a pi-memory team archive on PostgreSQL.
--
-- Run once as the role that owns the archive's tables (it needs CREATEROLE), in the
-- archive's database, after the first `pi-memory --db URL stats` has created them:
--
--   pi-memory --db postgresql://owner@db.example/pi_memory pg-roles | psql postgresql://owner@db.example/pi_memory
--
-- Idempotent: running it again changes nothing. Row-level security (see pg/schema.py) does
-- the rest: everyone with SELECT reads everything, a row is updated or deleted only by the
-- role that wrote it or by a member of pi_memory_admin.

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pi_memory_reader') THEN
    CREATE ROLE pi_memory_reader NOLOGIN;   -- search and read
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pi_memory_writer') THEN
    CREATE ROLE pi_memory_writer NOLOGIN;   -- also import, push, capture, forget its own sessions
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pi_memory_admin') THEN
    CREATE ROLE pi_memory_admin NOLOGIN;    -- also forget anyone's sessions
  END IF;
  IF NOT pg_has_role('pi_memory_admin', 'pi_memory_writer', 'MEMBER') THEN
    GRANT pi_memory_writer TO pi_memory_admin;
  END IF;
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO pi_memory_reader, pi_memory_writer', current_schema());
  EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO pi_memory_reader, pi_memory_writer', current_schema());
END $$;

GRANT INSERT, UPDATE, DELETE ON session, msg, entry, source_file, run, run_msg, run_file, forgotten TO pi_memory_writer;
GRANT INSERT, DELETE ON compact_window TO pi_memory_writer;  -- windows are never changed, only forgotten
GRANT UPDATE ON counter TO pi_memory_writer;
GRANT INSERT, UPDATE, DELETE ON edit, edit_observed, provenance_state TO pi_memory_writer;  -- provenance
GRANT INSERT, UPDATE, DELETE ON usage, usage_sum, context_ledger TO pi_memory_writer;  -- model requests, their sums, the ledger
GRANT INSERT ON memory_chain, memory_event TO pi_memory_writer;  -- the memory log: append only
GRANT INSERT, DELETE ON vec, vec_session TO pi_memory_writer;  -- semantic recall's rows (pgvector): `embed` writes them, forget removes them
-- the counts searchers left with the server (m016) name the words people searched for: only the
-- server's own functions read and write them
REVOKE ALL ON token_df FROM pi_memory_reader, pi_memory_writer;

-- Then one LOGIN role per person or bot (passwords go in ~/.pgpass or PGPASSWORD, never in a URL in a script):
--   CREATE ROLE alice LOGIN PASSWORD '...' IN ROLE pi_memory_writer;
--   CREATE ROLE dashboard LOGIN PASSWORD '...' IN ROLE pi_memory_reader;
--   GRANT pi_memory_admin TO lead;                                   -- may forget anyone's sessions
--   CREATE ROLE team_search NOLOGIN; GRANT team_search TO alice, bob; -- search(team="team_search")
