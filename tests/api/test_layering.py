"""rune's modules form layers and import only downward, counting imports made
inside functions (docs/design.md, "Layers": layers only call downward).

The layers, lowest first, one package each: the foundations (rune.base, with
rune.errors and rune.tree at the root because users import them by path) <
codegen < backends < core < nx < transforms < compiler < the public API
(rune/__init__.py, nn, optim, data, metrics, checkpoints, distributed, plot).
A module may import its own layer and the ones below; nx, in addition, never
imports a backend (it binds primitives; core dispatches them).

The graph is read from the source files (no module is imported), so it also
holds while the package itself fails to import.
"""
import ast
import functools
import importlib.util
import pathlib

ROOT = pathlib.Path(importlib.util.find_spec("rune").origin).parent

# Cycles tolerated, each with the work that would remove it.
KNOWN = set()  # no cycle is tolerated

LAYERS = (
    ("rune.errors", "rune.base", "rune.tree"),
    ("rune.codegen",),
    ("rune.backends",),
    ("rune.core",),
    ("rune.nx",),
    ("rune.transforms",),
    ("rune.compiler",),
    ("rune", "rune.nn", "rune.optim", "rune.data", "rune.debug", "rune.metrics", "rune.checkpoints", "rune.distributed",
     "rune.plot"),
)
_RANK = {prefix: rank for rank, prefixes in enumerate(LAYERS) for prefix in prefixes}

# Wrong-way imports tolerated for a while: (importer, imported) -> the work that
# removes it. An entry that no longer happens is an error too
# (test_every_exception_still_happens), so the list only shrinks.
ALLOWED_UPWARD = {}  # none is tolerated


def _module_name(path, root):
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module, level, name, is_package):
    if level == 0:
        return name
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([name] if name else []))


def import_graph(root=ROOT):
    """module -> the modules it imports anywhere in its file (functions included)."""
    return {m: set(ts) for m, ts in _import_graph(root).items()}  # a copy: callers may change it


@functools.lru_cache(maxsize=None)
def _import_graph(root):
    modules = {}
    for path in root.rglob("*.py"):
        modules[_module_name(path, root)] = path
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
    # A module naming its own package (`from . import x` where x is a name, not a
    # submodule) is not a layering edge: `import rune.nx.ops` runs
    # rune/nx/__init__.py first by Python's rules. Only the module's own package is
    # exempt: `from rune import jit` inside rune/core/ is an upward edge to `rune`.
    return {m: {t for t in ts if not (t == m.rpartition(".")[0] and t != "rune")} for m, ts in graph.items()}


def layer(module):
    """The rank of `module`'s layer (its longest listed prefix), or None."""
    if module == "rune":
        return _RANK["rune"]
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        rank = _RANK.get(".".join(parts[:n]))
        if rank is not None:
            return rank
    return None


def _inside(module, package):
    return module == package or module.startswith(package + ".")


def wrong_way(graph):
    """The (importer, imported) pairs against the layering: upward, or nx reaching a backend."""
    found = set()
    for m, ts in graph.items():
        for t in ts:
            upward = layer(m) is not None and layer(t) is not None and layer(t) > layer(m)
            if upward or (_inside(m, "rune.nx") and _inside(t, "rune.backends")):
                found.add((m, t))
    return found


def test_no_import_cycles():
    found = set(cycles(_package_edges(import_graph())))
    assert found <= KNOWN, sorted(sorted(c) for c in found - KNOWN)


def test_the_walker_sees_function_local_imports(tmp_path):
    # A made-up package, so that the check does not depend on a wrong-way import
    # existing in rune: `low` reaches `high` only inside a function.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "high.py").write_text("VALUE = 1\n")
    (package / "low.py").write_text("def f():\n    from .high import VALUE\n    return VALUE\n")
    (package / "top.py").write_text("import pkg.low\n")
    graph = import_graph(package)
    assert graph["pkg.low"] == {"pkg.high"}
    assert graph["pkg.top"] == {"pkg.low"}
    assert graph["pkg.high"] == set()


def test_every_module_is_in_a_layer():
    # A new top-level module or package is placed in LAYERS when it is added.
    assert sorted(m for m in import_graph() if layer(m) is None) == []


def test_no_module_imports_a_higher_layer():
    found = wrong_way(_package_edges(import_graph()))
    assert not found - set(ALLOWED_UPWARD), sorted(found - set(ALLOWED_UPWARD))


def test_every_exception_still_happens():
    # A stale entry would let the import it names come back unnoticed.
    found = wrong_way(_package_edges(import_graph()))
    assert not set(ALLOWED_UPWARD) - found, \
        f"these imports no longer happen, remove them from ALLOWED_UPWARD: {sorted(set(ALLOWED_UPWARD) - found)}"


def test_the_layer_check_sees_an_upward_import():
    # The check itself, on edges made up for it: each wrong way is reported, the
    # right ways are not.
    graph = {"rune.core.trace": {"rune.nx.ops", "rune.core.devices"}, "rune.nx.ops": {"rune.backends.base"},
             "rune.compiler.plan": {"rune.core.program", "rune.backends"}, "rune": {"rune.compiler.api"}}
    assert wrong_way(graph) == {("rune.core.trace", "rune.nx.ops"), ("rune.nx.ops", "rune.backends.base")}


def test_only_the_backends_package_reaches_into_a_backend():
    # Everything else asks `rune.backends.backend_for(device)` (docs/design.md: a
    # backend is one object per platform, the only thing touching raw buffers).
    graph = import_graph()
    reach = sorted((m, t) for m, ts in graph.items() for t in ts
                   if t.startswith("rune.backends.") and t != "rune.backends.base"
                   and not m.startswith("rune.backends"))
    assert reach == [], reach


def test_the_ancestor_exemption_is_only_a_modules_own_package():
    # `from rune import jit` inside rune/core/ is an edge to the top layer, not an
    # exempt re-export; `from . import name` inside rune/nx/ops.py names rune.nx.
    graph = {"rune.core.trace": {"rune"}, "rune.nx.ops": {"rune.nx"}, "rune.transforms.autodiff.rules": {"rune.transforms"}}
    assert wrong_way(_package_edges(graph)) == {("rune.core.trace", "rune")}


def _modules_shadowed(package):
    import importlib
    import pkgutil
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if getattr(package, info.name, None) is not module:
            found.append(f"{package.__name__}.{info.name} (is {type(getattr(package, info.name, None)).__name__})")
        if info.ispkg:
            found += _modules_shadowed(module)
    return found


def test_no_public_name_shadows_a_module():
    # `import rune.x; rune.x.name` must reach the module: a function re-exported
    # under a module's name would hide the module from attribute access.
    import rune
    assert _modules_shadowed(rune) == []
