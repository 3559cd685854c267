"""Host callbacks in a loop: the seed's pattern at 10,000 rows, and a cached jit call.

A scan whose step calls a host solver through a callback, and whose gradient
comes from a custom_vjp whose pullback calls a second callback (an adjoint
solve). The host functions do a little float work, so what is timed is the
cost per row of the loop, the callback crossing and, for the gradient, the
residuals and the reverse sweep. JAX runs the same model with
`jax.pure_callback` in `jax.lax.scan` and a `jax.custom_vjp`.

Targets: <= 20 us per row forward, <= 40 us per row gradient, and a cached
jit call of a tiny function no slower than JAX's.
"""
import numpy as np

import rune
from rune import nx

from .common import Row, jax, per_call, per_call_each, print_table

ROWS = 10_000
TARGETS = {"forward": 20.0, "gradient": 40.0}


def solve(theta):
    """The state u of theta: (theta^2 + 1) u = 1."""
    t = float(theta)
    return np.float32(1.0 / (t * t + 1.0))


def adjoint(theta, u, ct):
    """The cotangent of theta: -2 theta u lambda, with (theta^2 + 1) lambda = ct."""
    t, u, ct = float(theta), float(u), float(ct)
    return np.float32(-2.0 * t * u * ct / (t * t + 1.0))


def exact_grad(thetas):
    return -2.0 * thetas / (thetas * thetas + 1.0) ** 2


@rune.custom_vjp
def state_rune(theta):
    u = rune.callback(solve, theta, like=theta)

    def pullback(ct):
        return rune.callback(adjoint, theta, u, ct, like=theta)

    return u, pullback


def loss_rune(thetas):
    total, _ = rune.scan(lambda acc, theta: (acc + state_rune(theta), None),
                         nx.scalar(0.0, nx.float32), thetas)
    return total


if jax is not None:
    _SCALAR = jax.ShapeDtypeStruct((), np.float32)

    @jax.custom_vjp
    def state_jax(theta):
        return jax.pure_callback(solve, _SCALAR, theta)

    def _state_fwd(theta):
        u = state_jax(theta)
        return u, (theta, u)

    def _state_bwd(res, ct):
        theta, u = res
        return (jax.pure_callback(adjoint, _SCALAR, theta, u, ct),)

    state_jax.defvjp(_state_fwd, _state_bwd)

    def loss_jax(thetas):
        total, _ = jax.lax.scan(lambda acc, theta: (acc + state_jax(theta), None),
                                np.float32(0.0), thetas)
        return total


def _thetas():
    return np.linspace(-2.0, 2.0, ROWS, dtype=np.float32)


def check_gradients_agree():
    thetas = _thetas()
    g = np.asarray(rune.jit(rune.grad(loss_rune))(nx.array(thetas)))
    np.testing.assert_allclose(g, exact_grad(thetas), rtol=1e-5, atol=1e-6)


def scan_rows():
    thetas = _thetas()
    x = nx.array(thetas)
    per_row = lambda fn: per_call(fn, repeat=3, budget=1.0) / ROWS  # noqa: E731
    rune_fns = {
        "forward, eager": loss_rune,
        "forward, jit": rune.jit(loss_rune),
        "gradient, eager": rune.grad(loss_rune),
        "gradient, jit": rune.jit(rune.grad(loss_rune)),
    }
    jax_fns = {}
    if jax is not None:
        jx = jax.numpy.asarray(thetas)
        jax_fns = {
            "forward, eager": loss_jax,
            "forward, jit": jax.jit(loss_jax),
            "gradient, eager": jax.grad(loss_jax),
            "gradient, jit": jax.jit(jax.grad(loss_jax)),
        }
    rows = []
    for case, fn in rune_fns.items():
        times = {"rune": per_row(lambda: fn(x))}
        if case in jax_fns:
            jfn = jax_fns[case]
            times["jax"] = per_row(lambda: jax.block_until_ready(jfn(jx)))
        rows.append(Row(f"scan {ROWS:,} rows + callback, {case}", "per row", times))
    return rows


def dispatch_row():
    """A cached jit call of `x + 1` on one element: the fixed cost of calling compiled code."""
    base = np.ones(1, np.float32)
    x = nx.array(base)
    add_one = rune.jit(lambda v: v + 1)
    calls = {"rune": lambda: add_one(x), "numpy": lambda: base + 1}
    if jax is not None:
        jadd_one = jax.jit(lambda v: v + 1)
        jx = jax.numpy.asarray(base)
        calls["jax"] = lambda: jadd_one(jx).block_until_ready()
    # in alternation: the ratio to NumPy is the target, and a drift of the machine's speed would skew it
    return Row("cached jit call, x + 1 (1 x f32)", "per call", per_call_each(calls, budget=0.5, repeat=7))


def _verdicts(rows):
    lines = []
    for r in rows:
        for kind, target in TARGETS.items():
            if kind in r.case and "rune" in r.us:
                ok = "meets" if r.us["rune"] <= target else "misses"
                lines.append(f"{r.case}: rune {r.us['rune']:.1f} us/row {ok} <= {target:g}")
    dispatch = rows[-1]
    if "jax" in dispatch.us:
        ok = "meets" if dispatch.us["rune"] <= dispatch.us["jax"] else "misses"
        lines.append(f"cached jit call: rune {dispatch.us['rune']:.1f} us vs jax "
                     f"{dispatch.us['jax']:.1f} us ({ok} 'no slower than JAX')")
    return "\n".join(lines)


def run():
    check_gradients_agree()
    rows = scan_rows() + [dispatch_row()]
    print_table("host callbacks in a scan (the seed's pattern), and a cached jit call", rows,
                note=_verdicts(rows))
    return rows


if __name__ == "__main__":
    run()
