"""The test run's closing summary: what was skipped, grouped by reason, with counts."""

from __future__ import annotations

import pytest

from conftest import skip_reasons


def skipped(reason: str, n: int) -> pytest.TestReport:
    return pytest.TestReport(f"t{n}", ("t.py", n, "t"), {}, "skipped", ("t.py", n, f"Skipped: {reason}"), "setup")


def test_skips_are_grouped_by_reason_most_first():
    reports = [skipped("no PostgreSQL", 1), skipped("npm is missing", 2), skipped("no PostgreSQL", 3)]
    assert skip_reasons(reports) == [(2, "no PostgreSQL"), (1, "npm is missing")]
