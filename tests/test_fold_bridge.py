"""Folding through the bridge, on a real archive: stubs cite run addresses that read back the output."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from fold_helpers import Session
from pi_memory.frontends.bridge.server import METHODS
from pi_memory.frontends.cli.main import cli

SID = "fold-session-1"


def pi_entries(s: Session) -> list[dict[str, Any]]:
    """The helper's entries as pi writes them (parent links, ISO timestamps)."""
    out, parent = [], None
    for e in s.entries:
        ts = e["message"]["timestamp"] if e["type"] == "message" else s.clock
        iso = datetime.fromtimestamp(ts / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")
        out.append(dict(e, parentId=parent, timestamp=iso))
        parent = e["id"]
    return out


def archived_session(archive: Any, tmp_path: Path) -> Session:
    s = Session(fold=False)  # the test calls the bridge itself
    s.lookup = lambda ids: archive.fold_addresses(SID, ids)
    METHODS["session_start"](archive, {"session_id": SID, "cwd": str(tmp_path)})
    for i in range(1, 5):
        s.run(i, [("read", {"path": f"src/f{i}.ts"}, 9000)])
        METHODS["backfill"](archive, {"session_id": SID, "entries": pi_entries(s)})
    s.user("run 5: next")
    return s


def test_fold_context_stubs_cite_addresses_that_read_back_the_whole_output(archive: Any, tmp_path: Path) -> None:
    s = archived_session(archive, tmp_path)
    out = METHODS["fold_context"](
        archive, {"session_id": SID, "cwd": str(tmp_path), "messages": s.messages, "entries": s.slim(), "folds": []}
    )
    (rec,) = out["records"]
    assert rec["kind"] == "stubs" and all(i["address"] for i in rec["items"])
    item = rec["items"][0]
    assert f"archived as {item['address']};" in rec["stubs"][0]["text"]
    original = next(e["message"] for e in s.entries if e["id"] == item["entry"])["content"][0]["text"]
    read = METHODS["read_address"](archive, {"address": item["address"]})
    assert original in read["text"] and read["text"].startswith("[archived history")
    assert out["edits"][0]["message"]["content"][0]["text"] == rec["stubs"][0]["text"]


def test_fold_now_with_a_summary_makes_one_block_and_status_counts_it(archive: Any, tmp_path: Path) -> None:
    s = archived_session(archive, tmp_path)
    params = {"session_id": SID, "cwd": str(tmp_path), "entries": pi_entries(s), "folds": [], "summary": "learned"}
    out = METHODS["fold_now"](archive, params)
    (rec,) = out["records"]
    assert rec["kind"] == "block" and "r1/m" in rec["text"] and "Folded:" in out["text"]
    st = METHODS["fold_status"](archive, {"cwd": str(tmp_path), "folds": out["records"]})
    assert st["status"]["blocks"] == {"1": 1} and "tokens saved" in st["text"]


def test_folding_off_in_the_project_file_leaves_the_context_alone(archive: Any, tmp_path: Path) -> None:
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "pi-memory.json").write_text(json.dumps({"fold": {"enabled": False}}), encoding="utf-8")
    s = archived_session(archive, tmp_path)
    params = {"session_id": SID, "cwd": str(tmp_path), "messages": s.messages, "entries": s.slim(), "folds": []}
    assert METHODS["fold_context"](archive, params) == {"edits": [], "records": []}


def test_pi_memory_status_shows_the_folds_of_a_session(archive: Any, tmp_path: Path, db_path: Path) -> None:
    s = archived_session(archive, tmp_path)
    out = METHODS["fold_context"](
        archive, {"session_id": SID, "cwd": str(tmp_path), "messages": s.messages, "entries": s.slim(), "folds": []}
    )
    s.persist(out["records"])
    METHODS["backfill"](archive, {"session_id": SID, "entries": pi_entries(s)})
    archive.close()
    result = CliRunner().invoke(cli, ["status", "--cwd", str(tmp_path), "--session", SID])
    assert result.exit_code == 0, result.output
    assert "folding: on" in result.output and "1 folds" in result.output and "4 stubs" in result.output
    data = json.loads(CliRunner().invoke(cli, ["status", "--cwd", str(tmp_path), "--session", SID, "--json"]).output)
    assert data["fold"]["stubs"] == 4 and data["fold"]["saved_tokens"] > 5000
