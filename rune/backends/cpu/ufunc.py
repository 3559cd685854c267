"""A NumPy ufunc over a compiled C loop, made through NumPy's C API from ctypes.

An eager op on a small array costs mostly its call: through ctypes, converting the
arguments and allocating the result take about a microsecond more than NumPy's own
ufunc call. A ufunc made here runs a compiled loop of rune's (for example an eager
math function's, rune/backends/eager_mathlib.py) with NumPy's call machinery:
argument parsing, the result's allocation, broadcasting and strides are NumPy's, and
the loop receives NumPy's pointers, lengths and strides:

    void loop(char **args, const int64_t *dimensions, const int64_t *steps, void *data)

(`PyUFuncGenericFunction`: the inputs' pointers, then the output's; dimensions[0]
elements; each operand's stride in bytes). The ufunc is made by
`PyUFunc_FromFuncAndData`, the second entry of the table NumPy exports for C
extensions (its `_UFUNC_API` capsule), with one float32 signature. Where that table
is not reachable (a NumPy that moved it), `make` returns None and callers keep their
ctypes path.
"""
import ctypes

import numpy as np

_NPY_FLOAT = 11        # NPY_TYPES' float32
_PY_UFUNC_NONE = -1    # no identity
_FROM_FUNC_AND_DATA = 1   # PyUFunc_FromFuncAndData's index in the ufunc API table

_KEPT = []   # the arrays and names each ufunc points at (it does not copy them): kept for the process


def _from_func_and_data():
    """NumPy's PyUFunc_FromFuncAndData as a ctypes function, or None."""
    try:
        capsule = np._core._multiarray_umath._UFUNC_API
        # prototypes of our own: setting restype on ctypes.pythonapi's functions would
        # change them for every other library in the process
        get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
        get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", ctypes.pythonapi))
        table = get_pointer(capsule, get_name(capsule))
        address = ctypes.c_void_p.from_address(table + _FROM_FUNC_AND_DATA * ctypes.sizeof(ctypes.c_void_p)).value
    except (AttributeError, ValueError, TypeError):
        return None
    if not address:
        return None
    prototype = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                                  ctypes.c_int)
    return prototype(address)


_MAKE = _from_func_and_data()


def make(name, loop, nin):
    """A ufunc `name` of `nin` float32 inputs and one float32 output running the C
    function at address `loop`, or None where NumPy's C API is not reachable."""
    if _MAKE is None or not loop:
        return None
    functions = (ctypes.c_void_p * 1)(loop)
    data = (ctypes.c_void_p * 1)(None)
    types = (ctypes.c_ubyte * (nin + 1))(*([_NPY_FLOAT] * (nin + 1)))
    label = name.encode()
    doc = f"{name}: rune's compiled loop (float32)".encode()
    _KEPT.append((functions, data, types, label, doc))
    try:
        ufunc = _MAKE(ctypes.addressof(functions), ctypes.addressof(data), ctypes.addressof(types), 1, nin, 1,
                      _PY_UFUNC_NONE, label, doc, 0)
    except Exception:   # NumPy refused (it set an error): the caller keeps its ctypes path
        return None
    return ufunc if isinstance(ufunc, np.ufunc) else None
