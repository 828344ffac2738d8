"""The package has no import cycle (issue 20), counting every import: at module level,
inside functions and under ``TYPE_CHECKING``. A cycle makes the import order matter and
hides which module owns a name."""

from __future__ import annotations

import ast
from pathlib import Path

import slarouter_core

PACKAGE = Path(slarouter_core.__file__).parent


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from . import x`` names module x)."""
    files = {}
    for f in root.rglob("*.py"):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(parts)] = f
    graph = {}
    for mod, f in files.items():
        pkg = mod.split(".") if f.name == "__init__.py" else mod.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else (node.module or "")
                deps.update(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[mod] = {d for d in deps if d in files and d != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_slarouter_core_has_no_import_cycle():
    graph = import_graph()
    assert "slarouter_core.encoders" in graph["slarouter_core.embedding_cache"]  # it sees the imports
    assert cycles(graph) == []
