"""The softmax optimum's Newton systems (issue 22, point 4): the dense Hessian and the block preconditioner
against a dense NumPy Hessian written from the definition, and both solvers against scikit-learn's
multinomial LogisticRegression."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression

from fedviz.data.dataset import FederatedDataset
from fedviz.problems import optimum
from fedviz.problems.losses import Softmax
from fedviz.problems.objective import Problem


def _problem(n=300, d=8, C=5, seed=0, lam=1e-3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.6) * np.geomspace(1, 30, d)  # features of many scales
    W = rng.normal(size=(d, C))
    y = np.argmax(X @ W + rng.gumbel(size=(n, C)), axis=1).astype(float)
    y[:C] = np.arange(C)
    ds = FederatedDataset.from_assignment(sp.csr_matrix(X), y, rng.integers(0, 4, n))
    return Problem(ds, Softmax(), lam)


def _hessian(p, w):
    """∇²f(w) = Σ_i (x_i x_iᵀ) ⊗ (diag p_i − p_i p_iᵀ) / n + λI, entry by class pair, rows j·C + c."""
    X = p.X.toarray()
    d, C = p.d, p.n_classes
    P = softmax(X @ w.reshape(d, C), axis=1)
    H = np.zeros((d, C, d, C))
    for c in range(C):
        for e in range(C):
            H[:, c, :, e] = X.T @ (X * (P[:, c] * ((c == e) - P[:, e]))[:, None]) / p.n
    return H.reshape(d * C, d * C) + p.lam * np.eye(d * C)


def test_the_dense_newton_step_solves_the_hessian_of_the_definition():
    p = _problem()
    w = np.random.default_rng(1).normal(scale=0.3, size=p.size)
    z = p.matvec(w)
    g = p.grad(w)
    D = p.loss.curvature(z, p.y, divisor=p.n)
    step = optimum._dense_newton_direction(p, D, g)
    H = _hessian(p, w)
    want = -np.linalg.solve(H, g)
    # Normwise, as the rounding bound is: both Hessians are sums of n rank-one terms (relative error up to
    # n·eps each entry) and both solves are backward stable (d·C·eps), so the two steps may differ by
    # κ(H)·(n + d·C)·eps of their norm, whatever the BLAS; an entry-wise rtol is not a bound (a small
    # entry of the step carries the whole system's error: 1.2e-9 relative on one entry on an AMD EPYC with AVX-512).
    bound = np.linalg.cond(H) * (p.n + p.size) * np.finfo(float).eps
    assert np.linalg.norm(step - want) <= bound * np.linalg.norm(want)
    assert bound < 1e-6  # the problem is well enough conditioned for the comparison to mean something


def test_the_block_preconditioner_is_each_features_diagonal_block():
    p = _problem(seed=2)
    w = np.random.default_rng(3).normal(scale=0.3, size=p.size)
    D = p.loss.curvature(p.matvec(w), p.y, divisor=p.n)
    M = optimum._BlockPreconditioner(p, D)
    H = _hessian(p, w)
    C = p.n_classes
    r = np.random.default_rng(4).normal(size=p.size)
    want = np.concatenate([np.linalg.solve(H[j * C:(j + 1) * C, j * C:(j + 1) * C], r[j * C:(j + 1) * C])
                           for j in range(p.d)])
    np.testing.assert_allclose(M.solve(r), want, rtol=1e-10)


@pytest.mark.parametrize("dense", [True, False])
def test_both_solvers_reach_scikit_learns_multinomial_optimum(dense, monkeypatch):
    p = _problem(n=400, d=12, C=6, seed=5, lam=1e-3)
    if not dense:  # a model too large for the dense Hessian: CG with the block preconditioner
        monkeypatch.setattr(optimum, "DENSE_MAX_SIZE", 0)
    opt = optimum.solve(p, use_cache=False)
    assert opt.grad_norm <= 1e-10
    assert (opt.dense_hessians == opt.newton_iterations and opt.hessian_products == 0) if dense else \
        (opt.dense_hessians == 0 and opt.hessian_products > 0)
    m = LogisticRegression(C=1.0 / p.lam, fit_intercept=False, tol=1e-14, max_iter=100_000)
    m.fit(p.X, p.y.astype(int), sample_weight=np.full(p.n, 1.0 / p.n))
    f_sk = p.value(p.flat(np.ascontiguousarray(m.coef_.T)))
    assert opt.objective == pytest.approx(f_sk, rel=1e-8)
    assert opt.objective <= f_sk * (1 + 1e-12)
