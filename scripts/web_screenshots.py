"""Screenshots of every page of the web viewer, for the README (docs/screenshots/*.png).

Builds the browser tests' archive (`tests/web_fixture.py`: the pi fixture sessions, a hostile
message, a sound and a broken memory log; `tests/provenance_world.py`: a history of edits in a git
repository and an older Claude Code session), starts `python -m pi_memory serve` on it and
photographs each page with Debian's headless Chromium through Playwright, as the browser tests do.
Chinese needs a CJK font on the machine (Debian: fonts-noto-cjk).

    python scripts/web_screenshots.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from provenance_world import build_viewer_archive  # noqa: E402
from web_fixture import BROKEN_WS, CHROMIUM, CHROMIUM_ARGS, SOUND_WS, running_server  # noqa: E402

LONG_OUTPUT_SESSION = "01a2364c-a7f6-75cb-ba8a-42838165f27d"


def shots(db: Path, found: dict[str, str]) -> list[tuple[str, str, bool]]:
    """(file name, path, whole page) of each screenshot."""
    from pi_memory import Archive

    with Archive.open(db) as archive:
        run = archive.changed_files(found["repo_session"]).files[0].edits[-1].run
        hit = archive.search("zcat", limit=1)[0]
        long_read = next(
            a
            for a in archive.run_addresses(
                m.msg_id for m in archive.read(LONG_OUTPUT_SESSION, before=50).messages
            ).values()
            if archive.read_address(a).next_offset
        )
    return [
        ("overview.png", "/", True),
        ("search-en.png", "/search?q=README+lines", False),
        ("search-zh.png", "/search?q=响应式+购物车", False),
        ("search-runs.png", "/search?q=SSE+断流&track=runs", False),
        ("sessions.png", "/search?track=sessions", False),
        ("session.png", f"/session/{hit.session_id}?at={hit.msg_id}#m{hit.msg_id}", False),
        ("detail-paged.png", f"/read/{long_read}", False),
        ("session-markdown.png", f"/session/{found['claude_session']}", False),
        ("run-files.png", f"/read/{run}", False),
        ("timeline.png", f"/timeline?day={found['claude_day']}#day", True),
        ("file-blame.png", f"/file?path={found['file']}", True),
        ("memory.png", f"/memory?ws={SOUND_WS}", True),
        ("memory-broken.png", f"/memory?ws={BROKEN_WS}", False),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="pi-memory-shots-"))
    db = work / "archive.db"
    found = build_viewer_archive(db, work)
    args.out.mkdir(parents=True, exist_ok=True)
    with running_server(db, "--write") as url, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(work / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1200, "height": 820},
        )
        page = context.new_page()
        for name, path, whole in shots(db, found):
            page.goto(url + path)
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(args.out / name), full_page=whole)
            print(f"{args.out / name}")
        context.close()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
