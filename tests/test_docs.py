"""The documents stay what they promise: a README people read, its Chinese twin in step, every
command in the documentation site, benchmark pages generated from the committed results, one version."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

import pi_memory
from pi_memory.frontends.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_ZH = ROOT / "README.zh-CN.md"
COMMANDS = ROOT / "docs" / "commands.md"
MAX_README_LINES = 400


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def command_paths(group: click.Group = cli, prefix: str = "") -> list[str]:
    """Every command and subcommand: `search`, `memory verify`, `usage ledger`, ..."""
    paths = []
    for name, command in group.commands.items():
        paths.append(f"{prefix}{name}")
        if isinstance(command, click.Group):
            paths += command_paths(command, f"{prefix}{name} ")
    return paths


def documented_paths(page: str) -> set[str]:
    """Command paths a page names: `pi-memory X` in a heading or the text, with `a|b` alternatives
    (`pi-memory memory remember|list`, `pi-memory usage [daily|weekly]`) expanded."""
    found: set[str] = set()
    for words in re.findall(r"pi-memory ((?:[a-z][a-z-]*|\[?[a-z|-]+\]?)(?: (?:\[?[a-z][a-z|-]*\]?))?)", page):
        first, _, rest = words.partition(" ")
        found.add(first)
        for name in rest.strip("[]").split("|"):
            if name:
                found.add(f"{first} {name}")
    return found


def test_the_readme_is_a_guide_of_at_most_400_lines():
    for path in (README, README_ZH):
        assert len(text(path).splitlines()) <= MAX_README_LINES, path.name


def test_every_command_and_subcommand_is_documented_in_the_commands_page():
    page = text(COMMANDS)
    headings = set(re.findall(r"^## `pi-memory ([a-z-]+)", page, flags=re.M))
    assert set(cli.commands) <= headings, f"no section: {sorted(set(cli.commands) - headings)}"
    missing = [p for p in command_paths() if p not in documented_paths(page)]
    assert not missing, f"not in docs/commands.md: {missing}"


def test_the_documentation_check_sees_a_missing_subcommand():
    assert "memory verify" in documented_paths("## `pi-memory memory verify [--all]`")
    assert {"usage daily", "usage weekly"} <= documented_paths("`pi-memory usage [daily|weekly]`")
    assert "memory pin" not in documented_paths("## `pi-memory memory verify`")


def sections(path: Path) -> list[str]:
    """The heading levels in order: `##`, `###`, ... (titles differ by language, the shape does not)."""
    return [line.split(" ", 1)[0] for line in text(path).splitlines() if re.match(r"#{2,3} ", line)]


def commands_in_blocks(path: Path) -> list[str]:
    """Every line of every fenced block, its `# comment` dropped (the comments are translated)."""
    lines = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text(path), flags=re.S):
        for line in block.splitlines():
            line = re.split(r"\s+#", line, maxsplit=1)[0].rstrip() if not line.startswith("#") else ""
            if line:
                lines.append(line)
    return lines


def command_table(path: Path) -> list[str]:
    return re.findall(r"^\| `(pi-memory [a-z-]+)` \|", text(path), flags=re.M)


def test_the_chinese_readme_has_the_same_sections_and_the_same_commands():
    assert sections(README_ZH) == sections(README)
    assert commands_in_blocks(README_ZH) == commands_in_blocks(README)
    assert command_table(README_ZH) == command_table(README)
    links = lambda path: re.findall(r"\]\(((?:docs/|CHANGELOG)[^)#]*)", text(path))  # noqa: E731
    assert links(README_ZH) == links(README)


def test_the_readme_links_only_to_files_that_exist():
    for path in (README, README_ZH):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text(path)):
            assert (ROOT / target).exists(), f"{path.name} links to {target}"


def test_the_benchmark_pages_are_what_the_results_generate():
    done = subprocess.run(
        [sys.executable, "scripts/bench_pages.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_benchmark_page_names_a_commit_of_this_history_and_its_machine():
    pages = sorted((ROOT / "docs" / "benchmarks").glob("*.md"))
    assert len(pages) > 10
    for page in pages:
        if page.name == "index.md":
            continue
        body = text(page)
        source = re.search(r"^\| result file \| `(bench/results/[^`]+)` \|", body, flags=re.M)
        assert source, page.name
        commit = json.loads(text(ROOT / source.group(1)))["commit"].removesuffix("+dirty")
        assert f"`{commit[:12]}`" in body
        if (ROOT / ".git").exists():
            ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=ROOT)
            assert ancestor.returncode == 0, f"{page.name}: {commit} is not an ancestor of HEAD"
        assert re.search(r"^\| machine \| .*cores 2", body, flags=re.M), page.name


@pytest.mark.parametrize("package", ["extensions/pi/package.json", "package.json"])
def test_the_pi_packages_carry_the_python_packages_version(package: str):
    assert json.loads(text(ROOT / package))["version"] == pi_memory.__version__


def test_the_changelogs_newest_entry_is_this_version():
    newest = re.search(r"^## (\S+)", text(ROOT / "CHANGELOG.md"), flags=re.M)
    assert newest and newest.group(1) == pi_memory.__version__


def test_the_cli_reports_the_one_version():
    from click.testing import CliRunner

    assert CliRunner().invoke(cli, ["--version"]).output.strip().endswith(pi_memory.__version__)


def test_the_pi_package_is_a_pi_package():
    manifest = json.loads(text(ROOT / "extensions" / "pi" / "package.json"))
    assert "pi-package" in manifest["keywords"] and manifest["pi"]["extensions"] == ["./index.ts"]
    assert not manifest.get("private")
    assert set(manifest["peerDependencies"]) == {"@mariozechner/pi-coding-agent", "typebox"}
    assert all(meta["optional"] for meta in manifest["peerDependenciesMeta"].values())  # npm never downloads pi
    root = json.loads(text(ROOT / "package.json"))  # `pi install git:...` loads the repository's root
    assert root["pi"]["extensions"] == ["./extensions/pi/index.ts"] and root.get("private")
