"""Self-review inside real pi: `/review` notifies the report, `/dream` hands it to the model as evidence.

Real pi (0.73.1 and 1.6.0) in RPC mode with the scripted fake model and the pi-memory extension, as in
`test_pi_memory.py` (whose world and payload recorder this reuses). The archive holds the review
fixtures (`tests/data/review`): a test command failing 5 times over 3 sessions, two corrections.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_install import InstallUnavailable, PiInstall, ensure_pi
from test_pi_live import PI_VERSIONS, wait_for
from test_pi_memory import MemoryWorld, notes_with, requests

from pi_memory import Archive
from pi_memory.core.format import EVIDENCE_HEADER
from pi_memory.memory import Memories

REVIEW_DATA = Path(__file__).resolve().parent.parent / "data" / "review"
RULE = "Run make fixtures before python -m pytest tests/test_cart.py (r6 passed after it)"
SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "propose at most",
            "replies": [
                {
                    "content": [
                        {
                            "type": "toolCall",
                            "name": "memory_propose",
                            "arguments": {"body": RULE, "kind": "constraint"},
                        }
                    ]
                },
                {"content": "Proposed one rule; confirm it with /remember confirm:ID."},
            ],
        }
    ],
    "fallback": "OK.",
}


@pytest.fixture(scope="session", params=PI_VERSIONS)
def review_pi(request: pytest.FixtureRequest) -> PiInstall:
    try:
        return ensure_pi(str(request.param))
    except InstallUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def rworld(review_pi: PiInstall, isolated_home: Path, tmp_path: Path) -> Iterator[MemoryWorld]:
    w = MemoryWorld(review_pi, isolated_home, tmp_path)
    (tmp_path / "faux-script.json").write_text(json.dumps(SCRIPT, ensure_ascii=False), encoding="utf-8")
    with Archive.open(w.db) as archive:
        archive.import_paths([REVIEW_DATA])
    yield w
    w.stop_all()


def proposals(db: str, cwd: Path) -> list[Any]:
    with Archive.open(db) as archive:
        listing = Memories(archive.store).list(str(cwd), "", status="provisional")
    return [f.record for f in listing.found]


def test_review_notifies_the_report_and_dream_asks_the_model_for_provisional_rules(rworld: MemoryWorld) -> None:
    shop = rworld.project("shop")
    rpc, payloads = rworld.session(shop)
    rpc.command("/review since:all project:all")
    wait_for(lambda: bool(notes_with(rpc, "Recurring failures")))
    (report,) = notes_with(rpc, "Recurring failures")
    assert (
        "5x in 3 sessions  bash: python -m pytest tests/test_cart.py -q" in report and "User corrections (2)" in report
    )
    assert not requests(payloads)  # /review starts no model turn

    rpc.command("/dream since:all project:all min:2")
    wait_for(lambda: bool(proposals(rworld.db, shop)), timeout=60)
    (proposal,) = proposals(rworld.db, shop)
    assert proposal.body == RULE and proposal.author == "model" and proposal.status == "provisional"
    assert rpc.close() == 0

    (sent,) = [p for p in requests(payloads) if "propose at most" in json.dumps(p, ensure_ascii=False)][:1]
    text = json.dumps(sent["messages"], ensure_ascii=False)
    assert EVIDENCE_HEADER in text and "memory_propose" in text and "5x in 3 sessions" in text
    problems = [n for n in rpc.notifications if n.startswith("pi-memory") and "failed" in n]
    assert not problems, rworld.stderr()
