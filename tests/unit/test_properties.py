"""fedviz.properties against independent oracles: dense NumPy computations of the paper's
definitions (Section 1.2's characteristics, Section 3.1's properties (A)–(D), Section 3.6.1's
ω^j, the Appendix's XᵀX ⪯ σB, Theorem 5 and Lemma 4), on small data sets built here and on
the presets made to show properties (B)–(D).
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from problems import masked_data
from fedviz import properties as P
from fedviz.algorithms.dane import DANE
from fedviz.algorithms.dual_method import DualMethod
from fedviz.algorithms.gd import GD
from fedviz.algorithms.naive_fsvrg import NaiveFSVRG
from fedviz.algorithms.primal_method import PrimalMethod
from fedviz.data.dataset import FederatedDataset
from fedviz.data.presets import make_preset
from fedviz.errors import ParameterError
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve


def _data(seed=0, n=90, d=14, K=6, density=0.3, regression=False, sizes=None):
    """Sparse random rows with a bias column and an empty one; node k gets ``sizes[k]`` rows (random
    nodes if None): :func:`problems.masked_data` with this module's sizes."""
    return masked_data(n=n, d=d, K=K, density=density, seed=seed, regression=regression, sizes=sizes)


def _dense_nodes(ds):
    X = ds.X.toarray()
    return [X[ds.node_slice(k)] for k in range(ds.n_nodes)], X


# ---------------------------------------------------------------------------------------
# Section 1.2
# ---------------------------------------------------------------------------------------
def test_massively_distributed_and_unbalanced_by_hand():
    ds, _, _ = _data(sizes=[2, 3, 40, 4, 1, 5, 6, 7, 8, 9, 5])       # K = 11, n = 90
    m = P.massively_distributed(ds)
    assert (m.n_nodes, m.n) == (11, 90)
    assert m.mean_node_size == pytest.approx(90 / 11) and m.ratio == pytest.approx(11 / (90 / 11))
    assert m.holds                                                     # 11 > 8.18
    u = P.unbalanced(ds)
    assert (u.min_size, u.max_size, u.median_size) == (1, 40, 5.0)
    assert u.orders_of_magnitude == pytest.approx(math.log10(40)) and u.holds
    few, _, _ = _data(sizes=[30, 30, 30])
    assert not P.massively_distributed(few).holds and not P.unbalanced(few).holds


def test_non_iid_figures_match_a_dense_reference():
    ds, _, _ = _data(seed=1, n=120, K=5)
    r = P.non_iid(ds, seed=3)
    blocks, X = _dense_nodes(ds)
    n = ds.n

    def reference(y, offsets, blocks):
        p = np.mean(y > 0)
        label = sum((b - a) / n * abs(np.mean(y[a:b] > 0) - p) for a, b in zip(offsets[:-1], offsets[1:]))
        counts = np.array([(B != 0).sum(0) for B in blocks], dtype=float)
        q = counts.sum(0) / counts.sum()
        tv = [0.5 * np.abs(c / c.sum() - q).sum() for c in counts]
        sizes = np.diff(offsets)
        return label, float(np.sum(sizes * tv) / sizes.sum())

    label, feature = reference(ds.y, ds.offsets, blocks)
    assert r.label_skew == pytest.approx(label, rel=1e-12)
    assert r.feature_skew == pytest.approx(feature, rel=1e-12)
    # The reshuffle: the same rows dealt at random over nodes of the same sizes.
    deal = np.random.default_rng(3).permutation(ds.node_of_row)
    order = np.argsort(deal, kind="stable")
    Xs, ys = X[order], ds.y[order]
    sblocks = [Xs[a:b] for a, b in zip(ds.offsets[:-1], ds.offsets[1:])]
    label_s, feature_s = reference(ys, ds.offsets, sblocks)
    assert r.reshuffled_label_skew == pytest.approx(label_s, rel=1e-12)
    assert r.reshuffled_feature_skew == pytest.approx(feature_s, rel=1e-12)
    assert P.non_iid(_data(regression=True)[0]).label_skew is None


def test_non_iid_separates_a_label_sorted_partition_from_a_random_one():
    ds, X, y = _data(seed=2, n=200, K=4)
    by_label = ds.with_nodes(np.where(ds.y > 0, 0, 2) + (np.arange(ds.n) % 2))
    r = P.non_iid(by_label)
    p = np.mean(ds.y > 0)
    assert r.label_skew == pytest.approx(2 * p * (1 - p), rel=1e-12)   # nodes all + or all −
    assert r.reshuffled_label_skew < r.label_skew / 3


def test_sparse_by_hand():
    ds, _, _ = _data(seed=4, n=100, d=12, K=20, density=0.05)
    s = P.sparse(ds)
    blocks, X = _dense_nodes(ds)
    omega = np.array([(B != 0).any(0) for B in blocks]).sum(0)
    nj = (X != 0).sum(0)
    used = nj > 0
    assert s.appearing == used.sum() == ds.d - 1
    assert s.omega_max == omega.max() == ds.n_nodes                    # the bias column
    assert s.few_nodes == ds.n_nodes / 10
    assert s.share_on_few_nodes == pytest.approx(np.mean(omega[used] <= ds.n_nodes / 10))
    assert s.share_in_few_rows == pytest.approx(np.mean(nj[used] <= ds.n / 10))
    assert s.density == pytest.approx((X != 0).sum() / X.size)
    assert s.holds and s.share_on_few_nodes > 0
    dense, _, _ = _data(seed=4, n=100, d=6, K=3, density=1.0)           # every feature everywhere
    assert not P.sparse(dense).holds


# ---------------------------------------------------------------------------------------
# Section 3.1: the data conditions of (B), (C), (D) on the presets made for them
# ---------------------------------------------------------------------------------------
def test_disjoint_features_preset_reports_what_property_c_needs():
    ds = make_preset("disjoint-features")
    r = P.disjoint_features(ds)
    # Oracle: the set of nodes of each column's entries, by hand.
    X = ds.X.tocoo()
    nodes_of = [set() for _ in range(ds.d)]
    for i, j in zip(X.row, X.col):
        nodes_of[j].add(int(ds.node_of_row[i]))
    sizes = np.array([len(s) for s in nodes_of])
    assert r.holds and sizes.max() == r.omega_max == 1
    assert r.shared_features == 0 and r.appearing == int(np.sum(sizes == 1)) > 0.9 * ds.d
    assert r.n_nodes == 10
    assert not P.identical_nodes(ds).holds and P.identical_nodes(ds).distinct_datasets == 10
    assert not P.one_node(ds).holds
    # Each node learns its own block: XᵀX is block diagonal, so σ = 1 is valid.
    sb = P.sigma_bound(ds)
    assert sb.sigma_min == pytest.approx(1.0, rel=1e-9) and sb.holds and sb.admits(1.0)


def test_identical_nodes_preset_reports_what_property_d_needs():
    ds = make_preset("identical-nodes")
    r = P.identical_nodes(ds)
    first = ds.X[ds.node_slice(0)].toarray()
    same = all(np.array_equal(ds.X[ds.node_slice(k)].toarray(), first)
               and np.array_equal(ds.y[ds.node_slice(k)], ds.y[ds.node_slice(0)]) for k in range(ds.n_nodes))
    assert same and r.holds and r.distinct_datasets == 1 and r.n_nodes == 10
    d = P.disjoint_features(ds)
    omega = np.array([(ds.X[ds.node_slice(k)].toarray() != 0).any(0) for k in range(10)]).sum(0)
    assert not d.holds and d.omega_max == omega.max() == 10
    # Every node spans the same space: Σ_k P_k = K·P, so σ = K exactly.
    assert P.sigma_bound(ds).sigma_min == pytest.approx(10.0, rel=1e-9)


def test_identical_nodes_ignores_row_order_but_not_values():
    rng = np.random.default_rng(5)
    A = rng.normal(size=(6, 4)) * (rng.random((6, 4)) < 0.6)
    y = np.where(rng.random(6) < 0.5, 1.0, -1.0)
    perm = rng.permutation(6)
    X = np.vstack([A, A[perm]])
    ds = FederatedDataset.from_assignment(X, np.r_[y, y[perm]], np.repeat([0, 1], 6))
    assert P.identical_nodes(ds).holds
    X2 = X.copy()
    X2[7, np.flatnonzero(X2[7])[0]] += 1e-9
    ds2 = FederatedDataset.from_assignment(X2, np.r_[y, y[perm]], np.repeat([0, 1], 6))
    assert not P.identical_nodes(ds2).holds and P.identical_nodes(ds2).distinct_datasets == 2


def test_one_node_and_iid_presets():
    one = make_preset("one-node")
    assert P.one_node(one).holds and one.n_nodes == 1
    assert not P.massively_distributed(one).holds                      # 1 ≤ 3,000
    iid = make_preset("iid")
    sizes = iid.node_sizes
    assert not P.one_node(iid).holds
    assert P.massively_distributed(iid).holds and iid.n_nodes > iid.n / iid.n_nodes
    assert not P.unbalanced(iid).holds and sizes.max() < 10 * sizes.min()
    r = P.non_iid(iid)
    # IID nodes are as representative as a random deal of the same rows.
    assert r.label_skew == pytest.approx(r.reshuffled_label_skew, rel=0.25)
    assert r.feature_skew == pytest.approx(r.reshuffled_feature_skew, rel=0.05)


def test_google_plus_small_has_the_settings_characteristics():
    ds = make_preset("google-plus-small")
    sizes = ds.node_sizes
    assert P.massively_distributed(ds).holds and ds.n_nodes > ds.n / ds.n_nodes
    u = P.unbalanced(ds)
    assert u.holds and u.orders_of_magnitude == pytest.approx(np.log10(sizes.max() / sizes.min()))
    r = P.non_iid(ds)
    assert r.label_skew > 3 * r.reshuffled_label_skew                  # per-author label biases
    assert P.sparse(ds).holds
    sb = P.sigma_bound(ds, max_entries=0)                               # too large to factor here
    assert sb.sigma_min is None and sb.admits(ds.n_nodes) and "not measured" in sb.describe()


# ---------------------------------------------------------------------------------------
# Section 3.1: property (A) and the O(1)-round properties on runs
# ---------------------------------------------------------------------------------------
def _problem(loss="logistic", seed=0, **kw):
    ds, _, _ = _data(seed=seed, regression=loss == "squared", **kw)
    return Problem(ds, loss, 0.05)


def test_stays_at_optimum_measures_the_drift():
    pb = _problem()
    w_star = solve(pb, gtol=1e-14).w
    algo = GD(pb, w0=w_star)
    r = P.stays_at_optimum(algo, w_star, iterations=4)
    assert r.holds and r.iterations == 4 and len(r.drifts) == 5 and r.drifts[0] == 0.0
    assert r.drifts[-1] == np.linalg.norm(algo.w - w_star) <= 1e-10
    # Started elsewhere, it moves: the figure says so.
    away = P.stays_at_optimum(GD(pb, w0=w_star + 0.1), w_star, iterations=1)
    assert not away.holds and away.drifts[0] == pytest.approx(0.1 * math.sqrt(pb.d))


#: Exact DANE as the paper states its properties: "the default setting when μ = 0 and η = 1" (Section 3.4),
#: pinned, since fedviz's default μ need not be the paper's.
PAPER_DANE = dict(eta=1.0, mu=0.0, solver="exact", safeguard=False)


def test_exact_dane_converges_in_one_iteration_on_one_node_and_on_identical_nodes():
    one = Problem(_data(seed=6, K=1)[0], "logistic", 0.05)
    f1 = solve(one).objective
    r = P.converges_in_few_rounds(DANE(one, **PAPER_DANE), f1, case="B", tol=1e-10)
    assert r.holds and r.data_condition and r.rounds == 2 and r.iterations == 1
    assert r.initial_gap == pytest.approx(one.value(np.zeros(one.d)) - f1)
    rng = np.random.default_rng(7)
    A = rng.normal(size=(30, 6))
    y = np.where(A @ rng.normal(size=6) > 0, 1.0, -1.0)
    ds = FederatedDataset.from_assignment(np.tile(A, (4, 1)), np.tile(y, 4), np.repeat(np.arange(4), 30))
    pb = Problem(ds, "logistic", 0.01)
    f_star = solve(pb).objective
    algo = DANE(pb, **PAPER_DANE)
    r = P.converges_in_few_rounds(algo, f_star, case="D", tol=1e-12)
    assert r.holds and r.rounds == algo.rounds == 2
    assert r.final_gap == pb.value(algo.w) - f_star <= 1e-12
    # The same run on data not in case C says so.
    r = P.converges_in_few_rounds(DANE(pb, **PAPER_DANE), f_star, case="C", tol=1e-12)
    assert not r.data_condition and not r.holds and r.rounds == 2
    with pytest.raises(ParameterError):
        P.converges_in_few_rounds(DANE(pb, **PAPER_DANE), f_star, case="A")


def test_gd_is_not_o1_on_identical_nodes():
    rng = np.random.default_rng(8)
    A = rng.normal(size=(30, 6))
    y = np.where(A @ rng.normal(size=6) > 0, 1.0, -1.0)
    ds = FederatedDataset.from_assignment(np.tile(A, (3, 1)), np.tile(y, 3), np.repeat(np.arange(3), 30))
    pb = Problem(ds, "logistic", 0.01)
    f_star = solve(pb).objective
    algo = GD(pb)
    r = P.converges_in_few_rounds(algo, f_star, case="D", tol=1e-10, max_rounds=3)
    assert r.data_condition and not r.holds and r.rounds is None and algo.rounds == 3
    assert r.final_gap == pb.value(algo.w) - f_star > 1e-10


# ---------------------------------------------------------------------------------------
# Proposition 1
# ---------------------------------------------------------------------------------------
def test_proposition_1_figures_are_the_iterate_differences():
    pb = _problem(seed=9, n=150, K=5)
    r = P.proposition_1(pb, local_steps=17, stepsize=0.2, iterations=4, seed=2)
    dane = DANE(pb, seed=2, eta=1.0, mu=0.0, safeguard=False, solver="svrg", local_passes=1, local_steps=17, stepsize=0.2)
    naive = NaiveFSVRG(pb, seed=2, local_steps=17, stepsize=0.2)
    expect = []
    for _ in range(4):
        dane.step()
        naive.step()
        expect.append(np.abs(dane.w - naive.w).max())
        assert expect[-1] <= 1e-12 * max(1.0, np.abs(naive.w).max())
    assert r.differences == tuple(expect) and r.holds
    assert r.scale > 0.05 and r.iterations == 4


_EPS = np.finfo(float).eps


def _logistic_f(pb, w):
    """f(w) = (1/n) Σ log(1 + exp(−y_i x_iᵀw)) + (λ/2)‖w‖² densely, and a bound on how far another
    order of the same sums can be from it: each margin is a d-term dot product (error ≤ d ε (|X||w|)_i,
    and the loss is 1-Lipschitz in it), f a sum of n + 1 nonnegative terms (relative error ≤ (n+1) ε)."""
    X = pb.X.toarray()
    terms = np.logaddexp(0.0, -pb.y * (X @ w))
    f = float(np.mean(terms) + 0.5 * pb.lam * w @ w)
    tol = 2 * (pb.d * np.mean(np.abs(X) @ np.abs(w)) + (pb.n + pb.d + 1) * f) * _EPS
    return f, tol


def _ridge_f(pb, w):
    """f(w) = (1/2n) ‖Xw − y‖² + (λ/2)‖w‖² densely, and a bound on another order's distance from
    it: residual i is off by at most (d+1) ε (|X||w| + |y|)_i, its square by twice that times |r_i|."""
    X = pb.X.toarray()
    r = X @ w - pb.y
    f = float(0.5 * np.mean(r ** 2) + 0.5 * pb.lam * w @ w)
    bound = (pb.d + 1) * _EPS * (np.abs(X) @ np.abs(w) + np.abs(pb.y))
    tol = 2 * (float(np.mean(np.abs(r) * bound + bound ** 2)) + (pb.n + pb.d + 1) * _EPS * f)
    return f, tol


def test_proposition_1_run_records_both_methods_from_the_start():
    """The run the Learn page overlays: f of both iterates and ‖w_naive‖_∞ at t = 0..T, by dense
    formulas on the two methods stepped here; m and h as both ran (the derived defaults)."""
    pb = _problem(seed=9, n=150, K=5)
    r = P.proposition_1(pb, iterations=3, seed=4)
    naive = NaiveFSVRG(pb, seed=4)
    # The proposition's DANE: η = 1, μ = 0, one SVRG pass with naive FSVRG's m and h, pinned whatever
    # DANE's own defaults are (they may change; the proposition does not).
    dane = DANE(pb, seed=4, eta=1.0, mu=0.0, safeguard=False, solver="svrg", local_passes=1, local_steps=naive.m, stepsize=naive.h)
    assert (r.m, r.h, r.seed) == (naive.m, naive.h, 4) and r.local_steps is r.stepsize is None
    assert r.m == round(pb.n / pb.data.n_nodes)  # the default m = n/K
    run = r.run
    assert len(run.first) == len(run.second) == len(run.distances) == len(run.sizes) == 4
    assert run.distances[0] == 0.0 and run.distances[1:] == r.differences and run.sizes[0] == 0.0
    for t in range(4):
        if t:
            dane.step()
            naive.step()
        for value, w in ((run.first[t], dane.w), (run.second[t], naive.w)):
            f, tol = _logistic_f(pb, w)
            assert abs(value - f) <= tol
        assert run.sizes[t] == np.abs(naive.w).max()
    assert run.first[-1] < run.first[0]


# ---------------------------------------------------------------------------------------
# The Appendix: σ, Theorem 5, Lemma 4
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("K,density", [(3, 0.8), (5, 0.3), (12, 0.25)])
def test_sigma_min_is_the_smallest_sigma_with_xtx_below_sigma_b(K, density):
    ds, _, _ = _data(seed=10 + K, n=60, d=10, K=K, density=density)
    r = P.sigma_bound(ds)
    blocks, X = _dense_nodes(ds)
    # Oracle: Σ_k P_k with P_k = X_kᵀ (X_k X_kᵀ)⁺ X_k (pinv, not the module's SVD on the support).
    M = sum(B.T @ np.linalg.pinv(B @ B.T) @ B for B in blocks)
    sigma = np.linalg.eigvalsh(M)[-1]
    assert r.sigma_min == pytest.approx(sigma, rel=1e-8)
    # The Appendix's definition, in the n × n form: XXᵀ ⪯ σ Diag(X_k X_kᵀ), tight at σ_min.
    Bd = sp.block_diag([B @ B.T for B in blocks]).toarray()
    G = X @ X.T
    scale = np.abs(G).max()
    assert np.linalg.eigvalsh(r.sigma_min * Bd - G)[0] >= -1e-9 * scale
    assert np.linalg.eigvalsh(0.99 * r.sigma_min * Bd - G)[0] < -1e-6 * scale
    omega = np.array([(B != 0).any(0) for B in blocks]).sum(0)
    assert 1 <= r.sigma_min <= omega.max() + 1e-9 <= K + 1e-9 and r.holds
    assert r.omega_max == omega.max()
    assert r.blocks_positive_definite == all(np.linalg.matrix_rank(B) == B.shape[0] for B in blocks)
    assert r.admits(K) and not r.admits(0.99 * r.sigma_min)


@pytest.mark.parametrize("sigma_of_K", [lambda K: 1.0, lambda K: K / 2, None], ids=["1", "K/2", "default"])
@pytest.mark.parametrize("sizes", [[20, 20, 20], [10, 25, 15, 10]], ids=["equal", "unequal"])
def test_theorem_5_and_lemma_4_figures_against_a_dense_image(sigma_of_K, sizes):
    ds, _, _ = _data(seed=11, n=sum(sizes), d=8, sizes=sizes, regression=True)
    pb = Problem(ds, "squared", 0.1)
    K = ds.n_nodes
    sigma = None if sigma_of_K is None else sigma_of_K(K)
    alpha0 = np.random.default_rng(1).normal(size=pb.n)
    r = P.theorem_5(pb, sigma=sigma, alpha0=alpha0, iterations=4)
    primal = PrimalMethod(pb, sigma=sigma, alpha0=alpha0)
    dual = DualMethod(pb, sigma=sigma, alpha0=alpha0)
    Xd = pb.X.toarray()
    diffs, lemma = [], []
    for t in range(5):
        if t:
            primal.step()
            dual.step()
        image = Xd.T @ dual.alpha / (pb.lam * pb.n)
        diffs.append(np.abs(primal.w - image).max() / max(1.0, np.abs(image).max()))
        g = np.array([primal.correction(k) for k in range(K)])
        lemma.append(np.linalg.norm(g.sum(0)) / np.abs(g).sum())
    np.testing.assert_allclose(r.differences, diffs, rtol=0, atol=1e-13)
    np.testing.assert_allclose(r.lemma_4_residuals, lemma, rtol=0, atol=1e-15)
    assert max(diffs) <= 1e-9 and r.holds
    assert max(lemma) <= 1e-12 and r.lemma_4_holds
    assert r.sigma == (K if sigma is None else sigma)
    assert r.equal_node_sizes == (len(set(sizes)) == 1)


def test_theorem_5_run_records_the_primal_iterates_and_the_dual_image():
    """The run the Learn page overlays: f(w_primal^t), f((1/(λn)) X α^t) and ‖image‖_∞, t = 0..T,
    by dense formulas on the two methods stepped here."""
    ds, _, _ = _data(seed=11, n=60, d=8, sizes=[10, 25, 15, 10], regression=True)
    pb = Problem(ds, "squared", 0.1)
    alpha0 = np.random.default_rng(1).normal(size=pb.n)
    r = P.theorem_5(pb, sigma=2.0, alpha0=alpha0, iterations=3)
    primal = PrimalMethod(pb, sigma=2.0, alpha0=alpha0)
    dual = DualMethod(pb, sigma=2.0, alpha0=alpha0)
    Xd = pb.X.toarray()
    assert r.run.distances == r.differences and len(r.run.first) == 4
    for t in range(4):
        if t:
            primal.step()
            dual.step()
        image = Xd.T @ dual.alpha / (pb.lam * pb.n)
        # (1/(λn)) X α: each entry an n-term sum, off by at most (n+2) ε (|X|ᵀ|α|)_j / (λn).
        image_tol = (pb.n + 2) * _EPS * np.max(np.abs(Xd).T @ np.abs(dual.alpha)) / (pb.lam * pb.n)
        for value, w in ((r.run.first[t], primal.w), (r.run.second[t], image)):
            f, tol = _ridge_f(pb, w)
            # the image's own rounding moves f by at most ‖∇f(image)‖₁ times image_tol
            grad = Xd.T @ (Xd @ w - pb.y) / pb.n + pb.lam * w
            assert abs(value - f) <= tol + np.abs(grad).sum() * image_tol
        assert abs(r.run.sizes[t] - np.abs(image).max()) <= image_tol


def test_theorem_5_names_a_loss_other_than_squared():
    pb = _problem(seed=3)
    with pytest.raises(ParameterError, match="squared"):
        P.theorem_5(pb, iterations=1)


def test_every_figure_describes_itself_in_one_line():
    ds, _, _ = _data(seed=12, n=60, d=8, K=3, regression=True)
    pb = Problem(ds, "squared", 0.1)
    w_star = solve(pb, gtol=1e-14).w
    results = [P.massively_distributed(ds), P.unbalanced(ds), P.non_iid(ds), P.sparse(ds),
               P.one_node(ds), P.disjoint_features(ds), P.identical_nodes(ds),
               P.stays_at_optimum(GD(pb, w0=w_star), w_star),
               P.converges_in_few_rounds(GD(pb), pb.value(w_star), case="B"),
               P.proposition_1(pb, iterations=2), P.sigma_bound(ds), P.theorem_5(pb, iterations=2)]
    for r in results:
        text = r.describe()
        assert isinstance(text, str) and text and "\n" not in text
        with pytest.raises(AttributeError):
            r.holds = True  # frozen


# ---------------------------------------------------------------------------------------
# Property (A)'s start: every registered algorithm at w* with its state at its fixed point
# ---------------------------------------------------------------------------------------
from fedviz.algorithms import ALGORITHMS as _ALGORITHMS  # noqa: E402 - appended with the tests below


@pytest.mark.parametrize("name", list(_ALGORITHMS))
def test_fixed_point_start_puts_every_algorithm_at_w_star_with_its_state_there(name):
    """Oracle: w* from the module's solver checked by a dense gradient; α* = −φ'(Xw*) and
    SCAFFOLD's c_k = ∇F_k(w*) computed densely here (Section 3.3's F_k, eq. (14)'s image)."""
    from fedviz.algorithms.dual_method import DualAlgorithm

    cls = _ALGORITHMS[name]
    loss = "logistic" if "logistic" in cls.losses else "squared"
    pb = _problem(loss, seed=13)
    w_star = solve(pb, gtol=1e-13).w
    X = pb.X.toarray()
    d = pb.loss.deriv(X @ w_star, pb.y)
    assert np.linalg.norm(X.T @ d / pb.n + pb.lam * w_star) <= 1e-12
    algo = P.fixed_point_start(cls, pb, w_star, seed=3)
    assert algo.seed == 3
    np.testing.assert_allclose(algo.w, w_star, rtol=0, atol=1e-10 * max(1.0, np.abs(w_star).max()))
    if isinstance(algo, DualAlgorithm):
        np.testing.assert_allclose(algo.alpha, -d, rtol=1e-12, atol=1e-14)
    if name == "scaffold":
        off = pb.data.offsets
        C = np.array([X[off[k]:off[k + 1]].T @ d[off[k]:off[k + 1]] / (off[k + 1] - off[k])
                      for k in range(pb.data.n_nodes)]) + pb.lam * w_star
        c, S = algo.control_variates()
        np.testing.assert_allclose(S.toarray() + pb.lam * w_star, C, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(c, np.diff(off) / pb.n @ C, rtol=0, atol=1e-12)
        assert np.abs(c).max() <= 1e-12  # c = ∇f(w*) = 0
    # Started so, a method with property (A) stays: GD's step at w* is −h∇f(w*) ≈ 0.
    if name == "gd":
        assert P.stays_at_optimum(algo, w_star, iterations=2).holds


def test_dominant_node_is_property_b_on_several_nodes():
    """Property (B)'s case with K ≥ 2: one node's share of the rows, against a count made here."""
    ds = make_preset("one-node")
    node = np.zeros(ds.n, dtype=np.int64)
    node[:4] = [1, 2, 3, 3]                                  # 4 rows on 3 small nodes
    dealt = ds.with_nodes(node)
    check = P.dominant_node(dealt, share=0.99)
    assert check.n_nodes == 4 and check.largest == ds.n - 4 and check.share == (ds.n - 4) / ds.n
    assert check.holds and f"{ds.n - 4:,} of the {ds.n:,} rows" in check.describe()
    assert not P.dominant_node(dealt, share=0.9999).holds
    assert not P.dominant_node(ds).holds                     # K = 1: not the K ≥ 2 case
    with pytest.raises(ParameterError, match="share"):
        P.dominant_node(ds, share=1.5)
