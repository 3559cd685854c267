"""Closure conversion helpers shared by every rule that splits a function in two.

A backward function staged after a forward one captures the forward values
it reads. `split_residuals` turns those captures into residuals: values the
forward program must also output. Concrete arrays stay constants of the
backward program (they are valid anywhere); any other capture — a forward
tracer or an outer interpreter's tracer — is routed through the forward
program, so the backward program never refers to a trace that may be gone.
"""
from .program import Program
from .trace import Tracer


def split_residuals(bwd_program):
    """(`bwd_program` taking its residuals as leading inputs, the residual values
    the forward program must output)."""
    res_vars, res_values, const_vars, const_values = [], [], [], []
    for var, value in zip(bwd_program.constvars, bwd_program.consts):
        if isinstance(value, Tracer):
            res_vars.append(var)
            res_values.append(value)
        else:
            const_vars.append(var)
            const_values.append(value)
    program = Program(res_vars + bwd_program.invars, bwd_program.outvars, bwd_program.eqns,
                      const_vars, const_values)
    return program, res_values
