"""`nn.summary(model, *example_args)`: a table of the module calls one forward
pass makes (path, layer, input and output shapes, parameter and state counts),
as a string."""
import inspect
import math
import threading

from .. import tree
from ..errors import ArgumentError
from . import module as machinery
from .module import Module, apply, is_array, trainable

__all__ = ["summary"]


def _paths(model):
    """{id(module): its path in `model`} for every module inside it ("" for the model)."""
    found = {}

    def visit(path, node):
        if not isinstance(node, Module) or id(node) in found:
            return
        found[id(node)] = path
        for name in node.__dict__["_children"]:
            leaves, _ = tree.flatten_with_paths(node.__dict__[name], is_leaf=machinery._is_module)
            for sub, leaf in leaves:
                visit(f"{path}.{name}{sub}", leaf)
    visit("", model)
    return found


def _shapes(value):
    """The arrays of a tree of inputs or outputs as dtype[shape], comma-separated."""
    leaves = [x for x in tree.leaves(value) if is_array(x)]
    return ", ".join(f"{x.dtype.name}{list(x.shape)}" for x in leaves) or "-"


def _counts(module):
    """(trainable elements, other array elements) in `module`'s subtree."""
    marks = tree.leaves(trainable(module))
    sizes = [math.prod(x.shape) for x in tree.leaves(module)]
    params = sum(n for n, m in zip(sizes, marks) if m)
    return params, sum(sizes) - params


def _defaults(cls):
    """{argument: default} of the class's __init__ (the generated one's are the fields')."""
    try:
        parameters = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _is_default(value, default):
    """Whether a field holds its argument's default (an int default given per axis counts)."""
    if isinstance(value, tuple) and not isinstance(default, tuple):
        return all(v == default for v in value)
    return value == default


def _value(v):
    return getattr(v, "__name__", repr(v)) if callable(v) else repr(v)


def _describe(module):
    """The layer's class and the hyperparameters that differ from their defaults
    (static fields but the mode; functions by name)."""
    defaults = _defaults(type(module))
    statics = [f"{n}={_value(module.__dict__[n])}" for n in type(module)._module_fields
               if n not in module.__dict__["_children"] and n != "training"
               and not (n in defaults and _is_default(module.__dict__[n], defaults[n]))]
    return f"{type(module).__name__}({', '.join(statics)})" if statics else type(module).__name__


def _table(header, rows):
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) if i < 2 else c.rjust(w) if i >= 4 else c.ljust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    rule = "-" * len(line(header))
    return [line(header), rule] + [line(r) for r in rows] + [rule]


class _Recorder:
    """The watcher of module calls (see module.py's `_watchers`): a row per call
    of this thread, in call order, each filled in when its call returns."""

    def __init__(self, paths):
        self.paths, self.rows, self.depth = paths, [], 0
        self.thread = threading.get_ident()

    def __call__(self, run, module, args, kwargs):
        if threading.get_ident() != self.thread:
            return run()
        row = len(self.rows)
        self.rows.append(None)
        self.depth += 1
        try:
            out = run()
        finally:
            self.depth -= 1
        params, state = _counts(module)
        self.rows[row] = [self.paths.get(id(module), "?") or "(model)", "  " * self.depth + _describe(module),
                          _shapes((args, kwargs)), _shapes(out), f"{params:,}", f"{state:,}"]
        return out

    def copied(self, copy, module):
        """A policy's copy of `module` for a call: its modules take the paths of the originals."""
        if threading.get_ident() == self.thread:
            for c, m in zip(machinery._modules(copy), machinery._modules(module)):
                if id(m) in self.paths:
                    self.paths.setdefault(id(c), self.paths[id(m)])


def summary(model, *args, **kwargs):
    """A table of the module calls `model(*args, **kwargs)` makes, outermost
    first, sub-layers indented under their parent: each call's path in the
    model, its layer (class and hyperparameters), input and output shapes, and
    the trainable parameters and state elements (running statistics, buffers)
    of its subtree; then the totals and their bytes. The call runs once,
    eagerly, through `nn.apply` (a BatchNorm in training mode works; its
    updates are dropped); pass the key a training-mode Dropout wants, or
    summarise `model.eval()`. Returns the table as a string: `print(nn.summary(model, x))`."""
    if not isinstance(model, Module):
        raise ArgumentError(f"nn.summary: expected a Module (a model) and its example inputs, got a "
                            f"{type(model).__name__} first")
    watch = _Recorder(_paths(model))
    machinery._watchers.append(watch)
    try:
        apply(model, *args, **kwargs)
    finally:
        machinery._watchers.remove(watch)
    params, state = _counts(model)
    nbytes = sum(x.dtype.itemsize * math.prod(x.shape) for x in tree.leaves(model) if is_array(x))
    lines = _table(["path", "layer", "inputs", "outputs", "params", "state"], watch.rows)
    lines.append(f"parameters: {params:,} trainable, {state:,} state ({nbytes:,} bytes)")
    return "\n".join(lines)
