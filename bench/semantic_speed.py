"""What semantic recall costs: embedding rate, RSS, bytes per unit, and the time a hybrid search adds.

Design idea: the issue's targets are "a hybrid search adds <= 25 ms p95 at 100k embedded units
(<= 40 ms at 1M), lexical speed unchanged", and the embedding rate, RSS and bytes per unit stated.
Embedding 100k units with the real model takes hours on a shared core, so the archive (realistic
sessions through the real import path, `realistic.py`, as `search_bench.py` builds it) gets:
- `--real` units embedded by the real model through `Archive.embed` (the rate and RSS measured);
- every other unit a vector made from those real ones (a mix of two and some noise, unit length),
  written through the same `write_vectors` and scan index: the scan and the exact rescoring cost
  what they cost on real vectors, which is what is timed here (their recall is `quality.py`'s).
Each query is then asked lexical, hybrid and semantic, in turn, on one archive in one process
(the machine is shared: the added time is read per query against the lexical time of the same
query, measured beside it). The query's embedding is not cached: each query is new to the model.

`--pg URL`: the same on a team archive (PostgreSQL with pgvector): the same sessions imported into
the schema `semantic_speed_<messages>` of URL's database (`--reuse`: kept from an earlier run, its
vectors emptied), the vectors written through the same `write_vectors` (the float vector into
`vec.emb`, the HNSW index `vec_emb` kept up by the server as they go in), then `VACUUM ANALYZE`, as
autovacuum would after a bulk load, the index walked `--warm-walks` times with the archive's own
vectors (its pages in the server's buffers as far as they fit, as on a server in use), and the same
queries timed the same way. `--pg wheel` starts a throw-away server from the `pgserver` wheel the
test extra installs (`tests/pg_server.py`: PostgreSQL 16, pgvector 0.6, its default settings and
`fsync=off`), stopped at the end.

    python bench/semantic_speed.py --corpus ../shared/corpora --messages 300000 --work /tmp/pi-memory-semantic \
        --json bench/results/semantic_speed.json
    python bench/semantic_speed.py --corpus ../shared/corpora --messages 150000 --pg wheel \
        --json bench/results/semantic_speed-pg.json
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import latency_summary, peak_rss_mb, result_header, save_json, table  # noqa: E402
from pg_scale import server_settings  # noqa: E402
from realistic import CODE_QUESTIONS, SessionWriter, chinese_questions, english_questions, load_pools  # noqa: E402

from pi_memory.archive.api import Archive  # noqa: E402
from pi_memory.storage.pg import redact  # noqa: E402
from pi_memory.vectors import index as scan  # noqa: E402
from pi_memory.vectors import model as vmodel  # noqa: E402
from pi_memory.vectors.embed import refresh_index  # noqa: E402
from pi_memory.vectors.store import write_vectors  # noqa: E402
from pi_memory.vectors.units import pending  # noqa: E402

BATCH_MESSAGES = 20_000
WRITE_BATCH = 5_000


def build(corpus: Path, messages: int, target: Path | str, work: Path, seed: int) -> float:
    """The archive of realistic sessions, through the import path; returns its import rate (msg/s)."""
    writer = SessionWriter(load_pools(corpus), random.Random(seed))
    done, seconds = 0, 0.0
    with Archive.open(target) as archive:
        while done < messages:
            folder = work / "batch"
            shutil.rmtree(folder, ignore_errors=True)
            writer.write(folder, min(BATCH_MESSAGES, messages - done))
            start = time.perf_counter()
            done += archive.import_paths([folder]).added
            seconds += time.perf_counter() - start
            shutil.rmtree(folder, ignore_errors=True)
            print(f"  {done:>8} messages imported ({done / seconds:,.0f}/s)", flush=True)
    return done / seconds


def db_bytes(archive: Archive) -> int:
    """The archive's bytes; a team archive's: its vectors' tables and their indexes but `vec_emb`."""
    if archive.is_team:
        sql = """SELECT pg_total_relation_size('vec') + pg_total_relation_size('vec_session')
                 - coalesce(pg_relation_size(to_regclass('vec_emb')), 0)"""
        return int(archive.store.scalar(sql))
    archive.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return archive.path.stat().st_size


def index_bytes(archive: Archive) -> int:
    """The nearest-unit index: the scan index beside the file, or the team archive's HNSW index."""
    if archive.is_team:
        return int(archive.store.scalar("SELECT coalesce(pg_relation_size(to_regclass('vec_emb')), 0)"))
    return sum(p.stat().st_size for p in scan.folder_of(archive.path).iterdir())


def team_archive(url: str, messages: int, reuse: bool) -> tuple[str, bool]:
    """The URL of the schema `semantic_speed_<messages>` and whether its sessions are kept from an
    earlier run (`reuse`: then its vectors are emptied; else the schema is made anew)."""
    import psycopg

    schema = f"semantic_speed_{messages}"
    target = f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.msg",)).fetchone()
        if reuse and found and found[0]:
            conn.execute(f"TRUNCATE {schema}.vec, {schema}.vec_session".encode())
            return target, True
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    return target, False


def vacuum_analyze(url: str, tables: str) -> float:
    """What autovacuum does after a bulk load (the planner's statistics, the visibility map); seconds."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        start = time.perf_counter()
        conn.execute(f"VACUUM ANALYZE {tables}".encode())
        return round(time.perf_counter() - start, 1)


def warm_index(archive: Archive, walks: int) -> float:
    """A team server in use holds its HNSW index's pages in its buffers, as far as they fit; one just
    restarted, or whose vectors were just written, does not (with 128 MB of shared buffers a query's
    first walk of the 217 MB index at 106k units read 2,500-2,950 of its ~4,300 pages from the OS, 26 ms,
    its second 6-10 ms). So before timing, the index is walked as a search walks it with `walks` of
    the archive's own vectors (not the queries'); returns the seconds it took."""
    store: Any = archive.store
    sql = f"""SELECT v.id FROM vec v WHERE v.kind = 1 ORDER BY v.emb {store.distance_operator()}
              (SELECT emb FROM vec WHERE id = %s) LIMIT 200"""
    ids = [int(r[0]) for r in store.rows("SELECT id FROM vec WHERE kind = 1 ORDER BY id")]
    start = time.perf_counter()
    for vec_id in ids[:: max(1, len(ids) // walks)][:walks]:
        with store.read():
            store.scalar("SELECT set_config('hnsw.ef_search', '200', true)")
            store.rows(sql, (vec_id,))
    return round(time.perf_counter() - start, 1)


def pg_server_facts(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return {"url": redact(url), **server_settings(url), "pgvector": row[0] if row else None}


def wheel_server(stack: ExitStack) -> str:
    """A throw-away server with pgvector from the test extra's wheel, stopped when `stack` closes."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import pg_server

    server = pg_server.start(pg_server.PGVECTOR_WHEEL, vector=True)
    stack.callback(server.stop)
    return server.url


def synthetic_rest(archive: Archive, model_id: str, seed: int) -> int:
    """Every unit still without a vector gets a mix of two real vectors and noise (unit length)."""
    rng = np.random.default_rng(seed)
    rows = archive.store.rows("SELECT vec, scale FROM vec WHERE model = ?", (model_id,))
    real = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.int8).reshape(len(rows), vmodel.DIM)
    real = real.astype(np.float32) * np.array([r[1] for r in rows], dtype=np.float32)[:, None]
    written = 0
    while True:
        with archive.store.read():
            units = pending(archive.store, model_id, WRITE_BATCH)
        if not units:
            return written
        a, b = rng.integers(0, len(real), len(units)), rng.integers(0, len(real), len(units))
        mixed = real[a] + rng.uniform(0.2, 0.8, (len(units), 1)).astype(np.float32) * real[b]
        mixed += rng.normal(0, 0.02, mixed.shape).astype(np.float32)
        mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
        written += write_vectors(archive.store, model_id, units, [u.text[:200] for u in units], mixed)
        print(f"  {written:>8} synthetic vectors", flush=True)


def queries(corpus: Path, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    zh = rng.sample(chinese_questions(corpus), n // 2)
    en = english_questions(load_pools(corpus), rng, n - len(zh) - len(CODE_QUESTIONS)) + list(CODE_QUESTIONS)
    out = [q for pair in zip(zh, en, strict=False) for q in pair] + zh[len(en) :] + en[len(zh) :]
    return out[:n]


def time_modes(archive: Archive, qs: list[str]) -> dict[str, list[float]]:
    """ms per query and mode, the modes in turn for each query, each meeting the caches as the first did."""
    ms: dict[str, list[float]] = {"lexical": [], "hybrid": [], "semantic": [], "added": [], "query embedding": []}
    model = vmodel.load()
    searcher = archive.searcher
    for q in qs:
        model._queries.clear()
        start = time.perf_counter()
        model.query(q)
        ms["query embedding"].append((time.perf_counter() - start) * 1000)
        # the document frequencies and decoded texts earlier queries cached stay (a long-lived
        # process keeps them), those this one caches do not: before, hybrid found those its lexical
        # search had just cached. On a team archive of 106k units (128 MB of shared buffers) a
        # query's first lexical search took 40.7 / 94.9 ms p50 / p95, the same search again 13.4 / 18.4
        dfs, texts = searcher.df_cache._items.copy(), searcher._texts.copy()
        for mode in ("lexical", "hybrid", "semantic"):
            model._queries.clear()  # each mode embeds the query anew, as a first search does
            searcher.df_cache._items, searcher._texts = dfs.copy(), texts.copy()
            start = time.perf_counter()
            archive.search(q, limit=10, mode=mode)
            ms[mode].append((time.perf_counter() - start) * 1000)
        ms["added"].append(ms["hybrid"][-1] - ms["lexical"][-1])
    return ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--real", type=int, default=400, help="units embedded by the real model (the rate, RSS)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1, help="the model's threads for the embedding pass")
    ap.add_argument("--work", type=Path, default=Path("/tmp/pi-memory-semantic"))
    ap.add_argument("--reuse", action="store_true", help="keep the archive of a previous run (same --messages)")
    ap.add_argument("--pg", help="a team archive on this server (with pgvector); 'wheel': start one")
    ap.add_argument("--warm-walks", type=int, default=300, help="with --pg: HNSW walks before timing (warm_index)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if not vmodel.available():
        sys.exit(f"the semantic extra is not installed: {vmodel.INSTALL_HINT}")
    header = result_header("semantic_speed", {k: redact(str(v)) for k, v in vars(args).items()})
    args.work.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        if args.pg:
            url = wheel_server(stack) if args.pg == "wheel" else args.pg
            server = pg_server_facts(url)
            target, kept = team_archive(url, args.messages, args.reuse)
            import_rate = float("nan") if kept else build(args.corpus, args.messages, target, args.work, args.seed)
            if not kept:
                print(f"  VACUUM ANALYZE after the import: {vacuum_analyze(target, 'msg, run, session')} s", flush=True)
            measure(args, header, target, import_rate, {"server": server})
        else:
            lexical_db = args.work / f"lexical-{args.messages}.db"
            if not (args.reuse and lexical_db.exists()):
                import_rate = build(args.corpus, args.messages, lexical_db, args.work, args.seed)
            else:
                import_rate = float("nan")
            db = args.work / "semantic.db"
            for p in [*args.work.glob("semantic.db*")]:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
            shutil.copyfile(lexical_db, db)
            measure(args, header, db, import_rate, {})


def measure(
    args: argparse.Namespace, header: dict[str, Any], target: Path | str, import_rate: float, more: dict[str, Any]
) -> None:
    """Embed (real, then synthetic), refresh the index, time the queries; print and save."""
    vmodel.want_threads(args.threads)
    qs = queries(args.corpus, args.queries, args.seed)
    with Archive.open(target) as archive:
        before = db_bytes(archive)
        rss_before = peak_rss_mb()
        report = archive.embed(limit=args.real)
        rss_embed = peak_rss_mb()
        # the real pass embeds run summaries and memories first: the rate is over all three kinds
        real_kinds = {int(k): int(n) for k, n in archive.store.rows("SELECT kind, count(*) FROM vec GROUP BY kind")}
        model_id = report.model
        start = time.perf_counter()
        synthetic = synthetic_rest(archive, model_id, args.seed)
        written_s = time.perf_counter() - start
        if archive.is_team:  # the server keeps its HNSW index up as the rows go in
            more["vacuum_analyze_vec_s"] = vacuum_analyze(str(target), "vec, vec_session")
        else:
            with scan.writer_lock(archive.path, wait=True):
                refresh_index(archive.store, archive.path, model_id)
        more["synthetic_written_s"] = round(written_s, 1)
        if archive.is_team and args.warm_walks:
            more["index_warmed_s"] = warm_index(archive, args.warm_walks)
        state = archive.semantic_state()
        vec_bytes = db_bytes(archive) - before
        idx_bytes = index_bytes(archive)
        archive.search("warm up", mode="hybrid")  # the index mapped, numpy and the model loaded
        ms = time_modes(archive, qs)
        rss_search = peak_rss_mb()
    units = state.embedded
    rows = [[mode, *(latency_summary(v)[k] for k in ("p50", "p95", "max"))] for mode, v in ms.items()]
    print(f"\n{args.messages:,} messages, {units:,} units with vectors ({report.embedded} real, {synthetic:,} made)")
    print(f"real units by kind (1 message, 2 run summary, 3 memory): {real_kinds}")
    print(
        f"embedding (real model, {args.threads} thread): {report.rate:.1f} units/s; "
        f"peak RSS {rss_before:.0f} MB before, {rss_embed:.0f} MB after embedding, {rss_search:.0f} MB after searching"
    )
    print(f"bytes per unit: {vec_bytes / units:.0f} in the archive, {idx_bytes / units:.0f} in the nearest-unit index")
    print(f"{more}")
    print(table(["ms per search", "p50", "p95", "max"], rows))
    save_json(
        args.json,
        {
            **header,
            **more,
            "messages": args.messages,
            "import_msgs_per_s": round(import_rate, 1),
            "units": units,
            "real_units": report.embedded,
            "real_units_by_kind": {"message": real_kinds.get(1, 0), "run summary": real_kinds.get(2, 0)},
            "embed_units_per_s": round(report.rate, 2),
            "peak_rss_mb": {"before": rss_before, "after_embed": rss_embed, "after_search": rss_search},
            "bytes_per_unit": {"archive": round(vec_bytes / units, 1), "index": round(idx_bytes / units, 1)},
            "search_ms": {mode: latency_summary(v) for mode, v in ms.items()},
        },
    )


if __name__ == "__main__":
    main()
