"""Jacobians and Hessians: vmap over one-hot tangents (forward) or cotangents (reverse).

Mapping the basis with vmap evaluates the function once per Jacobian (its
Python body is traced once), whatever the size of its input or output.
Arguments and results are pytrees: the Jacobian is the output's structure
with each leaf replaced by the selected arguments' structure, each block of
shape out_leaf.shape + in_leaf.shape (as in JAX).
"""
import numpy as np

from ... import tree
from ..batching import vmap
from ...core.staging import abstract, stage_pytree
from ...nx import ops as nx
from ...nx.constants import iota
from ...nx.creation import zeros
from .api import jvp, select, vjp


def _select(f, args, argnums, what):
    """(f of the selected arguments' flat leaves, those leaves, their structure, multiple?)."""
    picked, chosen, multiple = select(f, args, {}, argnums, what)
    leaves, struct = tree.flatten(chosen)
    return (lambda *xs: picked(*tree.unflatten(struct, xs))), nx.operands(leaves), struct, multiple


def _one_hots(leaves):
    """One batch of one-hot arrays covering every element of every leaf: for leaf k,
    shape (total,) + leaf.shape, where total is the number of elements of all leaves."""
    total = sum(x.size for x in leaves)
    out, offset = [], 0
    for x in leaves:
        # Row r is one at column r - offset: made on x's device, never on the host.
        rows = iota((total, x.size), np.int32, 0, x.device, start=-offset)
        hot = nx.equal(rows, iota((total, x.size), np.int32, 1, x.device))
        out.append(nx.reshape(nx.astype(hot, x.dtype), (total,) + x.shape))
        offset += x.size
    return out


def _split_rows(batched, leaves):
    """Undo `_one_hots` on a result batched over all elements: one piece per leaf."""
    pieces, offset = [], 0
    for x in leaves:
        pieces.append(nx.slice_in_dim(batched, offset, offset + x.size, axis=0))
        offset += x.size
    return pieces


def _assemble(out_struct, blocks, in_struct, multiple):
    """blocks[o][k]: d out leaf o / d in leaf k, as the nested pytree JAX returns."""
    per_out = [tree.unflatten(in_struct, row) for row in blocks]
    per_out = [b if multiple else b[0] for b in per_out]
    return tree.unflatten(out_struct, per_out)


def jacfwd(f, argnums=0, has_aux=False):
    """The Jacobian of `f` by forward mode: one batched jvp over every input element."""
    return _jacfwd(f, argnums, has_aux, "jacfwd")


def _jacfwd(f, argnums, has_aux, what):
    def jac(*args):
        flat, leaves, in_struct, multiple = _select(f, args, argnums, what)
        if sum(x.size for x in leaves) == 0:
            main = (lambda *xs: flat(*xs)[0]) if has_aux else flat
            out_struct, out_avals = _output_shapes(main, leaves)
            blocks = [[zeros(a.shape + x.shape, a.dtype, a.device) for x in leaves] for a in out_avals]
            result = _assemble(out_struct, blocks, in_struct, multiple)
            return (result, None) if has_aux else result

        def push(*tangents):
            result = jvp(flat, leaves, list(tangents), has_aux=has_aux)
            return result[1], (result[2] if has_aux else None)

        tangent, aux = vmap(push, out_axes=(0, None))(*_one_hots(leaves))
        t_leaves, out_struct = tree.flatten(tangent)
        blocks = [[nx.reshape(nx.moveaxis(piece, 0, -1), t.shape[1:] + x.shape)
                   for piece, x in zip(_split_rows(t, leaves), leaves)] for t in t_leaves]
        result = _assemble(out_struct, blocks, in_struct, multiple)
        return (result, aux) if has_aux else result
    return jac


def _output_shapes(fn, leaves):
    """(structure, avals) of `fn`'s result, found by staging it: nothing runs."""
    program, struct = stage_pytree(fn, [abstract(x) for x in leaves])
    return struct, program.out_avals


def jacrev(f, argnums=0, has_aux=False):
    """The Jacobian of `f` by reverse mode: one batched pullback over every output element."""
    return _jacrev(f, argnums, has_aux, "jacrev")


def _jacrev(f, argnums, has_aux, what):
    def jac(*args):
        flat, leaves, in_struct, multiple = _select(f, args, argnums, what)
        result = vjp(flat, *leaves, has_aux=has_aux)
        out, pullback = result[0], result[1]
        out_leaves, out_struct = tree.flatten(out)
        out_leaves = [o if hasattr(o, "aval") else nx.asarray(o) for o in out_leaves]
        if sum(o.size for o in out_leaves) == 0:
            blocks = [[zeros(o.shape + x.shape, x.dtype, x.device) for x in leaves] for o in out_leaves]
        else:
            rows = vmap(lambda *cts: pullback(tree.unflatten(out_struct, cts)))(*_one_hots(out_leaves))
            pieces = [_split_rows(r, out_leaves) for r in rows]  # [input leaf][output leaf]
            blocks = [[nx.reshape(pieces[k][o], y.shape + x.shape) for k, x in enumerate(leaves)]
                      for o, y in enumerate(out_leaves)]
        jacobian = _assemble(out_struct, blocks, in_struct, multiple)
        return (jacobian, result[2]) if has_aux else jacobian
    return jac


def hessian(f, argnums=0, has_aux=False):
    """The Hessian of scalar `f`: forward mode over reverse mode."""
    return _jacfwd(_jacrev(f, argnums, has_aux, "hessian"), argnums, has_aux, "hessian")
