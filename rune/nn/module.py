"""Modules: layers as pytrees (as Equinox), so `jit`, `grad`, `vmap`, `checkpoint`,
the optimizers, `rune.save`/`rune.load` and `rune.distributed` take them as they
take any tree of arrays.

A module is a dataclass-like class: a subclass of `Module` declares its fields in
the class body (annotations) and either gets a generated `__init__` or writes its
own, which assigns every field once. When construction ends the instance is
sealed: assigning a field afterwards is an error; `module.replace(name=value)`
makes a changed copy, and `rune.tree.map` a transformed one.

Which fields are parameters is decided by value, when the instance is built:
a field holding arrays (an array, None, a sub-module, or lists, tuples and dicts
of those) is a child of the pytree, its arrays are leaves; any other field (an
int, a string, a float hyperparameter, a callable, a dtype, a tuple of ints) is
static aux data, part of the tree's structure (hashable, compared by jit's
cache, never traced). That split is kept by the copies the transformations
make, even when they put other leaves in the parameter slots (`tree.map(lambda
_: False, model)` is a filter tree of the model's structure).

`partition(tree, filter)` splits a tree in two trees of the same shape (None
where the other has the leaf) and `combine` joins them, so `grad` and the
optimizers see only the trainable arrays (Equinox's partition/combine).

State and modes (docs/modules.md, "State and modes"):
- a field declared `nn.field(state=True)` holds arrays that are not trained
  (running statistics, buffers, EMA copies): they are leaves like parameters
  (so jit traces them, checkpoints save them), but `nn.trainable(model)`, the
  filter `grad` and the optimizers are given through `partition`, leaves them out;
- a layer whose output depends on the mode declares a bool field `training`;
  `model.train()` / `model.eval()` return copies with every such field set;
- a layer updates its state by calling `nn.update_state(self, name=new, ...)`
  during a call made through `nn.apply(model, *args)`, which returns the output
  and a copy of the model holding the new values: pure functions in, pure
  functions out, so the update flows out of `jit` and `grad(has_aux=True)` as a
  return value (Equinox's style; Flax NNX mutates its variables instead).
"""
import dataclasses
import functools
import inspect
import threading

import numpy as np

from .. import nx, tree
from ..core.arraylike import ArrayLike
from ..errors import ArgumentError, TreeError, UsageError

__all__ = ["Module", "field", "partition", "combine", "is_array", "is_inexact_array", "trainable", "apply",
           "update_state"]


def is_array(x):
    """True for arrays (rune's, traced ones, NumPy's)."""
    return isinstance(x, (ArrayLike, np.ndarray, np.generic))


def is_inexact_array(x):
    """True for arrays of a floating or complex dtype: the ones gradients are taken of."""
    return is_array(x) and nx.isdtype(x.dtype, ("real floating", "complex floating"))


# ---------------------------------------------------------------- the Module base

def _over_items(value, test, combine):
    """`test` of `value`, or, for a list, tuple or dict, `combine` (all, any) of this
    over its items: how a field's value is read through the containers it nests."""
    if isinstance(value, (list, tuple)):
        return combine(_over_items(v, test, combine) for v in value)
    if isinstance(value, dict):
        return combine(_over_items(v, test, combine) for v in value.values())
    return test(value)


def _parameter(value):
    return is_array(value) or isinstance(value, Module)


def _holds_parameters(value):
    """Whether a field's value is a child of the pytree: arrays, None, modules, or
    lists/tuples/dicts made only of those."""
    return _over_items(value, lambda v: v is None or _parameter(v), all)


def _undecided(value):
    """Whether a field's value says nothing about its kind: an empty list, tuple or
    dict (or containers of only such) holds neither arrays nor hyperparameters.
    It is a parameter slot when built, and `replace` decides such a field anew
    by the value it is given."""
    return _over_items(value, lambda v: False, all)


def _holds_any_parameter(value):
    return _over_items(value, _parameter, any)


@functools.lru_cache(maxsize=None)
def _static_names(cls, children):
    """The fields of `cls` that are not among `children`, in declaration order:
    found once per class and split, as jit flattens and rebuilds modules every call."""
    return tuple(n for n in cls._module_fields if n not in children)


def _flatten(module):
    d = module.__dict__
    names = d["_children"]
    statics = tuple([d[n] for n in _static_names(type(module), names)])
    return [d[n] for n in names], (names, statics, d["_policy"])


def _unflatten(cls, aux, children):
    names, statics, policy = aux
    module = object.__new__(cls)
    d = module.__dict__
    d.update(zip(names, children))
    d.update(zip(_static_names(cls, names), statics))
    d["_children"], d["_policy"], d["_sealed"] = names, policy, True
    return module


def _specialized(cls, aux):
    """`_flatten` and `_unflatten` for the `cls` instances of this aux data (see
    `tree._specialize`), for the code compiled for a structure that jit runs every
    call: the field names and the static values are looked up once, here."""
    names, statics, policy = aux
    static_names = _static_names(cls, names)
    # `_flatten`'s aux data, flattened: equal to `aux` exactly when these are
    keys = ("_children",) + static_names + ("_policy",)
    expected = (names,) + statics + (policy,)
    fixed = dict(zip(static_names, statics))
    fixed.update(_children=names, _policy=policy, _sealed=True)

    def match(module):
        d = module.__dict__
        if tuple([d[k] for k in keys]) != expected:
            return None
        return [d[n] for n in names]

    def rebuild(children):
        module = object.__new__(cls)
        d = module.__dict__
        d.update(zip(names, children))
        d.update(fixed)
        return module
    return match, rebuild


def _keys(aux, n):
    return [f".{name}" for name in aux[0]]


def _sealing(cls, init):
    """`init`, then sealing the instance when it is a `cls` (not when a subclass's
    __init__ calls it through super())."""
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if type(self) is cls:
            self._seal()
    return __init__


def _boundary(call):
    """A module's __call__, run under its mixed-precision policy when it has one:
    parameters and inputs cast to the compute dtype, outputs to the output dtype."""
    @functools.wraps(call)
    def __call__(self, *args, **kwargs):
        if _watchers:
            return _watchers[-1](lambda: _under_policy(call, self, args, kwargs), self, args, kwargs)
        if self.__dict__.get("_policy") is None:    # the common case, without a further call
            return call(self, *args, **kwargs)
        return _under_policy(call, self, args, kwargs)
    return __call__


# Observers of every module call while one is set (nn.summary's): watcher(run,
# module, args, kwargs) runs the call with run() and returns its output, and
# watcher.copied(copy, module) hears of the copy a policy makes for a call (the
# watcher ignores the calls of other threads).
_watchers = []


def _under_policy(call, module, args, kwargs):
    policy = module.__dict__.get("_policy")
    if policy is None:
        return call(module, *args, **kwargs)
    inner, args, kwargs = policy.cast_to_compute((module, args, kwargs))
    if _watchers:
        _watchers[-1].copied(inner, module)
    out = call(inner, *args, **kwargs)
    updates = _collecting()
    if updates:
        _forward_updates(updates, inner, module)
    return policy.cast_to_output(out)


def _machinery_names():
    """The names a field cannot take: the Module methods and properties every
    instance needs (`replace`, `policy`) and the entries the machinery keeps in
    each instance (`_children`, `_policy`, `_sealed`). A field of such a name
    would either fail to be set (a property) or hide what jit, the optimizers
    and `replace` call."""
    own = {n for n in vars(Module) if not (n.startswith("__") and n.endswith("__"))}
    return frozenset(own | {"_children", "_policy", "_sealed"})


def _check_field_names(cls):
    """Refuse the class's own fields named like the machinery, before the dataclass
    machinery reads the inherited property or method as the field's default."""
    taken = _machinery_names()
    for name in cls.__dict__.get("__annotations__", {}):
        if name in taken:
            attribute = getattr(Module, name, None)
            what = ("a property of every module" if isinstance(attribute, property)
                    else "a method of every module" if callable(attribute) else "kept by the Module machinery")
            raise UsageError(f"{cls.__name__}: a field cannot be named {name!r}: {name} is {what}; "
                             f"rename the field (e.g. {name.strip('_')}_)")


class Module:
    """Base class of layers: a dataclass-like pytree whose array fields are
    parameters (leaves) and whose other fields are static hyperparameters.

    Subclass it, declare fields with annotations, and write `__call__`:

        class Affine(nn.Module):
            scale: object
            shift: object
            name: str = "affine"

            def __call__(self, x):
                return x * self.scale + self.shift

    Instances are immutable once built; `replace(**fields)` returns a changed copy.
    """

    _module_fields = ()
    _state_fields = frozenset()
    _custom_init = False
    _policy = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own_init = "__init__" in cls.__dict__
        cls._custom_init = own_init or cls._custom_init
        _check_field_names(cls)
        dataclasses.dataclass(cls, init=not cls._custom_init, repr=False, eq=False)
        cls._module_fields = tuple(f.name for f in dataclasses.fields(cls))
        cls._state_fields = frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get(_STATE))
        cls.__init__ = _sealing(cls, cls.__init__)
        if "__call__" in cls.__dict__:
            cls.__call__ = _boundary(cls.__call__)
        tree.register(cls, _flatten, functools.partial(_unflatten, cls), keys=_keys)
        tree._specialize(cls, functools.partial(_specialized, cls))

    def __setattr__(self, name, value):
        if self.__dict__.get("_sealed"):
            raise UsageError(f"{type(self).__name__} is immutable once built: cannot set {name!r}; "
                             f"use module.replace({name}=...) for a changed copy")
        if name not in type(self)._module_fields:
            raise UsageError(f"{type(self).__name__} has no field {name!r} (its fields: "
                             f"{list(type(self)._module_fields)}); declare it in the class body")
        object.__setattr__(self, name, value)

    def _seal(self):
        cls, d = type(self), self.__dict__
        missing = [n for n in cls._module_fields if n not in d]
        if missing:
            raise UsageError(f"{cls.__name__}.__init__ left the fields {missing} unset")
        children = []
        for name in cls._module_fields:
            value = d[name]
            if _holds_parameters(value):
                children.append(name)
            elif name in cls._state_fields:
                raise TreeError(f"{cls.__name__}.{name} is declared nn.field(state=True): it holds arrays "
                                f"(or None), got {_show(value)}")
            else:
                _check_static(cls, name, value)
        d["_children"] = tuple(children)
        d.setdefault("_policy", None)
        d["_sealed"] = True

    def replace(self, **changes):
        """A copy with the given fields changed. A parameter slot stays a parameter
        slot whatever it is given (so filter trees keep the model's structure); a
        static field stays static. A field holding only empty containers (`()`,
        `[]`, `{}`) was neither: it is decided by the value it is given, as
        construction decides (`replace(sizes=(3, 4))` makes it a hyperparameter)."""
        cls = type(self)
        unknown = [n for n in changes if n not in cls._module_fields]
        if unknown:
            raise UsageError(f"{cls.__name__}.replace: no fields {unknown} (its fields: {list(cls._module_fields)})")
        new = object.__new__(cls)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        children = set(self._children)
        for name, value in changes.items():
            if _undecided(self.__dict__[name]):
                children.discard(name)
                if _holds_parameters(value):
                    children.add(name)
            if name in children:
                continue
            if _holds_any_parameter(value):
                raise TreeError(f"{cls.__name__}.replace: {name} is a hyperparameter (it held "
                                f"{_show(self.__dict__[name])} when built), it cannot take arrays or modules")
            _check_static(cls, name, value)
        new.__dict__["_children"] = tuple(n for n in cls._module_fields if n in children)
        return new

    def train(self, mode=True):
        """A copy of this module (and every module inside it) in training mode, or
        in evaluation mode with mode=False: each module with a `training` field has
        it set (Dropout drops, BatchNorm normalises with the batch's statistics and
        updates its running ones). Returns the copy: `model = model.train()`."""
        mode = bool(mode)
        return _map_modules(self, lambda _, m: m.replace(training=mode) if "training" in type(m)._module_fields
                            else m)

    def eval(self):
        """A copy in evaluation mode: `model.train(False)` (Dropout is the identity,
        BatchNorm uses its running statistics). Returns the copy: `model = model.eval()`."""
        return self.train(False)

    @property
    def policy(self):
        """The mixed-precision policy of this module's calls (`nn.Policy.apply`), or None."""
        return self.__dict__.get("_policy")

    def __repr__(self):
        parts = [f"{n}={_show(self.__dict__.get(n, '<unset>'))}" for n in type(self)._module_fields]
        return f"{type(self).__name__}({', '.join(parts)})"


def _check_static(cls, name, value):
    if _holds_any_parameter(value):
        raise TreeError(f"{cls.__name__}.{name} mixes arrays or modules with other values ({_show(value)}); "
                        f"a field holds parameters or hyperparameters, not both (wrap a function among "
                        f"layers in nn.Lambda)")
    try:
        hash(value)
    except TypeError:
        raise TreeError(f"{cls.__name__}.{name} = {value!r} is a hyperparameter (it holds no arrays) and must be "
                        f"hashable: jit compares it; use a tuple instead of a list") from None


def _show(value):
    if is_array(value):
        return f"{nx.dtype(value.dtype).name}{list(value.shape)}"
    if isinstance(value, (list, tuple)) and _holds_any_parameter(value):
        inner = ", ".join(_show(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    return getattr(value, "__name__", None) if inspect.isfunction(value) else repr(value)


def with_policy(module, policy):
    """A copy of `module` whose calls run under `policy` (see nn.Policy.apply)."""
    new = object.__new__(type(module))
    new.__dict__.update(module.__dict__)
    new.__dict__["_policy"] = policy
    return new


# ---------------------------------------------------------------- partition and combine

def _is_none(x):
    return x is None


def partition(tree_, filter, is_leaf=None):
    """(kept, rest): two trees shaped like `tree_`, `kept` holding the leaves the
    filter selects and None elsewhere, `rest` the others (Equinox's partition).

    filter: a function of a leaf (`nn.is_array`, `nn.is_inexact_array`), or a
    tree prefix of `tree_` whose leaves are bools or such functions, each standing
    for its whole subtree, e.g. to freeze a sub-module:
        spec = rune.tree.map(lambda _: True, model).replace(embed=False)
        trainable, frozen = nn.partition(model, spec)
    """
    leaves, struct = tree.flatten(tree_, is_leaf)
    if callable(filter) and not isinstance(filter, Module):   # a module is a filter tree, though callable
        keep = [bool(filter(x)) for x in leaves]
    else:
        specs = tree.prefix_broadcast(filter, tree_, "partition's filter")
        keep = [bool(s(x)) if callable(s) else bool(s) for s, x in zip(specs, leaves)]
    kept = struct.unflatten([x if k else None for x, k in zip(leaves, keep)])
    rest = struct.unflatten([None if k else x for x, k in zip(leaves, keep)])
    return kept, rest


def combine(*trees):
    """The inverse of partition: each leaf taken from the first tree that has one
    (not None) at its place."""
    if not trees:
        raise ArgumentError("combine: expected at least one tree")
    def first(*xs):
        return next((x for x in xs if x is not None), None)
    return tree.map(first, *trees, is_leaf=_is_none)



# ---------------------------------------------------------------- state and modes

_STATE = "rune.nn.state"   # the dataclasses metadata key of a state field


def field(*, state=False, **kwargs):
    """A field declaration in a Module's class body (`dataclasses.field`'s
    arguments). `state=True` marks a field of arrays that are not trained
    (running statistics, buffers, EMA copies, counters): they stay leaves of the
    module, so jit traces them and `rune.save` writes them, but `nn.trainable`
    excludes them, and a layer changes them through `nn.update_state`:

        class Counter(nn.Module):
            count: object = nn.field(state=True)
    """
    metadata = dict(kwargs.pop("metadata", None) or {})
    if state:
        metadata[_STATE] = True
    return dataclasses.field(metadata=metadata, **kwargs)


def _is_module(x):
    return isinstance(x, Module)


def _map_modules(tree_, fn):
    """`tree_` with every module `m` in it replaced by `fn(m, m')`, where `m'` is a
    copy of `m` with its own sub-modules already mapped (bottom-up; containers
    rebuilt)."""
    def visit(node):
        if not isinstance(node, Module):
            return node
        d = node.__dict__
        new = object.__new__(type(node))
        new.__dict__.update(d)
        for name in d["_children"]:
            new.__dict__[name] = _map_modules(d[name], fn)
        return fn(node, new)
    return tree.map(visit, tree_, is_leaf=_is_module)


def _modules(tree_):
    """Every module in `tree_`, outermost first (the order is the same for any
    two trees of one structure)."""
    found = []

    def visit(node):
        if isinstance(node, Module):
            found.append(node)
            for name in node.__dict__["_children"]:
                tree.map(visit, node.__dict__[name], is_leaf=_is_module)
        return node
    tree.map(visit, tree_, is_leaf=_is_module)
    return found


def trainable(tree_):
    """A filter tree shaped like `tree_`: True at the leaves that train (floating
    or complex arrays outside `nn.field(state=True)` fields), False elsewhere.
    `params, rest = nn.partition(model, nn.trainable(model))` gives `grad` and
    the optimizers the parameters alone; `nn.combine(params, rest)` rebuilds."""
    marks = tree.map(is_inexact_array, tree_)

    def unmark_state(_, m):
        d = m.__dict__
        for name in type(m)._state_fields.intersection(d["_children"]):
            d[name] = tree.map(lambda _: False, d[name])
        return m
    return _map_modules(marks, unmark_state)


# The state updates of the calls in progress under `apply`, innermost last:
# {id(module): (module, {field: new value})}, per thread (each traces on its own).
_local = threading.local()


def _collecting():
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def update_state(module, **values):
    """Record new values of `module`'s state fields, from inside its `__call__`;
    `nn.apply` returns the model with them. Outside `nn.apply` there is nowhere
    for them to go, and that is an error (not a silent loss of the update)."""
    cls = type(module)
    wrong = [n for n in values if n not in cls._state_fields]
    if wrong:
        raise UsageError(f"{cls.__name__}: nn.update_state sets state fields (declared nn.field(state=True): "
                         f"{sorted(cls._state_fields)}), not {wrong}")
    updates = _collecting()
    if updates is None:
        raise UsageError(f"{cls.__name__} in training mode updates its state ({', '.join(values)}): call the "
                         f"model through nn.apply (`out, model = nn.apply(model, x)`, which returns the model "
                         f"with the new state), or switch it to evaluation mode with model.eval()")
    updates.setdefault(id(module), (module, {}))[1].update(values)


def _forward_updates(updates, inner, outer):
    """Move the updates recorded for the modules of `inner` (a copy of `outer`
    that a mixed-precision policy made for the call) to the matching modules of
    `outer`, in the dtypes of `outer`'s fields."""
    for copy, original in zip(_modules(inner), _modules(outer)):
        entry = updates.pop(id(copy), None)
        if entry is None:
            continue
        cast = {n: tree.map(lambda new, old: nx.astype(new, old.dtype), v, original.__dict__[n])
                for n, v in entry[1].items()}
        updates.setdefault(id(original), (original, {}))[1].update(cast)


def apply(model, *args, **kwargs):
    """(model(*args, **kwargs), the model with the state its layers updated).

    The call runs as usual; each `nn.update_state` made by a module of `model`
    during it is written into a copy of `model`, which is returned beside the
    output. In a training step it is the aux value of `value_and_grad` (see
    docs/modules.md, "State and modes"). A model in evaluation mode comes back
    unchanged."""
    updates = {}
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(updates)
    try:
        out = model(*args, **kwargs)
    finally:
        stack.pop()
    if not updates:
        return out, model
    placed = set()

    def place(m, new):
        if id(m) not in updates:
            return new
        placed.add(id(m))
        return new.replace(**updates[id(m)][1])
    new_model = _map_modules(model, place)
    lost = [type(m).__name__ for key, (m, _) in updates.items() if key not in placed]
    if lost:
        raise UsageError(f"nn.apply: {', '.join(lost)} updated its state but is not a module of the model given "
                         f"to nn.apply: a copy made inside the call (by vmap, scan or checkpoint over "
                         f"sub-modules, or a module built during the call) cannot hand its update back; "
                         f"return the new state from such a body instead")
    return out, new_model
