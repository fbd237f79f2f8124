"""The package's arrows: the import-linter contracts of pyproject.toml hold (stages point down, judging
reads no file format, the probe is a side entrance, check never imports torch), and no two modules import
each other, directly or round a circle, counting the imports inside functions (a lazy import is still an
arrow; the contracts see those too, this scan says where a circle is when one appears)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "stabdiag"


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere in its text (TYPE_CHECKING blocks aside: they
    never run)."""
    files = {_module_name(p, package.parent): p for p in package.rglob("*.py")}
    modules = {name for name, _ in files}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for (name, is_package), path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                    and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
                    for n in ast.walk(node)}
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(tree):
            if id(node) in checking:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                source = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_round_a_circle():
    assert circles(import_graph()) == []


def test_the_scan_finds_a_circle_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "stabdiag"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from . import y\n")
    (pkg / "a" / "y.py").write_text("def f():\n    from ..b import z\n")
    (pkg / "b.py").write_text("def g():\n    from .a.x import thing\n")
    assert circles(import_graph(pkg)) == [["stabdiag.a.x", "stabdiag.a.y", "stabdiag.b"]]
    (pkg / "b.py").write_text("def g():\n    pass\n")
    assert circles(import_graph(pkg)) == []


def test_the_import_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "import-linter is a dev dependency: pip install -e '.[dev]'"
    done = subprocess.run([lint, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout[-4000:]
