"""The interpreter stack under `bind`.

Every operation is `bind(prim, *args, **params)`, handed to the current
interpreter (Autodidax2 style). An interpreter that is not the eval one wraps
values in its own tracers and, for work on the values underneath, asks its
parent. Each interpreter treats only its own tracers as its own; anything else
(a concrete array, another interpreter's tracer) is a constant to it, which is
what prevents perturbation confusion in `grad(grad(f))`.
"""
import contextlib
import threading

from ..base import contexts
from ..backends import backend_for
from ..errors import (ArgumentError, ConcretizationError, DeviceMismatchError, NotDifferentiableError,
                      RuneError)
from .devices import get_device
from .array import Array
from . import arraylike as _arraylike
from .arraylike import ArrayLike
from .aval import Aval
from .dtypes import ALL as _ALL_DTYPES, dtype as _to_dtype, weak_dtype_of as _weak_dtype_of
from .primitive import abstract_rules, eval_rules

_HOST = get_device("cpu")  # where literals live
# The literals an eager op may meet next to an Array without the general
# placement loop: NumPy scalars of rune's dtypes (nx makes Python scalars these).
_LITERAL_TYPES = frozenset(d.type for d in _ALL_DTYPES)


class Interpreter:
    """Base of every interpreter: it processes primitives."""
    parent = None

    def process(self, prim, args, params):
        raise NotImplementedError

    def part(self, x):
        """(value underneath, this interpreter's data) for `x`; (x, None) if `x` is not ours."""
        if isinstance(x, Tracer) and x.interp is self:
            return x.parts()
        return x, None

    def unpack(self, args):
        pairs = [self.part(a) for a in args]
        return [v for v, _ in pairs], [e for _, e in pairs]

    def in_parent(self, fn, /, *args, **kwargs):
        """Run `fn` with the parent interpreter current (for work on values underneath)."""
        saved = _current.interp
        _current.interp = self.parent
        try:
            return fn(*args, **kwargs)
        finally:
            _current.interp = saved


class Tracer(ArrayLike):
    """A value owned by one interpreter, standing in for an array."""
    __slots__ = ("interp", "aval")

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    device = property(lambda self: self.aval.device)
    weak = property(lambda self: self.aval.weak)

    def concrete(self):
        """The concrete value under this tracer, or None when it is staged."""
        return None

    def parts(self):
        """(the value underneath, the interpreter's own data about it)."""
        raise NotImplementedError

    def _concrete_or_raise(self, what):
        value = self.concrete()
        if value is None:
            raise ConcretizationError(
                f"{what} needs a concrete value, but this is a traced {self.aval.describe()} "
                f"(inside jit, vmap, a scan/cond/while body or rune.trace). Use rune.cond / "
                f"rune.while_loop for control flow on traced values, mark the argument static "
                f"with jit(static_argnums=...), or read it in host code with rune.callback.")
        return value

    def __bool__(self): return bool(self._concrete_or_raise("bool() / an `if` on an array"))
    def __float__(self): return float(self._concrete_or_raise("float()"))
    def __int__(self): return int(self._concrete_or_raise("int()"))
    def __index__(self): return self._concrete_or_raise("using an array as an index").__index__()
    def __complex__(self): return complex(self._concrete_or_raise("complex()"))
    def item(self): return self._concrete_or_raise(".item()").item()
    def tolist(self): return self._concrete_or_raise(".tolist()").tolist()
    def __array__(self, dtype=None, copy=None):
        return self._concrete_or_raise("converting to a NumPy array").__array__(dtype)

    # NumPy's ufuncs and functions on a tracer run rune.nx's (rune.nx.numpy_dispatch):
    # NumPy's own would compute with the values alone, dropping the derivative or
    # the staging. Concrete arrays keep NumPy's default (they convert by __array__).
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _arraylike.ops.numpy_ufunc(_arraylike.ops.namespace, ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _arraylike.ops.numpy_function(_arraylike.ops.namespace, func, types, args, kwargs)

    def __repr__(self):
        return f"Tracer<{self.aval}>"


class PrimalTracer(Tracer):
    """A tracer over one parent value (its primal) and its interpreter's data
    about it (a tangent, a tape slot): concrete when the primal is."""
    __slots__ = ("primal", "data")

    def __init__(self, interp, primal, data):
        self.interp = interp
        self.aval = aval_of(primal)
        self.primal = primal
        self.data = data

    def parts(self):
        return self.primal, self.data

    def concrete(self):
        return self.primal.concrete() if hasattr(self.primal, "concrete") else self.primal

    # A Python or NumPy value holds the values alone: converting to one would
    # drop the derivative silently, so every conversion raises, as JAX's
    # ConcretizationTypeError does (math.* goes through float(), np.float64
    # and np.asarray through __array__). bool() stays: a branch carries none.
    def _concrete_or_raise(self, what):
        raise NotDifferentiableError(
            f"{what} of a {self.aval.describe()} being differentiated (inside grad, jvp or vjp) would "
            f"keep its value and drop its derivative. Compute with rune.nx functions instead (nx.sin, "
            f"not math.sin; a list of arrays: nx.stack or nx.asarray), convert rune.stop_gradient(x) "
            f"if no derivative should flow, or wrap host code in rune.callback with a custom_vjp")

    def __bool__(self):
        return bool(Tracer._concrete_or_raise(self, "bool() / an `if` on an array"))

    def __array__(self, dtype=None, copy=None):
        self._concrete_or_raise("np.asarray / np.array")


class _Current(threading.local):
    """The current interpreter, per thread: a trace in one thread never captures
    another thread's arrays."""

    def __init__(self):
        self.interp = EVAL



def current():
    return _current.interp


def bind(prim, *args, **params):
    """Apply primitive `prim` to `args` in the current interpreter."""
    interp = _current.interp
    if interp is EVAL and not params:   # eager: the shortcuts of one and two operands
        if len(args) == 2:
            return bind_binary(prim, args[0], args[1])
        if len(args) == 1 and type(args[0]) is Array:
            return _bind_unary(prim, args[0])
    return interp.process(prim, args, params)


def _bind_unary(prim, x):
    """`bind(prim, x)` eagerly for one Array operand and no parameters (exp, tanh,
    negative, ...): the eval interpreter's rule, as `bind_binary` runs it for two."""
    raw = x._raw
    impl = prim.impls.get(x.device.nd_name if raw.ndim else x.device.name)
    if impl is None or prim.multiple_results:   # the first call on this device, or not a backend op
        return EVAL.process(prim, (x,), {})
    try:
        out = impl(raw)
    except Exception as e:
        raise_user_error(prim, (x,), {}, e)
    return Array(out, x.device, x.weak)


def bind_binary(prim, x, y):
    """`bind(prim, x, y)` for a primitive of two operands and no parameters, as
    nx's binary functions call it.

    The commonest eager op, on two Arrays on one device or on an Array and a
    literal, is run here by the eval interpreter's own rule, minus the `process`
    call, the packing of arguments and the general placement loop: at 8
    elements, dispatch is most of the time an op takes. Its implementation is
    the one `process` resolved for the device on the op's first call; with an
    n-d operand, the backend's bare n-d function (`_load_impl`)."""
    interp = _current.interp
    if interp is EVAL:
        tx, ty = type(x), type(y)
        if tx is Array:
            device, x_raw = x.device, x._raw
            if ty is Array:
                y_raw = y._raw if y.device is device else None
                weak = x.weak and y.weak
            else:
                y_raw = y if ty in _LITERAL_TYPES else None
                weak = x.weak
        elif ty is Array and tx in _LITERAL_TYPES:
            device, x_raw, y_raw, weak = y.device, x, y._raw, y.weak
        else:
            y_raw = None
        if y_raw is not None and not prim.multiple_results:
            impl = prim.impls.get(device.nd_name if x_raw.ndim or y_raw.ndim else device.name)
            if impl is not None:  # else the first call on this device, or not a backend op
                try:
                    out = impl(x_raw, y_raw)
                except Exception as e:
                    raise_user_error(prim, (x, y), {}, e)
                return Array(out, device, weak)
    return interp.process(prim, (x, y), {})


@contextlib.contextmanager
def using(interp):
    """Make `interp` current within the block; restored even if user code raises."""
    saved = _current.interp
    _current.interp = interp
    contexts.opened()
    try:
        yield interp
    finally:
        _current.interp = saved
        contexts.closed()


def aval_of(x):
    """The aval of an array, a tracer or a (weak) scalar literal."""
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval
    dt = x.dtype if hasattr(x, "dtype") else _weak_dtype_of(x)
    return Aval((), _to_dtype(dt), None, True)


def device_mismatch(prim, first, second):
    """The error for operands on two devices; `prim` is a primitive or the name of
    the user's function (when it binds several primitives, name it, not them)."""
    return DeviceMismatchError(
        f"{getattr(prim, 'name', prim)}: operands are on different devices, {first} and {second}; "
        f"move one with nx.place(x, {str(first)!r}) first")


def common_device(prim, avals):
    """The one device the operands lie on (None when all are scalars)."""
    device = None
    for a in avals:
        d = a.device
        if d is not None and d != device:
            if device is not None:
                raise device_mismatch(prim, device, d)
            device = d
    return device


class EvalInterpreter(Interpreter):
    """Runs each primitive right away on the backend of its operands' device.

    This is the one eager dispatch path: nx functions validate, promote and
    bind, whatever their operands (arrays, literals or both), and nothing calls
    a backend behind `bind` (whose binary form, `bind_binary`, runs the
    commonest case itself, by the same rule). The implementation is resolved once per primitive and device, a
    backend failure is reported once as a rune error naming the operation, and
    results are wrapped as Arrays here. An operation on literals alone (NumPy
    scalars) is folded on the host, and its result is a literal."""

    def process(self, prim, args, params):
        if prim in eval_rules:
            return self._higher_order(prim, args, params)
        device, weak, raws = _placed(prim, args, params)
        if device is None:
            return _fold(prim, raws, args, params)
        impl = prim.impls.get(device.name) or _load_impl(prim, device)  # resolved once per device
        try:
            out = impl(*raws, **params)
        except Exception as e:
            raise_user_error(prim, args, params, e)
        if prim.multiple_results:
            return [Array(o, device, False) for o in out]
        return Array(out, device, weak)

    def _higher_order(self, prim, args, params):
        # Higher-order primitives (and `place`) evaluate themselves on Arrays.
        for a in args:
            if isinstance(a, Tracer):
                raise escaped_tracer(a, prim.name)
        return eval_rules[prim](*args, **params)


def _fold(prim, literals, args, params):
    """`prim` on literals alone, folded on the host: its result is a literal too
    (a NumPy scalar), unplaced, as the arithmetic of Python scalars would be."""
    impl = prim.impls.get(_HOST.name) or _load_impl(prim, _HOST)
    try:
        out = impl(*literals, **params)
    except Exception as e:
        raise_user_error(prim, args, params, e)
    return [o[()] for o in out] if prim.multiple_results else out[()]


def evaluate(prim, *args, **params):
    """`bind` into the eval interpreter, whatever interpreter is current: for
    values every transformation treats as constants (literals, host data being
    converted), computed now as Python's own arithmetic on them would be."""
    return EVAL.process(prim, args, params)


def _placed(prim, args, params):
    """(device, weak, raw operands) of an eager op: the one device its Arrays lie
    on (else the `device` param of a constant made on a device; None for
    literals alone) and whether every Array among them is weak."""
    device = None
    weak = True
    raws = []
    for a in args:
        if type(a) is Array:
            d = a.device
            if d is not device:
                if device is not None and d != device:
                    raise device_mismatch(prim, device, d)
                device = d
            raws.append(a._raw)
            if not a.weak:
                weak = False
        elif isinstance(a, Tracer):
            raise escaped_tracer(a, prim.name)
        else:
            raws.append(a)
    if device is None:  # literals only, or a constant made on the device
        device = params.get("device")
        if device is not None:
            weak = False  # iota and full make strong arrays (their abstract rules say so)
    return device, weak, raws


def raise_user_error(prim, args, params, error):
    """After a backend failed: the abstract rule names the operation and what was
    wrong; failing that, the backend's own message, as a rune error."""
    avals = [aval_of(a) for a in args]
    rule = abstract_rules.get(prim)
    if rule is not None:
        rule(*avals, **params)
    raise ArgumentError(f"{prim.name} on {', '.join(a.describe() for a in avals)}: {error}") from error


def _load_impl(prim, device):
    """`prim`'s implementation on `device`, remembered in `prim.impls` under the
    device's name; and under its `nd_name`, the bare function the backend offers
    for n-d operands (`on_nd`: without the wrapper that makes a 0-d result an
    array), which `bind` calls when an operand is n-d."""
    table = backend_for(device).impls(device)
    if prim.name not in table:
        raise RuneError(f"{prim.name} has no implementation on {device.platform}")
    impl = prim.impls[device.name] = table[prim.name]
    prim.impls[device.nd_name] = getattr(impl, "on_nd", impl)
    return impl


def escaped_tracer(tracer, where):
    return RuneError(
        f"{where} received a tracer ({tracer.aval}) of a transformation that has already "
        f"finished: a traced value escaped (stored in a global or returned through a side "
        f"channel). Return it from the transformed function instead.")


EVAL = EvalInterpreter()
_current = _Current()
# `active.interp` is the thread's current interpreter: hot eager paths read it
# without the frame `current()` costs.
active = _current
