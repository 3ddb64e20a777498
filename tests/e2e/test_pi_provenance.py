"""Blame inside real pi: the scripted model writes and edits files in a git repository over four runs
of two sessions, the user commits in between and edits by hand; then `pi-memory blame` from outside.

Real pi (0.73.1 and 1.6.0) in RPC mode with the faux model and the pi-memory extension, as in
`test_pi_live.py`. Every line written carries a marker of its writer (`«r3»`, `«hand»`), so the truth
of each line is read off the file: every line pi wrote must be attributed to the run that wrote it,
and no line written by hand to a session. The model also asks `session_blame` itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_install import InstallUnavailable, PiInstall, ensure_pi
from test_pi_live import PI_VERSIONS, World

from pi_memory import Archive

MARK = re.compile(r"«(r\d+|hand)»")


def block(who: str, *lines: str) -> str:
    return "".join(f"{line}  # «{who}»\n" for line in lines)


CONFIG_1 = block("r1", "def load(path):", "    text = open(path).read()", "    return parse(text)")
DEFAULTS_1 = block("r1", "TIMEOUT = 30", "RETRIES = 3", "BACKOFF = 1.5")
HAND_RETRIES = "RETRIES = 5  # «hand» tuned in production\n"
HAND_COMMENT = "# loader of the app settings  # «hand»\n"
ASKS = {
    "r1": "run one: write the config loader and its defaults",
    "r2": "run two: parse TOML in the loader",
    "r3": "run three: add validation and logging to the loader",
    "r4": "run four: rewrite the defaults with a dataclass, keep the tuned values",
}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "name": name, "arguments": arguments}


SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "run one",
            "replies": [
                {"content": [call("write", path="app/config.py", content=CONFIG_1)]},
                {"content": [call("write", path="app/defaults.py", content=DEFAULTS_1)]},
                {"content": "Wrote the loader and the defaults."},
            ],
        },
        {
            "match": "run two",
            "replies": [
                {
                    "content": [
                        call(
                            "edit",
                            path="app/config.py",
                            edits=[
                                {
                                    "oldText": "    return parse(text)  # «r1»\n",
                                    "newText": block("r2", "    import tomllib", "    return tomllib.loads(text)"),
                                }
                            ],
                        )
                    ]
                },  # fmt: skip
                # an edit whose old text is not in the file: pi refuses it, nothing is written
                {
                    "content": [
                        call(
                            "edit",
                            path="app/config.py",
                            edits=[{"oldText": "no such line\n", "newText": block("r2", "never")}],
                        )
                    ]
                },
                {"content": "The loader parses TOML now."},
            ],
        },
        {
            "match": "run three",
            "replies": [
                # the single-edit shape older pi took, which pi still accepts
                {
                    "content": [
                        call(
                            "edit",
                            path="app/config.py",
                            oldText="    import tomllib  # «r2»\n",
                            newText=block("r3", "    log.info('loading %s', path)") + "    import tomllib  # «r2»\n",
                        )
                    ]
                },  # fmt: skip
                {
                    "content": [
                        call(
                            "edit",
                            path="app/config.py",
                            edits=[
                                {
                                    "oldText": "    return tomllib.loads(text)  # «r2»\n",
                                    "newText": block(
                                        "r3", "    data = tomllib.loads(text)", "    validate(data)", "    return data"
                                    ),
                                }
                            ],
                        )
                    ]
                },  # fmt: skip
                {"content": "Validation and logging are in."},
            ],
        },
        {
            "match": "run four",
            "replies": [
                {
                    "content": [
                        call(
                            "write",
                            path="app/defaults.py",
                            content=block("r4", "from dataclasses import dataclass", "@dataclass", "class Defaults:")
                            + HAND_RETRIES
                            + block("r4", "    JITTER = 0.1"),
                        )
                    ]
                },  # fmt: skip
                {
                    "content": [
                        call(
                            "edit",
                            path="app/config.py",
                            edits=[
                                {
                                    "oldText": HAND_COMMENT,
                                    "newText": HAND_COMMENT + block("r4", "from .validate import validate"),
                                }
                            ],
                        )
                    ]
                },  # fmt: skip
                {"content": [call("session_blame", path="app/config.py:1-4")]},
                {"content": "Rewrote the defaults."},
            ],
        },
    ],
    "fallback": "OK.",
}


class BlameWorld(World):
    """`World` with this test's script, and a git repository for the project."""

    def __init__(self, pi: PiInstall, home: Path, tmp_path: Path) -> None:
        super().__init__(pi, home, tmp_path)
        (tmp_path / "faux-script.json").write_text(json.dumps(SCRIPT, ensure_ascii=False), encoding="utf-8")
        self.repo = home / "proj"
        self.repo.mkdir()
        for args in (["init", "-q"], ["config", "user.email", "dev@example.com"], ["config", "user.name", "Dev"]):
            self.git(*args)

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.repo, check=True, capture_output=True, text=True).stdout

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD").strip()

    def hand(self, path: str, old: str, new: str) -> None:
        target = self.repo / path
        text = target.read_text(encoding="utf-8")
        assert text.count(old) == 1, (path, old, text)
        target.write_text(text.replace(old, new), encoding="utf-8")

    def cli(self, *args: str) -> str:
        """`pi-memory` as a user runs it, in the repository."""
        cmd = [sys.executable, "-m", "pi_memory", *args]
        done = subprocess.run(cmd, cwd=self.repo, env=dict(os.environ), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout


@pytest.fixture(scope="session", params=PI_VERSIONS)
def installed_pi(request: pytest.FixtureRequest) -> PiInstall:
    try:
        return ensure_pi(str(request.param))
    except InstallUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def bworld(installed_pi: PiInstall, isolated_home: Path, tmp_path: Path) -> Iterator[BlameWorld]:
    w = BlameWorld(installed_pi, isolated_home, tmp_path)
    yield w
    w.stop_all()


def truth(path: Path) -> list[str | None]:
    return [m.group(1) if (m := MARK.search(line)) else None for line in path.read_text(encoding="utf-8").splitlines()]


def test_blame_gives_every_line_pi_wrote_its_run_and_no_hand_written_line_to_a_session(bworld: BlameWorld) -> None:
    w = bworld
    first = w.rpc(w.repo)
    first.prompt(ASKS["r1"])
    first.prompt(ASKS["r2"])
    assert first.close() == 0
    loader = w.commit("config loader")
    w.hand("app/defaults.py", "RETRIES = 3  # «r1»\n", HAND_RETRIES)
    w.hand("app/config.py", "def load(path):  # «r1»\n", HAND_COMMENT + "def load(path):  # «r1»\n")

    second = w.rpc(w.repo)
    second.prompt(ASKS["r3"])
    second.prompt(ASKS["r4"])
    assert second.close() == 0
    w.hand(
        "app/config.py",
        "    validate(data)  # «r3»\n",
        "    validate(data)  # «r3»\n    assert data, 'empty'  # «hand»\n",
    )
    w.commit("defaults")
    moved = "from .validate import validate  # «r4»\n"  # a person moves a line pi wrote to the end
    text = (w.repo / "app/config.py").read_text(encoding="utf-8")
    (w.repo / "app/config.py").write_text(text.replace(moved, "") + moved, encoding="utf-8")
    w.commit("move the import")

    scores = {"agent": 0, "right": 0, "hand": 0, "hand_given": 0}
    for path in ("app/config.py", "app/defaults.py"):
        found = json.loads(w.cli("blame", path, "--json"))
        said = [line["written_by"]["ask"] if line["written_by"] else None for line in found["lines"]]
        by_ask = {v: k for k, v in ASKS.items()}
        for who, ask in zip(truth(w.repo / path), said, strict=True):
            if who == "hand":
                scores["hand"] += 1
                scores["hand_given"] += ask is not None
            elif who is not None:
                scores["agent"] += 1
                scores["right"] += by_ask.get(ask or "") == who
    assert scores == {"agent": 12, "right": 12, "hand": 3, "hand_given": 0}, scores

    # what only the live agent saw: the commit each edit was on, and the file a person had edited
    with Archive.open(w.db) as archive:
        observed = archive.store.rows(
            "SELECT git_commit, before_text IS NOT NULL FROM edit_observed ORDER BY observed_at"
        )
    assert len(observed) == 7 and {c for c, _snap in observed[3:]} == {loader}
    assert sum(1 for _c, snap in observed if snap) >= 2  # the two files edited by hand in between
    history = w.cli("history", "app/config.py")
    assert history.count("run three") == 1 and loader[:10] in history

    # from outside: an import of pi's files adds nothing live capture missed; export and resume
    imported = json.loads(w.cli("import", str(w.agent_dir / "sessions"), "--json"))
    assert imported["added"] == 0 and not imported["errors"]
    session_file = sorted((w.agent_dir / "sessions").rglob("*.jsonl"))[-1]
    sid = json.loads(session_file.read_text(encoding="utf-8").splitlines()[0])["id"]
    markdown = w.cli("export", sid)
    assert "[archived history: evidence" in markdown and "→ write" in markdown and "JITTER = 0.1" in markdown
    assert "\\n" not in markdown  # tool call arguments as they were, not JSON-escaped
    assert w.cli("resume", sid).strip() == f"cd {w.repo} && pi --session {session_file}"

    # the model asked session_blame itself: the same answer, under the evidence header
    results = [json.loads(x) for x in session_file.read_text(encoding="utf-8").splitlines()]
    answer = next(
        "".join(b.get("text", "") for b in e["message"]["content"])
        for e in results
        if e.get("type") == "message" and e["message"].get("toolName") == "session_blame"
    )
    assert answer.startswith("[archived history") and "run one: write the config loader" in answer
    assert re.search(r"^2 · ", answer, flags=re.M) is None  # line 2 (`def load`) is pi's, line 1 a person's
    assert re.search(r"^1 · ", answer, flags=re.M)
