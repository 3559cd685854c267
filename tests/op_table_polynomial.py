"""Op-table rows of rune/nx/polynomial.py: each case is checked eagerly against NumPy, under jit
against eager, its jvp/vjp against finite differences and under vmap against a loop.
Also the linalg functions added with them (eig, eigvals, cond, lstsq, multi_dot, norm, tensorinv,
tensorsolve), as "linalg.*" rows."""
from op_table import *  # noqa: F401,F403  (case, the samplers, dtypes)
from op_table import _LINALG_TOL, _rng, _well_conditioned


def _coeffs(name, specs, domain="nonzero"):
    """One sample per spec: a tuple of (length, dtype) coefficient arrays, plus static kwargs."""
    rng = _rng(name)
    return [S(*(draw(rng, (n,), d, domain) for n, d in arrays), **kw) for arrays, kw in specs]


def _complex_of(d):
    return C64 if np.dtype(d) in (F32, C64) else C128


def _keeps_dtype(sample, np_dtype):
    """The coefficients' own dtype, as JAX's: NumPy multiplies or divides by an int64 arange
    (polyder, polyint) or fits in float64 (polyfit), widening 32-bit inputs."""
    return float_rule(sample, np_dtype) if is_inexact(np_dtype) else sample.args[0].dtype


_KEEPS_NOTE = "32-bit coefficients keep their dtype, as JAX's (NumPy widens them through an int64 arange)"


def _padded_polydiv(u, v):
    """NumPy's quotient and its remainder before trimming: len(u) coefficients."""
    q, r = np.polydiv(u, v)
    return q, np.concatenate([np.zeros(len(u) - len(r), r.dtype), r])


_PAIRS = [(((4, F64), (2, F64)), {}), (((3, F32), (5, F32)), {}), (((3, I32), (2, I32)), {})]
case("polyadd", nx.polyadd, np.polyadd, _coeffs("polyadd", _PAIRS), grad=True, diff_argnums=(0, 1))
case("polysub", nx.polysub, np.polysub, _coeffs("polysub", _PAIRS), grad=True, diff_argnums=(0, 1))
case("polymul", nx.polymul, np.polymul, _coeffs("polymul", _PAIRS), grad=True, diff_argnums=(0, 1))
case("polydiv", lambda u, v: nx.polydiv(u, v, trim_leading_zeros=False), _padded_polydiv,
     _coeffs("polydiv", [(((5, F64), (2, F64)), {}), (((4, F32), (3, F32)), {}), (((2, F64), (3, F64)), {})]),
     grad=True, diff_argnums=(0, 1), note="trim_leading_zeros=False: the untrimmed remainder (eager trimming: "
     "tests/nx/test_polynomial.py)")
case("polyder", nx.polyder, np.polyder,
     _coeffs("polyder", [(((5, F64),), {}), (((5, F32),), dict(m=2)), (((4, I32),), dict(m=3))]), grad=True,
     dtype_rule=_keeps_dtype, dtype_note=_KEEPS_NOTE)
case("polyint", nx.polyint, np.polyint,
     _coeffs("polyint", [(((4, F64),), {}), (((3, F64),), dict(m=2, k=(1.0, -2.0))), (((3, F32),), dict(m=2))]),
     grad=True, dtype_rule=_keeps_dtype, dtype_note=_KEEPS_NOTE)
case("polyval", nx.polyval, np.polyval,
     _coeffs("polyval", [(((4, F64), (3, F64)), {}), (((3, F32), (5, F32)), {}), (((3, I32), (2, I32)), {})],
             domain="small"), grad=True, diff_argnums=(0, 1))
case("poly", nx.poly, np.poly,
     _coeffs("poly", [(((3, F64),), {}), (((2, F32),), {})]) +
     [S(np.diag([1.0, 2.0, 4.0]) + 0.3 * draw(_rng("poly_m"), (3, 3), F64))], grad=True,
     note="of zeros, and of a matrix (its characteristic polynomial, through eigvals)")
# strip_zeros=False keeps a fixed shape (traceable); with a nonzero leading coefficient the
# roots are NumPy's, in its order (the same companion matrix), always complex
case("roots", lambda p: nx.roots(p, strip_zeros=False), lambda p: np.roots(p).astype(_complex_of(p.dtype)),
     [S(np.array([1.0, -6.0, 11.0, -6.0])), S(np.array([2.0, 1.0, 3.0], F32)),
      S(np.array([1.0, -1.5, -2.0, 1.0]))], grad=True, tol=_LINALG_TOL,
     note="complex always (NumPy: real when every root is); strip_zeros=True: tests/nx/test_polynomial.py")


def _fit_samples():
    rng = _rng("polyfit")
    x = np.linspace(-1.0, 1.0, 6)
    return [S(x, draw(rng, (6,), F64), deg=2), S(x.astype(F32), draw(rng, (6, 2), F32), deg=1),
            S(x, draw(rng, (6,), F64), deg=3, w=rng.uniform(0.5, 1.5, 6))]


case("polyfit", nx.polyfit, np.polyfit, _fit_samples(), grad=True, diff_argnums=(0, 1), tol=_LINALG_TOL,
     dtype_rule=_keeps_dtype, dtype_note="float32 samples fit in float32, as JAX's (NumPy: float64)")


# ---------------------------------------------------------------- nx.linalg additions

def _linalg_case(name, fn, ref, samples, **kw):
    case("linalg." + name, fn, ref, samples, tol=_LINALG_TOL, **kw)


def _real_spectrum(name, shapes=((3, 3), (2, 3, 3)), dtypes=(F64, F32)):
    """Matrices near diag(1, 2.5, 4): distinct real eigenvalues, real eigenvectors (fixed signs nearby)."""
    rng = _rng(name)
    return [S((np.diag(np.linspace(1.0, 4.0, s[-1])) + 0.3 * rng.standard_normal(s)).astype(d))
            for d in dtypes for s in shapes]


_linalg_case("eig", lambda a: (lambda w, v: (w, v * nx.conj(v)))(*nx.linalg.eig(a)),
             lambda a: (lambda w, v: (w.astype(_complex_of(a.dtype)),
                                      (v * v.conj()).astype(_complex_of(a.dtype))))(*np.linalg.eig(a)),
             _real_spectrum("linalg.eig"), grad=True, note="eigenvectors as v * conj(v) (their phase is arbitrary)")
_linalg_case("eigvals", nx.linalg.eigvals, lambda a: np.linalg.eigvals(a).astype(_complex_of(a.dtype)),
             _real_spectrum("linalg.eigvals") +
             [S(np.array([[0.5, -2.0, 0.1], [1.5, 0.3, 0.2], [0.0, 0.4, 3.0]]))], grad=True,
             note="complex always (NumPy: real when every eigenvalue is)")
_linalg_case("cond", nx.linalg.cond, np.linalg.cond,
             [S(_well_conditioned(_rng("cond"), (3, 3), F64)),
              S(_well_conditioned(_rng("cond"), (2, 3, 3), F32), p=1),
              S(_well_conditioned(_rng("cond"), (3, 3), F64), p="fro"),
              S(_well_conditioned(_rng("cond"), (4, 3), F64), p=-2)], grad=True)


def _full_lstsq(a, b, rcond=None):
    """NumPy's lstsq with every residual (rune's numpy_resid=False) and an int32 rank."""
    x, _, rank, s = np.linalg.lstsq(a, b, rcond=rcond)
    r = (b if b.ndim == 2 else b[:, None]) - a @ (x if x.ndim == 2 else x[:, None])
    return x, (r * r).sum(0), np.int32(rank), s


_linalg_case("lstsq", lambda a, b, rcond=None: tuple(nx.linalg.lstsq(a, b, rcond, numpy_resid=False)), _full_lstsq,
             [S(_well_conditioned(_rng("lstsq"), (5, 3), F64), draw(_rng("lstsq_b"), (5,), F64)),
              S(_well_conditioned(_rng("lstsq"), (4, 4), F32), draw(_rng("lstsq_b"), (4, 2), F32)),
              S(_well_conditioned(_rng("lstsq"), (3, 5), F64), draw(_rng("lstsq_b"), (3, 2), F64), rcond=1e-3)],
             grad=True, diff_argnums=(0, 1), note="numpy_resid=False: every residual (NumPy's empty ones: "
             "tests/nx/test_polynomial.py)")
_linalg_case("multi_dot", lambda *a: nx.linalg.multi_dot(a), lambda *a: np.linalg.multi_dot(a),
             [S(*(draw(_rng("multi_dot"), s, F64) for s in ((3,), (3, 5), (5, 2), (2, 4)))),
              S(*(draw(_rng("multi_dot2"), s, F32) for s in ((2, 6), (6, 3), (3,))))],
             grad=True, diff_argnums=(0, 1, 2))
_linalg_case("norm", nx.linalg.norm,
             lambda x, ord=None, axis=None, keepdims=False: np.asarray(np.linalg.norm(x, ord, axis, keepdims)),
             [S(draw(_rng("norm"), (2, 3, 4), F64)), S(draw(_rng("norm"), (3, 4), F32), ord=1),
              S(draw(_rng("norm"), (3, 4), F64), ord="nuc"), S(draw(_rng("norm"), (2, 3, 4), F64), ord=3, axis=1),
              S(draw(_rng("norm"), (2, 3, 4), F64), ord=np.inf, axis=(2, 0), keepdims=True)], grad=True)
_linalg_case("tensorinv", nx.linalg.tensorinv, np.linalg.tensorinv,
             [S(_well_conditioned(_rng("tinv"), (6, 6), F64).reshape(2, 3, 6)),
              S(_well_conditioned(_rng("tinv"), (4, 4), F32).reshape(4, 2, 2), ind=1)], grad=True)
_linalg_case("tensorsolve", nx.linalg.tensorsolve, np.linalg.tensorsolve,
             [S(_well_conditioned(_rng("tsolve"), (6, 6), F64).reshape(2, 3, 6), draw(_rng("tsolve_b"), (2, 3), F64)),
              S(_well_conditioned(_rng("tsolve"), (4, 4), F64).reshape(4, 2, 2), draw(_rng("tsolve_b"), (2, 2), F64),
                axes=(0,))], grad=True, diff_argnums=(0, 1))
