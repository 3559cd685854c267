"""Fit a model whose state comes from a host linear solver (docs/callbacks.md, scaled up).

A bar on [0, 1] is made of two materials: conductivity k[0] on the left half,
k[1] on the right. Heated uniformly and held at temperature 0 at both ends,
its temperature u at N interior points solves the finite-element system

    A(k) u = b,    A(k) = k[0] K_left + k[1] K_right,

which `numpy.linalg.solve` computes on the host, inside `rune.callback`. The
gradient comes from the adjoint system A(k)^T lam = u_bar, a second host solve
in the pullback of a `rune.custom_vjp`: the cotangent of k[i] is
-lam . (K_i u).

For each of several bars (several true parameter sets) the conductivities are
recovered from the measured temperatures by gradient descent on log k, in a
`rune.fori_loop`; a `rune.scan` runs over the bars; the whole fit is one
`rune.jit` call. The scan's step and the loop's body are traced once; the
solves run once per bar and per descent step.

Run from the repository root: python examples/solver_callbacks.py
"""
import numpy as np

import rune
from rune import nx

N = 15                      # interior grid points
STEPS = 60                  # gradient-descent steps per bar
LEARNING_RATE = 0.15
TRUE_CONDUCTIVITIES = [[0.5, 2.0], [1.0, 1.0], [3.0, 0.7], [0.3, 0.3]]


def stiffness(elements):
    """The stiffness matrix of linear elements on a uniform grid, for the chosen elements."""
    h = 1.0 / (N + 1)
    K = np.zeros((N, N))
    for e in elements:                      # element e joins nodes e-1 and e
        nodes = [i for i in (e - 1, e) if 0 <= i < N]   # the ends are held at 0
        for i in nodes:
            for j in nodes:
                K[i, j] += (1.0 if i == j else -1.0) / h
    return K


K_PARTS = [stiffness(range(0, (N + 1) // 2)), stiffness(range((N + 1) // 2, N + 1))]
LOAD = np.full(N, 1.0 / (N + 1))            # uniform heating

counts = {"solves": 0, "adjoint solves": 0}


def system(k):
    return sum(float(ki) * Ki for ki, Ki in zip(np.asarray(k), K_PARTS))


def solve(k):
    """The temperature for conductivities k: A(k) u = b."""
    counts["solves"] += 1
    return np.linalg.solve(system(k), LOAD)


def adjoint(k, u, ct):
    """The cotangent of k: lam solves A(k)^T lam = ct; k_bar[i] = -lam . (K_i u)."""
    counts["adjoint solves"] += 1
    lam = np.linalg.solve(system(k).T, np.asarray(ct))
    u = np.asarray(u)
    return np.array([-lam @ (Ki @ u) for Ki in K_PARTS])


@rune.custom_vjp
def temperature(k):
    u = rune.callback(solve, k, like=rune.Spec((N,), nx.float64))

    def pullback(ct):
        return rune.callback(adjoint, k, u, ct, like=k)

    return u, pullback


def misfit(log_k, measured):
    """Squared error of the log temperatures (the temperatures span orders of magnitude)."""
    r = nx.log(temperature(nx.exp(log_k))) - nx.log(measured)
    return 0.5 * (r * r).sum()


def fit(measured):
    """Log conductivities recovered from one bar's temperatures by gradient descent."""
    def descend(i, log_k):
        return log_k - LEARNING_RATE * rune.grad(misfit)(log_k, measured)

    return rune.fori_loop(0, STEPS, descend, nx.zeros((2,), dtype=nx.float64))


@rune.jit
def fit_all(measurements):
    """(the summed final misfit, the fitted conductivities of each bar)."""
    def one_bar(total, measured):
        log_k = fit(measured)
        return total + misfit(log_k, measured), nx.exp(log_k)

    return rune.scan(one_bar, nx.scalar(0.0, nx.float64), measurements)


def main():
    truth = nx.array(TRUE_CONDUCTIVITIES, dtype=nx.float64)
    measurements = nx.stack([temperature(k) for k in truth])   # synthetic, noise-free data
    bars = len(TRUE_CONDUCTIVITIES)

    counts.update({"solves": 0, "adjoint solves": 0})
    final_misfit, fitted = fit_all(measurements)
    print(f"{bars} bars x {STEPS} descent steps under one jit call: "
          f"{counts['solves']} solves, {counts['adjoint solves']} adjoint solves "
          f"(one extra solve per bar for the final misfit)")
    assert counts == {"solves": bars * (STEPS + 1), "adjoint solves": bars * STEPS}, counts

    counts.update({"solves": 0, "adjoint solves": 0})
    fit_all(measurements)                   # cached: no new trace, the solves run again
    print(f"second call: {counts['solves']} solves, {counts['adjoint solves']} adjoint solves, "
          f"traced {rune.stats()['traces']} time(s) in all")

    print(f"summed final misfit: {final_misfit.item():.2e}")
    print("bar   true k_left  k_right   fitted k_left  k_right")
    for b, (t, f) in enumerate(zip(truth.tolist(), fitted.tolist())):
        print(f"{b:3d}   {t[0]:11.4f} {t[1]:8.4f}   {f[0]:13.4f} {f[1]:8.4f}")
    worst = float(nx.abs(fitted / truth - 1.0).max())
    print(f"largest relative error: {worst:.1e}")
    assert worst < 1e-3, worst


if __name__ == "__main__":
    main()
