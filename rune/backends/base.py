"""The backend protocol: the one object per platform that touches raw buffers,
and the compiler protocol every platform's kernels are built through.

A backend knows nothing of traces, primitives or Arrays: it works on raw
buffers (NumPy arrays on the host, CuPy arrays on a GPU, whatever another
platform's backend makes) and primitive names. A platform is registered with
`rune.backends.register_platform(name, load)`; `rune.backends.backend_for(device)`
returns the backend of a `Device`; every raw-buffer operation in rune goes
through one of these methods (tests/backends/test_third_platform.py runs rune on
a platform whose buffers nothing else can read). Every platform implements the
same members with the same signatures (a test compares them).

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
                                  `rune.core.devices.transfer` counts it.
    from_foreign(obj, device)     a buffer on `device` from a NumPy array, a CuPy
                                  array or any DLPack producer.
    holds(obj)                    whether a foreign object (another library's
                                  array) lies in this platform's memory, so that
                                  `from_foreign` takes it without the host.
    full(shape, value, dtype, device)          a buffer filled with `value`.
    iota(shape, dtype, dimension, device)      the index along `dimension`.
    empty(aval)                   the stacked output of a loop that ran zero times.
    stack(rows, aval)             rows of a loop's output along a new leading axis.
    synchronize(device)           wait until the work queued on `device` is done
                                  (`Array.block_until_ready` calls it).
    read_scalar(raw)              a device value as a Python scalar, for the host
                                  to decide with (loop predicates, branch indices,
                                  dynamic starts); counted in `stats()["scalar_reads"]`.
    device_count()                how many devices of this platform exist here.
    device_props(device)          what kernels for `device` are rendered for (a
                                  GPU's `DeviceProps`; None on the host).
    dialect                       the codegen dialect rendering this platform's
                                  kernels (rune/codegen), None where there is none.
    compiler(device=None)         the `Compiler` kernels for `device` (default: the
                                  platform's first) are built with, or None
                                  (plans then run stretches op by op).
    compile(compiler, prelude, units)   rendered units [(name, source, kernels)]
                                  built through the one compile pipeline
                                  (rune/backends/pipeline.py: disk cache, batches,
                                  a thread pool) and loaded: one callable each, in
                                  order; a unit that does not build gets one
                                  raising its CompileError when run.
    kernels_for(device, props)    the `Kernels` (rune/backends/stretch.py) running
                                  stretches on `device` rendered for `props` (None:
                                  the device's own), one per toolchain and
                                  properties, shared by their stretches
                                  (`shared_kernels`); None without a compiler.
    compiled_stretch(eqns, unit, device, props=None)   the plan step running a
                                  fused unit (rune/compiler/fuse.py) as compiled
                                  kernels on `device` (rune/backends/stretch.py)
                                  from `kernels_for`, or None where its kernels
                                  cannot be rendered (op by op then). It compiles
                                  on its first run or with
                                  `rune.backends.compile_pending()`. Written once,
                                  here.
    library                       name -> fn for the calls a kernel compiler leaves
                                  to a vendor library (`dot_general`, convolutions).
    adopt(host, device)           `from_host` for a fresh NumPy array nothing else
                                  holds (a collective's result): the host keeps it
                                  as it is, other platforms copy it up.
    uploader(device)              an `Uploader` copying host batches onto `device`
                                  asynchronously (a GPU: pinned memory, a side
                                  stream), or None: rune.data places them with
                                  `from_host` as any array.
    communicator(device)          the `Communicator` of `device` (its platform's
                                  collective library, NCCL on a GPU), or None: then
                                  rune.distributed moves its buffers through the
                                  host's MPI (to_host, adopt).

`IMPLS`, `stack`, `empty`, `to_host` and `from_host` are also what plans
(`rune.compiler.plan`) read; `IMPLS` is the table of the platform's first device.

A `Compiler` turns one source into the bytes of one artifact (C: a shared
library; CUDA: a cubin) and loads those bytes as a `Program`, which hands out
the artifact's functions. `key(source)` names the artifact in rune's disk cache
(rune/backends/disk_cache.py): it covers the source and everything else that
changes the bytes (the compiler and its version, the flags, the CPU features or
GPU architecture, the calling convention).
"""
from ..errors import CompileError, DeviceError
from ..base.stats import COUNTERS


class Backend:
    """Base of every backend; a platform overrides what it does differently."""
    platform = None
    IMPLS = {}          # primitive name -> implementation (every device of the platform)
    library = {}        # name -> library call a kernel compiler may emit
    dialect = None      # the codegen dialect of this platform's kernels

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

    def holds(self, obj):
        return False

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

    def device_count(self):
        raise NotImplementedError

    def device_props(self, device):
        return None

    def compiler(self, device=None):
        return None  # no native kernels on this platform yet: stretches run op by op

    def compile(self, compiler, prelude, units):
        raise NotImplementedError(f"{self.platform}: no kernel compiler")

    def kernels_for(self, device, props):
        return None  # no compiler: stretches run op by op

    def shared_kernels(self, key, make):
        """The `Kernels` kept under `key` (toolchain, properties), made by `make()` the first time."""
        kept = self.__dict__.setdefault("_kernel_sets", {})
        kernels = kept.get(key)
        if kernels is None:
            kernels = kept.setdefault(key, make())
        return kernels

    def compiled_stretch(self, eqns, unit, device, props=None):
        kernels = self.kernels_for(device, props)
        if kernels is None:
            return None
        try:
            return kernels.stretch(eqns, unit, device)
        except NotImplementedError:   # a node the dialect has no rule for (an argmax reduction): op by op
            return None

    def adopt(self, host, device):
        return self.from_host(host, device)

    def uploader(self, device):
        return None   # no asynchronous copies: batches are placed as any array

    def communicator(self, device):
        return None   # no collective library of its own: collectives go through the host

    def __repr__(self):
        return f"<rune backend {self.platform}>"


class Uploader:
    """Host batches onto one device, each copy overlapping the work queued there
    (rune.data.Loader makes one in the thread that consumes the batches).

    upload(hosts)    device buffers of `hosts` (contiguous NumPy arrays), copied
                     asynchronously: (the buffers, a token the copies are done at).
    wait(ready)      make the consumer's queued work wait for the copies of token
                     `ready` (called in the consumer's thread).
    settle()         wait until every copy queued is done, then let go of what
                     they used: before batches made ahead are dropped.
    """

    def upload(self, hosts):
        raise NotImplementedError

    def wait(self, ready):
        pass

    def settle(self):
        pass


class Communicator:
    """One device's collectives with the same device of every other rank of a run,
    through its platform's collective library (NCCL on CUDA GPUs), on flat raw
    buffers, queued in order with the device's own work. rune/distributed packs a
    tree's leaves into such buffers (rune/distributed/nccl.py) and unpacks them.

    xp                          the array module of the device's buffers (packing,
                                casting and masks run where the buffers are).
    check()                     raise DeviceError, saying what to install, where
                                the library cannot be used here.
    selected()                  a context in which the device is the current one.
    where()                     (an id naming the device whatever this process is
                                shown, how many devices this process sees): two
                                ranks on one device are refused before `connect`.
    connect(rank, size, share)  join the run; `share(value)` returns rank 0's
                                `value` on every rank.
    reduce_dtype(work)          the dtype buffers of `work` are reduced in (wider
                                where the library has no type for `work`).
    all_reduce(flat, op)        in place: every rank's `flat` reduced by op "sum",
                                "max" or "min".
    broadcast(flat, root)       in place: rank `root`'s uint8 `flat` on every rank.
    all_gather(mine, every)     every rank's uint8 `mine` as the rows of `every`
                                (shape (size, mine.size)), in rank order.
    """
    xp = None

    def check(self):
        raise NotImplementedError

    def available(self):
        """Whether the library can be used here (`check` passes)."""
        try:
            self.check()
        except DeviceError:
            return False
        return True


class Binary(bytes):
    """What `Compiler.compile` returns: the artifact's bytes, and in `log` what the
    compiler printed while making them (for messages about them)."""
    log = ""

    def __new__(cls, data, log=""):
        self = super().__new__(cls, data)
        self.log = log
        return self


class SourceRejected(CompileError):
    """The compiler rejected a source; `log` is its messages, whose line numbers
    (`Compiler.blame`) say which units of a batched source are at fault."""

    def __init__(self, message, log=""):
        super().__init__(message)
        self.log = log


class Compiler:
    """One platform's toolchain, as the compile pipeline drives it.

    key(source)            the disk cache key of what `compile(source)` makes.
    compile(source, names) the artifact's bytes (a `Binary`); raises SourceRejected
                           when the source is at fault (`names`: the kernels it
                           holds, for the message), another CompileError when the
                           toolchain is (nothing usable made whatever the source).
    load(path, data)       the artifact as a `Program`; `path` is its file (None
                           when it is not on disk), `data` its bytes (None: read
                           `path`). Raises OSError where it does not load.
    symbols(unit)          the functions a rendered unit (name, source, kernels)
                           defines, all of which its Program must have.
    blame(log)             the source lines a rejection's log points at.
    """
    platform = None
    name = "compiler"   # for messages: "the C compiler (/usr/bin/cc)", "NVRTC 12.9"
    suffix = ""         # the artifact's file suffix in the cache
    batch = 64          # units per compiled source when many are built at once

    def key(self, source):
        raise NotImplementedError

    def compile(self, source, names=()):
        raise NotImplementedError

    def load(self, path, data=None):
        raise NotImplementedError

    def symbols(self, unit):
        raise NotImplementedError

    def blame(self, log):
        return set()


class Program:
    """A loaded artifact: its functions by name."""

    def has(self, name):
        """Whether the artifact defines function `name`."""
        raise NotImplementedError

    def function(self, name):
        """The artifact's function `name`, callable from Python."""
        raise NotImplementedError
