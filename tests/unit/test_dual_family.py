"""The dual family: CoCoA+/CoCoA and the Appendix's primal and dual methods (Algorithms 5 and 6).

Oracles: dense NumPy transcriptions of the pseudo-code (CoCoA+'s local SDCA with the
paper's X_k, Algorithm 5 with d × d solves, eq. (15) with explicit ∇ξ), brentq and
bounded scalar maximisation for the coordinate steps, the Appendix's Theorem 1 and
Lemma 1 as exact identities, weak duality, and w* from Newton-CG or a dense ridge solve.
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import brentq, minimize_scalar

from problems import sparse_problem
from fedviz.algorithms._batches import CHUNKS, chunk_bounds, plan
from fedviz.algorithms import _sdca_kernels as sdca_kernels
from fedviz.algorithms._sdca_kernels import NodeBlocks, node_permutations, sdca_step
from fedviz.problems._compiled import LOSS_CODES
from fedviz.algorithms.base import StopRequested
from fedviz.algorithms.cocoa import CoCoA
from fedviz.algorithms.cocoa_plus import CoCoAPlus
from fedviz.algorithms.dual_method import DualMethod
from fedviz.algorithms.primal_method import PrimalMethod
from fedviz.data.dataset import FederatedDataset
from fedviz.errors import ParameterError
from fedviz.problems.losses import SmoothedHinge, make_loss
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve

LOSSES = ["logistic", "squared", "smoothed-hinge"]


# ---------------------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------------------
def _problem(loss="logistic", n=240, d=20, K=6, lam=1e-2, seed=0, partition="noniid", density=0.3):
    """A small sparse problem (:func:`problems.sparse_problem`, this module's sizes)."""
    return sparse_problem(loss, n=n, d=d, K=K, lam=lam, seed=seed, partition=partition, density=density)


# ---------------------------------------------------------------------------------------
# Dense references, written from the definitions
# ---------------------------------------------------------------------------------------
def _xlogx(b):
    return np.where(b > 0, b * np.log(np.where(b > 0, b, 1.0)), 0.0)


def _phi(loss, z, y):
    if loss.name == "squared":
        return 0.5 * (z - y) ** 2
    a = y * z
    if loss.name == "logistic":
        return np.log1p(np.exp(-a))
    g = loss.gamma
    return np.where(a >= 1, 0.0, np.where(a <= 1 - g, 1 - a - g / 2, (1 - a) ** 2 / (2 * g)))


def _conj_neg(loss, alpha, y):
    """φ*(−α); the data of these tests keep α y inside the domain."""
    if loss.name == "squared":
        return 0.5 * alpha ** 2 - alpha * y
    b = alpha * y
    assert np.all((b >= -1e-15) & (b <= 1 + 1e-15))
    if loss.name == "logistic":
        return _xlogx(b) + _xlogx(1 - b)
    return -b + 0.5 * loss.gamma * b * b


def _coordinate_argmax(loss, a, z, y, q):
    """argmax_δ −φ*(−(a + δ)) − zδ − (q/2)δ², from the first-order condition."""
    if loss.name == "squared":
        # −(a + δ) + y − z − qδ = 0
        return (y - z - a) / (1 + q)
    b0 = a * y
    if loss.name == "smoothed-hinge":
        # In b = (a + δ)y ∈ [0, 1]: maximise b − γb²/2 − zy(b − b0) − q(b − b0)²/2, a concave quadratic.
        b = (1 - z * y + q * b0) / (loss.gamma + q)
        return y * (min(max(b, 0.0), 1.0) - b0)
    # Logistic: log((1 − b)/b) − zy − q(b − b0) = 0 on (0, 1), decreasing in b.
    g = lambda b: math.log1p(-b) - math.log(b) - z * y - q * (b - b0)  # noqa: E731
    b = brentq(g, 1e-300, 1 - 2**-53, xtol=1e-300, rtol=1e-15, maxiter=500)
    return y * (b - b0)


def _reference_cocoa_step(p, alpha, w, orders, sigma_p, gamma):
    """One CoCoA+ iteration (Ma et al. 2015, Algorithm 1 with local SDCA), dense and plain."""
    Xd, y, lam_n = p.X.toarray(), p.y, p.lam * p.n
    alpha_new, w_new = alpha.copy(), w.copy()
    for order in orders:
        dalpha, dw = np.zeros(p.n), np.zeros(p.d)
        for rows in order:
            for i in rows:
                x = Xd[i]
                z = x @ (w + sigma_p * dw)
                delta = _coordinate_argmax(p.loss, alpha[i] + dalpha[i], z, y[i], sigma_p * (x @ x) / lam_n)
                dalpha[i] += delta
                dw += delta * x / lam_n
        alpha_new += gamma * dalpha
        w_new += gamma * dw
    return alpha_new, w_new


def _reference_primal_method(p, alpha0, sigma, iterations):
    """Algorithm 5 literally: dense g_k, d × d local solves with F_k of eq. (12)."""
    Xd, y, lam, n, K = p.X.toarray(), p.y, p.lam, p.n, p.data.n_nodes
    sl = [p.data.node_slice(k) for k in range(K)]
    eta = K / sigma
    mu = lam * (eta - 1)
    w = Xd.T @ alpha0 / (lam * n)
    g = [eta * (K / n * Xd[s].T @ alpha0[s] - lam * w) for s in sl]

    def grad_Fk(k, v):  # eq. (18)
        return K / n * Xd[sl[k]].T @ (Xd[sl[k]] @ v - y[sl[k]]) + lam * v

    ws, gs = [w], [g]
    for _ in range(iterations):
        wk = []
        for k, s in enumerate(sl):
            a = grad_Fk(k, w) - (eta * grad_Fk(k, w) + g[k])
            # argmin F_k(v) − aᵀv + (μ/2)‖v − w‖²: its gradient is linear in v.
            H = K / n * Xd[s].T @ Xd[s] + (lam + mu) * np.eye(p.d)
            wk.append(np.linalg.solve(H, K / n * Xd[s].T @ y[s] + a + mu * w))
        w_new = np.mean(wk, axis=0)
        g = [g[k] + lam * eta * (wk[k] - w_new) for k in range(K)]
        w = w_new
        ws.append(w)
        gs.append(g)
    return ws, gs


def _reference_dual_method(p, alpha0, sigma, iterations):
    """Algorithm 6 literally: h_k = argmin D_k^t(u) of eq. (15), squared loss, dense."""
    Xd, y, lam, n, K = p.X.toarray(), p.y, p.lam, p.n, p.data.n_nodes
    alpha = alpha0.copy()
    ws = [Xd.T @ alpha / (lam * n)]
    for _ in range(iterations):
        grad_xi = Xd @ (Xd.T @ alpha)  # ∇ξ(α) = XᵀXα in the paper's d × n notation
        h = np.empty(n)
        for k in range(K):
            s = p.data.node_slice(k)
            # ∇D_k^t(u) = ∇_kξ/(λn²) + σ X_kᵀX_k u/(λn²) + (α_k + u − y_k)/n = 0
            M = sigma / (lam * n) * Xd[s] @ Xd[s].T + np.eye(s.stop - s.start)
            h[s] = np.linalg.solve(M, y[s] - alpha[s] - grad_xi[s] / (lam * n))
        alpha = alpha + h
        ws.append(Xd.T @ alpha / (lam * n))
    return ws


def _duality_gap_reference(p, w, alpha):
    Xd = p.X.toarray()
    primal = np.mean(_phi(p.loss, Xd @ w, p.y)) + 0.5 * p.lam * w @ w
    v = Xd.T @ alpha / (p.lam * p.n)
    dual = -0.5 * p.lam * v @ v - np.mean(_conj_neg(p.loss, alpha, p.y))
    return primal - dual


def _feasible_alpha(p, rng):
    if p.loss.name == "squared":
        return rng.normal(size=p.n)
    return p.y * rng.uniform(0.05, 0.95, size=p.n)


def _close(a, b, tol):
    scale = max(1.0, float(np.max(np.abs(b))))
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * scale)


# ---------------------------------------------------------------------------------------
# The SDCA coordinate step and the local solver
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", [make_loss("logistic"), make_loss("squared"), SmoothedHinge(1.0),
                                  SmoothedHinge(0.3)], ids=repr)
def test_sdca_step_maximises_the_coordinate_objective(loss):
    """Against bounded Brent maximisation of −φ*(−(a+δ)) − zδ − qδ²/2 with the library's φ*."""
    rng = np.random.default_rng(1)
    gamma = getattr(loss, "gamma", 1.0)
    for _ in range(60):
        y = rng.normal() if loss.task == "regression" else rng.choice([-1.0, 1.0])
        a = rng.normal() if loss.task == "regression" else y * rng.choice([0.0, rng.uniform(), 1.0])
        z, q = 3 * rng.normal(), 10 ** rng.uniform(-3, 3)
        delta = sdca_step(LOSS_CODES[loss.name], a, z, y, q, gamma) - a

        def obj(d):
            return float(-loss.conjugate(-(a + d), y) - z * d - 0.5 * q * d * d)

        assert math.isfinite(obj(delta))
        if loss.task == "regression":
            lo, hi = delta - 10, delta + 10
        else:  # δ keeps (a + δ) y in [0, 1]
            lo, hi = sorted((-a, y - a))
        best = minimize_scalar(lambda d: -obj(d), bounds=(lo, hi), method="bounded",
                               options={"xatol": 1e-12})
        assert obj(delta) >= -best.fun - 1e-12
        if loss.name == "logistic":
            b = (a + delta) * y
            assert 0 < b < 1  # strictly inside the domain


@pytest.mark.parametrize("loss", [make_loss("logistic"), make_loss("squared"), SmoothedHinge(0.5)], ids=repr)
@pytest.mark.parametrize("cls", [CoCoAPlus, CoCoA])
def test_cocoa_matches_a_dense_reference(loss, cls):
    """Same permutations, three iterations of two local passes each, from a random feasible α0."""
    p = _problem(loss, n=120, d=15, K=4, partition="noniid", seed=3)
    alpha0 = _feasible_alpha(p, np.random.default_rng(5))
    algo = cls(p, alpha0=alpha0, seed=11, local_passes=2)
    K = p.data.n_nodes
    gamma, sigma_p = (1.0, K) if cls is CoCoAPlus else (1.0 / K, 1.0)
    assert (algo.aggregation, algo.sigma_prime) == (gamma, sigma_p)
    alpha = alpha0.copy()
    w = p.X.toarray().T @ alpha / (p.lam * p.n)
    _close(algo.w, w, 1e-12)
    for _ in range(3):
        orders = algo.visit_orders()
        alpha, w = _reference_cocoa_step(p, alpha, w, orders, sigma_p, gamma)
        algo.step()
        _close(algo.alpha, alpha, 1e-12)
        _close(algo.w, w, 1e-12)
    assert algo.rounds == 3 and algo.vectors_up == 3 * K and algo.grad_evals == 3 * 2 * p.n


@pytest.mark.parametrize("loss", ["logistic", "smoothed-hinge"])
def test_threaded_batched_kernel_matches_the_dense_reference(loss, monkeypatch):
    """Small problems run on one thread in one batch; force the paper-scale path (nodes in
    several batches, each split into the fixed CHUNKS chunks the threads share) and compare again."""
    import fedviz.algorithms.cocoa_plus as cp

    monkeypatch.setattr(cp, "_PARALLEL_MIN_WORK", 0)
    monkeypatch.setattr(cp, "_BATCH_WORK", 40)
    p = _problem(loss, n=320, d=15, K=32, partition="iid", seed=6)  # four nodes a chunk
    algo = CoCoAPlus(p, local_passes=2)
    assert len(algo._batches) >= 3 and algo._n_chunks == CHUNKS
    alpha, w = np.zeros(p.n), np.zeros(p.d)
    for _ in range(2):
        alpha, w = _reference_cocoa_step(p, alpha, w, algo.visit_orders(), p.data.n_nodes, 1.0)
        algo.step()
        _close(algo.alpha, alpha, 1e-12)
        _close(algo.w, w, 1e-12)
    # Stop between two batches: the iteration is discarded, α and w are untouched.
    calls, alpha, w = [], algo.alpha.copy(), algo.w.copy()
    algo.stop_requested = lambda: calls.append(1) or len(calls) >= 2
    with pytest.raises(StopRequested):
        algo.step()
    assert len(calls) == 2 and np.array_equal(algo.alpha, alpha) and np.array_equal(algo.w, w)


@pytest.mark.parametrize("cls", [CoCoAPlus, CoCoA])
def test_iterates_do_not_depend_on_the_batch_size(cls, monkeypatch):
    """Batches only set how often Stop is checked: the chunks, and so the order in which
    each thread's accumulator sums its nodes, are the same for every batch size, so the
    iterates are bitwise equal."""
    import fedviz.algorithms.cocoa_plus as cp

    monkeypatch.setattr(cp, "_PARALLEL_MIN_WORK", 0)
    p = _problem("logistic", n=400, d=15, K=40, partition="iid", seed=8)  # five nodes a chunk
    runs = []
    for target in (1e18, 2000, 1):
        monkeypatch.setattr(cp, "_BATCH_WORK", target)
        algo = cls(p, seed=1, local_passes=2)
        for _ in range(2):
            algo.step()
        runs.append((algo.alpha.copy(), algo.w.copy(), len(algo._batches)))
    (a1, w1, b1), (a2, w2, b2), (a3, w3, b3) = runs
    assert b1 == 1 < b2 < b3
    assert np.array_equal(a1, a2) and np.array_equal(a1, a3)
    assert np.array_equal(w1, w2) and np.array_equal(w1, w3)


def test_logistic_dual_iterates_stay_strictly_inside_the_domain():
    """α_i y_i ∈ (0, 1) after every round, even with λ tiny, far-away points (b_i → 0) and
    outliers with flipped labels."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    X[:, 0] *= 30
    y = np.sign(X[:, 0])
    far = np.argsort(-np.abs(X[:, 0]))[:4]
    y[far] *= -1
    p = Problem(FederatedDataset.from_assignment(sp.csr_matrix(X), y, rng.integers(0, 4, 200)),
                "logistic", 1e-6)
    algo = CoCoAPlus(p, local_passes=3)
    for _ in range(20):
        algo.step()
        b = algo.alpha * p.y
        assert np.all((b > 0) & (b < 1))
        assert np.isfinite(algo.duality_gap) and algo.duality_gap >= -1e-12
    assert b.min() < 1e-100  # tiny b survive (computing a + δ would round them to 0)


@pytest.mark.parametrize("s", [-800.0, -40.0, -36.0, -5.0, 0.0, 5.0, 36.0, 40.0, 800.0])
def test_logistic_coordinate_step_stays_strictly_inside_at_extreme_margins(s):
    """The new b = α_i y_i lies in (0, 1) and solves the optimality condition wherever it is
    representable, for margins far beyond where σ(·) saturates."""
    for q in (0.0, 1e-6, 1.0, 1e6):
        for b0 in (0.0, 1e-300, 0.5, 1 - 2**-53, 1.0):
            for y in (-1.0, 1.0):
                b = sdca_step(LOSS_CODES["logistic"], y * b0, s * y, y, q, 1.0) * y
                assert 0.0 < b < 1.0
                if 1e-300 < b < 1 - 1e-15:  # away from the clamps: log(b/(1−b)) + s + q(b − b0) = 0
                    scale = 1 + abs(s) + q
                    assert abs(math.log(b) - math.log1p(-b) + s + q * (b - b0)) <= 1e-13 * scale


def test_visit_orders_are_reproducible_per_node_permutations():
    p = _problem(n=200, K=5, partition="iid")
    a, b = CoCoAPlus(p, seed=4, local_passes=3), CoCoAPlus(p, seed=4, local_passes=3)
    orders = a.visit_orders()
    for k, order in enumerate(orders):
        s = p.data.node_slice(k)
        assert order.shape == (3, s.stop - s.start)
        for rows in order:
            assert sorted(rows) == list(range(s.start, s.stop))
        assert not all(np.array_equal(order[0], r) for r in order[1:])  # fresh order each pass
    assert all(np.array_equal(x, y) for x, y in zip(orders, b.visit_orders()))
    a.step()
    assert not all(np.array_equal(x, y) for x, y in zip(orders, a.visit_orders()))  # new iteration
    assert np.array_equal(node_permutations(np.uint64(7), 5, 2), node_permutations(np.uint64(7), 5, 2))


def test_same_seed_same_iterates_and_other_seeds_differ():
    p = _problem()
    runs = []
    for seed in (0, 0, 1):
        algo = CoCoAPlus(p, seed=seed)
        for _ in range(3):
            algo.step()
        runs.append(algo.w.copy())
    assert np.array_equal(runs[0], runs[1])
    assert not np.allclose(runs[0], runs[2])


def _walk(batches, n_chunks, steps=None):
    """Replay a plan: per chunk, the (node, step) units in the order the batches visit them."""
    seen = [[] for _ in range(n_chunks)]
    for lo, hi in batches:
        assert lo.shape == hi.shape == (n_chunks, 2)
        for c in range(n_chunks):
            k, g = lo[c]
            while (k, g) < tuple(hi[c]):
                total = 1 if steps is None else max(int(steps[k]), 1)
                assert 0 <= g < total
                seen[c].append((k, g))
                k, g = (k, g + 1) if g + 1 < total else (k + 1, 0)
    return seen


@pytest.mark.parametrize("mid_node", [False, True], ids=["whole-nodes", "mid-node"])
def test_plan_visits_every_unit_once_in_fixed_chunks(mid_node):
    """Whatever the target, every node (and every step of it, when batches may cut inside
    a node) is visited exactly once, in order, by the same chunk: the chunks, and so the
    order of every sum, do not depend on the batch size."""
    rng = np.random.default_rng(0)
    K, C = 37, 3
    steps = rng.integers(0, 9, size=K) if mid_node else None
    work = rng.integers(1, 100, size=K).astype(float)
    if mid_node:
        work = work + 10.0 * steps
    bounds = chunk_bounds(work, C)
    assert bounds[0] == 0 and bounds[-1] == K and np.all(np.diff(bounds) >= 0)
    expect = [[(k, g) for k in range(bounds[c], bounds[c + 1])
               for g in range(1 if steps is None else max(int(steps[k]), 1))] for c in range(C)]
    sizes = []
    for target in (1.0, 37.0, 300.0, 1e9):
        batches = plan(work, C, target, steps=steps,
                       step_work=None if steps is None else np.full(K, 10.0))
        assert _walk(batches, C, steps) == expect
        sizes.append(len(batches))
    assert sizes[-1] == 1 and sizes[0] > sizes[1] > sizes[2] > 1
    if mid_node:
        # Some batch boundary falls inside a node (what makes one heavy node interruptible).
        cuts = [lo[c, 1] for lo, _ in plan(work, C, 37.0, steps=steps, step_work=np.full(K, 10.0))
                for c in range(C)]
        assert max(cuts) > 0


def test_plan_cuts_a_single_node_into_batches_of_the_target_work():
    """The centralised SVRG's case: one node with a million steps, two chunks (one empty)."""
    batches = plan(np.array([3.0 * 10**6]), 2, 3e5, steps=np.array([10**6]),
                   step_work=np.array([3.0]))
    assert len(batches) == 10
    assert _walk(batches, 2, [10**6]) == [[(0, g) for g in range(10**6)], []]
    taken = [int(hi[0, 1] or 10**6) - int(lo[0, 1]) for lo, hi in batches]
    assert max(taken) - min(taken) <= 1 and sum(taken) == 10**6


# ---------------------------------------------------------------------------------------
# The Appendix: Algorithms 5 and 6, Theorem 1, Lemma 1
# ---------------------------------------------------------------------------------------
# (n, d, K): n_k = 10 < |S_k| (the n_k × n_k Woodbury form), and n_k = 60 > d (the d × d form).
SHAPES = [(60, 40, 6), (240, 6, 4)]


@pytest.fixture(params=["direct", "tiled"])
def factorisation(request, monkeypatch):
    """'tiled': every node matrix above 4 × 4 factored panel by panel (3 columns a time),
    the path the paper's large nodes take, so that Stop can act inside a factorisation."""
    if request.param == "tiled":
        monkeypatch.setattr(sdca_kernels, "DIRECT_MAX", 4)
        monkeypatch.setattr(sdca_kernels, "FACTOR_TILE", 3)
    return request.param


@pytest.mark.parametrize("size,tile", [(1, 3), (7, 7), (50, 7), (64, 16)])
def test_tiled_cholesky_is_the_cholesky_factor(size, tile):
    rng = np.random.default_rng(size)
    A = rng.normal(size=(size, size + 3))
    M = A @ A.T + 0.5 * np.eye(size)
    calls = []
    L = np.tril(sdca_kernels._cholesky_tiled(M.copy(), tile, lambda: calls.append(1)))
    np.testing.assert_allclose(L, np.linalg.cholesky(M), rtol=0, atol=1e-12 * np.abs(M).max())
    np.testing.assert_allclose(L @ L.T, M, rtol=0, atol=1e-13 * np.abs(M).max())
    panels = -(-size // tile)
    assert len(calls) == sum(1 + (panels - j - 1) for j in range(panels - 1))


def test_stop_inside_a_large_factorisation_caches_nothing(monkeypatch):
    monkeypatch.setattr(sdca_kernels, "DIRECT_MAX", 4)
    monkeypatch.setattr(sdca_kernels, "FACTOR_TILE", 3)
    p = _problem("squared", n=60, d=40, K=3, partition="equal-iid", density=0.5)
    blocks = NodeBlocks(p.data.support, 0.7)
    c = np.random.default_rng(0).normal(size=p.n)
    expect = blocks.solve_rows(c)
    blocks = NodeBlocks(p.data.support, 0.7)
    assert blocks.row_form[0] and p.data.node_sizes[0] == 20

    class Stop(Exception):
        pass

    calls = []

    def between():
        calls.append(1)
        if len(calls) == 12:  # node 0's 20 × 20 matrix: 7 row blocks formed, then panels
            raise Stop

    with pytest.raises(Stop):
        blocks.solve_rows(c, between=between)
    assert blocks._cache == {} and blocks._used == 0
    assert np.array_equal(blocks.solve_rows(c), expect)


@pytest.mark.parametrize("shape", SHAPES)
def test_node_blocks_solve_both_systems(shape, factorisation):
    n, d, K = shape
    p = _problem("squared", n=n, d=d, K=K, partition="equal-iid", density=0.5)
    tau = 0.7
    blocks = NodeBlocks(p.data.support, tau)
    Xd = p.X.toarray()
    rng = np.random.default_rng(0)
    c, r = rng.normal(size=p.n), rng.normal(size=blocks.support_indices.size)
    h, delta = blocks.solve_rows(c), blocks.solve_cols(r)
    for k in range(K):
        A = Xd[p.data.node_slice(k)][:, blocks.support(k)]
        assert np.all(np.any(A != 0, axis=0))  # the support holds exactly the features used
        rows, cols = p.data.node_slice(k), slice(blocks.support_indptr[k], blocks.support_indptr[k + 1])
        np.testing.assert_allclose(h[rows], np.linalg.solve(np.eye(A.shape[0]) + tau * A @ A.T, c[rows]),
                                   rtol=1e-12)
        np.testing.assert_allclose(delta[cols], np.linalg.solve(np.eye(A.shape[1]) + tau * A.T @ A, r[cols]),
                                   rtol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("partition", ["equal-iid", "equal-noniid", "noniid"])
def test_primal_and_dual_methods_match_dense_references(shape, partition, factorisation):
    n, d, K = shape
    p = _problem("squared", n=n, d=d, K=K, partition=partition, seed=2)
    alpha0 = np.random.default_rng(1).normal(size=p.n)
    sigma = K / 2
    ws_p, gs_p = _reference_primal_method(p, alpha0, sigma, 4)
    ws_d = _reference_dual_method(p, alpha0, sigma, 4)
    primal = PrimalMethod(p, sigma=sigma, alpha0=alpha0)
    dual = DualMethod(p, sigma=sigma, alpha0=alpha0)
    for t in range(5):
        if t:
            primal.step()
            dual.step()
        _close(primal.w, ws_p[t], 1e-10)
        _close(dual.w, ws_d[t], 1e-10)
        for k in range(K):
            _close(primal.correction(k), gs_p[t][k], 1e-10)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("partition", ["equal-iid", "equal-noniid", "noniid"])
@pytest.mark.parametrize("sigma_of_K", [lambda K: 1.0, lambda K: K / 2, lambda K: float(K)],
                         ids=["sigma=1", "sigma=K/2", "sigma=K"])
@pytest.mark.parametrize("start", ["zero", "random"])
def test_theorem_1_primal_iterates_are_the_image_of_the_dual_iterates(shape, partition, sigma_of_K, start):
    """Appendix, Theorem 1: w^t of Algorithm 5 = (1/(λn)) X α^t of Algorithm 6, every t.

    The Appendix states it for equal n_k; the 'noniid' partition (unequal n_k) checks the
    generalisation documented in :mod:`fedviz.algorithms.primal_method`.
    """
    n, d, K = shape
    p = _problem("squared", n=n, d=d, K=K, partition=partition, seed=7)
    sigma = sigma_of_K(K)
    alpha0 = np.zeros(p.n) if start == "zero" else np.random.default_rng(3).normal(size=p.n)
    from fedviz.properties import theorem_5  # Theorem 1 here is Theorem 5 in the LaTeX's numbering

    measured = theorem_5(p, sigma=sigma, alpha0=alpha0, iterations=6)
    primal = PrimalMethod(p, sigma=sigma, alpha0=alpha0)
    dual = DualMethod(p, sigma=sigma, alpha0=alpha0)
    Xd = p.X.toarray()
    for t in range(6):
        image = Xd.T @ dual.alpha / (p.lam * p.n)
        _close(dual.w, image, 1e-10)
        _close(primal.w, image, 1e-9)
        assert measured.differences[t] <= 1e-9
        primal.step()
        dual.step()
    _close(primal.w, Xd.T @ dual.alpha / (p.lam * p.n), 1e-9)
    assert measured.holds and measured.differences[6] <= 1e-9


@pytest.mark.parametrize("partition", ["equal-noniid", "iid"])
def test_lemma_1_the_corrections_sum_to_zero(partition):
    p = _problem("squared", n=120, d=12, K=6, partition=partition, seed=4)
    from fedviz.properties import theorem_5  # Lemma 1 here is Lemma 4 in the LaTeX's numbering

    alpha0 = np.random.default_rng(0).normal(size=p.n)
    measured = theorem_5(p, sigma=3.0, alpha0=alpha0, iterations=4)
    primal = PrimalMethod(p, sigma=3.0, alpha0=alpha0)
    for t in range(5):
        g = np.array([primal.correction(k) for k in range(p.data.n_nodes)])
        assert np.abs(g).sum() > 1e-3  # the corrections themselves are not zero
        assert np.linalg.norm(g.sum(axis=0)) <= 1e-12 * np.abs(g).sum()
        assert measured.lemma_4_residuals[t] <= 1e-12
        primal.step()
    assert measured.lemma_4_holds


def test_cocoa_plus_with_exact_local_solves_is_the_dual_method():
    """The Appendix's remark after Theorem 1: CoCoA+ is Algorithm 6 with step 5 done
    inexactly.  Many SDCA passes make it exact; σ' = σ = K."""
    p = _problem("squared", n=90, d=12, K=3, lam=1.0, partition="noniid", seed=5)
    cocoa = CoCoAPlus(p, local_passes=200)
    dual = DualMethod(p)
    for _ in range(3):
        cocoa.step()
        dual.step()
        _close(cocoa.w, dual.w, 1e-10)
        _close(cocoa.alpha, dual.alpha, 1e-10)


# ---------------------------------------------------------------------------------------
# Property (A), convergence, the duality gap
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("cls", [CoCoAPlus, CoCoA])
def test_started_at_the_optimal_dual_point_cocoa_stays_at_the_optimum(loss, cls):
    """Property (A) of Section 3.1: α*_i = −φ'_i(x_iᵀw*) maps to w*, and the iterates stay."""
    p = _problem(loss)
    w_star = solve(p, gtol=1e-14).w
    alpha_star = -p.loss.deriv(p.X @ w_star, p.y)
    from fedviz.properties import stays_at_optimum

    for algo in (cls(p, alpha0=alpha_star, local_passes=2), cls(p, w0=w_star)):
        assert np.linalg.norm(algo.w - w_star) <= 1e-10
        measured = stays_at_optimum(algo, w_star, iterations=10, tol=1e-10)
        assert measured.holds and measured.drifts[0] <= 1e-10
        assert np.linalg.norm(algo.w - w_star) <= 1e-10


@pytest.mark.parametrize("cls", [PrimalMethod, DualMethod])
def test_started_at_the_optimum_the_appendix_methods_stay(cls):
    p = _problem("squared", partition="iid")
    Xd = p.X.toarray()
    w_star = np.linalg.solve(Xd.T @ Xd / p.n + p.lam * np.eye(p.d), Xd.T @ p.y / p.n)
    from fedviz.properties import stays_at_optimum

    for algo in (cls(p, w0=w_star), cls(p, alpha0=p.y - Xd @ w_star)):
        measured = stays_at_optimum(algo, w_star, iterations=10, tol=1e-10)
        assert measured.holds  # ‖w^t − w*‖ ≤ 1e-10 after each of the 10 iterations
        assert np.linalg.norm(algo.w - w_star) <= 1e-10


def _iterations_to(algo, f_star, budget, tol=1e-6):
    for t in range(1, budget + 1):
        algo.step()
        if algo.problem.value(algo.w) - f_star <= tol:
            return t
    return None


@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("partition", ["iid", "noniid"])
def test_cocoa_plus_converges_with_default_hyperparameters(loss, partition):
    """Budget 300 rounds: with λ = 1e-2, K = 6, σ' = K and one local pass these runs need
    about 20–100 rounds (CoCoA+'s rate scales with σ'·max‖x_i‖²/(λ n_k))."""
    p = _problem(loss, partition=partition)
    f_star = solve(p).objective
    assert _iterations_to(CoCoAPlus(p), f_star, budget=300) is not None
    assert _iterations_to(CoCoA(p), f_star, budget=300) is not None


@pytest.mark.parametrize("partition", ["iid", "noniid", "equal-noniid"])
@pytest.mark.parametrize("cls", [PrimalMethod, DualMethod])
def test_appendix_methods_converge_on_ridge_with_default_sigma(partition, cls):
    """Budget 400 rounds: Algorithm 6 with σ = K is block proximal gradient ascent with a
    linear rate (about 100 rounds here)."""
    p = _problem("squared", partition=partition)
    Xd = p.X.toarray()
    w_star = np.linalg.solve(Xd.T @ Xd / p.n + p.lam * np.eye(p.d), Xd.T @ p.y / p.n)
    assert _iterations_to(cls(p), p.value(w_star), budget=400) is not None


@pytest.mark.parametrize("loss", [make_loss("logistic"), make_loss("squared"), SmoothedHinge(0.5)], ids=repr)
def test_duality_gap_is_nonnegative_bounds_suboptimality_and_vanishes(loss):
    """Weak duality at every iterate, and the gap below 1e-7 within 400 rounds (these runs
    need about 60–280)."""
    p = _problem(loss, partition="noniid")
    f_star = solve(p, gtol=1e-12).objective
    algo = CoCoAPlus(p)
    for _ in range(400):
        algo.step()
        ref = _duality_gap_reference(p, algo.w, algo.alpha)
        assert ref >= -1e-13                                          # weak duality
        assert algo.duality_gap == pytest.approx(ref, rel=1e-8, abs=1e-13)
        assert p.value(algo.w) - f_star <= algo.duality_gap + 1e-13   # a certificate
        assert algo.dual_objective <= f_star + 1e-13
        if algo.duality_gap <= 1e-7:
            break
    assert algo.duality_gap <= 1e-7


# ---------------------------------------------------------------------------------------
# Inputs and control
# ---------------------------------------------------------------------------------------
def test_bad_inputs_are_refused_with_the_parameter_named():
    p = _problem("logistic")
    with pytest.raises(ParameterError, match=r"alpha0\[\d+\]"):
        CoCoAPlus(p, alpha0=-p.y)  # α_i y_i = −1 is outside [0, 1]
    with pytest.raises(ParameterError, match="alpha0"):
        CoCoAPlus(p, alpha0=np.zeros(p.n + 1))
    with pytest.raises(ParameterError, match="alpha0"):
        CoCoAPlus(p, alpha0=np.zeros(p.n), w0=np.zeros(p.d))
    with pytest.raises(ParameterError, match="local_passes"):
        CoCoAPlus(p, local_passes=0)
    with pytest.raises(ParameterError, match="sigma_prime"):
        CoCoAPlus(p, sigma_prime=-1.0)
    with pytest.raises(ParameterError, match="primal-method.loss"):
        PrimalMethod(p)
    q = _problem("squared", K=6)
    with pytest.raises(ParameterError, match=r"dual-method.sigma.*K = 6"):
        DualMethod(q, sigma=7.0)
    with pytest.raises(ParameterError, match="primal-method.sigma"):
        PrimalMethod(q, sigma=0.5)


@pytest.mark.parametrize("cls", [CoCoAPlus, PrimalMethod, DualMethod])
def test_stop_leaves_the_state_untouched(cls):
    p = _problem("squared")
    algo = cls(p)
    algo.step()
    w = algo.w.copy()
    alpha = getattr(algo, "alpha", np.zeros(0)).copy()
    algo.stop_requested = lambda: True
    with pytest.raises(StopRequested):
        algo.step()
    assert np.array_equal(algo.w, w) and algo.iteration == 1 and algo.rounds == 1
    assert np.array_equal(getattr(algo, "alpha", np.zeros(0)), alpha)
