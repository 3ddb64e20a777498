"""What the import's full-text writes cost, and which of their settings move it (issue 13).

Design idea: at 300k messages of 40-message sessions the import is bound by its writer thread,
and most of that thread is FTS5 (inserts into the per-transaction hash, the commit that sorts it
and writes it as a segment, the merges of those segments). This bench isolates that part: the
message index as a new archive defines it (`schema.COMPACT_FTS`), written with the real tokens of
real session files (`parse_and_tokenize`, as a parse worker cuts them) and the import's own
settings (`storage.merging`: automerge off, `IMPORT_CRISIS_MERGE`, `IMPORT_HASH_BYTES`, merge steps
of `MERGE_STEP_PAGES` pages after each flush by levels of `IMPORT_MERGE_RULE`, then the final
merge into one segment), and varies one thing at a time:

- `k`: messages per write transaction (the importer's are cut at ~30 ms, `writes.TXN_TARGET_S`,
  and at most a flush of `writes.BATCH`);
- `fanin`: how many flushes between merge passes (1: the importer's, a level merged once it holds
  `IMPORT_MERGE_RULE` segments; F > 1: level 0 merged F segments at once, levels of 16 above);
- `mmap`: `PRAGMA mmap_size` in MB (0: SQLite's default, none).

Each configuration runs in a child process of its own (its own peak RSS) `--repeat` times,
alternated with the others, and the table gives the fastest run of each (CPU time: this machine's
speed drifts), split into inserts and commits, merges while writing and the final merge, with the
longest transaction and merge step, bytes per message and peak RSS (which holds the tokens read
from the files too: compare it between configurations); ratios are against the first
configuration, measured in the same run. When the files hold fewer messages than `--messages`,
their token texts are written again under new rowids.

    python bench/fts_write_bench.py --sessions /tmp/ib300/sessions-long --json bench/results/fts-write.json
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import result_header, save_json, table  # noqa: E402

DEFAULT_CONFIGS = ("k=200,fanin=1,mmap=0", "k=100,fanin=1,mmap=0", "k=400,fanin=1,mmap=0", "k=200,fanin=64,mmap=0")


def collect_tokens(sessions: Path, limit: int, out: Path) -> int:
    """The two index columns of up to `limit` messages of the session files under `sessions`."""
    from pi_memory.ingest.importer import discover
    from pi_memory.ingest.prepare import parse_and_tokenize

    cuts: list[tuple[bytes | str, bytes | str]] = []
    for path in discover([sessions]):
        cuts += [(m[10], m[11]) for m in parse_and_tokenize(str(path), None).messages if m[10] or m[11]]
        if len(cuts) >= limit:
            break
    with out.open("wb") as f:
        pickle.dump(cuts[:limit], f)
    return len(cuts[:limit])


def parse_config(spec: str) -> dict[str, int]:
    config = {"k": 200, "fanin": 1, "mmap": 0}
    for part in filter(None, spec.split(",")):
        key, _, value = part.partition("=")
        if key not in config:
            raise SystemExit(f"unknown setting {key!r} in {spec!r} (k, fanin, mmap)")
        config[key] = int(value)
    return config


def run_child(tokens: Path, spec: str, messages: int, work: Path) -> dict[str, Any]:
    """One configuration, written in a fresh file (see `child`)."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", spec, "--tokens", str(tokens), "--messages", str(messages),
         "--work", str(work)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def child(tokens: Path, spec: str, messages: int, work: Path) -> dict[str, Any]:
    """Write `messages` index rows with one configuration; CPU, longest waits, size, peak RSS."""
    import apsw

    from pi_memory.storage import merging
    from pi_memory.storage.schema import COMPACT_FTS

    config = parse_config(spec)
    with tokens.open("rb") as f:
        cuts = pickle.load(f)
    db = work / "fts.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA page_size=8192; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    if config["mmap"]:
        conn.execute(f"PRAGMA mmap_size={config['mmap'] << 20}")
    conn.execute(_message_index_ddl(COMPACT_FTS))
    rule = merging.IMPORT_MERGE_RULE if config["fanin"] == 1 else 16
    for key, value in (("automerge", 0), ("usermerge", rule), ("crisismerge", max(merging.IMPORT_CRISIS_MERGE,
                       2 * config["fanin"])), ("hashsize", merging.IMPORT_HASH_BYTES)):  # fmt: skip
        conn.execute(f"INSERT INTO msg_fts(msg_fts, rank) VALUES ('{key}', {value})")
    longest = {"transaction_ms": 0.0, "merge_step_ms": 0.0}
    start = time.process_time()
    merges = 0.0
    flushes = 0
    for first in range(0, messages, config["k"]):
        began = time.perf_counter()
        with conn:
            rows = [(first + j + 1, *cuts[(first + j) % len(cuts)]) for j in range(min(config["k"], messages - first))]
            conn.executemany("INSERT INTO msg_fts(rowid, chars, grams) VALUES (?,?,?)", rows)
        longest["transaction_ms"] = max(longest["transaction_ms"], (time.perf_counter() - began) * 1000)
        flushes += 1
        if flushes % config["fanin"] == 0:
            merged = time.process_time()
            _merge(conn, merging.MERGE_STEP_PAGES, longest)
            merges += time.process_time() - merged
    written = time.process_time()
    _merge(conn, -merging.MERGE_STEP_PAGES, longest)  # the final merge into one segment
    final = time.process_time() - written
    total = time.process_time() - start
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = _pragma(conn, "page_count") - _pragma(conn, "freelist_count")
    conn.close()
    per = 1e6 / messages
    return {
        "config": spec,
        "messages": messages,
        "cpu_us_per_msg": round(total * per, 1),
        "inserts_commits_us_per_msg": round((total - merges - final) * per, 1),
        "merges_while_writing_us_per_msg": round(merges * per, 1),
        "final_merge_s": round(final, 2),
        "longest_transaction_ms": round(longest["transaction_ms"], 1),
        "longest_merge_step_ms": round(longest["merge_step_ms"], 1),
        "bytes_per_msg": round(pages * 8192 / messages),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def _pragma(conn: Any, name: str) -> int:
    return int(conn.execute(f"PRAGMA {name}").get)


def _message_index_ddl(compact_fts: str) -> str:
    """msg_fts's CREATE statement as a new archive makes it."""
    statements = [s.strip() for s in compact_fts.split(";")]
    return next(s for s in statements if s.startswith("CREATE VIRTUAL TABLE msg_fts"))


def _merge(conn: Any, pages: int, longest: dict[str, float]) -> None:
    """Merge steps of `pages` pages (negative: into one segment), one transaction each, until FTS5
    reports no work left, as `ImportMerging.merge_steps` does (with its `merge_step`)."""
    from pi_memory.storage import merging

    while True:
        began = time.perf_counter()
        with conn:
            worked = merging.merge_step(conn, "msg_fts", pages)
        longest["merge_step_ms"] = max(longest["merge_step_ms"], (time.perf_counter() - began) * 1000)
        if not worked:
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sessions", type=Path, help="a folder of session files (e.g. import_bench.py's --work shapes)"
    )
    parser.add_argument("--messages", type=int, default=300_000, help="index rows written per configuration")
    parser.add_argument("--distinct", type=int, default=60_000, help="messages parsed from the files at most")
    parser.add_argument("--config", action="append", help="k=N,fanin=F,mmap=MB (repeatable; the first is the baseline)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--tokens", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="fts-write-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.child:
        print(json.dumps(child(args.tokens, args.child, args.messages, work)))
        return
    if args.sessions is None:
        parser.error("--sessions is required")
    configs = args.config or list(DEFAULT_CONFIGS)
    for spec in configs:
        parse_config(spec)
    header = result_header("fts_write_bench", {k: str(v) for k, v in vars(args).items()})
    tokens = work / "tokens.pickle"
    distinct = collect_tokens(args.sessions, args.distinct, tokens)
    print(f"{distinct} messages' tokens from {args.sessions}; {args.messages} rows per configuration", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {spec: [] for spec in configs}
    for round_ in range(args.repeat):
        for spec in configs:
            result = run_child(tokens, spec, args.messages, work)
            runs[spec].append(result)
            print(f"round {round_ + 1}: {spec}: {result['cpu_us_per_msg']} us a message", flush=True)
    best = {spec: min(results, key=lambda r: r["cpu_us_per_msg"]) for spec, results in runs.items()}
    base = best[configs[0]]["cpu_us_per_msg"]
    headers = ["config", "CPU us/msg", "x base", "inserts+commits", "merges", "final s", "max txn ms",
               "max step ms", "B/msg", "RSS MB"]  # fmt: skip
    rows = [
        [spec, r["cpu_us_per_msg"], round(r["cpu_us_per_msg"] / base, 2), r["inserts_commits_us_per_msg"],
         r["merges_while_writing_us_per_msg"], r["final_merge_s"], r["longest_transaction_ms"],
         r["longest_merge_step_ms"], r["bytes_per_msg"], r["peak_rss_mb"]]
        for spec, r in best.items()
    ]  # fmt: skip
    print(table(headers, rows))
    save_json(args.json, {**header, "distinct_messages": distinct, "best": best, "runs": runs})


if __name__ == "__main__":
    main()
