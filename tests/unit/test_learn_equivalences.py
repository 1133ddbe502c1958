"""fedviz.learn.equivalences against independent oracles: naive FSVRG (Algorithm 3) written here
densely with the samples of the documented contract, the ridge optimum in closed form, and the
figures fedviz.properties checks (themselves tested against dense references in test_properties).
"""

import numpy as np
import pytest
from scipy.special import expit

from problems import sparse_problem
from fedviz import properties as P
from fedviz.algorithms._svrg_kernels import SAMPLE_STREAM
from fedviz.errors import ParameterError
from fedviz.learn.equivalences import (EQUIVALENCE_DATA, equivalence_problem, proposition_1_overlay,
                                       theorem_5_overlay)
from fedviz.learn.matrix import one_thread
from fedviz.problems.optimum import solve


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():
        yield


def _ridge_star(pb) -> float:
    """min_w (1/2n)‖Xw − y‖² + (λ/2)‖w‖², from the normal equations."""
    X, y, n, lam = pb.X.toarray(), pb.y, pb.n, pb.lam
    w = np.linalg.solve(X.T @ X / n + lam * np.eye(pb.d), X.T @ y / n)
    return float(0.5 * np.mean((X @ w - y) ** 2) + 0.5 * lam * w @ w)


def _logistic_f(pb, w):
    X = pb.X.toarray()
    return float(np.mean(np.logaddexp(0.0, -pb.y * (X @ w))) + 0.5 * pb.lam * w @ w)


def _naive_fsvrg_dense(pb, T, m, h, seed):
    """Algorithm 3 (Section 3.5), densely: node k takes m steps
    w_k ← w_k − h(∇f_i(w_k) − ∇f_i(w^t) + ∇f(w^t)),
    i drawn uniformly from P_k (the samples of iteration t: default_rng([seed, t, SAMPLE_STREAM])), and
    w^{t+1} = w^t + (1/K) Σ_k (w_k − w^t).  Returns every iterate."""
    X, y, lam = pb.X.toarray(), pb.y, pb.lam
    off, K = pb.data.offsets, pb.data.n_nodes
    sizes = np.diff(off)

    def dphi(z, yi):
        return -yi * expit(-yi * z)

    w = np.zeros(pb.d)
    out = [w.copy()]
    for t in range(T):
        g = X.T @ dphi(X @ w, y) / pb.n + lam * w
        draws = np.random.default_rng([seed, t, SAMPLE_STREAM]).integers(0, np.repeat(sizes, m))
        total = np.zeros(pb.d)
        for k in range(K):
            wk = w.copy()
            for i in off[k] + draws[k * m:(k + 1) * m]:
                x = X[i]
                wk = wk - h * ((dphi(x @ wk, y[i]) - dphi(x @ w, y[i])) * x + lam * (wk - w) + g)
            total += (wk - w) / K
        w = w + total
        out.append(w.copy())
    return out


def _dane_one_svrg_pass_dense(pb, T, m, h, seed, eta=1.0, mu=0.0):
    """DANE (Algorithm 2) with its subproblem, eq. (10), solved by one pass of SVRG (Algorithm 1)
    started at w^t, written from the definitions: node k's subproblem is
    G_k(v) = F_k(v) − a_kᵀv + (μ/2)‖v − w^t‖², a_k = ∇F_k(w^t) − η∇f(w^t), its i-th term ψ_i(v) =
    f_i(v) − a_kᵀv + (μ/2)‖v − w^t‖²; SVRG steps v ← v − h(∇ψ_i(v) − ∇ψ_i(w^t) + ∇G_k(w^t)) with the
    samples of Algorithm 3 above (the Remark after Proposition 1); w^{t+1} = (1/K) Σ_k v_k.
    Nothing here cancels a_k by hand: that it drops out at η = 1, μ = 0 is the proposition."""
    X, y, lam = pb.X.toarray(), pb.y, pb.lam
    off, K = pb.data.offsets, pb.data.n_nodes
    sizes = np.diff(off)

    def dphi(z, yi):
        return -yi * expit(-yi * z)

    w = np.zeros(pb.d)
    out = [w.copy()]
    for t in range(T):
        g = X.T @ dphi(X @ w, y) / pb.n + lam * w
        draws = np.random.default_rng([seed, t, SAMPLE_STREAM]).integers(0, np.repeat(sizes, m))
        vs = []
        for k in range(K):
            Xk, yk = X[off[k]:off[k + 1]], y[off[k]:off[k + 1]]
            a = Xk.T @ dphi(Xk @ w, yk) / sizes[k] + lam * w - eta * g
            full = Xk.T @ dphi(Xk @ w, yk) / sizes[k] + lam * w - a          # ∇G_k(w^t)

            def grad_psi(v, i):
                return dphi(X[i] @ v, y[i]) * X[i] + lam * v - a + mu * (v - w)

            v = w.copy()
            for i in off[k] + draws[k * m:(k + 1) * m]:
                v = v - h * (grad_psi(v, i) - grad_psi(w, i) + full)
            vs.append(v)
        w = np.mean(vs, axis=0)
        out.append(w.copy())
    return out


def test_proposition_1_overlay_is_algorithm_3_and_dane_on_top_of_it():
    pb = sparse_problem(n=120, d=15, K=4, lam=0.05, density=0.3, seed=3, partition="equal-noniid")
    f_star = solve(pb, gtol=1e-12).objective
    m, h = 17, 0.3
    o = proposition_1_overlay(pb, f_star, iterations=4, seed=5, local_steps=m, stepsize=h)
    ref = _naive_fsvrg_dense(pb, 4, m, h, seed=5)
    expect = [_logistic_f(pb, w) - f_star for w in ref]
    # Both curves are Algorithm 3's (the second is naive FSVRG itself, the first DANE with one SVRG pass).
    np.testing.assert_allclose(o.second, expect, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(o.first, expect, rtol=1e-10, atol=1e-13)
    assert o.iterations == (0, 1, 2, 3, 4) and o.first[-1] < o.first[0]
    # The identity on the oracle's side: DANE from its definitions is Algorithm 3, at rounding.
    dane = _dane_one_svrg_pass_dense(pb, 4, m, h, seed=5)
    for a, b in zip(dane, ref):
        assert np.abs(a - b).max() <= 1e-12 * max(1.0, np.abs(b).max())
    # With μ > 0 the subproblem differs, and so does the dense DANE: the reference is not Algorithm 3 itself.
    assert np.abs(_dane_one_svrg_pass_dense(pb, 1, m, h, seed=5, mu=0.5)[1] - ref[1]).max() > 1e-3
    # The overlay's distances are Proposition 1's figures (the one run both read), at rounding.
    r = P.proposition_1(pb, local_steps=m, stepsize=h, iterations=4, seed=5)
    assert o.distances[0] == 0.0 and o.distances[1:] == r.differences and o.holds == r.holds
    assert o.holds and o.distance <= 1e-12 * max(1.0, o.scale)
    assert f"m = {m} steps with h = {h:.3g}" in o.settings and f"K = {pb.data.n_nodes} nodes" in o.settings
    assert o.scale == pytest.approx(max(np.abs(w).max() for w in ref), rel=1e-10)


def _dual_method_images_dense(pb, alpha0, sigma, T):
    """Algorithm 6 (Appendix A) for the squared loss, densely: h_k = argmin D_k^t(u) of eq. (15),
    whose gradient ∇_kξ(α)/(λn²) + σ X_kX_kᵀu/(λn²) + (α_k + u − y_k)/n (X_k here n_k × d) is linear
    in u; α ← α + h.  Returns the images (1/(λn)) X α^t, eq. (14), t = 0..T."""
    X, y, lam, n = pb.X.toarray(), pb.y, pb.lam, pb.n
    alpha = alpha0.copy()
    out = [X.T @ alpha / (lam * n)]
    for _ in range(T):
        grad_xi = X @ (X.T @ alpha)
        h = np.empty(n)
        for k in range(pb.data.n_nodes):
            s = pb.data.node_slice(k)
            M = sigma / (lam * n) * X[s] @ X[s].T + np.eye(s.stop - s.start)
            h[s] = np.linalg.solve(M, y[s] - alpha[s] - grad_xi[s] / (lam * n))
        alpha = alpha + h
        out.append(X.T @ alpha / (lam * n))
    return out


def test_theorem_5_overlay_is_the_theorems_figure_and_converges_to_the_closed_form_optimum():
    pb, f_star = equivalence_problem("identical-nodes", "squared")
    assert f_star == pytest.approx(_ridge_star(pb), rel=1e-10, abs=1e-12)
    o = theorem_5_overlay(pb, f_star, iterations=6, start="random", seed=2)
    alpha0 = np.random.default_rng(2).normal(size=pb.n)
    r = P.theorem_5(pb, alpha0=alpha0, iterations=6)
    assert o.distances == r.differences and o.holds == r.holds is True and o.distance <= 1e-9
    # The second curve is Algorithm 6's image, from a dense transcription (σ = K by default).
    K, n, X = pb.data.n_nodes, pb.n, pb.X.toarray()
    images = _dual_method_images_dense(pb, alpha0, K, 6)
    # Rounding allowed: each α update is a solve with M_k, relative error ≲ κ(M_k) n ε, over 6 of them;
    # f is a sum of n + d nonnegative terms (relative n + d ε) and moves by ‖∇f‖₁ ‖δw‖_∞ with w.
    eps = np.finfo(float).eps
    kappa = max(np.linalg.cond(K / (pb.lam * n) * X[s] @ X[s].T + np.eye(s.stop - s.start))
                for s in map(pb.data.node_slice, range(K)))
    w_rel = 6 * kappa * n * eps
    for gap, w in zip(o.second, images):
        f = 0.5 * np.mean((X @ w - pb.y) ** 2) + 0.5 * pb.lam * w @ w
        grad = X.T @ (X @ w - pb.y) / n + pb.lam * w
        tol = (n + pb.d) * eps * (f + f_star) + np.abs(grad).sum() * w_rel * np.abs(w).max()
        assert abs(gap - (f - f_star)) <= tol
    assert o.scale == pytest.approx(max(np.abs(w).max() for w in images), rel=w_rel)
    # The two curves are f of the same iterates: equal to the distance's order.
    np.testing.assert_allclose(o.first, o.second, rtol=1e-8, atol=1e-12)
    # Start: w^0 = (1/(λn)) X α^0, so f(w^0) − f* is a dense computation.
    X = pb.X.toarray()
    w0 = X.T @ alpha0 / (pb.lam * pb.n)
    f0 = 0.5 * np.mean((X @ w0 - pb.y) ** 2) + 0.5 * pb.lam * w0 @ w0
    assert o.first[0] == pytest.approx(f0 - f_star, rel=1e-10)
    # "converges for any ridge regression problem and any data partitioning" (Appendix A).
    assert o.first[-1] < 1e-3 * o.first[0]


def test_theorem_5_holds_for_a_sigma_too_small_for_convergence():
    """The theorem is an identity of the two sequences for every σ, whether or not they converge."""
    pb, f_star = equivalence_problem("google-plus-small?nodes=40", "squared")
    o = theorem_5_overlay(pb, f_star, iterations=8, sigma=1.0)
    assert o.holds and o.distance <= 1e-9
    assert max(o.first) > o.first[0]  # σ = 1 < σ_min here: the primal method oversteps
    assert "σ = 1" in o.settings


def test_the_equivalence_data_all_build():
    for spec in EQUIVALENCE_DATA:
        pb, f_star = equivalence_problem(spec, "squared")
        assert pb.n > 0 and np.isfinite(f_star)


@pytest.mark.parametrize("kw,word", [(dict(iterations=0), "iterations"), (dict(iterations=2.5), "iterations"),
                                     (dict(start="ones"), "start"), (dict(sigma=1e6), "sigma")])
def test_theorem_5_overlay_names_a_bad_setting(kw, word):
    pb, f_star = equivalence_problem("identical-nodes", "squared")
    with pytest.raises(ParameterError, match=word):
        theorem_5_overlay(pb, f_star, **kw)


def test_theorem_5_overlay_refuses_a_loss_other_than_squared():
    pb, f_star = equivalence_problem("identical-nodes", "logistic")
    with pytest.raises(ParameterError, match="squared"):
        theorem_5_overlay(pb, f_star)
    with pytest.raises(ParameterError, match="iterations"):
        proposition_1_overlay(pb, f_star, iterations=201)
