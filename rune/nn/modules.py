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

Built-in layers take an explicit key and initialise as PyTorch does (weights and
biases of Linear and Conv uniform in +-1/sqrt(fan_in), embeddings N(0, 1), norms
ones and zeros); `weight_init=` takes any `rune.nn` initialiser `(key, shape,
dtype)`. Dense weights are (in, out) and convolution kernels (*window, in, out),
as `x @ w` and `nx.conv` (NHWC) want them.

`partition(tree, filter)` splits a tree in two trees of the same shape (None
where the other has the leaf) and `combine` joins them, so `grad` and the
optimizers see only the trainable arrays (Equinox's partition/combine).
"""
import dataclasses
import functools
import inspect
import math

import numpy as np

from .. import nx, tree
from ..core.arraylike import ArrayLike
from . import functional
from ..errors import ArgumentError, DTypeError, ShapeError, TreeError, UsageError

__all__ = ["Module", "Linear", "Conv", "Embedding", "LayerNorm", "RMSNorm", "Dropout", "MultiHeadAttention",
           "MLP", "Sequential", "Lambda", "partition", "combine", "is_array", "is_inexact_array"]


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
        policy = self.__dict__.get("_policy")
        if policy is None:
            return call(self, *args, **kwargs)
        inner, args, kwargs = policy.cast_to_compute((self, args, kwargs))
        return policy.cast_to_output(call(inner, *args, **kwargs))
    return __call__


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
    _custom_init = False
    _policy = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own_init = "__init__" in cls.__dict__
        cls._custom_init = own_init or cls._custom_init
        _check_field_names(cls)
        dataclasses.dataclass(cls, init=not cls._custom_init, repr=False, eq=False)
        cls._module_fields = tuple(f.name for f in dataclasses.fields(cls))
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


# ---------------------------------------------------------------- helpers of the layers

def _split(key, n):
    keys = nx.random.split(key, n)
    return [keys[i] for i in range(n)]


def _fan_in_uniform(key, shape, fan_in, dtype):
    """PyTorch's default for Linear and Conv weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
    return nx.random.uniform(key, shape, nx.dtype(dtype), -bound, bound)


def _init(init, key, shape, fan_in, dtype):
    return _fan_in_uniform(key, shape, fan_in, dtype) if init is None else init(key, shape, dtype)


def _in_dtype_of(where, x, param):
    """The input `x` in the dtype of the layer's parameter `param` (under a policy,
    the compute dtype its parameters were cast to): int ids or float64 data given
    to a float32 layer compute in float32 and give float32, as the layer's own
    arithmetic would, not in NumPy's promoted dtype. Complex inputs to a real
    layer are refused (a cast would drop their imaginary part)."""
    x = nx.asarray(x)
    if param is None or x.dtype == param.dtype:
        return x
    if nx.isdtype(x.dtype, "complex floating") and not nx.isdtype(param.dtype, "complex floating"):
        raise DTypeError(f"{where}: expected a real input for its {nx.dtype(param.dtype).name} parameters, "
                         f"got {nx.dtype(x.dtype).name} of shape {x.shape}")
    return nx.astype(x, param.dtype)


def _tuple(name, what, value, n):
    value = (value,) * n if isinstance(value, int) else tuple(value)
    if len(value) != n:
        raise ShapeError(f"{name}: {what} needs {n} entries (one per spatial axis), got {value}")
    return value


# ---------------------------------------------------------------- layers

class Linear(Module):
    """y = x @ weight + bias over the last axis of x; weight (in, out)."""
    weight: object
    bias: object
    in_features: int
    out_features: int

    def __init__(self, key, in_features, out_features, use_bias=True, dtype=nx.float32, weight_init=None,
                 bias_init=None):
        wkey, bkey = _split(key, 2)
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = _init(weight_init, wkey, (self.in_features, self.out_features), self.in_features, dtype)
        self.bias = _init(bias_init, bkey, (self.out_features,), self.in_features, dtype) if use_bias else None

    def __call__(self, x):
        where = f"Linear(in_features={self.in_features}, out_features={self.out_features})"
        x = _in_dtype_of(where, x, self.weight)
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ShapeError(f"{where}: expected an input whose last axis is {self.in_features}, got shape {x.shape}")
        y = x @ self.weight
        return y if self.bias is None else y + self.bias


class Conv(Module):
    """N-d convolution (cross-correlation) of an (N, *spatial, C_in) or (*spatial,
    C_in) input with a (*kernel_size, C_in / groups, C_out) kernel (NHWC, `nx.conv`).

    kernel_size: a tuple with one entry per spatial axis (its length gives 1, 2 or
    3 spatial axes), or an int for a square 2-d window. padding: "SAME" (the
    default, as Flax), "VALID", or (low, high) pairs.
    """
    weight: object
    bias: object
    in_channels: int
    out_channels: int
    kernel_size: tuple
    strides: tuple
    padding: object
    dilation: tuple
    groups: int

    def __init__(self, key, in_channels, out_channels, kernel_size, strides=1, padding="SAME", dilation=1,
                 groups=1, use_bias=True, dtype=nx.float32, weight_init=None, bias_init=None):
        kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        nd = len(kernel_size)
        if not 1 <= nd <= 3:
            raise ShapeError(f"Conv: kernel_size must have 1 to 3 entries (spatial axes), got {kernel_size}")
        if in_channels % groups or out_channels % groups:
            raise ShapeError(f"Conv: in_channels {in_channels} and out_channels {out_channels} must divide by "
                             f"groups {groups}")
        wkey, bkey = _split(key, 2)
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = kernel_size
        self.strides = _tuple("Conv", "strides", strides, nd)
        self.dilation = _tuple("Conv", "dilation", dilation, nd)
        self.padding = padding if isinstance(padding, (str, int)) else tuple(tuple(p) for p in padding)
        fan_in = self.in_channels // self.groups * math.prod(kernel_size)
        self.weight = _init(weight_init, wkey, kernel_size + (self.in_channels // self.groups, self.out_channels),
                            fan_in, dtype)
        self.bias = _init(bias_init, bkey, (self.out_channels,), fan_in, dtype) if use_bias else None

    def __call__(self, x):
        where = (f"Conv(in_channels={self.in_channels}, out_channels={self.out_channels}, "
                 f"kernel_size={self.kernel_size})")
        x = _in_dtype_of(where, x, self.weight)
        nd = len(self.kernel_size)
        if x.ndim not in (nd + 1, nd + 2) or x.shape[-1] != self.in_channels:
            raise ShapeError(f"{where}: expected an input (N, *spatial, {self.in_channels}) "
                             f"or (*spatial, {self.in_channels}) with {nd} spatial axes, got shape {x.shape}")
        single = x.ndim == nd + 1
        y = nx.conv(x[None] if single else x, self.weight, self.strides, self.padding, self.dilation, self.groups)
        if self.bias is not None:
            y = y + self.bias
        return y[0] if single else y


class Embedding(Module):
    """Rows of a (num_embeddings, features) table looked up by integer ids.

    An id outside [0, num_embeddings) gives a row of NaN (for a floating or
    complex table), eagerly and under jit/grad alike, as `nn.cross_entropy` gives a
    NaN loss for an out-of-range label: a vocabulary that does not match the table
    shows in the loss instead of training silently on a clamped row. (A table of
    another dtype has no NaN: its out-of-range ids are clamped as by `nx.take`.)"""
    weight: object
    num_embeddings: int
    features: int

    def __init__(self, key, num_embeddings, features, dtype=nx.float32, weight_init=None):
        self.num_embeddings, self.features = int(num_embeddings), int(features)
        shape = (self.num_embeddings, self.features)
        self.weight = nx.random.normal(key, shape, nx.dtype(dtype)) if weight_init is None else \
            weight_init(key, shape, dtype)

    def __call__(self, ids):
        ids = nx.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise DTypeError(f"Embedding(num_embeddings={self.num_embeddings}, features={self.features}): "
                             f"expected integer ids, got {ids.dtype.name} of shape {ids.shape}")
        rows = nx.take(self.weight, ids, axis=0)
        if not is_inexact_array(self.weight):
            return rows
        # a where, not a Python check, so the same rule holds for traced ids
        valid = ids >= 0
        if self.num_embeddings <= nx.iinfo(ids.dtype).max:   # else every id fits (uint8 ids, 300 rows)
            valid = nx.logical_and(valid, ids < self.num_embeddings)
        valid = valid[..., None]
        return nx.where(valid, rows, nx.full_like(rows, float("nan")))


def _normalised_axes(name, shape, x):
    axes = tuple(range(-len(shape), 0))
    if x.ndim < len(shape) or tuple(x.shape[-len(shape):]) != shape:
        raise ShapeError(f"{name}(shape={shape}): expected an input ending in axes {shape}, got shape {x.shape}")
    return axes


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) over the trailing axes `shape`, times weight plus
    bias (both of that shape; PyTorch's eps and affine defaults)."""
    weight: object
    bias: object
    shape: tuple
    eps: float

    def __init__(self, shape, eps=1e-5, use_weight=True, use_bias=True, dtype=nx.float32):
        self.shape = (int(shape),) if isinstance(shape, int) else tuple(shape)
        self.eps = float(eps)
        self.weight = nx.ones(self.shape, nx.dtype(dtype)) if use_weight else None
        self.bias = nx.zeros(self.shape, nx.dtype(dtype)) if use_bias else None

    def __call__(self, x):
        param = self.weight if self.weight is not None else self.bias
        x = _in_dtype_of(f"LayerNorm(shape={self.shape})", x, param)
        axes = _normalised_axes("LayerNorm", self.shape, x)
        return functional.layer_norm(x, self.weight, self.bias, axis=axes, eps=self.eps)


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) over the trailing axes `shape`, times weight
    (Zhang & Sennrich 2019; Flax's eps)."""
    weight: object
    shape: tuple
    eps: float

    def __init__(self, shape, eps=1e-6, use_weight=True, dtype=nx.float32):
        self.shape = (int(shape),) if isinstance(shape, int) else tuple(shape)
        self.eps = float(eps)
        self.weight = nx.ones(self.shape, nx.dtype(dtype)) if use_weight else None

    def __call__(self, x):
        x = _in_dtype_of(f"RMSNorm(shape={self.shape})", x, self.weight)
        axes = _normalised_axes("RMSNorm", self.shape, x)
        out = x * nx.rsqrt(nx.mean(x * x, axis=axes, keepdims=True) + self.eps)
        return out if self.weight is None else out * self.weight


class Dropout(Module):
    """Zeroes each element with probability `rate` and scales the rest by
    1 / (1 - rate), drawing from the key given at call time; with key=None (for
    evaluation) the input comes back unchanged."""
    rate: float

    def __init__(self, rate):
        if not 0.0 <= rate < 1.0:
            raise ArgumentError(f"Dropout: rate must be in [0, 1), got {rate}")
        self.rate = float(rate)

    def __call__(self, x, *, key=None):
        if key is None:
            return nx.asarray(x)
        return functional.dropout(key, self.rate, x)


def _mask_forms(batch, heads, lq, lk):
    """{ndim: (name, shape)} of the masks `mask=` takes, decided by the number of
    axes alone (never by comparing sizes: a (batch, L_k) padding mask and an
    (L_q, L_k) one have the same rank, and batch == L_q happens)."""
    nb = len(batch)
    return {nb + 3: ("(*batch, num_heads, L_q, L_k)", batch + (heads, lq, lk)),
            nb + 2: ("(*batch, L_q, L_k)", batch + (lq, lk)),
            2: ("(L_q, L_k)", (lq, lk))}


def _fits(shape, expected):
    return len(shape) == len(expected) and all(n in (1, e) for n, e in zip(shape, expected))


def _bool_mask(where, argument, mask, accepted):
    mask = nx.asarray(mask)
    if mask.dtype != nx.bool:
        raise DTypeError(f"{where}: expected {argument}= a bool mask of shape {accepted}, "
                         f"got {nx.dtype(mask.dtype).name}{list(mask.shape)}")
    return mask


def _attention_mask(where, mask, key_mask, causal, batch, heads, lq, lk):
    """Which scores stay, broadcastable to (*batch, num_heads, L_q, L_k), or None."""
    allowed = nx.arange(lq)[:, None] >= nx.arange(lk)[None, :] if causal else None
    if mask is not None:
        forms = _mask_forms(batch, heads, lq, lk)
        accepted = " or ".join(f"{name} = {shape}" for name, shape in reversed(forms.values()))
        mask = _bool_mask(where, "mask", mask, accepted)
        form = forms.get(mask.ndim)
        if form is None or not _fits(mask.shape, form[1]):
            raise ShapeError(f"{where}: expected mask= a bool mask of shape {accepted} (an axis of 1 broadcasts), "
                             f"got bool{list(mask.shape)}; a (*batch, L_k) padding mask of the keys goes in "
                             f"key_mask=")
        if mask.ndim == len(batch) + 2 and batch:
            mask = mask[..., None, :, :]   # one mask for every head
        allowed = mask if allowed is None else nx.logical_and(allowed, mask)
    if key_mask is not None:
        expected = batch + (lk,)
        accepted = f"(*batch, L_k) = {expected}"
        key_mask = _bool_mask(where, "key_mask", key_mask, accepted)
        if not _fits(key_mask.shape, expected):
            raise ShapeError(f"{where}: expected key_mask= a bool mask of shape {accepted} (an axis of 1 "
                             f"broadcasts), got bool{list(key_mask.shape)}")
        key_mask = key_mask[..., None, None, :]   # every head and every query
        allowed = key_mask if allowed is None else nx.logical_and(allowed, key_mask)
    return allowed


class MultiHeadAttention(Module):
    """Scaled dot-product attention over `num_heads` heads (Vaswani et al. 2017):
    softmax(q k^T / sqrt(head_dim)) v per head, with q from `x` (*batch, L_q,
    features) and k, v from `context` (*batch, L_k, context_features; default: x,
    self-attention), then an output projection back to `features`.

    Masks are bools, True where a query may attend to a key; `causal=True` also
    hides the later positions. `mask=` takes, told apart by its number of axes:
      (L_q, L_k)                        the same for every example and head;
      (*batch, L_q, L_k)                one per example, the same for every head;
      (*batch, num_heads, L_q, L_k)     one per example and head (Flax's form);
    any axis may be 1 to broadcast (Flax and Hugging Face's (B, 1, L_q, L_k)).
    `key_mask=` takes (*batch, L_k): which keys are real tokens (True) and which
    are padding (False), for every query and head. It is the complement of
    PyTorch's `key_padding_mask` (True there marks padding). Any other shape is a
    ShapeError: a 2-d mask is always (L_q, L_k), never guessed to be a
    (batch, L_k) padding mask from its sizes.
    """
    q_proj: Linear
    k_proj: Linear
    v_proj: Linear
    out_proj: Linear
    num_heads: int
    features: int

    def __init__(self, key, num_heads, features, context_features=None, use_bias=True, dtype=nx.float32):
        if features % num_heads:
            raise ShapeError(f"MultiHeadAttention: features {features} must divide by num_heads {num_heads}")
        context_features = features if context_features is None else context_features
        kq, kk, kv, ko = _split(key, 4)
        self.num_heads, self.features = int(num_heads), int(features)
        self.q_proj = Linear(kq, features, features, use_bias, dtype)
        self.k_proj = Linear(kk, context_features, features, use_bias, dtype)
        self.v_proj = Linear(kv, context_features, features, use_bias, dtype)
        self.out_proj = Linear(ko, features, features, use_bias, dtype)

    def __call__(self, x, context=None, *, mask=None, key_mask=None, causal=False):
        x = nx.asarray(x)
        context = x if context is None else nx.asarray(context)
        where = f"MultiHeadAttention(num_heads={self.num_heads}, features={self.features})"
        if x.ndim < 2 or x.shape[-1] != self.features:
            raise ShapeError(f"{where}: expected queries (..., length, {self.features}), got shape {x.shape}")
        if context.ndim < 2 or context.shape[-1] != self.k_proj.in_features:
            raise ShapeError(f"{where}: expected a context (..., length, {self.k_proj.in_features}), "
                             f"got shape {context.shape}")
        try:
            batch = tuple(np.broadcast_shapes(x.shape[:-2], context.shape[:-2]))
        except ValueError:
            raise ShapeError(f"{where}: the batch axes of the queries {x.shape} and the context "
                             f"{context.shape} do not broadcast") from None
        heads = lambda t: nx.reshape(t, t.shape[:-1] + (self.num_heads, self.features // self.num_heads))  # noqa: E731
        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(context)), heads(self.v_proj(context))
        scores = nx.einsum("...qhd,...khd->...hqk", q, k) * (1.0 / math.sqrt(self.features // self.num_heads))
        allowed = _attention_mask(where, mask, key_mask, causal, batch, self.num_heads, x.shape[-2],
                                  context.shape[-2])
        if allowed is not None:
            scores = nx.where(allowed, scores, nx.finfo(scores.dtype).min)
        weights = nx.softmax(scores, axis=-1)
        out = nx.einsum("...hqk,...khd->...qhd", weights, v)
        return self.out_proj(nx.reshape(out, out.shape[:-2] + (self.features,)))


class Lambda(Module):
    """A function as a layer (of a Sequential): it holds no parameters."""
    fn: object

    def __call__(self, x):
        return self.fn(x)


@functools.lru_cache(maxsize=None)
def _takes_key(cls):
    return "key" in inspect.signature(cls.__call__).parameters


class Sequential(Module):
    """Layers applied in order; plain functions among them are wrapped in Lambda.
    A key given at call time is split among the layers that take one (Dropout)."""
    layers: tuple

    def __init__(self, *layers):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = layers[0]
        for i, layer in enumerate(layers):
            if not callable(layer):
                raise UsageError(f"Sequential: layer {i} is a {type(layer).__name__}, not a module or a function")
        self.layers = tuple(layer if isinstance(layer, Module) else Lambda(layer) for layer in layers)

    def __call__(self, x, *, key=None):
        keys = [None] * len(self.layers) if key is None else _split(key, len(self.layers))
        for layer, k in zip(self.layers, keys):
            x = layer(x, key=k) if _takes_key(type(layer)) else layer(x)
        return x

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self):
        return len(self.layers)


class MLP(Module):
    """Linear layers of the given sizes ([in, hidden..., out]) with `activation`
    (relu by default) between them (not after the last)."""
    layers: tuple
    activation: object

    def __init__(self, key, sizes, activation=functional.relu, use_bias=True, dtype=nx.float32):
        sizes = tuple(int(s) for s in sizes)
        if len(sizes) < 2:
            raise ArgumentError(f"MLP: sizes must list at least an input and an output size, got {sizes}")
        keys = _split(key, len(sizes) - 1)
        self.layers = tuple(Linear(k, a, b, use_bias, dtype) for k, a, b in zip(keys, sizes[:-1], sizes[1:]))
        self.activation = activation

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.layers[-1](x)
