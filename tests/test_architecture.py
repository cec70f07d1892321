"""The import graph: no cycles, and the core never imports the edges (views, plots, CLI, proxy server,
importers). The serialized session state machine the loop uses is core; the proxy's HTTP server is an edge.

Every import counts, also the ones inside functions and under TYPE_CHECKING, with one sanctioned
exception: a record's `_repr_mimebundle_` may import `toolcall_lab.notebook` lazily, so notebooks
can display core values without the core depending on the views (see STYLE.md, "Notebook display").
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "toolcall_lab"
EDGES = (
    "toolcall_lab.notebook",
    "toolcall_lab.plotting",
    "toolcall_lab.analysis",
    "toolcall_lab.dependencies",
    "toolcall_lab.cli",
    "toolcall_lab._cli_runs",
    "toolcall_lab.importers",
    "toolcall_lab.proxy_server",
    "toolcall_lab.proxy.server",
    "toolcall_lab.record",
    "toolcall_lab.compression",
    "toolcall_lab.generation",
    "toolcall_lab.openai_model",
    "toolcall_lab.scenarios",
    "toolcall_lab.trace_files",
    "toolcall_lab.redaction",
    "toolcall_lab.conformance",
)
CORE = (
    "toolcall_lab.messages",
    "toolcall_lab.records",
    "toolcall_lab.events",
    "toolcall_lab.runs",
    "toolcall_lab.trace",
    "toolcall_lab.exceptions",
    "toolcall_lab.formats",
    "toolcall_lab.tools",
    "toolcall_lab._copy",
    "toolcall_lab._hooks",
    "toolcall_lab._stopping",
    "toolcall_lab._outcomes",
    "toolcall_lab._execution",
    "toolcall_lab._model_call",
    "toolcall_lab.strategies",
    "toolcall_lab.loop",
    "toolcall_lab.models",
    "toolcall_lab.clock",
    "toolcall_lab.protocol",
    "toolcall_lab.replay",
)


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Modules of the package this file imports, except display hooks importing the notebook views."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST, in_display_hook: bool) -> None:
        for child in ast.iter_child_nodes(node):
            hook = in_display_hook or (
                isinstance(child, ast.FunctionDef) and child.name == "_repr_mimebundle_"
            )
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [child.module] + [f"{child.module}.{a.name}" for a in child.names]
            elif isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            else:
                names = []
            for name in names:
                if name.startswith("toolcall_lab.") and not (
                    hook and name.startswith("toolcall_lab.notebook")
                ):
                    found.add(name)
            visit(child, hook)

    visit(tree, False)
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    out: dict[str, set[str]] = {}
    for name, path in files.items():
        out[name] = {m for m in imports(path) if m in files and m != name}
    return out


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(g.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := dfs(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(g):
        if node not in state and (cycle := dfs(node)):
            return cycle
    return None


def test_import_graph_has_no_cycles() -> None:
    g = graph()
    g.pop("toolcall_lab", None)  # the package's curated re-exports sit on top of everything
    cycle = find_cycle(g)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_core_never_imports_the_edges() -> None:
    bad = [
        f"{mod} imports {dep}"
        for mod, deps in graph().items()
        if within(mod, CORE)
        for dep in deps
        if within(dep, EDGES)
    ]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
