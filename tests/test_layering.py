"""The module graph of rune has no import cycles, counting imports made inside
functions (DESIGN 2: layers only call downward)."""
import ast
import functools
import pathlib

import rune

ROOT = pathlib.Path(rune.__file__).parent

# Cycles tolerated, each with the work that would remove it.
KNOWN = set()  # no cycle is tolerated


def _module_name(path):
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module, level, name, is_package):
    if level == 0:
        return name
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([name] if name else []))


def import_graph():
    return {m: set(ts) for m, ts in _import_graph().items()}  # a copy: callers may change it


@functools.lru_cache(maxsize=None)
def _import_graph():
    modules = {}
    for path in ROOT.rglob("*.py"):
        modules[_module_name(path)] = path
    graph = {m: set() for m in modules}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, node.level, node.module, is_package)
                # `from . import x` names a submodule when one exists.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                while t and t not in modules:  # rune.nx.ops.asarray -> rune.nx.ops
                    t = t.rpartition(".")[0]
                if t and t != module:
                    graph[module].add(t)
    return graph


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _package_edges(graph):
    # A package's __init__ re-exporting its submodules is not a layering edge
    # (`import rune.nx.ops` runs rune/nx/__init__.py first by Python's rules).
    return {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}


def test_no_import_cycles():
    found = set(cycles(_package_edges(import_graph())))
    assert found <= KNOWN, sorted(sorted(c) for c in found - KNOWN)


def test_the_walker_sees_function_local_imports():
    graph = import_graph()
    assert "rune.nx.ops" in graph["rune.core.staging"]  # imported inside _as_array


def test_only_the_backends_package_reaches_into_a_backend():
    # Everything else asks `rune.backends.backend_for(device)` (DESIGN 2: a
    # backend is one object per platform, the only thing touching raw buffers).
    graph = import_graph()
    reach = sorted((m, t) for m, ts in graph.items() for t in ts
                   if t.startswith("rune.backends.") and t != "rune.backends.base"
                   and not m.startswith("rune.backends"))
    assert reach == [], reach


def test_plans_know_no_higher_order_primitive():
    # Host steps are registered next to their primitives (rune.control,
    # rune.callback), keyed by primitive; the plan builder imports none of them.
    reach = set()
    graph = import_graph()
    todo = ["rune.compiler.plan"]
    while todo:
        m = todo.pop()
        for t in graph[m] - reach:
            reach.add(t)
            todo.append(t)
    assert not reach & {"rune.control", "rune.callback", "rune.autodiff.custom", "rune.autodiff.api"}, reach
