"""`rune.jit`: trace once per signature, plan, cache, replay.

The cache key is the pytree structure of the arguments, each leaf's shape,
dtype, device and weak type, the static arguments' values and types, which
leaves are the same array (so `f(a, a)` and `f(a, b)` are traced apart, as
donation and aliasing may differ), and the device the function is traced on
(`device=`, else the default device: constants `f` creates lie there). Under
an enclosing transformation a jitted function is traced through like plain
code: jit changes speed, never results, placement included.

A call whose pytree arguments have the structure of the signature last hit is
matched against it by code compiled for that structure (`Structure.matcher`)
instead of being flattened, and its key reuses that signature's structure and
avals, so the lookup compares them by identity: a training loop's step costs
little more than its plan.
"""
import collections
import functools
import inspect
import weakref

import numpy as np

from ..base import config
from .. import tree
from ..core.aval import Spec
from ..core import trace as _trace
from ..core import stage_cache
from ..core.aval import Aval
from ..core.program import dce
from ..core.staging import stage_pytree
from ..core.devices import _default, default_device, get_device
from ..errors import ArgumentError, DTypeError, ScalarOverflowError, UsageError
from ..nx import exact_math as _exact_math
from ..nx import ops as nx
from ..nx.buffers import Array
from ..nx.placement import place
from ..base.contexts import OPEN as _CONTEXTS  # never rebound: read without a call
from ..base.profiler import _OPEN as _PROFILES_OPEN  # never rebound: read without a call
from ..base.stats import COUNTERS, call_cell, release_cell
from ..base.tracebacks import hide_internal_frames
from . import donation, nan_check
from .plan import Plan, forget_plans
from .straight import straight_lines


def _env_cache_size():
    return config.jit_cache_size()


# Entries each jitted function keeps (least recently used dropped first); a
# Jitted's own `cache_size` attribute overrides it.
CACHE_SIZE = _env_cache_size()

_ALL = weakref.WeakSet()  # every Jitted, for clear_caches()


_LEAF = tree.structure(0)  # the structure of a bare array
_CURRENT, _EVAL = _trace._current, _trace.EVAL  # read on every call: module globals, not attributes
_NANS = nan_check.SWITCH


class _Entry:
    """A traced signature: its plan, and how to turn the plan's raw outputs into f's result.

    Where each output lies is fixed when it is traced (the device the function is
    traced on is part of the key), so a call wraps buffers without looking it up."""
    __slots__ = ("plan", "key", "out_struct", "out_places", "out_avals", "checked", "bare", "reuse", "call",
                 "runs", "hot_call", "hot_cell", "scalar_ranges")

    def __init__(self, plan, key, in_avals, out_struct, where):
        self.plan, self.key, self.out_struct = plan, key, out_struct
        self.out_places = tuple((where if a.device is None else a.device, a.weak) for a in plan.out_avals)
        # The outputs' avals, given to the arrays `outputs` makes: a training loop
        # passes them back, and the next call's key then neither builds avals nor
        # (these being the very objects of this entry's key where equal) compares
        # them field by field. None where the first run's buffers disagree.
        known = {a: a for a in in_avals}
        self.out_avals = tuple(known.setdefault(aval, aval) for aval in
                               (Aval(a.shape, a.dtype, device, weak)
                                for a, (device, weak) in zip(plan.out_avals, self.out_places)))
        self.checked = False
        self.bare = out_struct == _LEAF  # f returned one array: no tree to rebuild
        self.reuse = None  # where donated buffers go (rune/compiler/donation.py), found on the first donating call
        # A one-array call of a one-array function whose plan is NumPy stretches
        # only, as one written function of the argument's buffer (`_written_call`),
        # from its third call; False where it cannot be written.
        self.call = None
        self.runs = 0
        self.hot_call = None   # the same, as a Jitted's own `__call__` (Jitted._write_hot_call)
        self.hot_cell = None   # where hot_call counts its calls (rune/base/stats.py)
        self.scalar_ranges = ()   # (leaf, lo, hi, message) a Python int argument must satisfy (`_stage`)

    def single_call(self):
        """`call` once it is worth writing (the plan has run twice), else None."""
        self.runs += 1
        if self.runs < 3:
            return None
        plan = self.plan
        if not (self.bare and len(plan.in_slots) == 1 and plan.straight):
            self.call = False
            return None
        self.call = _written_call(plan, *self.out_places[0])
        return self.call

    def outputs(self, raws):
        avals = self.out_avals
        if not self.checked:  # the first run: are the avals those of its buffers?
            self.checked = True
            if not all(r.shape == a.shape and r.dtype == a.dtype for r, a in zip(raws, avals)):
                avals = self.out_avals = None
        if avals is None:
            arrays = [Array(r, device, weak) for r, (device, weak) in zip(raws, self.out_places)]
        else:
            arrays = []
            for r, aval in zip(raws, avals):
                x = Array(r, aval.device, aval.weak)
                x._aval = aval
                arrays.append(x)
        return arrays[0] if self.bare else self.out_struct.unflatten(arrays)


def _call_body(plan, device, weak, names, indent, cell=None):
    """The statements of a cached call of `plan` (one input `x`, one output, NumPy
    stretches only): counted as a cache hit and its stretches as launched (in
    `cell`, rune/base/stats.py's call_cell, where given), the result returned as an
    Array on `device`. Names they use go into `names`."""
    names.update(COUNTERS=COUNTERS, Array=Array, device=device, weak=weak, CELL=cell)
    body, (out,) = straight_lines(plan, ["x"], "", names)
    counting = (["CELL[0] += 1"] if cell is not None else
                ["COUNTERS['cache_hits'] += 1", f"COUNTERS['kernels_launched'] += {len(plan.steps)}"])
    lines = [*counting, *body, f"return Array({out}, device, weak)"]
    return [indent + line for line in lines]


def _written(lines, names, name):
    exec(compile("\n".join(lines), "<rune jit call>", "exec"), names)
    return names[name]


def _written_call(plan, device, weak):
    """The cached call of `plan` as one function of the input's buffer."""
    names = {}
    return _written(["def call(x):", *_call_body(plan, device, weak, names, "    ")], names, "call")


_NO_ARGUMENT = object()


def _release(entry):
    """An entry leaving a function's cache: what its hot call counted is counted."""
    if entry.hot_cell is not None:
        release_cell(entry.hot_cell)


def _hot_call(plan, aval, device, weak, cell):
    """`Jitted.__call__` for one array of `aval` running `plan`, written out as
    `_written_call` writes it, behind the checks that make it that call: any
    other call goes to `Jitted.__call__`. Its calls count in `cell`."""
    names = {"AVAL": aval, "OPEN": _CONTEXTS, "NO": _NO_ARGUMENT, "full_call": Jitted.__call__}
    lines = ["def __call__(self, a=NO, /, *args, **kwargs):",
             "    if type(a) is Array and a._aval is AVAL and not OPEN[0] and not args and not kwargs:",
             "        x = a._raw",
             *_call_body(plan, device, weak, names, "        ", cell),
             "    if a is NO:",
             "        return full_call(self, *args, **kwargs)",
             "    return full_call(self, a, *args, **kwargs)"]
    return _written(lines, names, "__call__")


class Jitted:
    """A jitted function; see `jit`."""

    def __init__(self, f, static_argnums=(), static_argnames=(), donate_argnums=(), device=None):
        if not callable(f):
            raise UsageError(f"jit: expected a function, got {type(f).__name__} {f!r}")
        self.f = f
        self.static_argnums, self.static_argnames = _statics(f, _as_tuple(static_argnums),
                                                             _as_tuple(static_argnames))
        self.donate_argnums = _as_tuple(donate_argnums)  # reused on GPUs only (rune/compiler/donation.py)
        self.device = None if device is None else get_device(device)
        self.cache = collections.OrderedDict()  # key -> _Entry, least recently used first
        self._latest = None  # the entry at the end of `cache` (moving it there again is a no-op)
        self._last_single = (None, None, None)  # (aval, default device's name, entry) of a one-array call
        self._hot_aval = None  # the aval `_write_hot_call` wrote this function's call for
        self.cache_size = CACHE_SIZE
        # The cheap key applies when nothing can make a call differ from its avals.
        self._fast = (not self.static_argnums and not self.static_argnames and self.device is None
                      and not self.donate_argnums)
        # Pytree arguments are matched against the structure of the signature last
        # hit (`_matched_key`) when no static argument or placement takes part in the key.
        self._plain = not self.static_argnums and not self.static_argnames and self.device is None
        self._match = None  # (structure, its matcher, alias) of that signature's key
        functools.update_wrapper(self, f, updated=())  # never copy f.__dict__ over ours
        _ALL.add(self)

    def __get__(self, obj, objtype=None):
        # A method: `obj.f(x)` calls `f(obj, x)` (obj static or a pytree), sharing this cache.
        return self if obj is None else _Bound(self, obj)

    def __call__(self, *args, **kwargs):
        try:
            if _CURRENT.interp is not _EVAL:
                return self._traced_through(args, kwargs)
            if _CONTEXTS[0] and _NANS.on:   # rune.debug.nans: a NaN in the result is traced to its op
                return nan_check.checked_call(self, f"jit({_name(self.f)})", args, kwargs)
            if len(args) == 1 and self._fast and not kwargs and type(args[0]) is Array:
                # The commonest call: one array. Its key is `_fast_key`'s, made here
                # without a frame; an array whose aval is the very object the last
                # such call had (the same array again), on the same default device,
                # skips the lookup too.
                a = args[0]
                aval, where = a._aval or a.aval, _default.stack[-1].name
                last_aval, last_where, entry = self._last_single
                repeated = aval is last_aval and where is last_where
                if not repeated:
                    entry = self.cache.get((where, aval))
                    if entry is None or entry is not self._latest:
                        entry = None
                    else:
                        self._last_single = (aval, where, entry)
                if entry is not None:
                    call = entry.call
                    if call is None:
                        call = entry.single_call()
                    if call and not _PROFILES_OPEN:  # a profile times each plan step
                        # (never for signatures that alternate: each would rewrite the class)
                        if repeated and not _CONTEXTS[0] and self._hot_aval is not aval:
                            self._write_hot_call(entry, aval)
                        return call(a._raw)
                    COUNTERS["cache_hits"] += 1
                    out = entry.plan.run([a._raw])
                    if entry.bare:
                        device, weak = entry.out_places[0]
                        return Array(out[0], device, weak)
                    return entry.outputs(out)
            key = None
            match = self._match
            if match is not None:
                key, leaves = self._matched_key(match, args, kwargs)
            if key is None:
                key = self._fast_key(args, kwargs)
                leaves = args
                if key is None:
                    key, leaves = self._key(args, kwargs)
            entry = self.cache.get(key)
            if entry is None:
                entry = self._compile(key, leaves, args, kwargs)
            else:
                COUNTERS["cache_hits"] += 1
                if self._plain and (match is None or match[0] is not entry.key[0]):
                    self._match_next(entry)
                if entry is not self._latest:  # a loop calling one signature never reorders the cache
                    try:
                        self.cache.move_to_end(key)
                    except KeyError:  # another thread cleared or evicted it meanwhile: the entry still runs
                        pass
                    self._latest = entry
            raws = [leaves[0]._raw] if len(leaves) == 1 else [x._raw for x in leaves]  # one arg: no comprehension frame
            if entry.scalar_ranges:
                _check_scalar_ranges(entry.scalar_ranges, raws)
            if self.donate_argnums:
                return entry.outputs(self._run_donating(entry, args, leaves, raws))
            return entry.outputs(entry.plan.run(raws))
        except Exception as e:   # the user's frames only (RUNE_TRACEBACK=full: all), as it leaves rune
            hide_internal_frames(e)
            raise

    def _run_donating(self, entry, args, leaves, raws):
        """Run `entry` giving the GPU buffers of the donated arguments' leaves to its
        outputs (rune/compiler/donation.py); those leaves are deleted."""
        where = f"jit({_name(self.f)}) (donate_argnums={self.donate_argnums})"
        for i in range(len(leaves)):
            if isinstance(raws[i], donation.DeletedBuffer):
                raws[i]._deleted()
        donated = {i: leaves[i] for i in self._donated_leaves(args)
                   if type(leaves[i]) is Array and leaves[i].device.platform != "cpu"}
        if not donated:
            return entry.plan.run(raws)
        slots = {entry.plan.in_slots[i]: i for i in donated}
        if entry.reuse is None:
            entry.reuse = donation.reuse_plan(entry.plan, list(slots))
        # the leaves are deleted; a buffer another live array also reads (an alias, a view) is not reused
        owned = donation.take(leaves, raws, list(donated), where)
        offered = {s: owned[i] for s, i in slots.items() if i in owned}
        return entry.plan.run(raws, donation.by_step(entry.reuse, offered))

    def _donated_leaves(self, args):
        """Positions, among a call's leaves, of the leaves of the donated arguments."""
        dyn_args = self._split(args, {})[0]  # static arguments are None there: no leaves
        starts, n = [0], len(dyn_args)
        for a in dyn_args:
            starts.append(starts[-1] + len(tree.leaves(a)))
        found = set()
        for pos in self.donate_argnums:
            j = pos if pos >= 0 else n + pos
            if 0 <= j < n:
                found.update(range(starts[j], starts[j + 1]))
        return sorted(found)

    def _traced_through(self, args, kwargs):
        if self.device is None:
            return self.f(*args, **kwargs)
        with default_device(self.device):  # as when staged: on `device`, in and out
            args, kwargs = tree.map(lambda v: place(v, self.device) if hasattr(v, "aval") else v,
                                    (args, kwargs))
            out_leaves, struct = self._outputs(self.f(*args, **kwargs))
        return tree.unflatten(struct, out_leaves)

    def _match_next(self, entry):
        """Match the next calls against `entry`'s structure, if its key is one
        `_matched_key` makes (pytree arguments, no two leaves the same array)."""
        struct = entry.key[0]
        if type(struct) is tree.Structure:
            alias = entry.key[3]
            matcher = struct.matcher(Array) if len(set(alias)) == len(alias) else None
            if matcher is not None:
                self._match = (struct, matcher, alias)

    def _matched_key(self, match, args, kwargs):
        """`_key`'s key and leaves for a call whose arguments have the structure
        in `match` with distinct Arrays for leaves, found without flattening
        them: the structure and alias of the stored key are reused, so comparing
        keys compares them by identity. (None, None) for any other call."""
        struct, matcher, alias = match
        leaves = matcher((list(args), kwargs))
        if leaves is None or len(set(map(id, leaves))) != len(leaves):
            return None, None
        return (struct, tuple([x._aval or x.aval for x in leaves]), (), alias, _default.stack[-1]), leaves

    def _fast_key(self, args, kwargs):
        """For the common call (distinct Arrays, no keywords, statics or placement):
        the default device's name (a str hashes without a call into Python) and
        the avals, which skips flattening; None otherwise.
        `_key` gives the same key for such a call, so each signature has one entry."""
        if kwargs or not self._fast:
            return None
        if len(args) == 1:  # the most common call, without the loop
            a = args[0]
            return (_default.stack[-1].name, a.aval) if type(a) is Array else None
        key = [_default.stack[-1].name]
        for a in args:
            if type(a) is not Array:
                return None
            key.append(a.aval)
        n = len(args)
        if n > 1 and (args[0] is args[1] if n == 2 else len(set(map(id, args))) != n):
            return None  # aliased arguments
        return tuple(key)

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
        try:
            committed = nx.committed_device(leaves)
            leaves = [self._leaf(x, committed, exact=True) for x in leaves]
        except DTypeError:
            self._raise_bad_leaf((dyn_args, dyn_kwargs), "argument")
            raise
        first = {}
        alias = tuple(first.setdefault(id(x), i) for i, x in enumerate(leaves))
        where = self.device or _default.stack[-1]
        avals = tuple(x.aval for x in leaves)
        if (not statics and not dyn_kwargs and len(first) == len(leaves)
                and struct == _positional(len(args))):
            return (where.name,) + avals, leaves  # the form `_fast_key` gives
        try:
            key = (struct, avals, tuple((pos, _typed(v)) for pos, v in statics), alias, where)
            hash(key)
        except TypeError as e:
            bad = [pos for pos, v in statics if not _hashable(v)]
            named = ", ".join(f"args[{p}]" if isinstance(p, int) else p for p in bad) or "a static argument"
            raise ArgumentError(f"jit({_name(self.f)}): static arguments must be hashable, and {named} is not "
                                f"({e}); give its class __hash__ and __eq__, or register it as a pytree "
                                f"(rune.tree.register) and pass it as a traced argument") from e
        return key, leaves

    def _leaf(self, x, committed=None, exact=False):
        """A leaf as the staged program sees it: an Array (or tracer), on `device` if
        given. Uncommitted values (NumPy, Python) go to `committed`, the device of the
        rune arrays they came with, as in eager code (`nx.ops.committed_device`)."""
        if type(x) is not Array:
            weak = type(x) in (bool, int, float)  # Python scalars stay weak; NumPy values do not
            # an argument's Python float or int at its exact value: the function sees a weak
            # float32 / int32 that converts from this value (nx.narrowed_python_scalars)
            x = nx.asarray(x, _EXACT_DTYPES.get(type(x)) if exact else None, device=committed)
            if weak:
                x = Array(x._raw, x.device, True)
        if self.device is not None and x.device != self.device:
            x = place(x, self.device)
        return x

    def _outputs(self, out):
        """f's result as leaves and structure: Python scalars become weak arrays
        and every leaf lies on `device` if given."""
        out_leaves, struct = tree.flatten(out)
        try:
            return [self._leaf(x) for x in out_leaves], struct
        except DTypeError:
            self._raise_bad_leaf(out, "output")
            raise

    def _raise_bad_leaf(self, value, what):
        """Name the leaf of `value` that is not an array, if one is not."""
        for path, x in tree.flatten_with_paths(value)[0]:
            if not isinstance(x, (Array, _trace.Tracer, bool, int, float, complex, np.ndarray, np.generic)):
                if what == "argument":  # `value` is (args, kwargs): show the path as the user wrote it
                    path = ("args" if path.startswith("[0]") else "kwargs") + path[3:]
                    hint = ("; mark it static (static_argnums/static_argnames; it must be hashable) "
                            "or register its type with rune.tree.register")
                else:
                    path = "output" + path
                    hint = "; a jitted function returns arrays, Python scalars and pytrees of them"
                raise DTypeError(f"jit({_name(self.f)}): {path} has type {type(x).__name__}, "
                                 f"which is not an array{hint}")

    def _compile(self, key, leaves, args, kwargs):
        program, out_struct, ranges = self._stage(leaves, args, kwargs)
        key = _interned(key)
        where = self.device or _default.stack[-1]   # staged there: unplaced values lie there
        entry = _Entry(Plan(program, None, where), key, _avals_of(key), out_struct, where)
        entry.scalar_ranges = ranges
        # Counted and kept once both succeeded: a failed trace leaves counters and cache as they were.
        COUNTERS["traces"] += 1
        COUNTERS["compiles"] += 1
        self.cache[key] = entry
        self._latest = entry
        while len(self.cache) > self.cache_size:
            _release(self.cache.popitem(last=False)[1])
        return entry

    def _stage(self, leaves, args, kwargs):
        dyn_args, dyn_kwargs, statics = self._split(args, kwargs)
        _, struct = tree.flatten((dyn_args, dyn_kwargs))

        def call(a, k):
            for pos, value in statics:
                if isinstance(pos, int):
                    a[pos] = value
                else:
                    k[pos] = value
            flat, structure = tree.flatten((a, k))
            flat, found = nx.narrowed_python_scalars(flat)
            scalars.extend(found)
            if not scalars:
                return self.f(*a, **k)
            try:
                a, k = tree.unflatten(structure, flat)
                return self.f(*a, **k)
            finally:
                nx.forget_exact(scalars)

        scalars = []
        with default_device(self.device or _default.stack[-1]):
            program, out_struct = stage_pytree(call, [x.aval for x in leaves], struct, flatten=self._outputs)
        for value in program.consts:
            # jit stages only when nothing else is tracing: a captured tracer escaped.
            if isinstance(value, _trace.Tracer):
                raise _trace.escaped_tracer(value, "jit")
        program = dce(program)
        return program, out_struct, _scalar_ranges(program, scalars)

    def trace(self, *args, **kwargs):
        """The staged Program for these arguments."""
        _, leaves = self._key(args, kwargs)
        return self._stage(leaves, args, kwargs)[0]

    def plan(self, *args, target=None, **kwargs):
        """The Plan this function runs for these arguments. With `target="cuda"`, the
        plan for a CUDA device from the arguments' shapes and dtypes alone (arrays or
        `rune.Spec`s), on any machine: an inspection (`plan.kernels` hold CUDA
        sources), built afresh and not run."""
        if target is not None:
            return self._target_plan(target, args, kwargs)
        if _has_spec(args, kwargs):
            raise ArgumentError(f"plan: a rune.Spec argument describes a plan for a target from shapes "
                                f"alone (plan(..., target=\"cuda\")); the plan this process runs needs "
                                f"arrays, got {_spec_named(args, kwargs)}")
        key, leaves = self._key(args, kwargs)
        entry = self.cache.get(key)
        if entry is None:
            entry = self._compile(key, leaves, args, kwargs)
        return entry.plan

    def _target_plan(self, target, args, kwargs, structure=False):
        args, kwargs = tree.map(lambda v: _SpecLeaf(v) if isinstance(v, Spec) else v, (args, kwargs),
                                is_leaf=lambda v: isinstance(v, Spec))
        dyn_args, dyn_kwargs, _ = self._split(args, kwargs)
        leaves = [x if type(x) is _SpecLeaf else self._leaf(x, exact=True)
                  for x in tree.leaves((dyn_args, dyn_kwargs))]
        program, out_struct, _ = self._stage(leaves, args, kwargs)
        plan = Plan(program, target, self.device or _default.stack[-1])
        return (plan, leaves, out_struct) if structure else plan

    def emulate(self, *args, target="cuda", **kwargs):
        """The function's results computed by the kernels `target` (a GPU platform) would
        run, emulated on the host: the plan `plan(*args, target=target)` with its kernels
        built for the host's C++ compiler (g++) and run launch by launch, every CUDA
        thread a host thread (rune/compiler/emulation.py). Arguments are concrete arrays;
        the results are host Arrays in the function's output structure. A CI without a
        GPU checks a program's GPU kernels this way; it is slow (small inputs only)."""
        if _has_spec(args, kwargs):
            raise ArgumentError(f"emulate: expected concrete arrays to run on, got a rune.Spec; "
                                f"use plan(..., target={target!r}) to inspect kernels from shapes alone")
        from .emulation import emulate as run_emulated   # the emulator is built on first use only
        plan, leaves, out_struct = self._target_plan(target, args, kwargs, structure=True)
        host = [np.asarray(leaf) for leaf in leaves]
        outs = [Array(np.array(o), get_device("cpu"), False) for o in run_emulated(plan, host, target)]
        return tree.unflatten(out_struct, outs)

    def clear_cache(self):
        """Forget every traced signature: the next call traces again."""
        for entry in self.cache.values():
            _release(entry)
        self.cache.clear()
        self._latest = None
        self._last_single = (None, None, None)
        self._match = None
        self._forget_hot_call()

    def _write_hot_call(self, entry, aval):
        """This function's calls with one array of `aval`, while no trace, default
        device block or profile is open anywhere (`rune.base.contexts`), written as the
        class's own `__call__`: the argument checks and the plan's NumPy ops in one
        frame, every other call handed to `Jitted.__call__`. The class is this
        function's own, made here (Python finds `__call__` on the type)."""
        if type(self) is Jitted:
            self.__class__ = type("Jitted", (Jitted,), {"__module__": Jitted.__module__})
        if entry.hot_call is None:
            entry.hot_cell = call_cell(len(entry.plan.steps))
            entry.hot_call = _hot_call(entry.plan, aval, *entry.out_places[0], entry.hot_cell)
        type(self).__call__ = entry.hot_call
        self._hot_aval = aval

    def _forget_hot_call(self):
        if type(self) is not Jitted and "__call__" in vars(type(self)):
            del type(self).__call__
        self._hot_aval = None


class _SpecLeaf:
    """A `rune.Spec` standing for an argument when planning: only its aval is read."""
    __slots__ = ("aval",)

    def __init__(self, spec):
        self.aval = Aval(spec.shape, spec.dtype, spec.device)


class _Bound:
    """A jitted method bound to its instance: calls prepend it, the cache is the function's."""
    __slots__ = ("jitted", "obj")

    def __init__(self, jitted, obj):
        self.jitted, self.obj = jitted, obj

    def __call__(self, *args, **kwargs):
        try:
            return self.jitted(self.obj, *args, **kwargs)
        except Exception as e:   # (this frame too is rune's)
            hide_internal_frames(e)
            raise

    def trace(self, *args, **kwargs):
        return self.jitted.trace(self.obj, *args, **kwargs)

    def plan(self, *args, target=None, **kwargs):
        return self.jitted.plan(self.obj, *args, target=target, **kwargs)

    def emulate(self, *args, target="cuda", **kwargs):
        return self.jitted.emulate(self.obj, *args, target=target, **kwargs)

    def __getattr__(self, name):  # __name__, __doc__, clear_cache, cache, ...
        return getattr(self.jitted, name)

    def __repr__(self):
        return f"<bound jitted method {_name(self.jitted.f)} of {self.obj!r}>"


def clear_caches():
    """Forget the traced signatures of every jitted function, the bodies eager
    control flow kept (with the arrays they captured) and every kept plan."""
    for jitted in list(_ALL):
        jitted.clear_cache()
    stage_cache.clear()
    forget_plans()


def _avals_of(key):
    """The leaves' avals in a key of either form (`_key`)."""
    return key[1] if type(key[0]) is tree.Structure else key[1:]


def _interned(key):
    """`key` with each of its equal avals one object, the first: a stored key whose
    leaves share an aval (a model and its optimizer moments) and the avals of its
    outputs (`_Entry`) are then the same objects, and keys compare them by identity."""
    first = {}
    avals = tuple([first.setdefault(a, a) for a in _avals_of(key)])
    return (key[0], avals) + key[2:] if type(key[0]) is tree.Structure else key[:1] + avals


@functools.lru_cache(maxsize=None)
def _positional(n):
    """The structure of `n` positional leaves and no keywords (the fast key's calls)."""
    return tree.structure(([0] * n, {}))


def _typed(value):
    """A static value with its type, recursively in tuples: 1, 1.0 and True are
    equal and hash alike, yet trace differently."""
    if type(value) is tuple:
        return tuple, tuple(_typed(v) for v in value)
    if type(value) is frozenset:
        return frozenset, frozenset(_typed(v) for v in value)
    return type(value), value


def _name(f):
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


def _statics(f, argnums, argnames):
    """Static positions and names, each completed from the other through f's
    signature (as JAX does), so a static argument is static however it is passed.
    Positions and names f cannot take are an error here, not a silent no-op."""
    for i in argnums:
        if type(i) is not int:
            raise ArgumentError(f"jit({_name(f)}): static_argnums must be integers, got {i!r}")
    for n in argnames:
        if type(n) is not str:
            raise ArgumentError(f"jit({_name(f)}): static_argnames must be strings, got {n!r}")
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return argnums, argnames
    params = list(sig.parameters.values())
    kinds = {p.kind for p in params}
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if inspect.Parameter.VAR_POSITIONAL not in kinds:
        for i in argnums:
            if not -len(positional) <= i < len(positional):
                raise ArgumentError(
                    f"jit({_name(f)}): static_argnums={i} is out of range: {_name(f)}{sig} takes "
                    f"{len(positional)} positional argument{'' if len(positional) == 1 else 's'}")
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        for n in argnames:
            if n not in named:
                raise ArgumentError(f"jit({_name(f)}): static_argnames has {n!r}, which is not a "
                                    f"parameter of {_name(f)}{sig}")
    nums = set(argnums) | {positional.index(n) for n in argnames if n in positional}
    names = set(argnames) | {positional[i] for i in argnums if -len(positional) <= i < len(positional)}
    return tuple(sorted(nums)), tuple(sorted(names))


def _as_tuple(x):
    if x is None:
        return ()
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def jit(f=None, static_argnums=(), static_argnames=(), donate_argnums=(), device=None):
    """Compile `f`: traced once per signature, planned, cached and replayed.

    `static_argnums`/`static_argnames` name arguments passed as Python values
    (hashable; part of the cache key with their type, so 1, 1.0 and True trace
    apart). With `device=`, array arguments are placed on `device` and every
    output lies there, constants and Python scalars included. Works on methods
    (`self` static through `static_argnums=0` if hashable, else a pytree).

    Each jitted function keeps at most `cache_size` traced signatures (an
    attribute, default 4096 or the environment variable RUNE_JIT_CACHE_SIZE),
    dropping the least recently used; `f.clear_cache()` forgets them, and
    `rune.clear_caches()` does so for every jitted function.
    """
    if f is None:
        return functools.partial(jit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, device=device)
    return Jitted(f, static_argnums, static_argnames, donate_argnums, device)


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


# The exact math behind the random samplers runs compiled when called eagerly on
# large arrays (rune/nx/exact_math.py): registered here, since nx sits below jit.
_exact_math.use_compiler(jit)


# a Python scalar argument's dtype as staged: its exact value (nx.narrowed_python_scalars)
_EXACT_DTYPES = {float: np.float64, int: np.int64}


def _has_spec(args, kwargs):
    return any(isinstance(v, Spec) for v in tree.leaves((args, kwargs), is_leaf=lambda v: isinstance(v, Spec)))


def _spec_named(args, kwargs):
    """The first rune.Spec among the arguments, with where it is."""
    for path, v in tree.flatten_with_paths((args, kwargs), is_leaf=lambda v: isinstance(v, Spec))[0]:
        if isinstance(v, Spec):
            path = str(path)
            where = ("args" + path[3:]) if path.startswith("[0]") else ("kwargs" + path[3:])
            return f"{v!r} at {where}"
    return "a rune.Spec"


def _scalar_ranges(program, scalars):
    """The ranges the Python int arguments of a staged function must lie in, as
    (leaf position, lowest, highest, message): each integer dtype the function narrowed
    one to (`int8_array + n`), and int32 where it used the weak int32 it saw itself.
    Eagerly such a value that does not fit raises; staged it would wrap silently."""
    used = {id(v) for e in program.eqns for v in e.inputs} | {id(v) for v in program.outvars}
    ranges = []
    for s in scalars:
        if s.exact.aval.dtype.kind != "i":
            continue
        leaf = program.invars.index(s.exact.var)
        narrowed = list(s.ranges) + ([(np.dtype(np.int32), "asarray")] if id(s.narrow.var) in used else [])
        for dtype, name in dict.fromkeys(narrowed):
            info = np.iinfo(dtype)
            ranges.append((leaf, int(info.min), int(info.max),
                           f"{name}: the Python scalar {{}} does not fit in {dtype.name}"))
    return tuple(ranges)


def _check_scalar_ranges(ranges, raws):
    for leaf, lo, hi, message in ranges:
        value = int(raws[leaf])
        if not lo <= value <= hi:
            raise ScalarOverflowError(message.format(value))
