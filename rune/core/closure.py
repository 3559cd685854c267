"""Closure conversion helpers shared by every rule that splits a function in two.

A backward function staged after a forward one captures the forward values
it reads. `split_residuals` turns those captures into residuals: values the
forward program must also output. Concrete arrays stay constants of the
backward program (they are valid anywhere); any other capture — a forward
tracer or an outer interpreter's tracer — is routed through the forward
program, so the backward program never refers to a trace that may be gone.
"""
from .trace import Tracer


def split_residuals(fwd_interp, bwd_program):
    """Make `bwd_program` take residuals as leading inputs; returns the forward values to output."""
    res_vars, res_values, const_vars, const_values = [], [], [], []
    for var, value in zip(bwd_program.constvars, bwd_program.consts):
        if isinstance(value, Tracer):
            res_vars.append(var)
            res_values.append(value)
        else:
            const_vars.append(var)
            const_values.append(value)
    bwd_program.invars = res_vars + bwd_program.invars
    bwd_program.constvars, bwd_program.consts = const_vars, const_values
    return res_values


def reorder(program, in_order=None, out_order=None):
    """The same program with its inputs/outputs permuted (lists of old positions)."""
    from .program import Program
    invars = program.invars if in_order is None else [program.invars[i] for i in in_order]
    outvars = program.outvars if out_order is None else [program.outvars[i] for i in out_order]
    return Program(invars, outvars, program.eqns, program.constvars, program.consts)
