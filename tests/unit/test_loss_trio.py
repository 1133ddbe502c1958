"""The loss defined once (issue 29, point 4): the compiled trio φ, φ', φ'' of
:mod:`fedviz.problems._compiled` against the NumPy definitions of :mod:`fedviz.problems.losses`, for
every loss of the registry, and every compiled dispatch on a loss code failing loudly on a code it
does not know.

Tolerances are rounding bounds, in units of u = 2⁻⁵³ (the unit roundoff) of the magnitude the
rounding is relative to:

- Each side evaluates each function through at most two libm calls (exp, log or log1p; glibc
  documents them within 1 ulp = 2u) and at most four roundings (u each), and no step amplifies a
  relative error by more than 1: the condition number of log1p(e) in e is e/((1 + e) log1p(e)) ≤ 1,
  that of σ(t) in e^(−|t|) is ≤ 1, and that of s(1 − s) in s is |1 − 2s| ≤ 1.  Kahan's
  log(u)·e/(u ⊖ 1) for log1p(e) (the compiled logistic loss) is within 5u by itself when log is
  within u/2 (Goldberg 1991, "What every computer scientist should know about floating-point
  arithmetic", Theorem 4), 6u with glibc's log.  So each side is within 8u of the exact value and
  the two within ``BUDGET`` = 16u of each other.
- Relative to what: to the value itself for φ and φ'; for the logistic φ'' = s(1 − s) to s = σ(yz),
  whose rounding (a few u of s) the product inherits — for s near 1 the product is much smaller
  than s (1 − s cancels), so its error is a few u of s, not of the product.
- Below the smallest normal number (2⁻¹⁰²²) a side may flush to zero (scipy's ``expit`` does for
  arguments below −709.78): an absolute 2⁻¹⁰²² is allowed on top.

The finite differences are central, (f(z + h) − f(z − h)) / (2h), whose error is at most
h²/6 · max|f'''| over [z − h, z + h] (Taylor) plus the rounding of f at the two points over 2h;
the bounds on the higher derivatives per loss (:func:`derivative_bound`) are derived in its docstring.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit

from fedviz.algorithms import ALGORITHMS
from fedviz.algorithms._sdca_kernels import DUAL_LOSSES, sdca_step
from fedviz.algorithms.cocoa import CoCoA
from fedviz.algorithms.cocoa_plus import CoCoAPlus
from fedviz.data.dataset import FederatedDataset
from fedviz.errors import ParameterError
from fedviz.personal import _newton
from fedviz.problems import _compiled
from fedviz.problems._compiled import LOSS_CODES, NO_CODE, check_code, d2phi, dphi, loss_code, phi
from fedviz.problems.losses import LOSSES, MULTICLASS_LOSSES, Loss, SmoothedHinge
from fedviz.problems.objective import Problem
from fedviz.problems import pernode

U = 2.0 ** -53
BUDGET = 16 * U
TINY = 2.0 ** -1022
#: Codes no loss has: the multiclass marker, the next free code, and far ones.
UNKNOWN = (NO_CODE, max(LOSS_CODES.values()) + 1, 99, -7)


def instances() -> list[Loss]:
    """Every loss of the registry with a code (each default, and the smoothed hinge at three γ)."""
    out = [cls() for cls in LOSSES.values()]
    out += [SmoothedHinge(0.25), SmoothedHinge(2.0)]
    return out


def labels(loss: Loss) -> tuple[float, ...]:
    return (-1.0, 1.0) if loss.task == "classification" else (-1e3, -2.5, 0.0, 1.0, 7.25)


def kinks(loss: Loss) -> tuple[float, ...]:
    """The margins a = yz where φ'' jumps (the smoothed hinge's 1 − γ and 1); none elsewhere."""
    return (1.0 - loss.gamma, 1.0) if isinstance(loss, SmoothedHinge) else ()


def margins(loss: Loss, y: float) -> np.ndarray:
    """The grid: a sweep of ±1e3, logarithmic ladders towards 0 from both sides, the logistic
    loss's thresholds (1 ⊕ e^(−|t|) = 1 from |t| ≈ 36.7, exp's underflow near 708–745) and every
    kink with its two floating-point neighbours."""
    ladder = np.geomspace(1e-300, 1e3, 301)
    special = np.array([0.0, 1.0, 36.04, 36.74, 37.0, 700.0, 708.4, 709.79, 745.0, 746.0, 1e3])
    z = [np.linspace(-1e3, 1e3, 2001), ladder, -ladder, special, -special]
    for a in kinks(loss):
        zk = a / y
        z.append(np.array([np.nextafter(zk, -np.inf), zk, np.nextafter(zk, np.inf)]))
    return np.unique(np.concatenate(z))


@numba.njit  # not cached: numba's disk cache would keep an old trio inlined after an edit of _compiled.py
def trio(code, z, y, gamma, out):
    """out = [φ, φ', φ''] at every z (y a scalar label)."""
    for i in range(z.size):
        out[0, i] = phi(code, z[i], y, gamma)
        out[1, i] = dphi(code, z[i], y, gamma)
        out[2, i] = d2phi(code, z[i], y, gamma)


def compiled(loss: Loss, z: np.ndarray, y: float) -> np.ndarray:
    code, gamma = loss_code(loss)
    out = np.empty((3, z.size))
    trio(code, np.ascontiguousarray(z, dtype=np.float64), float(y), gamma, out)
    return out


def curvature_scale(loss: Loss, z: np.ndarray, y: float) -> np.ndarray:
    """What the rounding of φ'' is relative to (see the module docstring): σ(yz) for the logistic
    loss's s(1 − s), 0 (the value itself then) for the losses whose φ'' is a constant per piece."""
    return expit(y * z) if loss.name == "logistic" else np.zeros_like(z)


def derivative_bound(loss: Loss, z: np.ndarray, y: float, h: np.ndarray, order: int) -> np.ndarray:
    """A bound on |φ⁽ᵒʳᵈᵉʳ⁾| over [z − h, z + h] (order 3 or 4), off the kinks.

    Logistic, s = σ(yz), y² = 1: φ''' = ±s(1 − s)(1 − 2s), at most √3/18 (at s = ½ ± √3/6), and
    φ'''' = s(1 − s)(1 − 6s + 6s²), at most 1/8 (at s = ½); both are at most s(1 − s) ≤ e^(−|yz|),
    so over the interval at most e^(−(|z| − h)).  Squared: φ''' = 0.  Smoothed hinge: quadratic
    or linear on each piece, φ''' = 0 off the kinks (the points whose interval holds one are skipped).
    """
    if loss.name == "logistic":
        peak = math.sqrt(3.0) / 18.0 if order == 3 else 0.125
        with np.errstate(over="ignore"):
            return np.minimum(peak, np.exp(-(np.abs(z) - h)))
    if loss.name in ("squared", "smoothed-hinge"):
        return np.zeros_like(z)
    raise AssertionError(f"no derivative bound for the loss {loss.name!r}: add one to this test")


def off_kinks(loss: Loss, zm: np.ndarray, zp: np.ndarray, y: float) -> np.ndarray:
    lo, hi = np.minimum(y * zm, y * zp), np.maximum(y * zm, y * zp)
    keep = np.ones(zm.size, dtype=bool)
    for a in kinks(loss):
        keep &= ~((lo <= a) & (a <= hi))
    return keep


def ids(loss: Loss) -> str:
    return repr(loss)


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------

def test_every_scalar_loss_has_a_code_and_the_multiclass_ones_none():
    """A loss of ``LOSSES`` without a code would reach no kernel (``loss_code`` refuses it); a code
    without a loss would be dead.  Softmax (C × C curvature blocks) has its own kernels."""
    assert set(LOSS_CODES) == set(LOSSES)
    assert len(set(LOSS_CODES.values())) == len(LOSS_CODES)
    assert NO_CODE not in LOSS_CODES.values()
    for name, cls in MULTICLASS_LOSSES.items():
        with pytest.raises(ParameterError, match="compiled kernels evaluate"):
            loss_code(cls())


# ---------------------------------------------------------------------------------------------
# The compiled trio against the NumPy definitions
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loss", instances(), ids=ids)
def test_compiled_trio_equals_the_numpy_definitions(loss):
    for y in labels(loss):
        z = margins(loss, y)
        c = compiled(loss, z, y)
        yy = np.full(z.size, y)
        with np.errstate(over="ignore"):
            py = np.stack([loss.value(z, yy), loss.deriv(z, yy), loss.deriv2(z, yy)])
        scale = np.maximum(np.abs(c), np.abs(py))
        scale[2] = np.maximum(scale[2], curvature_scale(loss, z, y))
        for r, what in enumerate(("φ", "φ'", "φ''")):
            err = np.abs(c[r] - py[r])
            bad = ~(err <= BUDGET * scale[r] + TINY)
            assert not bad.any(), (f"{loss!r} y={y}: compiled {what} differs from the NumPy definition beyond "
                                   f"16 u at z = {z[bad][:5]}: {c[r][bad][:5]} vs {py[r][bad][:5]}")


@pytest.mark.parametrize("loss", instances(), ids=ids)
def test_derivatives_are_the_finite_differences_of_the_previous_function(loss):
    """φ' against the central difference of the compiled φ, φ'' against that of the compiled φ'."""
    for y in labels(loss):
        z = margins(loss, y)
        h = np.ldexp(1.0, np.frexp(np.maximum(1.0, np.abs(z)))[1] - 18)  # ≈ 2⁻¹⁷·|z|, a power of two
        zp, zm = z + h, z - h
        keep = off_kinks(loss, zm, zp, y)
        z, zp, zm, h = z[keep], zp[keep], zm[keep], h[keep]
        dz = zp - zm
        at, up, down = compiled(loss, z, y), compiled(loss, zp, y), compiled(loss, zm, y)
        for r, what in ((1, "φ'"), (2, "φ''")):
            f_up, f_down = up[r - 1], down[r - 1]
            fd = (f_up - f_down) / dz
            rounding = (2 * (BUDGET / 2 * np.maximum(np.abs(f_up), np.abs(f_down)) + TINY)
                        + U * np.abs(f_up - f_down)) / dz + 2 * U * np.abs(fd)
            # …and the rounding of the derivative compared, 8u of its scale (φ'': of σ(yz) for the logistic loss).
            own = np.maximum(np.abs(at[r]), curvature_scale(loss, z, y)) if r == 2 else np.abs(at[r])
            tol = derivative_bound(loss, z, y, h, r + 1) * h * h / 6.0 + rounding + BUDGET / 2 * own + TINY
            err = np.abs(fd - at[r])
            bad = ~(err <= tol)
            assert not bad.any(), (f"{loss!r} y={y}: {what} is not the finite difference at z = {z[bad][:5]}: "
                                   f"{at[r][bad][:5]} vs {fd[bad][:5]}")


# ---------------------------------------------------------------------------------------------
# An unknown code fails loudly wherever it could be dispatched
# ---------------------------------------------------------------------------------------------

@numba.njit
def _trio_at(code, z, y, gamma):
    return phi(code, z, y, gamma), dphi(code, z, y, gamma), d2phi(code, z, y, gamma)


@pytest.mark.parametrize("code", UNKNOWN)
def test_the_trio_gives_nan_for_an_unknown_code_never_another_loss(code):
    for z, y in ((0.3, 1.0), (-2.0, -1.0), (5.0, 1.0)):
        assert all(math.isnan(v) for v in _trio_at(code, z, y, 1.0))
        assert all(math.isnan(f(code, z, y, 1.0)) for f in (phi, dphi, d2phi))  # called from Python too


@pytest.mark.parametrize("code", UNKNOWN)
def test_the_dual_coordinate_step_gives_nan_for_a_loss_it_has_no_step_for(code):
    assert math.isnan(sdca_step(code, 0.2, 0.3, 1.0, 1.5, 1.0))


def test_the_dual_methods_take_exactly_the_losses_with_a_dual_step():
    for name in DUAL_LOSSES:
        b = sdca_step(LOSS_CODES[name], 0.2, 0.3, 1.0, 1.5, 1.0)
        assert math.isfinite(b), name
    for cls in (CoCoAPlus, CoCoA):
        assert set(cls.losses) == set(DUAL_LOSSES)


@pytest.mark.parametrize("code", UNKNOWN)
def test_the_python_boundaries_refuse_an_unknown_code(code):
    with pytest.raises(ParameterError, match="loss code"):
        check_code(code)
    z = np.linspace(-2, 2, 10)
    y = np.where(z > 0, 1.0, -1.0)
    with pytest.raises(ParameterError, match="loss code"):
        pernode._node_loss_sums(z, y, np.array([0, 4, 10]), code, 1.0, np.empty(2))
    B = sp.csr_matrix(np.eye(10)[:, :3])
    with pytest.raises(ParameterError, match="loss code"):
        _newton.solve_nodes(B, y, np.array([0, 10]), np.array([0, 3]), code, 1.0, 0.1, 0.0, np.zeros(3),
                            np.zeros(3), 1e-8)


@pytest.mark.parametrize("code", UNKNOWN)
def test_the_compiled_kernels_give_nan_for_an_unknown_code(code):
    """Behind the boundaries: the per-node loss sums and the personal Newton solver, called with a
    code directly, give NaN (no finite number they could be mistaken for)."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=20)
    y = np.where(rng.random(20) < 0.5, 1.0, -1.0)
    offsets = np.array([0, 7, 20], dtype=np.int64)
    for kernel in pernode._LOSS_SUMS:
        out = np.zeros(2)
        kernel(z, y, offsets, code, 1.0, out)
        assert np.isnan(out).all()
    X = sp.csr_matrix(rng.normal(size=(20, 3)))
    indptr, indices = X.indptr.astype(np.int64), X.indices.astype(np.int64)
    v = np.zeros(3)
    newton, residual, cg = _newton._solve_node(indptr, indices, X.data, y, 0, 20, 0, 3, code, 1.0, 0.1, 0.0,
                                               np.zeros(3), v, 1e-8)
    assert not np.isfinite(residual)  # the solver cannot report convergence
    assert math.isnan(_newton._value(code, 1.0, y, 0, z, v, v, 0.1, 0.0, 0.05))


class _Unregistered(Loss):
    """A scalar loss with no code (as a new loss added to losses.py only would be)."""

    name = "unregistered-huber"
    task = "regression"

    def value(self, z, y):
        r = np.abs(z - y)
        return np.where(r <= 1, 0.5 * r * r, r - 0.5)

    def deriv(self, z, y):
        return np.clip(z - y, -1.0, 1.0)

    def deriv2(self, z, y):
        return (np.abs(z - y) < 1).astype(float)


def test_a_loss_without_a_code_is_refused_by_every_algorithm_before_a_kernel_runs():
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.normal(size=(40, 5)))
    y = rng.normal(size=40)
    problem = Problem(FederatedDataset.from_assignment(X, y, np.arange(40) % 4), _Unregistered())
    with pytest.raises(ParameterError, match="compiled kernels evaluate"):
        loss_code(problem.loss)
    for name, cls in ALGORITHMS.items():
        with pytest.raises(ParameterError, match="unregistered-huber"):
            cls(problem, seed=0)
    # The evaluator's own losses take the loss's NumPy values when it has no code: right, not NaN.
    assert _compiled.LOSS_CODES.get(problem.loss.name) is None
    ev = pernode.NodeEvaluator(problem)
    w = rng.normal(size=5)
    z = problem.data.X @ w
    off = problem.data.offsets
    for k, got in enumerate(ev.node_loss(w, z) - 0.5 * problem.lam * (w @ w)):
        terms = problem.loss.value(z[off[k]:off[k + 1]], problem.y[off[k]:off[k + 1]])
        # Two summation orders of n_k terms: each within (n_k − 1)u Σ|φ_i| of the exact sum.
        n_k = terms.size
        assert abs(got - terms.sum() / n_k) <= 2 * (n_k - 1) * U * np.abs(terms).sum() / n_k + 4 * U * abs(got)
