"""Index math of C-style kernels: axes merged into loops, loop nests, element offsets, guards.

- `collapse`: merge the axes every access walks as one and drop unit axes (a contiguous
  elementwise kernel becomes one flat loop);
- `nest`: the lines of a loop nest around a body; `offset`: an access's element offset in
  the loop variables; `flat_index`: axis indices from a row-major flat index;
- `guarded_axes`, `condition`: the axes a padded load guards and its C condition.

Pure functions of shapes and strides, shared by both dialects.
"""


def offset(ivars, strides, constant=0):
    """The C expression sum(ivars[a] * strides[a]) + constant (zero terms dropped)."""
    terms = [v if s == 1 else f"{v} * {s}" for v, s in zip(ivars, strides) if s != 0]
    if constant:
        terms.append(str(constant))
    return " + ".join(terms) or "0"



def nest(idx, ivars, shape, pragmas, body, depth, first=None):
    """Lines of loops over `shape` (index type `idx`, variables `ivars`; a pragma, or
    None, before each) around the lines `body`, indented from `depth`. `first`, where
    given, is the (start, stop) C expressions of the first loop instead of (0, extent)."""
    lines = []
    for a, (v, d, p) in enumerate(zip(ivars, shape, pragmas)):
        if p:
            lines.append("  " * depth + p)
        lo, hi = first if a == 0 and first is not None else ("0", d)
        lines.append("  " * depth + f"for ({idx} {v} = {lo}; {v} < {hi}; {v}++) {{")
        depth += 1
    lines += ["  " * depth + x for x in body]
    for _ in shape:
        depth -= 1
        lines.append("  " * depth + "}")
    return lines


def collapse(shape, accesses, pinned=()):
    """Merge adjacent axes that every access walks as one, and drop unit axes.

    Returns (shape, [strides per access], the new axis of each old one or None
    where it was dropped): a contiguous elementwise kernel becomes one flat
    loop; a transposed read keeps two. `pinned` axes (guarded ones) stay as they are."""
    axes = [a for a, d in enumerate(shape) if d != 1 or a in pinned]
    shp = [shape[a] for a in axes]
    acc = [[s[a] for a in axes] for s in accesses]
    groups = [[a] for a in axes]
    a = len(shp) - 2
    while a >= 0:
        if (not set(groups[a] + groups[a + 1]) & set(pinned)
                and all(s[a] == s[a + 1] * shp[a + 1] for s in acc)):
            shp[a] *= shp[a + 1]
            del shp[a + 1]
            for s in acc:
                s[a] = s[a + 1]
                del s[a + 1]
            groups[a] += groups.pop(a + 1)
        a -= 1
    amap = [None] * len(shape)
    for k, g in enumerate(groups):
        for old in g:
            amap[old] = k
    return shp, acc, amap


def guarded_axes(loads, start, stop):
    """The axes in [start, stop) that some guarded (padded) load guards: loops kept apart."""
    return {a for ld in loads if ld.guard for a in range(start, stop)
            if a < len(ld.guard) and ld.guard[a] is not None}


def condition(guard, axis_vars, extents):
    """C condition for a guarded load: each guarded axis's index inside [lo, hi)."""
    terms = []
    for g, v, n in zip(guard, axis_vars, extents):
        if g is None:
            continue
        lo, hi = g
        if v is None:  # not a loop (a dropped unit axis): its index is 0
            if not lo <= 0 < hi:
                return "0"
            continue
        if lo > 0:
            terms.append(f"{v} >= {lo}")
        if hi < n:
            terms.append(f"{v} < {hi}")
    return " && ".join(terms) or "1"


def flat_index(idx, rv, rshape, flat):
    """Lines giving each reduced axis index (`rv`) of the row-major flat index `flat`."""
    lines, step = [], 1
    for a in reversed(range(len(rshape))):
        q = f"({flat})" if step == 1 else f"({flat}) / {step}"
        lines.append(f"const {idx} {rv[a]} = ({idx})({q}" + (f" % {rshape[a]});" if a else ");"))
        step *= rshape[a]
    return list(reversed(lines))
