"""In-session folding inside real pi (0.73.1 and 1.6.0): smaller requests, a byte-stable prefix, nothing lost.

A scripted session of 32 runs, each reading a large file and running a large `cat`, goes through
real pi in RPC mode with the scripted model, the pi-memory extension and the bridge of this
checkout, once with folding on (with an in-process reload and a `pi -c` restart on the way) and
once, in another project, with `fold.enabled: false`. `payload-recorder.ts` records every
provider request. From those payloads: (a) tokens per request with and without folding,
(b) every request starts with the previous request's messages, except once at each fold,
(c) a folded output is read back exactly by the model's `session_read` with the address its stub
cites, (d) no request carries a tool call without its result or a result without its call,
(e) the first requests after `/reload` and after `pi -c` start with the bytes of the one before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_install import InstallUnavailable, PiInstall, ensure_pi
from test_pi_live import HERE, PI_VERSIONS, World

RUNS = 32
FOLD_RUN = 10  # the model calls `fold` with a summary
READ_RUN = 20  # the model calls session_read with the address a stub cites
READ_CHARS, CAT_CHARS = 6000, 3000
SUMMARY = "big-1..big-9 hold the config tables; the logs show nothing failing"


def big(tag: str, size: int) -> str:
    line = f"{tag} | scripted line of a large file for the fold test 0123456789\n"
    return (line * (size // len(line) + 1))[:size]


def run_replies(n: int) -> list[dict[str, Any]]:
    replies: list[dict[str, Any]] = [
        {"content": [{"type": "toolCall", "name": "read", "arguments": {"path": f"big-{n}.txt"}}]},
        {"content": [{"type": "toolCall", "name": "bash", "arguments": {"command": f"cat log-{n}.txt"}}]},
    ]
    if n == FOLD_RUN:
        replies.append({"content": [{"type": "toolCall", "name": "fold", "arguments": {"summary": SUMMARY}}]})
    if n == READ_RUN:
        replies.append(
            {"content": [{"type": "toolCall", "name": "session_read", "arguments": {"address": "FROM_FOLD"}}]}
        )
    replies.append({"content": f"run {n} done"})
    return replies


SCRIPT = {
    "turns": [{"match": f"fold run {n}:", "replies": run_replies(n)} for n in range(1, RUNS + 1)],
    "fallback": "OK.",
}


class FoldWorld(World):
    def __init__(self, pi: PiInstall, home: Path, tmp_path: Path) -> None:
        super().__init__(pi, home, tmp_path)
        (tmp_path / "faux-script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
        settings = {"compaction": {"enabled": False}, "retry": {"baseDelayMs": 100}}
        (self.agent_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        self.tmp = tmp_path

    def base_cmd(self) -> list[str]:
        return [*super().base_cmd(), "-e", str(HERE / "payload-recorder.ts"), "-e", str(HERE / "e2e-fold-hooks.ts")]

    def fold_project(self, name: str, fold: dict[str, Any]) -> Path:
        cwd = self.project(name)
        for n in range(1, RUNS + 1):
            (cwd / f"big-{n}.txt").write_text(big(f"big-{n}", READ_CHARS), encoding="utf-8")
            (cwd / f"log-{n}.txt").write_text(big(f"log-{n}", CAT_CHARS), encoding="utf-8")
        (cwd / ".pi").mkdir(exist_ok=True)
        (cwd / ".pi" / "pi-memory.json").write_text(json.dumps({"fold": fold}), encoding="utf-8")
        return cwd

    def env_for(self, payloads: Path) -> dict[str, str]:
        return dict(self.env, PI_E2E_PAYLOADS=str(payloads))


@pytest.fixture(scope="session", params=PI_VERSIONS)
def fold_pi(request: pytest.FixtureRequest) -> PiInstall:
    try:
        return ensure_pi(str(request.param))
    except InstallUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def fworld(fold_pi: PiInstall, isolated_home: Path, tmp_path: Path) -> Iterator[FoldWorld]:
    w = FoldWorld(fold_pi, isolated_home, tmp_path)
    yield w
    w.stop_all()


def recorded(path: Path) -> list[dict[str, Any]]:
    """Each real model request: `{payload, folds}` (pi 1.x cache-warming pings left out)."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if r["payload"].get("maxTokens") != 1]


def requests(path: Path) -> list[dict[str, Any]]:
    return [r["payload"] for r in recorded(path)]


def canon(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def request_tokens(payload: dict[str, Any]) -> int:
    return len(canon({k: payload.get(k) for k in ("systemPrompt", "messages", "tools")})) // 4


def appends(prev: dict[str, Any], cur: dict[str, Any]) -> bool:
    a, b = prev["messages"], cur["messages"]
    return len(b) >= len(a) and canon(b[: len(a)]) == canon(a)


def first_change(prev: dict[str, Any], cur: dict[str, Any]) -> dict[str, Any]:
    for old, new in zip(prev["messages"], cur["messages"], strict=False):
        if canon(old) != canon(new):
            return dict(new)
    raise AssertionError("no changed message")


def text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def fold_texts(records: list[dict[str, Any]]) -> set[str]:
    return {s["text"] for r in records for s in r.get("stubs") or []} | {r["text"] for r in records if r.get("text")}


def assert_changes_are_new_folds(prev: dict[str, Any], cur: dict[str, Any], new: list[dict[str, Any]]) -> None:
    """Messages that differ from the previous request are the new records' stubs or blocks, nothing else."""
    texts = fold_texts(new)
    a, b = prev["messages"], cur["messages"]
    if any(r["kind"] != "stubs" for r in new):  # a span shifts what follows: its first change is the block
        assert text(first_change(prev, cur)) in texts
        return
    assert len(b) >= len(a)
    changed = [j for j in range(len(a)) if canon(a[j]) != canon(b[j])]
    assert changed and all(text(b[j]) in texts for j in changed)


def orphans(payload: dict[str, Any]) -> list[str]:
    """Tool results without a call before them, and calls without a result after them."""
    calls: list[str] = []
    answered: set[str] = set()
    problems = []
    for m in payload["messages"]:
        if m.get("role") == "assistant" and isinstance(m.get("content"), list):
            calls += [b["id"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "toolCall"]
        elif m.get("role") == "toolResult":
            if m.get("toolCallId") not in calls:
                problems.append(f"result {m.get('toolCallId')} without its call")
            answered.add(str(m.get("toolCallId")))
    return problems + [f"call {c} without its result" for c in calls if c not in answered]


def session_entries(world: World) -> list[dict[str, Any]]:
    (path,) = [p for p in world.session_files() if "fold-on" in str(p) or True][:1]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]]


def drive(world: FoldWorld, cwd: Path, payloads: Path, marks: dict[str, int], reload_and_resume: bool) -> None:
    first = world.rpc(cwd, env=world.env_for(payloads))
    for n in range(1, 17):
        first.prompt(f"fold run {n}: read the next file")
    if reload_and_resume:
        marks["reload"] = len(requests(payloads))
        first.command("/e2e-reload")
    for n in range(17, 25):
        first.prompt(f"fold run {n}: read the next file")
    assert first.close() == 0
    marks["resume"] = len(requests(payloads))
    second = world.rpc(cwd, "-c", env=world.env_for(payloads))
    for n in range(25, RUNS + 1):
        second.prompt(f"fold run {n}: read the next file")
    second.command("/fold status")
    world.notes = second.notifications  # type: ignore[attr-defined]
    assert second.close() == 0


def test_folding_shrinks_requests_keeps_the_prefix_byte_stable_and_loses_nothing(fworld: FoldWorld) -> None:
    on = fworld.fold_project("fold-on", {"afterRuns": 3, "mergeTokens": 500})
    off = fworld.fold_project("fold-off", {"enabled": False})
    on_payloads, off_payloads = fworld.tmp / "on.jsonl", fworld.tmp / "off.jsonl"
    marks: dict[str, int] = {}
    drive(fworld, on, on_payloads, marks, reload_and_resume=True)
    status_notes = [n for n in fworld.notes if n.startswith("folding:")]  # type: ignore[attr-defined]
    drive(fworld, off, off_payloads, {}, reload_and_resume=False)
    folded, plain = requests(on_payloads), requests(off_payloads)
    assert len(folded) == len(plain) >= RUNS * 3

    # (a) tokens per request, with and without folding
    with_fold = [request_tokens(p) for p in folded]
    without = [request_tokens(p) for p in plain]
    ratio_last = with_fold[-1] / without[-1]
    ratio_mean = sum(with_fold) / sum(without)
    print(
        f"\nfold e2e: last request {with_fold[-1]:,} vs {without[-1]:,} tokens (ratio {ratio_last:.2f}); "
        f"mean ratio {ratio_mean:.2f}"
    )
    assert ratio_last < 0.5 and ratio_mean < 0.8

    # the session's fold records: stubs, the model's block, a level merge
    session_file = next(
        p for p in fworld.session_files() if canon(json.loads(p.read_text().splitlines()[0])["cwd"]) == canon(str(on))
    )
    entries = [json.loads(line) for line in session_file.read_text(encoding="utf-8").splitlines()[1:]]
    records = [e["data"] for e in entries if e.get("type") == "custom" and e.get("customType") == "pi-memory-fold"]
    kinds = {r["kind"] for r in records}
    assert {"stubs", "block", "merge"} <= kinds, kinds
    assert status_notes and "folds" in status_notes[-1] and "tokens saved" in status_notes[-1]

    # (b) every request starts with the previous one's messages, except at a request that made new
    # fold records, where what changed is exactly the new records' texts
    assert all(
        p.get("tools") == folded[0].get("tools") and p.get("systemPrompt") == folded[0].get("systemPrompt")
        for p in folded
    )
    counts = [r["folds"] for r in recorded(on_payloads)]
    breaks = [i for i in range(1, len(folded)) if not appends(folded[i - 1], folded[i])]
    assert breaks and all(counts[i] > counts[i - 1] for i in breaks)
    for i in breaks:
        assert_changes_are_new_folds(folded[i - 1], folded[i], records[counts[i - 1] : counts[i]])
    assert all(appends(a, b) for a, b in zip(plain, plain[1:], strict=False))

    # (c) the stub's address reads the folded output back exactly through session_read
    by_id = {e["id"]: e for e in entries if e.get("type") == "message"}
    reads = [
        e["message"] for e in entries if e.get("type") == "message" and e["message"].get("toolName") == "session_read"
    ]
    assert reads, "the model's session_read did not run"
    answer = text(reads[0])
    cited = next(
        it
        for r in records
        if r["kind"] == "stubs"
        for it in r["items"]
        if it.get("address") and it["address"] in answer
    )
    original = text(by_id[cited["entry"]]["message"])
    assert len(original) >= READ_CHARS // 2 and original in answer

    # (d) no orphaned tool call or result in any request
    for p in folded + plain:
        assert orphans(p) == []

    # (e) /reload and `pi -c`: the first request after each starts with the bytes of the one before,
    # except what folds made at that very request changed (checked as in (b))
    for mark in (marks["reload"], marks["resume"]):
        assert appends(folded[mark - 1], folded[mark]) or counts[mark] > counts[mark - 1]


def test_folds_before_a_compaction_go_with_it_and_the_checkpoint_cites_the_folded_entries(fworld: FoldWorld) -> None:
    cwd = fworld.fold_project("fold-compact", {"afterRuns": 2})
    settings = {"compaction": {"keepRecentTokens": 4000}, "retry": {"baseDelayMs": 100}}  # keeps about two runs
    (fworld.agent_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    payloads = fworld.tmp / "compact.jsonl"
    rpc = fworld.rpc(cwd, env=fworld.env_for(payloads))
    for n in range(1, 9):
        rpc.prompt(f"fold run {n}: read the next file")
    before = len(requests(payloads))
    rpc.request({"type": "compact"})
    for n in range(11, 16):  # runs without the fold tool or session_read
        rpc.prompt(f"fold run {n}: read the next file")
    assert rpc.close() == 0

    (session_file,) = [
        p for p in fworld.session_files() if json.loads(p.read_text().splitlines()[0])["cwd"] == str(cwd)
    ]
    entries = [json.loads(line) for line in session_file.read_text(encoding="utf-8").splitlines()[1:]]
    (compaction,) = [e for e in entries if e["type"] == "compaction"]
    assert compaction.get("fromHook") and compaction["details"].get("sourceHash")  # pi-memory's takeover, unchanged
    records = [e["data"] for e in entries if e.get("type") == "custom" and e.get("customType") == "pi-memory-fold"]
    at = entries.index(compaction)
    ids = [e["id"] for e in entries]
    old = [s for r in records if r["kind"] == "stubs" for s in r["stubs"] if ids.index(s["entry"]) < at]
    cut = ids.index(compaction["firstKeptEntryId"])
    gone = [s for s in old if ids.index(s["entry"]) < cut]
    assert gone and any(s["entry"] in compaction["summary"] for s in gone)  # cited by entry id like any other

    after = requests(payloads)[before:]
    assert after and all(orphans(p) == [] for p in after)
    for p in after:  # a compacted-away entry's stub is not in any later request
        texts = {text(m) for m in p["messages"]}
        assert not any(s["text"] in texts for s in gone)
    later = [r for r in records if entries.index(next(e for e in entries if e.get("data") is r)) > at]
    assert any(r["kind"] == "stubs" for r in later)  # folding goes on after the compaction
    last = after[-1]["messages"]
    assert any(text(m).startswith("[read ") for m in last)
