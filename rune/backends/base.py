"""The backend protocol: the one object per platform that touches raw buffers.

A backend knows nothing of traces, primitives or Arrays: it works on raw
buffers (NumPy arrays on the host, CuPy arrays on a GPU) and primitive names.
`rune.backends.backend_for(device)` returns the backend of a `Device`; every
raw-buffer operation in rune goes through one of these methods.

    impls(device)                 primitive name -> fn(*raws, **params) -> raw (or
                                  list of raws); the functions run on `device`
                                  (on a GPU they select it first), so a second
                                  GPU works. Eager evaluation and plans both use it.
    to_host(raw)                  a NumPy array with the same contents.
    from_host(host, device)       a new buffer on `device` holding `host` (a copy,
                                  so no two devices ever share a buffer).
    copy(raw, src, dst)           `raw` (on `src`, same platform as this backend)
                                  as a new buffer on `dst`; device to device
                                  without a host bounce where the platform allows.
                                  `rune.devices.transfer` counts it.
    from_foreign(obj, device)     a buffer on `device` from a NumPy array, a CuPy
                                  array or any DLPack producer.
    full(shape, value, dtype, device)          a buffer filled with `value`.
    iota(shape, dtype, dimension, device)      the index along `dimension`.
    empty(aval)                   the stacked output of a loop that ran zero times.
    stack(rows, aval)             rows of a loop's output along a new leading axis.
    synchronize(device)           wait until the work queued on `device` is done
                                  (`Array.block_until_ready` calls it).
    read_scalar(raw)              a device value as a Python scalar, for the host
                                  to decide with (loop predicates, branch indices,
                                  dynamic starts); counted in `stats()["scalar_reads"]`.
    compiler()                    the native compiler kernels are built with, or
                                  None (plans then run stretches op by op).
    compile(compiler, prelude, units)   rendered units (name, source, kernel
                                  names) built and loaded: one callable each
                                  (`rune.compiler.lower` renders them, batched).
    library                       name -> fn for the calls a kernel compiler leaves
                                  to a vendor library (`dot_general`, convolutions).
    compiled_stretch(eqns, unit, device)   (a device platform with a compiler) the
                                  plan step running a fused unit (rune/compiler/fuse.py)
                                  as compiled kernels on `device`, or None where
                                  its kernels cannot be rendered (op by op then).

`IMPLS`, `stack`, `empty`, `to_host` and `from_host` are also what plans
(`rune.compiler.plan`) read; `IMPLS` is the table of the platform's first device.
"""
from ..stats import COUNTERS


class Backend:
    """Base of every backend; a platform overrides what it does differently."""
    platform = None
    IMPLS = {}          # primitive name -> implementation (every device of the platform)
    library = {}        # name -> library call a kernel compiler may emit

    def impls(self, device):
        return self.IMPLS

    def to_host(self, raw):
        raise NotImplementedError

    def from_host(self, host, device):
        raise NotImplementedError

    def copy(self, raw, src, dst):
        return self.from_host(self.to_host(raw), dst)

    def from_foreign(self, obj, device):
        raise NotImplementedError

    def full(self, shape, value, dtype, device):
        raise NotImplementedError

    def iota(self, shape, dtype, dimension, device):
        raise NotImplementedError

    def empty(self, aval):
        raise NotImplementedError

    def stack(self, rows, aval):
        raise NotImplementedError

    def synchronize(self, device):
        pass

    def read_scalar(self, raw):
        COUNTERS["scalar_reads"] += 1
        return raw.item()

    def compiler(self):
        return None  # no native kernels on this platform yet: stretches run op by op

    def compile(self, compiler, prelude, units):
        raise NotImplementedError(f"{self.platform}: no kernel compiler")

    def __repr__(self):
        return f"<rune backend {self.platform}>"
