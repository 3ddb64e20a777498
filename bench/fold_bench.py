"""In-session folding over a scripted 100-run pi session: request size and prefix stability, with and without.

Real pi (default 1.6.0; `--pi 0.73.1`) in RPC mode with the scripted fake model, the pi-memory
extension and the bridge of this checkout, as the end-to-end tests run it (`tests/e2e`: the pi
install, the RPC driver, the faux provider and the payload recorder are reused from there). The
same 100 prompts run twice in one invocation, in two projects: folding on with the default
settings, and `fold.enabled: false`. Each run reads one large file and runs one large `cat`
(sizes vary deterministically, 2k-14k and 0.5k-6k chars). pi's auto-compaction is off so both
sessions keep their whole history.

From every recorded provider request (system prompt, tools, messages, serialised in that order):
input tokens (chars/4, pi's estimate) p50 and last, and the share of the request's bytes that are a
prefix of the previous request (the part a provider's prefix cache can serve), mean over requests.

    python bench/fold_bench.py [--runs 100] [--pi 1.6.0] [--json bench/results/fold.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(HERE))

from common import git_commit, machine  # noqa: E402
from pi_install import ensure_pi  # noqa: E402
from pi_rpc import PiRpc  # noqa: E402

E2E = ROOT / "tests" / "e2e"
EXTENSION = ROOT / "extensions" / "pi" / "index.ts"


def sizes(n: int) -> tuple[int, int]:
    return 2000 + (n * 3137) % 12000, 500 + (n * 1913) % 5500


def content(tag: str, size: int) -> str:
    line = f"{tag} | scripted line of a large file for the fold benchmark 0123456789 abcdef\n"
    return (line * (size // len(line) + 1))[:size]


def script(runs: int) -> dict[str, Any]:
    turns = []
    for n in range(1, runs + 1):
        replies = [
            {"content": [{"type": "toolCall", "name": "read", "arguments": {"path": f"src/mod{n}.ts"}}]},
            {"content": [{"type": "toolCall", "name": "bash", "arguments": {"command": f"cat logs/run{n}.log"}}]},
            {"content": f"run {n}: read mod{n}.ts and its log; nothing failing."},
        ]
        turns.append({"match": f"bench run {n}:", "replies": replies})
    return {"turns": turns, "fallback": "OK."}


def project(home: Path, name: str, runs: int, fold: dict[str, Any]) -> Path:
    cwd = home / name
    (cwd / "src").mkdir(parents=True)
    (cwd / "logs").mkdir()
    for n in range(1, runs + 1):
        read, cat = sizes(n)
        (cwd / "src" / f"mod{n}.ts").write_text(content(f"mod{n}", read), encoding="utf-8")
        (cwd / "logs" / f"run{n}.log").write_text(content(f"log{n}", cat), encoding="utf-8")
    (cwd / ".pi").mkdir()
    (cwd / ".pi" / "pi-memory.json").write_text(json.dumps({"fold": fold}), encoding="utf-8")
    return cwd


WIRE_KEYS = ("role", "content", "toolCallId", "toolName", "isError")


def serialised(payload: dict[str, Any]) -> str:
    """What a provider is sent, in order: system prompt, tools, then each message's role and content
    (pi's own bookkeeping on messages, such as usage and timestamps, never goes on the wire)."""
    parts = [payload.get("systemPrompt") or "", json.dumps(payload.get("tools"), ensure_ascii=False)]
    for m in payload["messages"]:
        parts.append(json.dumps({k: m[k] for k in WIRE_KEYS if k in m}, ensure_ascii=False))
    return "\n".join(parts)


def prefix_share(prev: str, cur: str) -> float:
    n = len(os.path.commonprefix([prev, cur]))
    return n / len(cur) if cur else 1.0


def session(pi: Any, env: dict[str, str], cwd: Path, runs: int, payloads: Path, log: Any) -> float:
    cmd = [
        str(pi.pi),
        "-e",
        str(E2E / "faux-provider.ts"),
        "-e",
        str(E2E / "payload-recorder.ts"),
        "-e",
        str(EXTENSION),
    ]
    cmd += ["--model", "faux/faux-1", "-nc", "-ns", "-np", "--mode", "rpc"]
    rpc = PiRpc(cmd, cwd, dict(env, PI_E2E_PAYLOADS=str(payloads)), log, settles=pi.major >= 1)
    start = time.perf_counter()
    try:
        for n in range(1, runs + 1):
            rpc.prompt(f"bench run {n}: look at the next module", timeout=120)
    finally:
        rpc.close()
    return time.perf_counter() - start


def measure(payloads: Path) -> dict[str, Any]:
    lines = payloads.read_text(encoding="utf-8").splitlines()
    reqs = [r["payload"] for r in map(json.loads, lines) if r["payload"].get("maxTokens") != 1]
    texts = [serialised(p) for p in reqs]
    tokens = [len(t) // 4 for t in texts]
    shares = [prefix_share(a, b) for a, b in zip(texts, texts[1:], strict=False)]
    return {
        "requests": len(reqs),
        "input_tokens_p50": int(statistics.median(tokens)),
        "input_tokens_last": tokens[-1],
        "input_tokens_total": sum(tokens),
        "prefix_share_mean": round(statistics.mean(shares), 4),
        "prefix_share_p10": round(sorted(shares)[len(shares) // 10], 4),
        "prefix_breaks": sum(1 for a, b in zip(texts, texts[1:], strict=False) if not b.startswith(a)),
    }


def environment(pi: Any, home: Path, agent: Path) -> dict[str, str]:
    return pi.env(
        dict(
            os.environ,
            HOME=str(home),
            PI_OFFLINE="1",
            PI_CODING_AGENT_DIR=str(agent),
            PI_MEMORY_DB=str(home / "archive.db"),
            PI_FAUX_SCRIPT=str(home / "script.json"),
            PI_MEMORY_BRIDGE=f"{sys.executable} -m pi_memory bridge",
            PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
            TMPDIR=str(home),
        )
    )


def bench(version: str, runs: int) -> dict[str, Any]:
    """Both sessions (folding on with the defaults, folding off) on one pi version."""
    pi = ensure_pi(version)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fold-bench-") as tmp:
        home = Path(tmp)
        agent = home / ".pi" / "agent"
        agent.mkdir(parents=True)
        (agent / "settings.json").write_text(json.dumps({"compaction": {"enabled": False}}), encoding="utf-8")
        (home / "script.json").write_text(json.dumps(script(runs)), encoding="utf-8")
        env = environment(pi, home, agent)
        with open(home / "pi-stderr.log", "w", encoding="utf-8") as log:
            for name, fold in (("folding", {}), ("no_folding", {"enabled": False})):
                cwd = project(home, name, runs, fold)
                seconds = session(pi, env, cwd, runs, home / f"{name}.jsonl", log)
                results[name] = dict(measure(home / f"{name}.jsonl"), seconds=round(seconds, 1))
    results["tokens_ratio"] = round(
        results["folding"]["input_tokens_total"] / results["no_folding"]["input_tokens_total"], 3
    )
    return results


def show(version: str, runs: int, results: dict[str, Any]) -> None:
    print(f"fold bench: {runs} runs, pi {version}, default fold settings")
    print(
        f"{'':14} {'requests':>9} {'tokens p50':>11} {'tokens last':>12} {'prefix share':>13} {'p10':>6} {'breaks':>7} {'seconds':>8}"
    )
    for name in ("folding", "no_folding"):
        r = results[name]
        print(
            f"{name:14} {r['requests']:>9} {r['input_tokens_p50']:>11,} {r['input_tokens_last']:>12,} "
            f"{r['prefix_share_mean']:>13.1%} {r['prefix_share_p10']:>6.1%} {r['prefix_breaks']:>7} {r['seconds']:>8}"
        )
    print(f"input tokens over the session, folding / no folding: {results['tokens_ratio']:.2f}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--pi", default="1.6.0,0.73.1", help="pi versions, comma-separated")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out: dict[str, Any] = {"commit": git_commit(), "machine": machine(), "runs": args.runs, "pi": {}}
    for version in [v.strip() for v in args.pi.split(",")]:
        out["pi"][version] = bench(version, args.runs)
        show(version, args.runs, out["pi"][version])
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
