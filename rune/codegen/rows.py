"""Row groups: consecutive kernels of a unit that run row by row, each row of
every kernel in turn, instead of each kernel over all its points.

A softmax fused by rune/compiler/fuse.py is four kernels over the same rows
(the row maxima, the exponentials, their sums, the quotients), and each
streams the whole array through memory once: at a transformer's sizes the
arrays outgrow the caches and the kernels wait on memory. Run row by row,
a row's values are still in cache when the next kernel reads them (the
issue the fused softmax kernels of other frameworks solve by hand). Each
kernel keeps its loops, stores and order of operations, so results are the
same to the bit; only the order between rows changes, and a group is formed
only where no kernel reads, in its row, what another kernel of the group
writes in another row.

A kernel's row form (`RowForm`, from the dialect that renders it) is the
extent of its outermost loop after collapsing, what its loads read per index
of that loop, and what its stores write per index. Kernels whose outermost
extents are multiples of a common row count R, of at least MIN_ROWS, form a
group when every load of a buffer that an earlier kernel of the group
writes reads only that row's part of it. Nothing here knows the target.
"""
import math
from typing import NamedTuple

from ..base.tuning import ROW_GROUP_MIN_ROWS

MIN_ROWS = ROW_GROUP_MIN_ROWS


class Read(NamedTuple):
    """A load's walk: its buffer, its stride along the outermost loop, the inner
    loops' extents and its strides along them, its constant offset, and whether
    it also reads at runtime-computed places (a gather)."""
    buffer: int
    stride: int
    extents: tuple
    strides: tuple
    offset: int
    dynamic: bool


class RowForm(NamedTuple):
    """A kernel seen as `extent` iterations of its outermost loop: what its loads
    read (`reads`), the buffers it writes contiguously and how many elements each
    index of the outer loop writes (`writes`), and its points (`work`)."""
    extent: int
    reads: tuple
    writes: dict
    work: int


class Group(NamedTuple):
    """Kernels [start, stop) of a unit run row by row over `rows` rows; kernel j
    runs `chunks[j - start]` iterations of its outermost loop per row."""
    start: int
    stop: int
    rows: int
    chunks: tuple


def groups(forms, written_by):
    """The row groups of a unit whose kernels have the row forms `forms` (None:
    a kernel that runs whole), greedily from the first kernel. `written_by`: buffer
    index -> how many of the unit's kernels store into it (a buffer two kernels
    write is never shared by a group)."""
    found, i, n = [], 0, len(forms)
    while i < n:
        if forms[i] is None or forms[i].extent < MIN_ROWS:
            i += 1
            continue
        rows, j = forms[i].extent, i + 1
        while j < n and forms[j] is not None:
            trial = math.gcd(rows, forms[j].extent)
            if trial < MIN_ROWS or not _row_local(forms[i:j + 1], trial, written_by):
                break
            rows, j = trial, j + 1
        if j - i >= 2:
            found.append(Group(i, j, rows, tuple(f.extent // rows for f in forms[i:j])))
        i = j
    return found


def _row_local(forms, rows, written_by):
    """Whether kernels with `forms`, run row by row over `rows` rows, read of one
    another only what the same row wrote before them."""
    writer = {}   # buffer -> (position of its writer in the group, elements a row of it holds)
    for pos, form in enumerate(forms):
        for buffer, each in form.writes.items():
            if written_by.get(buffer, 0) != 1 or buffer in writer:
                return False
            writer[buffer] = (pos, form.extent // rows * each)
    for pos, form in enumerate(forms):
        chunk = form.extent // rows
        for read in form.reads:
            if read.buffer not in writer:
                continue   # written outside the group: whole before it runs
            by, width = writer[read.buffer]
            if by >= pos or read.dynamic or chunk * read.stride != width:
                return False
            lo, hi = _span(read, chunk)
            if lo < 0 or hi >= width:
                return False
    return True


def _span(read, chunk):
    """The least and greatest element offset a row's part of `read` reaches."""
    steps = ((chunk, read.stride),) + tuple(zip(read.extents, read.strides))
    lo = read.offset + sum(min(0, (n - 1) * s) for n, s in steps)
    hi = read.offset + sum(max(0, (n - 1) * s) for n, s in steps)
    return lo, hi
