"""The import graph of hybridfuzz/, strategies/ and oracles/: no cycles, and only cli/ imports cli.

Read with ``ast``, never imported (so no vLLM or torch): every ``import`` and ``from ... import`` in a
module counts, at module level or inside a function, with relative imports resolved and strategies/ and
oracles/ under the names they install as (``hybridfuzz.strategies``, ``hybridfuzz.oracles``). Imports
under ``if TYPE_CHECKING:`` are left out: they never run. ``from P import name`` is an edge to the
module ``P.name`` where that is a module, else to ``P``; importing a module is not counted as importing
its parent packages (every ``__init__`` would otherwise sit on a cycle with its own submodules).

``python tests/test_import_graph.py [ROOT]`` prints the cycles and cli imports of the tree at ROOT.
"""

from __future__ import annotations

import ast
import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# directory in the checkout -> the package name it installs as (pyproject.toml's package-dir)
ROOTS = {"hybridfuzz": "hybridfuzz", "strategies": "hybridfuzz.strategies", "oracles": "hybridfuzz.oracles"}
CLI = "hybridfuzz.cli"
# What generates and judges cases comes below what runs them and what comes after: strategies/ and oracles/ import
# none of these packages.
ABOVE_ORACLES = ("hybridfuzz.engines", "hybridfuzz.campaign", "hybridfuzz.cli", "hybridfuzz.triage", "hybridfuzz.bench",
                 "hybridfuzz.report", "hybridfuzz.export")


def modules(root: str = HERE) -> dict[str, tuple[str, bool]]:
    """Module name -> (path, is a package) for every .py file under the three roots."""
    found: dict[str, tuple[str, bool]] = {}
    for folder, package in ROOTS.items():
        top = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
            rel = os.path.relpath(dirpath, top)
            parts = [package] + ([] if rel == "." else rel.split(os.sep))
            # a folder reached through the top level of hybridfuzz/ that is itself one of the roots' names
            # (the gpu link farm's hybridfuzz/strategies) is the same tree again: skip it
            if folder == "hybridfuzz" and len(parts) > 1 and parts[1] in ("strategies", "oracles"):
                dirnames[:] = []
                continue
            for name in sorted(filenames):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(dirpath, name)
                if name == "__init__.py":
                    found[".".join(parts)] = (path, True)
                else:
                    found[".".join(parts + [name[:-3]])] = (path, False)
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node, at any depth, except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _known(name: str, mods) -> str | None:
    """The deepest module of ours that ``name`` (a dotted import target) names, if any."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in mods:
            return candidate
    return None


def graph(root: str = HERE) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports."""
    mods = modules(root)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for module, (path, is_package) in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                source = _resolve(module, is_package, node)
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in mods else source for alias in node.names]
            for target in targets:
                known = _known(target, mods)
                if known and known != module:
                    edges[module].add(known)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges) + 100))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return [_one_cycle(edges, set(c)) for c in components]


def _one_cycle(edges: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, as [a, b, ..., a]."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(edges[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return path[::-1] + [start]  # start, ..., v, start
                if w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"no cycle in {component}")


def cli_imports(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) for each module outside hybridfuzz.cli that imports hybridfuzz.cli or below it."""
    return sorted((m, t) for m, targets in edges.items() if not _inside(m, (CLI,)) for t in targets if _inside(t, (CLI,)))


def _inside(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def layer_violations(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) for each module of strategies/ or oracles/ that imports a package above them."""
    low = ("hybridfuzz.strategies", "hybridfuzz.oracles")
    return sorted((m, t) for m, targets in edges.items() if _inside(m, low) for t in targets if _inside(t, ABOVE_ORACLES))


def test_graph_sees_every_module():
    edges = graph()
    assert "hybridfuzz.case" in edges and "hybridfuzz.strategies.case" in edges and "hybridfuzz.oracles.verdict" in edges
    assert "hybridfuzz.case" in edges["hybridfuzz.strategies.case"]  # an import that exists, resolved


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_only_cli_imports_cli():
    found = cli_imports(graph())
    assert not found, "modules outside hybridfuzz/cli/ that import it:\n" + "\n".join(f"{m} -> {t}" for m, t in found)


def test_strategies_and_oracles_import_nothing_above_them():
    found = layer_violations(graph())
    assert not found, "strategies/ or oracles/ importing engines, campaign or a later stage:\n" + "\n".join(f"{m} -> {t}" for m, t in found)


if __name__ == "__main__":
    edges = graph(sys.argv[1] if len(sys.argv) > 1 else HERE)
    for c in cycles(edges):
        print("cycle: " + " -> ".join(c))
    for m, t in cli_imports(edges):
        print(f"cli import: {m} -> {t}")
    for m, t in layer_violations(edges):
        print(f"layer: {m} -> {t}")
