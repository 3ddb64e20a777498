"""Usage and cost: totals equal the session files' own numbers, prices equal the price table's,
unknown models stay unknown, the ledger shows what folding and compaction removed."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from genai_prices import Usage, calc_price

from pi_memory import Archive
from pi_memory.core import prices
from pi_memory.core.tokens import estimate_tokens
from pi_memory.core.usage import TokenUsage
from pi_memory.frontends.cli.main import cli

DATA = Path(__file__).parent / "data"


def sums(archive: Archive, agent: str | None = None) -> dict[str, int]:
    total = archive.usage("model", agent=agent).total
    return {
        "input": total.input,
        "output": total.output,
        "cache_read": total.cache_read,
        "cache_write": total.cache_write,
    }


def pi_file_sums(paths: list[Path]) -> dict[str, int]:
    """The usage fields of every request line of pi session files, added up (each request once)."""
    seen: set[str] = set()
    out = dict.fromkeys(("input", "output", "cache_read", "cache_write"), 0)
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            usage = (d.get("message") or {}).get("usage") if d.get("type") == "message" else d.get("usage")
            if not isinstance(usage, dict) or d.get("type") not in ("message", "usage", "compaction", "branch_summary"):
                continue
            ident = json.dumps([d.get("type"), d.get("timestamp"), usage], sort_keys=True)
            if ident in seen:  # a fork's copy of the same request
                continue
            seen.add(ident)
            for ours, theirs in (
                ("input", "input"),
                ("output", "output"),
                ("cache_read", "cacheRead"),
                ("cache_write", "cacheWrite"),
            ):
                out[ours] += usage.get(theirs, 0)
    return out


def test_pi_fixture_totals_equal_the_usage_fields_of_the_files(tmp_path: Path):
    files = sorted((DATA / "pi").glob("*.jsonl"))
    with Archive.open(tmp_path / "a.db") as a:
        a.import_paths(files)
        assert sums(a) == pi_file_sums(files)


def test_claude_fixture_totals_count_each_api_message_once(tmp_path: Path):
    files = sorted((DATA / "claude").rglob("*.jsonl"))
    expected = dict.fromkeys(("input", "output", "cache_read", "cache_write"), 0)
    last: dict[tuple[str, str], dict[str, int]] = {}
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            msg = d.get("message") or {}
            if d.get("type") == "assistant" and isinstance(msg.get("usage"), dict):
                last[(msg["id"], d.get("requestId") or "")] = msg["usage"]
    for usage in last.values():
        expected["input"] += usage.get("input_tokens", 0)
        expected["output"] += usage.get("output_tokens", 0)
        expected["cache_read"] += usage.get("cache_read_input_tokens", 0)
        expected["cache_write"] += usage.get("cache_creation_input_tokens", 0)
    with Archive.open(tmp_path / "a.db") as a:
        a.import_paths([DATA / "claude"])
        assert sums(a, "claude") == expected
        assert a.usage("model", agent="claude").total.unpriced == 0  # every Claude model has a price


def codex_rollout(path: Path) -> list[dict[str, int]]:
    """A Codex rollout with token_count events: two requests, one event repeated, one model switch."""
    totals = [
        {"input_tokens": 1200, "cached_input_tokens": 600, "output_tokens": 40, "reasoning_output_tokens": 10},
        {"input_tokens": 1200, "cached_input_tokens": 600, "output_tokens": 40, "reasoning_output_tokens": 10},
        {"input_tokens": 3000, "cached_input_tokens": 2400, "output_tokens": 90, "reasoning_output_tokens": 25},
    ]
    lines = [
        {
            "timestamp": "2026-01-02T03:04:05.000Z",
            "type": "session_meta",
            "payload": {
                "id": "c0dec0de-0000-4000-8000-000000000001",
                "timestamp": "2026-01-02T03:04:05.000Z",
                "cwd": "/w/proj",
                "model_provider": "openai",
            },
        },
        {
            "timestamp": "2026-01-02T03:04:06.000Z",
            "type": "turn_context",
            "payload": {"cwd": "/w/proj", "model": "gpt-5.2-codex"},
        },
        {
            "timestamp": "2026-01-02T03:04:07.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "List the files."}],
            },
        },
        {
            "timestamp": "2026-01-02T03:04:08.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Two files."}],
            },
        },
    ]
    for i, total in enumerate(totals):
        lines.append(
            {
                "timestamp": f"2026-01-02T03:05:0{i}.000Z",
                "type": "event_msg",
                "payload": {"type": "token_count", "info": {"total_token_usage": dict(total, total_tokens=0)}},
            }
        )
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return totals


def test_codex_requests_add_up_to_the_last_running_total_and_are_priced_by_the_table(tmp_path: Path):
    path = tmp_path / "rollout-2026-01-02T03-04-05-c0dec0de-0000-4000-8000-000000000001.jsonl"
    final = codex_rollout(path)[-1]
    with Archive.open(tmp_path / "a.db") as a:
        a.import_paths([path])
        total = a.usage("model").total
    assert total.requests == 2  # the repeated event adds nothing
    assert total.input + total.cache_read == final["input_tokens"]
    assert total.cache_read == final["cached_input_tokens"] and total.output == final["output_tokens"]
    when = datetime(2026, 1, 2, 3, 5, tzinfo=timezone.utc)
    table = sum(
        float(
            calc_price(
                Usage(input_tokens=i, cache_read_tokens=c, output_tokens=o),
                "gpt-5.2-codex",
                provider_id="openai",
                genai_request_timestamp=when,
            ).total_price
        )
        for i, c, o in ((1200, 600, 40), (1800, 1800, 50))
    )
    assert total.cost == pytest.approx(table, rel=0.01)


def pi_session(path: Path, model: str, provider: str, requests: list[tuple[int, int, int, int, float]]) -> None:
    """A pi session whose assistant messages record known usage (and cost, when not 0)."""
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": path.stem,
            "timestamp": "2026-03-01T10:00:00.000Z",
            "cwd": "/home/dev/known",
        }
    ]
    parent = None
    for i, (inp, out, cr, cw, cost) in enumerate(requests):
        ts = f"2026-03-01T10:{i:02d}:00.000Z"
        uid, aid = f"u{i:07d}", f"a{i:07d}"
        lines.append(
            {
                "type": "message",
                "id": uid,
                "parentId": parent,
                "timestamp": ts,
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": f"question {i}"}],
                    "timestamp": 1772359200000 + i * 60000,
                },
            }
        )
        usage = {
            "input": inp,
            "output": out,
            "cacheRead": cr,
            "cacheWrite": cw,
            "totalTokens": inp + out + cr + cw,
            "cost": {"total": cost},
        }
        lines.append(
            {
                "type": "message",
                "id": aid,
                "parentId": uid,
                "timestamp": ts,
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"answer {i}"}],
                    "provider": provider,
                    "model": model,
                    "usage": usage,
                    "stopReason": "stop",
                    "timestamp": 1772359200000 + i * 60000 + 1000,
                },
            }
        )
        parent = aid
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")


KNOWN = [(1200, 300, 0, 5000, 0.0), (50, 420, 5000, 800, 0.0), (10, 90, 5800, 0, 0.0)]


def test_a_session_with_known_usage_gives_its_exact_totals_and_the_tables_price(tmp_path: Path):
    path = tmp_path / "0a0b0c0d-known.jsonl"
    pi_session(path, "claude-sonnet-4-5", "anthropic", KNOWN)
    with Archive.open(tmp_path / "a.db") as a:
        a.import_paths([path])
        report = a.usage("session")
    total = report.total
    assert (total.input, total.output, total.cache_read, total.cache_write) == tuple(
        map(sum, list(zip(*KNOWN, strict=True))[:4])
    )
    when = datetime(2026, 3, 1, 10, tzinfo=timezone.utc)
    table = sum(
        float(
            calc_price(
                Usage(input_tokens=i + cr + cw, output_tokens=o, cache_read_tokens=cr, cache_write_tokens=cw),
                "claude-sonnet-4-5",
                provider_id="anthropic",
                genai_request_timestamp=when,
            ).total_price
        )
        for i, o, cr, cw, _ in KNOWN
    )
    assert total.cost == pytest.approx(table, rel=0.01) and total.unpriced == 0
    assert total.cache_hit_rate == pytest.approx(10800 / (1260 + 10800 + 5800))


def test_a_cost_the_session_recorded_wins_over_the_table(tmp_path: Path):
    path = tmp_path / "0a0b0c0e-recorded.jsonl"
    pi_session(path, "claude-sonnet-4-5", "anthropic", [(100, 10, 0, 0, 0.5)])
    with Archive.open(tmp_path / "a.db") as a:
        a.import_paths([path])
        assert a.usage().total.cost == pytest.approx(0.5)
        assert a.store.scalar("SELECT cost_source FROM usage") == "session"


def test_an_unknown_model_counts_its_tokens_and_leaves_its_cost_unknown_said_once(tmp_path: Path):
    path = tmp_path / "0a0b0c0f-unknown.jsonl"
    pi_session(path, "house-model-7", "in-house", [(100, 10, 0, 0, 0.0), (200, 20, 0, 0, 0.0)])
    db = tmp_path / "a.db"
    with Archive.open(db) as a:
        a.import_paths([path])
        report = a.usage()
    assert report.total.tokens == 330 and report.total.unpriced == 2
    assert report.total.to_dict()["cost_usd"] is None and report.unknown_models == ["in-house/house-model-7"]
    out = CliRunner().invoke(cli, ["--db", str(db), "usage", "daily"]).output
    assert "$0" not in out and out.count("house-model-7") == 1 and "?" in out


def test_live_capture_then_import_of_the_same_request_counts_it_once(tmp_path: Path):
    path = tmp_path / "0a0b0c10-live.jsonl"
    pi_session(path, "claude-sonnet-4-5", "anthropic", KNOWN[:1])
    assistant = json.loads(path.read_text().splitlines()[2])["message"]
    with Archive.open(tmp_path / "a.db") as a:
        a.ensure_session("0a0b0c10-live", "/home/dev/known")
        a.capture_message("0a0b0c10-live", assistant)
        assert a.usage().total.requests == 1
        a.import_paths([path])
        assert a.usage().total.requests == 1 and a.usage().total.output == 300


def test_the_data_step_fills_the_requests_of_an_archive_made_before(tmp_path: Path):
    files = sorted((DATA / "pi").glob("*.jsonl"))
    with Archive.open(tmp_path / "a.db") as a:
        a.import_paths(files)
        before = sums(a)
        with a.store.write():
            a.store.execute("DELETE FROM usage")
            a.store.execute("DELETE FROM usage_sum")
        assert sums(a)["output"] == 0
        a.store.backfill_usage()
        assert sums(a) == before
    legacy = tmp_path / "old.db"
    legacy.write_bytes((DATA / "legacy" / "schema5-pi.db").read_bytes())
    with Archive.open(legacy) as old:  # schema 5: migrated, its requests read from its verbatim lines
        # it was made from the same nine files (not agent-dir/'s three sessions, whose 4 requests
        # make a fresh import of the whole tests/data/pi folder 73): the same requests, exactly
        assert sums(old) == before and old.usage().total.requests == 69


def test_price_rate_cards_agree_with_the_table_within_rounding():
    for provider, model in (
        ("anthropic", "claude-haiku-4-5"),
        ("openai", "gpt-5.2-codex"),
        ("anthropic", "claude-sonnet-4-5"),
    ):
        for prompt in (1000, 250_000):  # below and past a tiered price's threshold
            u = TokenUsage("k", 1767225600000, provider, model, prompt, 700, 4000, 900)
            assert prices.price(u)[0] == pytest.approx(prices.exact_price(u), rel=1e-9)


def test_a_session_ledger_shows_what_a_fold_removed_and_the_cache_around_it(tmp_path: Path):
    path = tmp_path / "0a0b0c11-fold.jsonl"
    pi_session(
        path,
        "claude-sonnet-4-5",
        "anthropic",
        [(100, 10, 0, 9000, 0), (100, 10, 9000, 100, 0), (100, 10, 2000, 3000, 0), (100, 10, 5000, 50, 0)],
    )
    lines = path.read_text().splitlines()
    fold = {
        "type": "custom",
        "customType": "pi-memory-fold",
        "id": "f0000001",
        "parentId": "a0000001",
        "timestamp": "2026-03-01T10:01:30.000Z",
        "data": {
            "id": "f1",
            "kind": "stubs",
            "level": 0,
            "ts": 1772359290000,
            "before_chars": 24000,
            "after_chars": 400,
            "before_tokens": 6000,
            "after_tokens": 100,
            "trigger": "age",
        },
    }
    lines.insert(5, json.dumps(fold))
    path.write_text("\n".join(lines) + "\n")
    db = tmp_path / "a.db"
    with Archive.open(db) as a:
        a.import_paths([path])
        a.record_context_event("0a0b0c11-fold", "memory", "用户偏好：回答用中文。Prefer pytest -q.")
        led = a.usage_ledger("0a0b0c11-fold")
    folds = [e for e in led.events if e.kind == "fold"]
    assert len(folds) == 1 and folds[0].tokens == -5900 and folds[0].requests == 2
    assert folds[0].token_requests == -11800 and folds[0].cost is not None and folds[0].cost < 0
    assert folds[0].cache_before == pytest.approx(9000 / 9200) and folds[0].cache_after == pytest.approx(2000 / 5100)
    assert led.totals()["saved_cost_usd"] > 0
    out = CliRunner().invoke(cli, ["--db", str(db), "usage", "ledger", "0a0b0c11-fold", "--json"]).output
    assert json.loads(out)["totals"]["removed_token_requests"] == 11800


@pytest.mark.parametrize("family", ["openai", "anthropic"])
def test_the_token_estimate_is_within_15_percent_on_chinese_english_and_code(family: str):
    samples = json.loads((DATA / "tokens" / "samples.json").read_text(encoding="utf-8"))["samples"]
    for s in samples:
        assert abs(estimate_tokens(s["text"], family) / s[family] - 1) <= 0.15, s["kind"]
    chinese = next(s for s in samples if s["kind"] == "zh")
    assert abs((len(chinese["text"]) + 3) // 4 / chinese[family] - 1) > 0.3  # what chars / 4 gave


def test_usage_json_carries_rows_and_a_total(tmp_path: Path):
    db = tmp_path / "a.db"
    with Archive.open(db) as a:
        a.import_paths([DATA / "pi"])
    out = json.loads(CliRunner().invoke(cli, ["--db", str(db), "usage", "--json"]).output)
    assert out["view"] == "daily" and out["rows"] and out["total"]["tokens"] == sum(r["tokens"] for r in out["rows"])
    assert CliRunner().invoke(cli, ["--db", str(db), "usage", "daily", "--since", "2026-13-01"]).exit_code == 2
    line = CliRunner().invoke(cli, ["--db", str(db), "usage", "statusline"]).output
    assert "tok" in line and line.count("\n") == 1


def compaction_line(entry_id: str, parent: str, at: str, summary: str, tokens_before: int, **extra: Any) -> str:
    return json.dumps(
        {
            "type": "compaction",
            "id": entry_id,
            "parentId": parent,
            "timestamp": at,
            "summary": summary,
            "firstKeptEntryId": parent,
            "tokensBefore": tokens_before,
            **extra,
        }
    )


def test_the_ledger_takes_a_checkpoints_own_token_counts_and_settles_pis_summary_on_the_next_request(
    tmp_path: Path,
):
    path = tmp_path / "0a0b0c12-compact.jsonl"
    requests = [(100, 10, 0, 9000, 0), (100, 10, 0, 3000, 0), (100, 10, 3000, 900, 0), (100, 10, 3900, 0, 0)]
    pi_session(path, "claude-sonnet-4-5", "anthropic", requests)
    lines = path.read_text().splitlines()
    ours = {"contextTokensBefore": 7000, "contextTokensAfter": 2500, "tokenFamily": "anthropic"}
    # pi-memory's checkpoint after request 0, pi's own summary after request 2
    lines.insert(
        3,
        compaction_line(
            "c0000001", "a0000000", "2026-03-01T10:00:30.000Z", "checkpoint", 9100, fromHook=True, details=ours
        ),
    )
    lines.insert(8, compaction_line("c0000002", "a0000002", "2026-03-01T10:02:30.000Z", "pi summary", 5000))
    path.write_text("\n".join(lines) + "\n")
    with Archive.open(tmp_path / "a.db") as a:
        a.import_paths([path])
        led = a.usage_ledger("0a0b0c12-compact")
    ours_event, pis = [e for e in led.events if e.kind == "compaction"]
    assert ours_event.what == "compaction (pi-memory)" and ours_event.tokens == -4500 and ours_event.requests == 2
    # pi's: its tokensBefore (5,000) down to what the next request sent (3,900 cached + 100 uncached)
    assert pis.what == "compaction (pi)" and pis.tokens == -1000 and pis.requests == 1
    assert ours_event.cache_before == 0 and ours_event.cache_after == 0


def spread_requests(archive: Archive, session_id: str, start_ms: int, n: int, step_ms: int) -> list[int]:
    """`n` priced requests of one session, `step_ms` apart from `start_ms`; their times."""
    from pi_memory.storage.usage import row_of

    archive.ensure_session(session_id, "/home/dev/tz")
    times = [start_ms + i * step_ms for i in range(n)]
    rows = [
        row_of(session_id, TokenUsage(f"{session_id}:{i}", t, "anthropic", "claude-sonnet-4-5", 100, 10, i, 0))
        for i, t in enumerate(times)
    ]
    with archive.store.write():
        archive.store.insert_usage(rows)
    return times


@pytest.mark.parametrize("zone", ["America/New_York", "Europe/London", "Asia/Kolkata", "UTC"])
def test_days_weeks_and_months_are_the_zones_own_across_clock_changes(archive: Archive, zone: str):
    """On both backends: the local day is worked out in SQL, one UTC offset per stretch of time."""
    from zoneinfo import ZoneInfo

    # every 37 minutes for 100 days across the spring clock change of 2026, 60 across the autumn one
    times = spread_requests(archive, "0a0b0c14-tz", 1_772_000_000_000, 100 * 24 * 60 // 37, 37 * 60_000)
    times += spread_requests(archive, "0a0b0c15-tz", 1_790_000_000_000, 60 * 24 * 60 // 37, 37 * 60_000)
    for view, fmt in (
        ("daily", lambda d: d.strftime("%Y-%m-%d")),
        ("weekly", lambda d: "{}-W{:02d}".format(*d.isocalendar()[:2])),
        ("monthly", lambda d: d.strftime("%Y-%m")),
    ):
        expected: dict[str, int] = {}
        for t in times:
            label = fmt(datetime.fromtimestamp(t / 1000, ZoneInfo(zone)))
            expected[label] = expected.get(label, 0) + 1
        got = {line.label: line.requests for line in archive.usage(view, tz=zone).lines}
        assert got == expected, view


def test_a_request_stamped_in_the_same_millisecond_as_a_fold_counts_after_it() -> None:
    from pi_memory.usage.ledger import LedgerEvent, Request, _apply

    def request(ts: int, prompt: int) -> Request:
        return Request(ts, "faux", "faux-1", prompt, 10, 0, 0, None)

    fold = LedgerEvent(2_000, "fold", "f1", -400, -100)
    # the fold is written before the request it shrinks; a fast one shares its millisecond
    _apply(fold, [request(1_000, 900), request(2_000, 500), request(3_000, 600)], None)
    assert (fold.prompt_before, fold.prompt_after, fold.requests) == (900, 500, 2)
