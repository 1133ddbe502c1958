"""Losses, objective and optimum against independent oracles: scipy's check_grad,
finite differences, numerical conjugates, and scikit-learn's solver."""


import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import check_grad, minimize_scalar

from problems import random_rows
from fedviz.data.dataset import FederatedDataset
from fedviz.problems.losses import LOSSES, Logistic, SmoothedHinge, Squared, make_loss
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve
from conftest import DATA

ALL_LOSSES = [Logistic(), Squared(), SmoothedHinge(1.0), SmoothedHinge(0.3)]


def _problem(loss, sparse, seed=0, n=60, d=8, lam=0.05):
    X, y, nodes = random_rows(n=n, d=d, density=0.5, seed=seed, regression=loss.task == "regression",
                              positive_rate=0.4)
    ds = FederatedDataset.from_assignment(sp.csr_matrix(X) if sparse else X, y, nodes)
    return Problem(ds, loss, lam), X, y


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=repr)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_gradient_matches_finite_differences(loss, sparse):
    problem, _, _ = _problem(loss, sparse)
    rng = np.random.default_rng(1)
    for _ in range(3):
        w = rng.normal(size=problem.d)
        err = check_grad(problem.value, problem.grad, w)
        assert err < 1e-6 * max(1.0, np.linalg.norm(problem.grad(w)))


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=repr)
def test_derivatives_match_finite_differences(loss):
    rng = np.random.default_rng(2)
    z = rng.normal(scale=2, size=200)
    y = rng.normal(size=200) if loss.task == "regression" else np.where(rng.random(200) < 0.5, 1.0, -1.0)
    h = 1e-6
    fd1 = (loss.value(z + h, y) - loss.value(z - h, y)) / (2 * h)
    np.testing.assert_allclose(loss.deriv(z, y), fd1, atol=1e-7)
    fd2 = (loss.deriv(z + h, y) - loss.deriv(z - h, y)) / (2 * h)
    # The smoothed hinge's φ'' jumps at the kinks: compare away from them.
    if isinstance(loss, SmoothedHinge):
        a = y * z
        keep = (np.abs(a - 1) > 1e-3) & (np.abs(a - 1 + loss.gamma) > 1e-3)
    else:
        keep = np.ones_like(z, dtype=bool)
    np.testing.assert_allclose(loss.deriv2(z, y)[keep], fd2[keep], atol=1e-6)
    # The smoothness constant bounds φ'' everywhere.
    assert np.all(loss.deriv2(z, y) <= loss.smoothness + 1e-15)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=repr)
def test_conjugate_is_the_numerical_supremum(loss):
    rng = np.random.default_rng(3)
    for _ in range(12):
        y = rng.normal() if loss.task == "regression" else rng.choice([-1.0, 1.0])
        # A u in the conjugate's domain: u = φ'(z) for some z.
        u = float(loss.deriv(np.array([rng.normal(scale=2)]), y)[0])
        res = minimize_scalar(lambda z: -(u * z - float(loss.value(np.array([z]), y)[0])),
                              bounds=(-60, 60), method="bounded", options={"xatol": 1e-10})
        assert float(loss.conjugate(np.array([u]), y)[0]) == pytest.approx(-res.fun, abs=1e-6)
    if loss.task == "classification":
        # Outside [0, 1] for b = −u y the conjugate is +inf.
        assert np.isinf(loss.conjugate(np.array([0.5]), 1.0)[0])
        assert np.isinf(loss.conjugate(np.array([-1.5]), 1.0)[0])


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=repr)
def test_fenchel_young_equality(loss):
    rng = np.random.default_rng(4)
    z = rng.normal(scale=3, size=100)
    y = rng.normal(size=100) if loss.task == "regression" else np.where(rng.random(100) < 0.5, 1.0, -1.0)
    u = loss.deriv(z, y)
    np.testing.assert_allclose(loss.value(z, y) + loss.conjugate(u, y), z * u, atol=1e-9)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=repr)
def test_hessian_vector_product_matches_gradient_differences(loss):
    problem, _, _ = _problem(loss, True)
    rng = np.random.default_rng(5)
    w, v = rng.normal(size=problem.d), rng.normal(size=problem.d)
    h = 1e-6
    fd = (problem.grad(w + h * v) - problem.grad(w - h * v)) / (2 * h)
    np.testing.assert_allclose(problem.hessp(problem.curvature(w), v), fd, atol=1e-5)


def test_objective_equals_dense_reference():
    problem, X, y = _problem(Logistic(), True, lam=0.1)
    w = np.random.default_rng(6).normal(size=problem.d)
    # Rows are reordered by node inside the data set; the objective is order-free.
    ref = np.mean([np.log1p(np.exp(-yi * xi @ w)) for xi, yi in zip(X, y)]) + 0.05 * w @ w
    assert problem.value(w) == pytest.approx(ref, rel=1e-13)


def test_node_gradients_average_to_the_full_gradient():
    """Eqs. (6)-(7): f = Σ_k (n_k/n) F_k, so Σ_k (n_k/n) ∇F_k = ∇f."""
    problem, _, _ = _problem(Logistic(), True)
    w = np.random.default_rng(7).normal(size=problem.d)
    G = problem.node_grads_data(w).toarray()
    weights = problem.data.node_sizes / problem.n
    np.testing.assert_allclose(weights @ G + problem.lam * w, problem.grad(w), atol=1e-14)


def test_smoothness_upper_bounds_the_hessian():
    problem, X, _ = _problem(Squared(), False)
    H = X.T @ X / problem.n + problem.lam * np.eye(problem.d)
    lmax = np.linalg.eigvalsh(H)[-1]
    assert lmax <= problem.smoothness <= 1.02 * lmax


def test_make_loss_rejects_unknown_names():
    with pytest.raises(ValueError, match="loss='hinge'.*logistic"):
        make_loss("hinge")
    assert set(LOSSES) == {"logistic", "squared", "smoothed-hinge"}


def test_classification_loss_refuses_real_labels():
    ds = FederatedDataset.from_assignment(sp.csr_matrix(np.eye(3)), [0.5, 1.0, -1.0], [0, 0, 1])
    with pytest.raises(ValueError, match="labels are not ±1"):
        Problem(ds, "logistic")


def test_lam_must_be_positive():
    ds = FederatedDataset.from_assignment(sp.csr_matrix(np.eye(3)), [1.0, 1.0, -1.0], [0, 0, 1])
    with pytest.raises(ValueError, match=r"lam=0\.0.*> 0"):
        Problem(ds, "logistic", 0.0)


# -- the optimum ------------------------------------------------------------------------------

def test_optimum_matches_scikit_learn_on_a9a():
    """The issue's acceptance figure: f* = 0.32337958246 on a9a with λ = 1/n, no intercept."""
    from sklearn.datasets import load_svmlight_file
    from sklearn.linear_model import LogisticRegression

    X, y = load_svmlight_file(DATA / "a9a")
    ds = FederatedDataset.from_assignment(X, y, np.zeros(X.shape[0], dtype=int))
    problem = Problem(ds, "logistic")
    opt = solve(problem, use_cache=False)
    assert opt.grad_norm <= 1e-10
    clf = LogisticRegression(C=1.0 / (problem.lam * problem.n), fit_intercept=False,
                             tol=1e-12, max_iter=10_000).fit(X, y)
    f_sk = problem.value(clf.coef_.ravel())
    assert opt.objective == pytest.approx(f_sk, rel=1e-8)
    assert opt.objective <= f_sk + 1e-15
    assert opt.objective == pytest.approx(0.32337958246, rel=1e-10)
    assert opt.train_error == pytest.approx(np.mean(clf.predict(X) != y), abs=1e-4)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=repr)
def test_optimum_certificate(loss):
    """First-order optimality: ∇f(w*) = 0, and f(w*) ≤ f at random nearby points."""
    problem, _, _ = _problem(loss, True, n=300, d=20, lam=1e-3)
    opt = solve(problem, use_cache=False)
    assert opt.grad_norm <= 1e-10
    assert np.linalg.norm(problem.grad(opt.w)) <= 1e-10
    rng = np.random.default_rng(8)
    for _ in range(5):
        assert problem.value(opt.w + 1e-3 * rng.normal(size=problem.d)) >= opt.objective


def test_ridge_optimum_solves_the_normal_equations():
    problem, X, y = _problem(Squared(), False, n=100, d=10)
    Xs, ys = problem.X.toarray(), problem.y
    w_ref = np.linalg.solve(Xs.T @ Xs / problem.n + problem.lam * np.eye(problem.d), Xs.T @ ys / problem.n)
    np.testing.assert_allclose(solve(problem, use_cache=False).w, w_ref, atol=1e-10)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_optimum_of_a_real_file_reaches_its_certificate(loss):
    """heart_scale (270 rows, 13 features, λ = 1/n): Newton-CG's inexact steps took ‖∇f‖ to 3.3e-10, where
    the decrease a step promises (1e-19) is below f's rounding; Armijo's test then passed at whatever t the
    halving reached and the squared loss stalled there for 100 steps ('the optimum did not converge').
    The optimum must reach ‖∇f‖ ≤ 1e-10 and, for the squared loss, the normal equations' solution."""
    from fedviz.data.build import DataSpec, build

    ds = build(DataSpec(source=str(DATA / "heart_scale"), partition="iid", nodes=100, seed=0))
    problem = Problem(ds, loss, None)
    opt = solve(problem, use_cache=False)
    assert opt.grad_norm <= 1e-10 and np.linalg.norm(problem.grad(opt.w)) <= 1e-10
    if loss == "squared":
        X, y = ds.X.toarray(), ds.y
        w_ref = np.linalg.solve(X.T @ X / problem.n + problem.lam * np.eye(problem.d), X.T @ y / problem.n)
        np.testing.assert_allclose(opt.w, w_ref, rtol=0, atol=1e-10 * np.linalg.norm(w_ref))


def test_optimum_is_cached_per_problem():
    problem, _, _ = _problem(Logistic(), True)
    assert solve(problem) is solve(problem)
    other = Problem(problem.data, "logistic", problem.lam * 2)
    assert solve(other) is not solve(problem)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=repr)
@pytest.mark.parametrize("n", [300, 60_000])  # below and above the fused kernel's threshold
def test_value_grad_error_equals_the_separate_evaluations(loss, n):
    rng = np.random.default_rng(9)
    X = sp.random(n, 15, density=0.3, random_state=1, format="csr")
    y = rng.normal(size=n) if loss.task == "regression" else np.where(rng.random(n) < 0.4, 1.0, -1.0)
    problem = Problem(FederatedDataset.from_assignment(X, y, rng.integers(0, 5, n)), loss, 1e-3)
    w = rng.normal(size=15)
    w[0] = 0.0
    z = problem.X @ w
    z[:7] = 0.0  # ties predict -1
    f, g, err = problem.value_grad_error(w, z)
    assert f == pytest.approx(float(np.mean(loss.value(z, problem.y)) + 0.5e-3 * w @ w), rel=1e-12)
    np.testing.assert_allclose(g, problem.X.T @ (loss.deriv(z, problem.y) / n) + 1e-3 * w, rtol=1e-12,
                               atol=1e-15)
    assert err == pytest.approx(problem.train_error(w, z), abs=1e-15)


# -- products on every core (fedviz.problems._blocks) ---------------------------------------------
def _random_csr(n, d, per_row, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.poisson(per_row, size=n)  # unequal rows, some empty
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(d, size=k, replace=False)) for k in lengths] + [np.empty(0, int)])
    return sp.csr_matrix((rng.normal(size=indptr[-1]), indices.astype(np.int32), indptr), shape=(n, d))


@pytest.mark.parametrize("n, d, per_row", [(40_000, 300, 12), (5_000, 50_000, 40), (0, 10, 1), (3, 4, 2)])
def test_row_blocks_match_scipy_and_a_dense_reference(n, d, per_row):
    from fedviz.problems import _blocks

    X = _random_csr(n, d, per_row, seed=n + d)
    blocks = _blocks.RowBlocks(X)
    assert blocks.rows[0] == 0 and blocks.rows[-1] == n and np.all(np.diff(blocks.rows) >= 0)
    rng = np.random.default_rng(0)
    w, r = rng.normal(size=d), rng.normal(size=n)
    # X w is summed row by row in SciPy's order: equal bit for bit.
    assert np.array_equal(blocks.matvec(w), X @ w)
    dense = X.toarray()
    np.testing.assert_allclose(blocks.rmatvec(r), dense.T @ r, rtol=1e-12, atol=1e-12 * max(1, np.abs(r).sum()))


@pytest.mark.parametrize("values", ["ones", "float32", "float64"])
@pytest.mark.parametrize("d", [300, 70_000])
def test_row_blocks_store_x_compactly_and_exactly(values, d):
    """Indices narrowed to uint16 (d ≤ 65,536) or uint32, values to nothing (all 1) or float32
    when exact: the products are SciPy's to the last bit all the same."""
    from fedviz.problems import _blocks

    X = _random_csr(30_000, d, 15, seed=d)
    if values == "ones":
        X.data[:] = 1.0
    elif values == "float32":
        X.data = X.data.astype(np.float32).astype(np.float64)
    blocks = _blocks.RowBlocks(X)
    assert blocks.n_blocks > 1
    assert blocks._indices.dtype == (np.uint16 if d <= 1 << 16 else np.uint32)
    assert (blocks._data is None) if values == "ones" else blocks._data.dtype == np.dtype(values)
    rng = np.random.default_rng(0)
    w, r = rng.normal(size=d), rng.normal(size=X.shape[0])
    assert np.array_equal(blocks.matvec(w), X @ w)
    np.testing.assert_allclose(blocks.rmatvec(r), X.T @ r, rtol=1e-12, atol=1e-12 * np.abs(r).sum())


@pytest.mark.parametrize("scale", [1e-9, 1.0, 30.0, 700.0])
def test_fused_logistic_kernel_matches_exactly_summed_reference(scale):
    """The compiled Σ log(1 + e^{−yz}), −y σ(−yz) and error count against NumPy's logaddexp and
    expit summed exactly (math.fsum), over margins from tiny to overflowing; the sum does not
    depend on the thread count."""
    import numba
    from scipy.special import expit

    rng = np.random.default_rng(7)
    n = 200_003  # above the kernel's threshold, not a multiple of its chunk
    z = rng.normal(size=n) * scale
    z[:5] = [0.0, -0.0, 1e-300, -745.0, 745.0]
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    loss = Logistic()
    before = numba.get_num_threads()
    try:
        out = []
        for threads in (1, before):
            numba.set_num_threads(threads)
            out.append(loss.value_deriv(z, y))
    finally:
        numba.set_num_threads(before)
    (total, d, errors), (total2, d2, errors2) = out
    assert total == total2 and np.array_equal(d, d2) and errors == errors2
    reference = math.fsum(np.logaddexp(0.0, -y * z))
    assert total == pytest.approx(reference, rel=1e-15)
    np.testing.assert_allclose(d, -y * expit(-y * z), rtol=1e-15, atol=1e-300)  # a few ulps
    assert errors == np.count_nonzero((z > 0) != (y > 0))


def test_row_blocks_are_set_by_the_matrix_and_results_do_not_depend_on_threads():
    import numba

    from fedviz.problems import _blocks

    X = _random_csr(60_000, 2_000, 20, seed=3)
    assert X.nnz >= 8 * _blocks.MIN_BLOCK_NNZ  # the test must exercise MAX_BLOCKS blocks
    blocks = _blocks.RowBlocks(X)
    assert blocks.n_blocks == _blocks.MAX_BLOCKS
    # Blocks hold about equal nonzeros (within one row of the ideal split).
    per_block = np.diff(X.indptr[blocks.rows])
    assert per_block.max() - per_block.min() <= 2 * np.diff(X.indptr).max()
    rng = np.random.default_rng(1)
    w, r = rng.normal(size=X.shape[1]), rng.normal(size=X.shape[0])
    before = numba.get_num_threads()
    try:
        results = []
        for threads in (1, before):
            numba.set_num_threads(threads)
            results.append((blocks.matvec(w), blocks.rmatvec(r)))
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(results[0][0], results[1][0]) and np.array_equal(results[0][1], results[1][1])


def test_objective_gradient_and_hessian_through_blocks(monkeypatch):
    """The Problem's f, ∇f and ∇²f v with X split into blocks agree with a dense transcription."""
    from fedviz.problems import _blocks

    monkeypatch.setattr(_blocks, "MIN_BLOCK_NNZ", 10)
    problem, X, y = _problem(Logistic(), True, n=400, d=30)
    assert problem.blocks.n_blocks > 1
    rng = np.random.default_rng(2)
    w, v = rng.normal(size=problem.d), rng.normal(size=problem.d)
    Xd = problem.X.toarray()  # rows grouped by node, as the problem holds them
    yd = problem.y
    z = Xd @ w
    s = 1 / (1 + np.exp(yd * z))
    f = np.mean(np.logaddexp(0, -yd * z)) + 0.5 * problem.lam * w @ w
    g = Xd.T @ (-yd * s) / problem.n + problem.lam * w
    f2, g2, _ = problem.value_grad_error(w)
    assert f2 == pytest.approx(f, rel=1e-13)
    np.testing.assert_allclose(g2, g, rtol=1e-12, atol=1e-15)
    D = problem.curvature(w)
    np.testing.assert_allclose(problem.hessp(D, v), Xd.T @ (s * (1 - s) * (Xd @ v)) / problem.n + problem.lam * v,
                               rtol=1e-12, atol=1e-15)


def test_blas_gets_the_thread_count_fedviz_sets(monkeypatch):
    """One BLAS thread unless FEDVIZ_BLAS_THREADS says otherwise; a bad value names the variable."""
    from threadpoolctl import threadpool_info

    from fedviz.errors import ParameterError
    from fedviz.problems import _cores

    def counts():
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    try:
        monkeypatch.setenv("FEDVIZ_BLAS_THREADS", "2")
        _cores.single_threaded_blas()
        assert counts() == {2}
        monkeypatch.delenv("FEDVIZ_BLAS_THREADS")
        _cores.single_threaded_blas()
        assert counts() == {1}
        monkeypatch.setenv("FEDVIZ_BLAS_THREADS", "zero")
        with pytest.raises(ParameterError, match="FEDVIZ_BLAS_THREADS"):
            _cores.single_threaded_blas()
    finally:
        monkeypatch.delenv("FEDVIZ_BLAS_THREADS", raising=False)
        _cores.single_threaded_blas()


def test_openmp_threads_sleep_when_idle_unless_the_user_chose():
    """fedviz sets OMP_WAIT_POLICY=PASSIVE at import (fedviz/__init__.py; why: fedviz.problems._cores), and
    leaves a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT alone.  Each case in a fresh process: the
    variable only matters before numba starts its OpenMP threads."""
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    script = "import os, fedviz; print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"
    for extra, expected in (({}, "PASSIVE None"), ({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE None"),
                            ({"GOMP_SPINCOUNT": "300000"}, "None 300000")):
        r = subprocess.run([sys.executable, "-c", script], env={**base, **extra}, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split("\n")[0] == expected, (extra, r.stdout)
