"""Usage and the context ledger inside real pi (0.73.1 and 1.6.0): the model asks what the session cost.

A scripted session of 8 runs, each reading a real source file of this repository and running a
`cat` of another, goes through real pi in RPC mode with the scripted model (whose usage counts
its prompt at four characters a token and simulates a prefix cache), the pi-memory extension
and the bridge of this checkout, folding after 2 runs. In the last run the model calls
`session_usage`; then `/usage` is typed. Checked: the tool's answer and `/usage` show this
session's requests and its ledger with the fold; `pi-memory usage ledger` shows each fold's
savings (tokens a request, requests it lasted over) with the prefix-cache share before and after
it, and the first fold's savings agree with the drop of the prompt the provider reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_install import InstallUnavailable, PiInstall, ensure_pi
from test_pi_live import HERE, PI_VERSIONS, World

RUNS = 8
ASK_RUN = RUNS  # the model calls session_usage
# the largest ASCII source files: the scripted model counts four characters a token, which is
# about right for code (the estimate's o200k fit: 4.11) and not for Chinese
SOURCES = sorted(
    (p for p in (HERE.parent.parent / "src" / "pi_memory").rglob("*.py") if p.read_text(encoding="utf-8").isascii()),
    key=lambda p: -p.stat().st_size,
)[: RUNS * 2]


def run_replies(n: int) -> list[dict[str, Any]]:
    replies: list[dict[str, Any]] = [
        {"content": [{"type": "toolCall", "name": "read", "arguments": {"path": f"src/a{n}.py"}}]},
        {"content": [{"type": "toolCall", "name": "bash", "arguments": {"command": f"cat src/b{n}.py"}}]},
    ]
    if n == ASK_RUN:
        replies.append({"content": [{"type": "toolCall", "name": "session_usage", "arguments": {}}]})
    replies.append({"content": f"run {n} done"})
    return replies


SCRIPT = {
    "turns": [{"match": f"usage run {n}:", "replies": run_replies(n)} for n in range(1, RUNS + 1)],
    "fallback": "OK.",
}


class UsageWorld(World):
    def __init__(self, pi: PiInstall, home: Path, tmp_path: Path) -> None:
        super().__init__(pi, home, tmp_path)
        (tmp_path / "faux-script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
        settings = {"compaction": {"enabled": False}, "retry": {"baseDelayMs": 100}}
        (self.agent_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")

    def usage_project(self) -> Path:
        cwd = self.project("usage-on")
        (cwd / "src").mkdir(exist_ok=True)
        for n in range(1, RUNS + 1):  # real files of this repository as the tool outputs
            (cwd / "src" / f"a{n}.py").write_text(SOURCES[2 * n - 2].read_text(encoding="utf-8"), encoding="utf-8")
            (cwd / "src" / f"b{n}.py").write_text(SOURCES[2 * n - 1].read_text(encoding="utf-8"), encoding="utf-8")
        (cwd / ".pi").mkdir(exist_ok=True)
        (cwd / ".pi" / "pi-memory.json").write_text(json.dumps({"fold": {"afterRuns": 2}}), encoding="utf-8")
        return cwd


@pytest.fixture(scope="session", params=PI_VERSIONS)
def usage_pi(request: pytest.FixtureRequest) -> PiInstall:
    try:
        return ensure_pi(str(request.param))
    except InstallUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def uworld(usage_pi: PiInstall, isolated_home: Path, tmp_path: Path) -> Iterator[UsageWorld]:
    w = UsageWorld(usage_pi, isolated_home, tmp_path)
    yield w
    w.stop_all()


def cli_json(world: World, *args: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-m", "pi_memory", "--db", world.db, *args, "--json"],
        env=world.env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def entries_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]]


def test_the_model_asks_what_the_session_cost_and_its_ledger_shows_the_folds_savings(uworld: UsageWorld) -> None:
    cwd = uworld.usage_project()
    rpc = uworld.rpc(cwd)
    for n in range(1, RUNS + 1):
        rpc.prompt(f"usage run {n}: read the next file")
    rpc.command("/usage")
    notes = list(rpc.notifications)
    assert rpc.close() == 0

    (session_file,) = uworld.session_files()
    entries = entries_of(session_file)
    sid = json.loads(session_file.read_text(encoding="utf-8").splitlines()[0])["id"]
    assistants = [e for e in entries if e["type"] == "message" and e["message"]["role"] == "assistant"]
    folds = [e["data"] for e in entries if e["type"] == "custom" and e.get("customType") == "pi-memory-fold"]
    assert folds and all(f["before_tokens"] > f["after_tokens"] > 0 for f in folds)

    # the model's tool answer: this session, its requests, and the ledger with the fold(s)
    (answer,) = [
        e["message"] for e in entries if e["type"] == "message" and e["message"].get("toolName") == "session_usage"
    ]
    text = "".join(b.get("text", "") for b in answer["content"])
    assert f"session {sid}" in text and "faux/faux-1" in text and "context ledger:" in text
    assert "  fold " in text and "not in the price table" in text  # the scripted model has no price: never $0
    # `/usage` for people says the same (one notification), with every request counted by then
    (shown,) = [n for n in notes if "context ledger:" in n]
    assert f"session {sid}" in shown

    report = cli_json(uworld, "usage", "session", "--session", sid)
    assert report["total"]["requests"] == len(assistants)
    ledger = cli_json(uworld, "usage", "ledger", sid)
    fold_events = [e for e in ledger["events"] if e["kind"] == "fold"]
    assert len(fold_events) == len(folds)
    assert all(e["tokens"] < 0 and e["requests"] > 0 for e in fold_events)
    assert ledger["totals"]["removed_token_requests"] == -sum(e["token_requests"] for e in fold_events)
    first = fold_events[0]
    # the fold changed the prompt's bytes once, at its first stub: the provider's cache served the
    # request after it only up to there, where a request that only appends reads all of the one before
    assert first["cache_before"] is not None and first["cache_after"] is not None
    assert first["cache_after"] * first["prompt_after"] < 0.5 * first["prompt_before"]
    # its savings agree with what the provider reported: the prompt shrank by about what the fold
    # removed (less the new prompt that came with it); the scripted model counts four characters a
    # token (about right for code), and pi 0.73's version of it reports the uncached part twice (as
    # input and as cache write), so its prompt is input + cache read
    at = next(i for i, e in enumerate(entries) if e.get("customType") == "pi-memory-fold")
    before = next(e for e in reversed(entries[:at]) if e in assistants)["message"]["usage"]
    after = next(e for e in entries[at:] if e in assistants)["message"]["usage"]
    assert first["prompt_before"] == before["input"] + before["cacheRead"] + before["cacheWrite"]
    drop = provider_prompt(before, uworld.pi.major) - provider_prompt(after, uworld.pi.major)
    print(f"\nusage e2e: fold f1 removed {-first['tokens']:,} tokens a request (estimate); prompt dropped {drop:,}")
    assert drop > 0 and abs(-first["tokens"] - drop) <= 0.15 * drop


def provider_prompt(u: dict[str, int], pi_major: int) -> int:
    """The prompt tokens the scripted model counted (pi 0.73's reports its uncached part twice)."""
    return u["input"] + u["cacheRead"] + (u["cacheWrite"] if pi_major >= 1 else 0)
