"""The import progress line: what it says, when it draws, and silence when nobody watches."""

from __future__ import annotations

import io
import os
import pty
import shutil
import subprocess
from pathlib import Path

from conftest import PI_DATA, python_cli
from pi_memory.frontends.cli.progress import ImportProgress, progress_line


def test_the_progress_line_names_files_messages_rate_and_eta() -> None:
    assert progress_line(120, 751, 4800, 2.0) == "importing 120/751 files · 4,800 messages · 2,400 msg/s · ETA 0:11"
    assert progress_line(0, 10, 0, 0.0) == "importing 0/10 files · 0 messages"
    assert progress_line(10, 10, 500, 1.0).endswith("500 msg/s")  # done: no ETA
    assert "ETA 1:00:00" in progress_line(1, 2, 10, 3600.0)


def test_the_display_redraws_in_place_at_most_a_few_times_a_second_and_erases_itself() -> None:
    now = [0.0]
    out = io.StringIO()
    display = ImportProgress(3, out, clock=lambda: now[0])
    display(Path("a"), 10)
    display(Path("b"), 20)  # same instant: not redrawn
    now[0] = 1.0
    display(Path("c"), 30)  # the last file is always drawn
    display.close()
    text = out.getvalue()
    assert text.count("\r") == 3 + 1 and "1/3 files" in text and "2/3" not in text and "3/3 files" in text
    assert text.endswith("\r") and text.rstrip("\r").endswith(" ")


def test_import_draws_no_redrawn_line_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    cmd = [*python_cli(), "import", str(PI_DATA), "--db", str(tmp_path / "a.db")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "\r" not in done.stderr and "ETA" not in done.stderr
    assert "messages added" in done.stdout


def many_files(tmp_path: Path, n: int = 250) -> Path:
    """n session files (copies of one small real session: the same messages, n files to count)."""
    folder = tmp_path / "many"
    folder.mkdir()
    source = PI_DATA / "pi-1.6.0-vue-reactive-zh.jsonl"
    for i in range(n):
        shutil.copy(source, folder / f"s{i:03d}.jsonl")
    return folder


def import_with_stderr_on_a_terminal(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`pi-memory import ...` with its stderr on a pseudo-terminal (stdout piped): exit code, stdout, stderr."""
    controller, terminal = pty.openpty()
    cmd = [*python_cli(), "import", *args, "--db", str(tmp_path / "a.db")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=terminal, text=True)
    os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=300)
    os.close(controller)
    return proc.returncode, out, seen.decode("utf-8", "replace")


def test_a_long_import_draws_its_progress_line_on_a_terminal(tmp_path: Path) -> None:
    code, out, err = import_with_stderr_on_a_terminal(tmp_path, str(many_files(tmp_path)))
    assert code == 0 and "250 files" in out
    assert "\r" in err and "importing " in err and "/250 files" in err and "messages" in err


def test_a_long_import_is_quiet_on_stderr_when_piped_or_with_json(tmp_path: Path) -> None:
    folder = many_files(tmp_path)
    piped = subprocess.run(
        [*python_cli(), "import", str(folder), "--db", str(tmp_path / "a.db")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert piped.returncode == 0 and piped.stderr == "" and "250 files" in piped.stdout
    code, out, err = import_with_stderr_on_a_terminal(tmp_path, str(folder), "--force", "--json")
    assert code == 0 and err == "" and '"files": 250' in out


def test_import_paths_reports_each_file_with_the_messages_read_so_far(tmp_path: Path) -> None:
    from pi_memory import Archive

    seen: list[tuple[str, int]] = []
    plain: list[Path] = []
    with Archive.open(tmp_path / "a.db") as archive:
        report = archive.import_paths(
            [PI_DATA], progress=plain.append, on_progress=lambda p, n: seen.append((p.name, n))
        )
    files = sorted(PI_DATA.rglob("*.jsonl"))
    assert [name for name, _ in seen] == [p.name for p in plain] and len(seen) == len(files)
    counts = [n for _, n in seen]
    assert counts == sorted(counts) and counts[-1] == report.added + report.skipped
