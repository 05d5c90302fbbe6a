"""The import graph of core/ and api/: no cycle (counting imports under TYPE_CHECKING and
inside functions too), core never imports api, api never imports core.store, and
starting the app leaves the heavy SDKs for their first use."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "api")  # the folders; installed as c2.core / c2.api


def modules() -> dict[str, Path]:
    """Module name → file, for every module of core/ and api/ (migrations excluded)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(("c2", *parts))] = path
    return found


def imported_names(path: Path) -> Iterator[str]:
    """Every absolute module name `path` imports, wherever the import statement sits."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            # `from c2.core.agents import client` imports the module c2.core.agents.client.
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """Edges between project modules (a module importing itself is not an edge)."""
    mods = modules()
    return {
        name: {target for target in imported_names(path) if target in mods and target != name}
        for name, path in mods.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_cycle_finder_sees_a_cycle() -> None:
    """The finder itself reports a two-module cycle and ignores a chain."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_graph_is_read_from_the_sources() -> None:
    """The walker finds the engine's imports, lazy and TYPE_CHECKING ones included."""
    graph = import_graph()
    assert "c2.core.live_agents" in graph["c2.core.engine"]
    assert "c2.core.engine" in graph["c2.api.services"]


def test_core_and_api_have_no_import_cycle() -> None:
    """No two modules of core/ and api/ import each other, directly or round a loop."""
    assert cycles(import_graph()) == []


def test_core_never_imports_api() -> None:
    """The domain does not know the HTTP layer."""
    graph = import_graph()
    offending = {
        (name, target)
        for name, targets in graph.items()
        if name.startswith("c2.core")
        for target in targets
        if target.startswith("c2.api")
    }
    assert offending == set()


def test_api_never_imports_the_store() -> None:
    """api/ is HTTP only: it reaches data through core services, never core.store."""
    graph = import_graph()
    offending = {
        (name, target)
        for name, targets in graph.items()
        if name.startswith("c2.api")
        for target in targets
        if target == "c2.core.store" or target.startswith("c2.core.store.")
    }
    assert offending == set()


def test_nothing_imports_the_bare_folder_names() -> None:
    """c2 installs its folders as c2.api / c2.core only; a bare `import core` would load a second
    copy of a module (or another distribution's `core`) — docs/decisions.md, "One c2 namespace"."""
    roots = [ROOT / folder for folder in ("api", "core", "tests", "bench")]
    offending = [
        f"{path.relative_to(ROOT)}: {name}"
        for root in roots
        for path in root.rglob("*.py")
        if "node_modules" not in path.parts
        for name in imported_names(path)
        if name.split(".")[0] in ("api", "core")
    ]
    assert offending == []


def test_starting_the_server_leaves_the_heavy_sdks_for_first_use() -> None:
    """The app imports without the ACP SDK (first agent start), pywebpush and py_vapid (first
    push), psycopg (cluster members), Alembic (a database behind the head revision), httpx
    (the first outbound client: a webhook, a push, a relay), PyYAML (the first skill read) and
    GitPython (the first worktree operation): over 1 s of CPU and 40 MB that every `c2 serve`
    start would otherwise pay."""
    heavy = "{'acp', 'pywebpush', 'py_vapid', 'psycopg', 'alembic', 'httpx', 'yaml', 'git'}"
    probe = f"import sys, c2.api.app; print(sorted({heavy} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
