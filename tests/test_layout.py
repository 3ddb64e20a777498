"""The layout stays what the documents say: every package is in the architecture's table, no module imports in a cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "pi_memory"


def packages_on_disk() -> set[str]:
    """`pi_memory/x/` for every package below the top one (a folder with an `__init__.py`)."""
    return {
        "pi_memory/" + init.parent.relative_to(PACKAGE).as_posix() + "/"
        for init in PACKAGE.rglob("__init__.py")
        if init.parent != PACKAGE and "__pycache__" not in init.parts
    }


def packages_in_table(document: Path) -> set[str]:
    """The packages named in the first column of the document's tables (`| `pi_memory/x/` | ...`)."""
    text = document.read_text(encoding="utf-8")
    return set(re.findall(r"^\| `(pi_memory/[a-z_/]+/)` \|", text, flags=re.M))


def test_the_architecture_document_lists_every_package_and_no_other() -> None:
    assert packages_in_table(ROOT / "docs" / "architecture.md") == packages_on_disk()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True inside `if TYPE_CHECKING:` (an import for the type checker only, never run)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, modules: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        here = name.split(".") if is_package else name.split(".")[:-1]
        here = here[: len(here) - node.level + 1]
        base = ".".join(here + ([node.module] if node.module else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def _known(target: str, modules: set[str]) -> str | None:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports when it runs (function-level imports too)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or _in_type_checking(node, parents):
                continue
            for target in _targets(node, name, path.name == "__init__.py", set(files)):
                found = _known(target, set(files)) if target.startswith("pi_memory") else None
                if found and found != name:
                    graph[name].add(found)
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each group of modules that reach one another (a cycle), sorted; a small graph, so plain searches do."""
    reach = {module: reachable(graph, module) for module in graph}
    groups = {tuple(sorted({m} | {o for o in reach[m] if m in reach.get(o, ())})) for m in graph if m in reach[m]}
    return sorted(list(group) for group in groups)


def test_no_module_imports_another_that_imports_it_back() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
