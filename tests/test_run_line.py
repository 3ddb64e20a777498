"""A run's navigation line is stored once, in its packed fields; the `run.summary` column is
written empty, and archives written before keep theirs there (both backends)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import PI_DATA
from pi_memory import Archive
from pi_memory.frontends.cli.main import cli

OLD_LINE = "an old run whose line is only in the summary column"


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def column_lines(archive: Archive) -> dict[int, str]:
    with archive.store.read():
        return {int(i): str(s) for i, s in archive.store.rows("SELECT id, summary FROM run")}


def make_old_style(archive: Archive, odd: int) -> None:
    """Rows as written before: the line in the column as well as in the fields; run `odd` with its
    line in the column only."""
    runs = archive.runs(limit=1000)
    fields = {k: v for k, v in archive.run(odd).fields.items() if k != "line"}
    packed = archive.store.stored_text(json.dumps(fields, ensure_ascii=False, separators=(",", ":")))
    with archive.store.write():
        for r in runs:
            archive.store.execute("UPDATE run SET summary=? WHERE id=?", (r.summary, r.id))
        archive.store.execute("UPDATE run SET summary=?, fields=? WHERE id=?", (OLD_LINE, packed, odd))


def nginx_run(archive: Archive) -> int:
    return archive.search_runs("nginx", limit=1)[0].run.id


def test_a_run_written_now_has_an_empty_summary_column_and_its_line_in_the_fields(imported: Archive) -> None:
    assert set(column_lines(imported).values()) == {""}
    runs = imported.runs(limit=1000)
    assert len(runs) == 32
    assert all(r.summary and r.summary == r.fields["line"] for r in runs)


def test_the_cli_lists_shows_reads_and_searches_runs_by_their_line(archive_target: str) -> None:
    run("import", str(PI_DATA))
    listed = json.loads(run("runs", "--project", "vue-shop", "--limit", "100", "--json"))["runs"]
    cart = next(r for r in listed if "购物车" in r["summary"])
    assert cart["summary"] == cart["fields"]["line"]
    assert f"{cart['run']} " in run("runs", "--project", "vue-shop", "--limit", "100")
    assert f" · {cart['summary']}" in run("runs", "--project", "vue-shop", "--limit", "100")
    assert f"summary: {cart['summary']}" in run("show", cart["run"])
    assert f"summary: {cart['summary']}" in run("read", cart["run"])
    hits = json.loads(run("search", "nginx", "--scope", "summary", "--json"))["hits"]
    assert hits and all(h["summary"] for h in hits)
    assert f" · {hits[0]['summary']}" in run("search", "nginx", "--scope", "summary")


def test_the_review_reports_the_costliest_runs_with_their_lines(imported: Archive) -> None:
    longest = imported.review().cost["longest"]["messages"]
    assert longest and all(r["summary"] == imported.run(r["run"]).summary != "" for r in longest)


def test_an_archive_with_old_style_rows_still_shows_their_lines(imported: Archive) -> None:
    before = {r.id: r.summary for r in imported.runs(limit=1000)}
    odd = nginx_run(imported)
    make_old_style(imported, odd)
    assert set(column_lines(imported).values()) - {OLD_LINE} == set(before.values())
    assert {r.id: r.summary for r in imported.runs(limit=1000)} == {**before, odd: OLD_LINE}
    assert imported.run(odd).summary == OLD_LINE
    (hit,) = [h for h in imported.search_runs("nginx", limit=50) if h.run.id == odd]
    assert hit.run.summary == OLD_LINE
    assert f"summary: {OLD_LINE}" in run("read", f"r{odd}")


def test_re_summarizing_an_old_style_run_moves_its_line_into_the_fields(imported: Archive) -> None:
    before = {r.id: r.summary for r in imported.runs(limit=1000)}
    make_old_style(imported, nginx_run(imported))
    imported.rebuild_runs()
    assert set(column_lines(imported).values()) == {""}
    assert {r.id: r.summary for r in imported.runs(limit=1000)} == before
