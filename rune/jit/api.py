"""`rune.jit`: trace once per signature, plan, cache, replay.

The cache key is the pytree structure of the arguments, each leaf's shape,
dtype, device and weak type, the static arguments' values, and which leaves
are the same array (so `f(a, a)` and `f(a, b)` are traced apart, as donation
and aliasing may differ). Under an enclosing transformation a jitted function
is traced through like plain code: jit changes speed, never results.
"""
import functools
import inspect

from .. import tree
from ..core import trace as _trace
from ..core.program import dce
from ..core.staging import stage
from ..devices import get_device
from ..errors import RuneError
from ..nx import ops as nx
from ..nx.array import Array
from ..nx.placement import place
from ..stats import COUNTERS
from .plan import Plan, _wrap


class _Entry:
    __slots__ = ("plan", "out_struct")

    def __init__(self, plan, out_struct):
        self.plan, self.out_struct = plan, out_struct


class Jitted:
    def __init__(self, f, static_argnums=(), static_argnames=(), donate_argnums=(), device=None):
        self.f = f
        self.static_argnums, self.static_argnames = _statics(f, _as_tuple(static_argnums),
                                                             _as_tuple(static_argnames))
        self.donate_argnums = _as_tuple(donate_argnums)  # a hint: host buffers are never reused
        self.device = None if device is None else get_device(device)
        self.cache = {}
        functools.update_wrapper(self, f, updated=())  # never copy f.__dict__ over ours

    def __call__(self, *args, **kwargs):
        if _trace._current.interp is not _trace.EVAL:
            if self.device is not None:  # traced through, it still places its array inputs
                args, kwargs = tree.map(lambda v: place(v, self.device) if hasattr(v, "aval") else v,
                                        (args, kwargs))
            return self.f(*args, **kwargs)
        fast = self._fast_key(args, kwargs)
        entry = self.cache.get(fast) if fast is not None else None
        if entry is not None:
            COUNTERS["cache_hits"] += 1
            leaves = args
        else:
            key, leaves = self._key(args, kwargs)
            entry = self.cache.get(key)
            if entry is None:
                entry = self._compile(leaves, args, kwargs)
                self.cache[key] = entry
            else:
                COUNTERS["cache_hits"] += 1
            if fast is not None:
                self.cache[fast] = entry
        raws = entry.plan.run([x._raw for x in leaves])
        return tree.unflatten(entry.out_struct, _wrap(raws, entry.plan.out_avals))

    def _fast_key(self, args, kwargs):
        """For the common call (distinct Arrays, no keywords, statics or placement):
        the avals alone, which skips flattening; None otherwise."""
        if kwargs or self.static_argnums or self.device is not None:
            return None
        for a in args:
            if type(a) is not Array:
                return None
        if len({id(a) for a in args}) != len(args):
            return None
        return tuple(a.aval for a in args)

    def _split(self, args, kwargs):
        """(dynamic args with statics replaced by None, dynamic kwargs, static values)."""
        n = len(args)
        statics = []
        dyn_args = list(args)
        for i in self.static_argnums:
            j = i if i >= 0 else n + i
            if 0 <= j < n:
                statics.append((j, args[j]))
                dyn_args[j] = None
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self.static_argnames:
                statics.append((k, v))
            else:
                dyn_kwargs[k] = v
        return dyn_args, dyn_kwargs, tuple(statics)

    def _key(self, args, kwargs):
        dyn_args, dyn_kwargs, statics = self._split(args, kwargs)
        leaves, struct = tree.flatten((dyn_args, dyn_kwargs))
        leaves = [self._leaf(x) for x in leaves]
        first = {}
        alias = tuple(first.setdefault(id(x), i) for i, x in enumerate(leaves))
        try:
            key = (struct, tuple(x.aval for x in leaves), statics, alias)
            hash(key)
        except TypeError as e:
            raise RuneError(f"jit: static arguments must be hashable: {e}") from e
        return key, leaves

    def _leaf(self, x):
        if type(x) is not Array:
            weak = type(x) in (bool, int, float)  # Python scalars stay weak; NumPy values do not
            x = nx.asarray(x)
            if weak:
                x = Array(x._raw, x.device, True)
        if self.device is not None and x.device != self.device:
            x = place(x, self.device)
        return x

    def _compile(self, leaves, args, kwargs):
        program, out_struct = self._stage(leaves, args, kwargs)
        plan = Plan(program)
        # Counted once both succeeded: a failed trace leaves the counters as they were.
        COUNTERS["traces"] += 1
        COUNTERS["compiles"] += 1
        return _Entry(plan, out_struct)

    def _stage(self, leaves, args, kwargs):
        dyn_args, dyn_kwargs, statics = self._split(args, kwargs)
        _, struct = tree.flatten((dyn_args, dyn_kwargs))
        box = []

        def flat(*xs):
            a, k = tree.unflatten(struct, xs)
            for pos, value in statics:
                if isinstance(pos, int):
                    a[pos] = value
                else:
                    k[pos] = value
            out_leaves, s = tree.flatten(self.f(*a, **k))
            box.append(s)
            return out_leaves

        program = stage(flat, [x.aval for x in leaves])
        for value in program.consts:
            # jit stages only when nothing else is tracing: a captured tracer escaped.
            if isinstance(value, _trace.Tracer):
                raise _trace.escaped_tracer(value, "jit")
        return dce(program), box[0]

    def trace(self, *args, **kwargs):
        """The staged Program for these arguments."""
        _, leaves = self._key(args, kwargs)
        return self._stage(leaves, args, kwargs)[0]

    def plan(self, *args, **kwargs):
        """The Plan this function runs for these arguments."""
        key, leaves = self._key(args, kwargs)
        entry = self.cache.get(key)
        if entry is None:
            entry = self._compile(leaves, args, kwargs)
            self.cache[key] = entry
        return entry.plan


def _statics(f, argnums, argnames):
    """Static positions and names, each completed from the other through f's
    signature (as JAX does), so a static argument is static however it is passed."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return argnums, argnames
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums = set(argnums) | {positional.index(n) for n in argnames if n in positional}
    names = set(argnames) | {positional[i] for i in argnums if -len(positional) <= i < len(positional)}
    return tuple(sorted(nums)), tuple(sorted(names))


def _as_tuple(x):
    if x is None:
        return ()
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def jit(f=None, static_argnums=(), static_argnames=(), donate_argnums=(), device=None):
    """Compile `f`: traced once per signature, planned, cached and replayed."""
    if f is None:
        return functools.partial(jit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, device=device)
    return Jitted(f, static_argnums, static_argnames, donate_argnums, device)

