"""Every error rune raises: a RuneError, and also the matching built-in; and
RuneWarning, the category of every warning rune gives."""


class RuneError(Exception):
    """Base class of all rune errors."""


class ArgumentError(RuneError, ValueError):
    """An argument value the function does not accept (an unknown option, say)."""


class ShapeError(RuneError, ValueError):
    """Shapes that do not fit the operation (broadcasting, reshape, axes)."""


class AxisError(ShapeError, IndexError):
    """An axis out of range for an array's rank: a ShapeError, and an IndexError as
    the Array API standard asks (NumPy's AxisError is both too)."""


class DTypeError(RuneError, TypeError):
    """A dtype the operation does not accept."""


class ScalarOverflowError(DTypeError, OverflowError):
    """A Python integer that does not fit the dtype it must take."""


class UsageError(RuneError, TypeError):
    """A value used in a way its type does not allow (len() of a 0-d array, a non-callable)."""


class DeviceError(RuneError, ValueError):
    """An unknown or unavailable device."""


class DeviceMismatchError(RuneError, ValueError):
    """Operands of one operation placed on different devices."""


class TreeError(RuneError, ValueError):
    """Pytrees whose structures do not match, or leaves of an unknown type."""


class ConcretizationError(RuneError, TypeError):
    """A traced value was read as a Python value while tracing."""


class NotDifferentiableError(RuneError, TypeError):
    """A derivative was asked of something that has none."""


class CallbackError(RuneError, RuntimeError):
    """The host function of a callback raised, or returned the wrong thing."""


class IndexingError(RuneError, IndexError):
    """An index that does not fit the array."""


class DistributedError(RuneError, RuntimeError):
    """Processes of a distributed run that disagree (a collective called with different
    shapes, a rank that exited early) or a launch rune cannot join."""


class CompileError(RuneError, RuntimeError):
    """The C compiler rejected a kernel, or what it built does not load."""


class RuneWarning(UserWarning):
    """Something rune worked around (a kernel cache it cannot use, say): results are
    unaffected, but the user may want to fix the cause."""
