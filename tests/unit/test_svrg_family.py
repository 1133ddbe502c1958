"""The SVRG family and DANE against plain dense references of the paper's pseudo-code,
the exact identities of Section 3 (Proposition 1; FSVRG with K = 1 is SVRG), the
desirable properties (A) and (D) of Section 3.1, convergence with default
hyperparameters, and DANE's degradation with K that the paper reports.

The references below are written from Algorithms 1-4 and eq. (10) directly: dense
vectors, one Python step per sample, no lazy updates.  They draw their samples through
the documented contract (``rng(SAMPLE_STREAM)``: per-node stable argsort of
``random(n)`` keys for permutations, one ``integers(0, highs)`` call for uniform draws).
"""

from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import minimize

from problems import masked_data
from fedviz.algorithms import _svrg_kernels as kernels
from fedviz.algorithms import sgd as sgd_module
from fedviz.algorithms._svrg_kernels import SAMPLE_STREAM
from fedviz.algorithms.base import StopRequested
from fedviz.algorithms.dane import DANE
from fedviz.algorithms.fsvrg import FSVRG
from fedviz.algorithms.naive_fsvrg import NaiveFSVRG
from fedviz.algorithms.one_shot import OneShotAveraging
from fedviz.algorithms.sgd import SGD
from fedviz.algorithms.svrg import SVRG
from fedviz.data.dataset import FederatedDataset
from fedviz.errors import ParameterError
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve


# ----------------------------------------------------------------------------- problems
def _problem(loss="logistic", partition="iid", *, seed=0, n=120, d=25, K=5, lam=0.05, density=0.25):
    """Sparse random data with a bias column, a column in no example (ω = 0), an explicit
    stored zero, and either a random (IID) partition or one sorted by the target into
    unbalanced contiguous groups (non-IID; many features then miss some nodes):
    :func:`problems.masked_data` with this module's sizes."""
    ds, _, _ = masked_data(n=n, d=d, K=K, density=density, seed=seed, regression=loss == "squared",
                           partition="iid" if partition == "iid" else "sorted", explicit_zero=True)
    return Problem(ds, loss, lam)


def _dense(pb):
    return pb.X.toarray(), pb.y, pb.data.offsets, pb.lam


def _dphi(pb, z, y):
    return float(pb.loss.deriv(np.array([z]), np.array([y]))[0])


def _full_grad(pb, X, w):
    return X.T @ pb.loss.deriv(X @ w, pb.y) / pb.n + pb.lam * w


# Samples through the documented contract, for the algorithm's current iteration.
def _permutations(algo, ptr):
    keys = algo.rng(SAMPLE_STREAM).random(int(ptr[-1]))
    return [np.argsort(keys[a:b], kind="stable") for a, b in zip(ptr[:-1], ptr[1:])]


def _uniform(algo, sizes, counts):
    draws = algo.rng(SAMPLE_STREAM).integers(0, np.repeat(sizes, counts))
    return np.split(draws, np.cumsum(counts)[:-1])


# ----------------------------------------------------------------------------- references
def _ref_fsvrg(pb, w, orders, h, local_stepsize=True, size_weights=True, gradient_scaling=True,
               aggregate_scaling=True):
    """Algorithm 4, with S_k on the data term of the gradient difference only."""
    X, y, off, lam = _dense(pb)
    n, K = pb.n, pb.data.n_nodes
    g = _full_grad(pb, X, w)
    nz = X != 0
    phi = nz.mean(axis=0)
    omega = np.zeros(pb.d)
    total = np.zeros(pb.d)
    for k in range(K):
        rows = slice(off[k], off[k + 1])
        nk = off[k + 1] - off[k]
        phi_k = nz[rows].mean(axis=0)
        S = np.where(phi_k > 0, phi / np.where(phi_k > 0, phi_k, 1.0), 1.0) if gradient_scaling \
            else np.ones(pb.d)
        omega += nz[rows].any(axis=0)
        hk = h / nk if local_stepsize else h
        wk = w.copy()
        for i in off[k] + orders[k]:
            x = X[i]
            diff = (_dphi(pb, x @ wk, y[i]) - _dphi(pb, x @ w, y[i])) * S * x + lam * (wk - w)
            wk = wk - hk * (diff + g)
        total += (nk / n if size_weights else 1.0 / K) * (wk - w)
    A = np.where(omega > 0, K / np.where(omega > 0, omega, 1.0), 1.0) if aggregate_scaling else 1.0
    return w + A * total


def _ref_naive(pb, w, draws, h):
    """Algorithm 3."""
    X, y, off, lam = _dense(pb)
    g = _full_grad(pb, X, w)
    K = pb.data.n_nodes
    total = np.zeros(pb.d)
    for k in range(K):
        wk = w.copy()
        for i in off[k] + draws[k]:
            x = X[i]
            wk = wk - h * ((_dphi(pb, x @ wk, y[i]) - _dphi(pb, x @ w, y[i])) * x
                           + lam * (wk - w) + g)
        total += (wk - w) / K
    return w + total


def _ref_svrg(pb, w, sample, h):
    """Algorithm 1."""
    X, y, _, lam = _dense(pb)
    g = _full_grad(pb, X, w)
    v = w.copy()
    for i in sample:
        x = X[i]
        v = v - h * ((_dphi(pb, x @ v, y[i]) - _dphi(pb, x @ w, y[i])) * x + lam * (v - w) + g)
    return v


def _ref_dane_svrg(pb, w, draws, h, m, passes, eta, mu):
    """Algorithm 2 with SVRG (Algorithm 1) on the subproblem (10), started at w^t."""
    X, y, off, lam = _dense(pb)
    g = _full_grad(pb, X, w)
    K = pb.data.n_nodes
    out = []
    for k in range(K):
        Xk, yk = X[off[k]:off[k + 1]], y[off[k]:off[k + 1]]

        def grad_F(v, Xk=Xk, yk=yk):
            return Xk.T @ pb.loss.deriv(Xk @ v, yk) / len(yk) + lam * v

        a = grad_F(w) - eta * g

        def grad_phi(v, a=a, grad_F=grad_F):
            return grad_F(v) - a + mu * (v - w)

        wk = w.copy()
        for p in range(passes):
            snap = wk.copy()
            G = grad_phi(snap)
            for i in off[k] + draws[k][p * m:(p + 1) * m]:
                x = X[i]

                def gi(v, x=x, i=i, a=a):
                    return _dphi(pb, x @ v, y[i]) * x + lam * v - a + mu * (v - w)

                wk = wk - h * (gi(wk) - gi(snap) + G)
        out.append(wk)
    return np.mean(out, axis=0)


def _minimise_dense(fun_grad_hess, x0):
    res = minimize(lambda v: fun_grad_hess(v)[0], x0, jac=lambda v: fun_grad_hess(v)[1],
                   hess=lambda v: fun_grad_hess(v)[2], method="trust-exact",
                   options={"gtol": 1e-13, "maxiter": 500})
    return res.x


def _ref_dane_exact(pb, w, eta, mu):
    """Algorithm 2 with every subproblem (10) minimised over all of R^d by scipy."""
    X, y, off, lam = _dense(pb)
    g = _full_grad(pb, X, w)
    out = []
    for k in range(pb.data.n_nodes):
        Xk, yk = X[off[k]:off[k + 1]], y[off[k]:off[k + 1]]
        nk = len(yk)
        a = Xk.T @ pb.loss.deriv(Xk @ w, yk) / nk + lam * w - eta * g

        def fgh(v, Xk=Xk, yk=yk, nk=nk, a=a):
            z = Xk @ v
            f = pb.loss.value(z, yk).mean() + 0.5 * lam * v @ v - a @ v + 0.5 * mu * (v - w) @ (v - w)
            gr = Xk.T @ pb.loss.deriv(z, yk) / nk + (lam + mu) * v - a - mu * w
            H = (Xk.T * pb.loss.deriv2(z, yk)) @ Xk / nk + (lam + mu) * np.eye(len(v))
            return f, gr, H

        out.append(_minimise_dense(fgh, w.copy()))
    return np.mean(out, axis=0)


# ----------------------------------------------------------------------------- kernels vs references
ABLATIONS = [
    {},
    {"local_stepsize": False},
    {"size_weights": False},
    {"gradient_scaling": False},
    {"aggregate_scaling": False},
    {"local_stepsize": False, "size_weights": False, "gradient_scaling": False,
     "aggregate_scaling": False},
]


@pytest.mark.parametrize("switches", ABLATIONS, ids=lambda s: ",".join(s) or "algorithm-4")
@pytest.mark.parametrize("loss", ["logistic", "squared", "smoothed-hinge"])
def test_fsvrg_matches_the_dense_reference(loss, switches):
    pb = _problem(loss, "noniid", seed=1)
    h = 0.6 if switches.get("local_stepsize", True) else 0.02
    algo = FSVRG(pb, stepsize=h, safeguard=False, **switches)
    w = algo.w.copy()
    for _ in range(3):
        w = _ref_fsvrg(pb, w, _permutations(algo, pb.data.offsets), h, **switches)
        algo.step()
        np.testing.assert_allclose(algo.w, w, rtol=0, atol=1e-12 * max(1.0, np.abs(w).max()))


@pytest.mark.parametrize("K", [1, 5])
@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_fsvrg_default_stepsize_follows_its_help_text(loss, K):
    """Safeguard on: h = 4 n̄/L̄.  Off: min(n̄/(2L̄), 4/L), no cap for K = 1.  local_stepsize off: ÷ n̄.
    L̄ = (1/γ) mean‖x_i‖² + λ and L = (1/γ) λ_max(XᵀX)/n + λ from the dense matrix (γ = 4 logistic, 1 squared)."""
    pb = _problem(loss, "noniid", seed=3, K=K)
    X = pb.X.toarray()
    gamma = 4.0 if loss == "logistic" else 1.0
    L_bar = (X * X).sum(axis=1).mean() / gamma + pb.lam
    L = np.linalg.eigvalsh(X.T @ X / pb.n).max() / gamma + pb.lam
    n_bar = pb.n / K
    derived = lambda **hp: FSVRG.derived_defaults(pb, hp)["stepsize"]  # noqa: E731
    assert derived() == pytest.approx(4 * n_bar / L_bar, rel=1e-12)
    assert derived(local_stepsize=False) == pytest.approx(4 / L_bar, rel=1e-12)
    cautious = n_bar / (2 * L_bar) if K == 1 else min(n_bar / (2 * L_bar), 4 / L)
    assert derived(safeguard=False) == pytest.approx(cautious, rel=0.02)  # L is a Lanczos estimate, rounded up 1%
    assert FSVRG(pb).h == derived() and FSVRG(pb, safeguard=False).h == derived(safeguard=False)


def _judged(pb, trial, w_acc, h, rejected):
    """The monotone safeguard's rule (FSVRG, SVRG), densely: the trial adopted when f did not rise,
    else the accepted point kept and h halved.  Returns (accepted point, h, rejections)."""
    if trial is None or pb.value(trial) <= pb.value(w_acc):
        return (w_acc if trial is None else trial), h, rejected
    return w_acc, h / 2, rejected + 1


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_fsvrg_safeguard_matches_the_dense_reference(loss):
    """The safeguard: trial = Algorithm 4's step from the last accepted point; adopted when f did
    not rise, else h halves and the step is retaken from the accepted point (dense reference)."""
    pb = _problem(loss, "noniid", seed=1)
    h = 40.0  # far too long a step: the safeguard must reject some trials
    algo = FSVRG(pb, stepsize=h)
    w_acc, trial, rejected = algo.w.copy(), None, 0
    rounds = 0
    for _ in range(8):
        orders = _permutations(algo, pb.data.offsets)
        w_acc, h, rejected = _judged(pb, trial, w_acc, h, rejected)
        trial = _ref_fsvrg(pb, w_acc, orders, h)
        algo.step()
        rounds += 2
        np.testing.assert_allclose(algo.w, w_acc, rtol=0, atol=1e-12 * max(1.0, np.abs(w_acc).max()))
        assert algo.h == h and algo.rejected == rejected
        assert algo.rounds == rounds and algo.grad_evals == rounds * pb.n  # rejected trials stay counted
        f, _ = algo.objective_and_gradient()  # the cached metrics are those of the model shown
        assert f == pytest.approx(pb.value(w_acc), rel=1e-12)
    assert 0 < rejected < 8 and pb.value(w_acc) < pb.value(np.zeros(pb.d))


def test_fsvrg_lazy_updates_stay_exact_with_the_papers_tiny_lambda():
    """λ = 1/n: the just-in-time regulariser must not lose digits over long gaps."""
    pb = _problem("logistic", "iid", seed=2, n=150, lam=None, density=0.1)
    assert pb.lam == 1.0 / 150
    algo = FSVRG(pb, stepsize=5.0, safeguard=False)
    w = algo.w.copy()
    for _ in range(3):
        w = _ref_fsvrg(pb, w, _permutations(algo, pb.data.offsets), 5.0)
        algo.step()
        np.testing.assert_allclose(algo.w, w, rtol=0, atol=1e-12 * max(1.0, np.abs(w).max()))


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_naive_fsvrg_matches_the_dense_reference(loss):
    pb = _problem(loss, "noniid", seed=3)
    m, h = 17, 0.05
    algo = NaiveFSVRG(pb, local_steps=m, stepsize=h)
    K = pb.data.n_nodes
    w = algo.w.copy()
    for _ in range(3):
        w = _ref_naive(pb, w, _uniform(algo, pb.data.node_sizes, np.full(K, m)), h)
        algo.step()
        np.testing.assert_allclose(algo.w, w, rtol=0, atol=1e-12 * max(1.0, np.abs(w).max()))


@pytest.mark.parametrize("sampling,m", [("uniform", 150), ("permutation", 250)])
def test_svrg_matches_the_dense_reference(sampling, m):
    pb = _problem("logistic", "iid", seed=4)
    h = 0.05
    algo = SVRG(pb, stepsize=h, inner_steps=m, sampling=sampling, safeguard=False)  # Algorithm 1 as printed
    n = pb.n
    w = algo.w.copy()
    for _ in range(3):
        if sampling == "uniform":
            sample = _uniform(algo, [n], [m])[0]
        else:
            blocks = -(-m // n)
            sample = np.concatenate(_permutations(algo, np.arange(blocks + 1) * n))[:m]
        w = _ref_svrg(pb, w, sample, h)
        algo.step()
        np.testing.assert_allclose(algo.w, w, rtol=0, atol=1e-12 * max(1.0, np.abs(w).max()))
    assert algo.rounds == 0 and algo.grad_evals == 3 * (n + m)


@pytest.mark.parametrize("loss, start", [("logistic", 2.0), ("squared", 0.5)])
def test_svrg_default_stepsize_follows_its_help_text(loss, start):
    """2/L̄ with the safeguard, 1/(2L̄) for the squared loss (φ'' is the bound at every margin) and
    without the safeguard; L̄ = (1/γ) mean‖x_i‖² + λ, from the data."""
    pb = _problem(loss, "iid", seed=4)
    X, _, _, lam = _dense(pb)
    L_bar = pb.loss.smoothness * np.mean(np.sum(X * X, axis=1)) + lam
    assert SVRG(pb).h == pytest.approx(start / L_bar, rel=1e-12)
    assert SVRG(pb, safeguard=False).h == pytest.approx(0.5 / L_bar, rel=1e-12)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_svrg_safeguard_matches_the_dense_reference(loss):
    """SVRG's safeguard (FSVRG's rule): an epoch from the last accepted anchor; its result adopted when f
    did not rise, else h halves and the epoch is retaken from the accepted anchor (dense reference)."""
    pb = _problem(loss, "noniid", seed=1)
    h = 8.0 / pb.average_example_smoothness  # too long a step: the safeguard must reject some epochs
    algo = SVRG(pb, stepsize=h)
    n, m = pb.n, algo.m
    w_acc, trial, rejected = algo.w.copy(), None, 0
    for t in range(8):
        sample = _uniform(algo, [n], [m])[0]
        w_acc, h, rejected = _judged(pb, trial, w_acc, h, rejected)
        trial = _ref_svrg(pb, w_acc, sample, h)
        algo.step()
        np.testing.assert_allclose(algo.w, w_acc, rtol=0, atol=1e-12 * max(1.0, np.abs(w_acc).max()))
        assert algo.h == h and algo.rejected == rejected
        assert algo.grad_evals == (t + 1) * (n + m)  # rejected epochs stay counted
        f, _ = algo.objective_and_gradient()  # the cached metrics are those of the model shown
        assert f == pytest.approx(pb.value(w_acc), rel=1e-12)
    assert 0 < rejected < 8 and pb.value(w_acc) < pb.value(np.zeros(pb.d))


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_inexact_dane_matches_the_dense_reference(loss):
    """Several SVRG passes on the subproblem (10) with η ≠ 1 and μ > 0."""
    pb = _problem(loss, "noniid", seed=5)
    m, passes, h, eta, mu = 11, 3, 0.04, 0.7, 0.3
    algo = DANE(pb, solver="svrg", local_steps=m, local_passes=passes, stepsize=h, eta=eta, mu=mu, safeguard=False)
    K = pb.data.n_nodes
    w = algo.w.copy()
    for _ in range(3):
        draws = _uniform(algo, pb.data.node_sizes, np.full(K, m * passes))
        w = _ref_dane_svrg(pb, w, draws, h, m, passes, eta, mu)
        algo.step()
        np.testing.assert_allclose(algo.w, w, rtol=0, atol=1e-12 * max(1.0, np.abs(w).max()))


@pytest.mark.parametrize("loss,eta,mu", [("logistic", 1.0, 0.0), ("logistic", 0.8, 0.5),
                                         ("squared", 1.0, 0.2)])
def test_exact_dane_matches_dense_subproblem_minimisers(loss, eta, mu):
    """Every subproblem minimised over all of R^d by scipy: this checks the vectorised
    per-node Newton-CG and the closed form off each node's support."""
    pb = _problem(loss, "noniid", seed=6, lam=0.1)
    algo = DANE(pb, eta=eta, mu=mu, safeguard=False)
    w = algo.w.copy()
    for _ in range(2):
        w = _ref_dane_exact(pb, w, eta, mu)
        algo.step()
        np.testing.assert_allclose(algo.w, w, rtol=0, atol=1e-8 * max(1.0, np.abs(w).max()))


def _ref_dane_safeguarded(pb, T, eta=1.0):
    """DANE's safeguard from its help text, on the dense reference: μ starts at L̄/1024 (L̄ = (1/γ) mean‖x_i‖²
    + λ, :attr:`Problem.average_example_smoothness`); a trial that
    raises f is dropped and μ multiplied by 8, one that does not is adopted and μ halved; the model is
    the last adopted point.  Returns the models and μ after each iteration."""
    mu = pb.average_example_smoothness / 1024
    w = np.zeros(pb.d)
    trial, models, mus = None, [], []
    for _ in range(T):
        if trial is not None:
            if pb.value(trial) <= pb.value(w):
                w, mu = trial, mu / 2
            else:
                mu = 8 * mu
        trial = _ref_dane_exact(pb, w, eta, mu)
        models.append(w)
        mus.append(mu)
    return models, mus


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_dane_s_safeguard_matches_its_dense_reference(loss):
    """The default (the safeguard, μ adapted) against its rule run on the dense reference: the same
    trials adopted or dropped, the same μ, the same models; every iteration two rounds, and f never rises."""
    pb = _problem(loss, "noniid", seed=6, lam=0.01, K=8)
    algo = DANE(pb)
    models, mus = _ref_dane_safeguarded(pb, 8)
    f = [pb.value(algo.w)]
    for w, mu in zip(models, mus):
        algo.step()
        assert algo.mu == pytest.approx(mu, rel=1e-12)
        np.testing.assert_allclose(algo.w, w, rtol=0, atol=1e-8 * max(1.0, np.abs(w).max()))
        f.append(pb.value(algo.w))
    assert np.all(np.diff(f) <= 0)
    assert algo.rounds == 2 * len(models)


def test_dane_s_safeguard_converges_where_mu_0_diverges():
    """On nodes that hold slices of sorted data, Algorithm 2 at the paper's μ = 0 diverges (Section 3.4);
    the default drops the rising trials, raises μ, and converges — every dropped trial counted."""
    pb = _ridge_partitioned(8, "sorted")
    f_star = solve(pb).objective
    paper = _dane_gaps(pb, 20, mu=0.0)
    assert paper[-1] > paper[0]
    algo = DANE(pb)
    gaps = [pb.value(algo.w) - f_star]
    for _ in range(20):
        algo.step()
        gaps.append(pb.value(algo.w) - f_star)
    assert algo.rejected >= 1 and np.all(np.diff(gaps) <= 0) and gaps[-1] <= 1e-6 * gaps[0]
    assert algo.rounds == 40 and algo.grad_evals >= 20 * pb.n


def test_sgd_matches_the_dense_reference():
    pb = _problem("logistic", "iid", seed=7)
    X, y, _, lam = _dense(pb)
    n, h = pb.n, 0.3
    for schedule in ("decaying", "constant"):
        algo = SGD(pb, stepsize=h, schedule=schedule)
        w = algo.w.copy()
        for it in range(3):
            sample = _uniform(algo, [n], [n])[0]
            for t, i in enumerate(sample):
                ht = h / (1 + h * lam * (it * n + t)) if schedule == "decaying" else h
                w = w - ht * (_dphi(pb, X[i] @ w, y[i]) * X[i] + lam * w)
            algo.step()
            np.testing.assert_allclose(algo.w, w, rtol=0, atol=1e-12)


def test_one_shot_averages_the_local_minimisers_once():
    pb = _problem("logistic", "noniid", seed=8, lam=0.1)
    X, y, off, lam = _dense(pb)
    ref = np.zeros(pb.d)
    for k in range(pb.data.n_nodes):
        Xk, yk = X[off[k]:off[k + 1]], y[off[k]:off[k + 1]]

        def fgh(v, Xk=Xk, yk=yk):
            z = Xk @ v
            return (pb.loss.value(z, yk).mean() + 0.5 * lam * v @ v,
                    Xk.T @ pb.loss.deriv(z, yk) / len(yk) + lam * v,
                    (Xk.T * pb.loss.deriv2(z, yk)) @ Xk / len(yk) + lam * np.eye(pb.d))

        ref += len(yk) / pb.n * _minimise_dense(fgh, np.zeros(pb.d))
    algo = OneShotAveraging(pb)
    algo.step()
    np.testing.assert_allclose(algo.w, ref, rtol=0, atol=1e-9)
    first = (algo.w.copy(), algo.rounds, algo.grad_evals)
    algo.step()
    assert np.array_equal(algo.w, first[0]) and (algo.rounds, algo.grad_evals) == first[1:]
    assert algo.rounds == 1 and algo.vectors_up == pb.data.n_nodes


def test_lazy_step_tables_are_accurate_for_tiny_decay():
    """r^Δ and (1 − r^Δ)/(1 − r) against exact rational arithmetic, r = 1 − a, a tiny."""
    for a in (1e-9, 3.7e-5, 0.3):
        m = 300
        pw, ge = np.empty(m + 1), np.empty(m + 1)
        kernels._geom_table(a, m, pw, ge)
        r = 1 - Fraction(a)
        for dlt in range(0, m + 1, 7):
            exact_pw = r ** dlt
            exact_ge = (1 - exact_pw) / Fraction(a)
            # exp(Δ log r) is accurate to ~|Δ log r| ulp: relative 1e-13 covers |Δ log r| ≤ 100.
            assert abs(pw[dlt] - float(exact_pw)) <= 1e-13 * float(exact_pw)
            assert abs(ge[dlt] - float(exact_ge)) <= 1e-14 * max(float(exact_ge), 1e-300)


# ----------------------------------------------------------------------------- identities
def test_proposition_1_dane_with_one_svrg_pass_is_naive_fsvrg():
    from fedviz.properties import proposition_1

    pb = _problem("logistic", "noniid", seed=9, n=200, d=30, K=6)
    m, h = 23, 0.2
    measured = proposition_1(pb, local_steps=m, stepsize=h, iterations=6)
    dane = DANE(pb, eta=1.0, mu=0.0, safeguard=False, solver="svrg", local_passes=1, local_steps=m, stepsize=h)
    naive = NaiveFSVRG(pb, local_steps=m, stepsize=h)
    for t in range(6):
        dane.step()
        naive.step()
        np.testing.assert_allclose(dane.w, naive.w, rtol=0, atol=1e-12 * max(1.0, np.abs(naive.w).max()))
        assert measured.differences[t] == np.abs(dane.w - naive.w).max()  # the figure is this run's
    assert measured.holds
    assert np.abs(naive.w).max() > 0.1  # the iterates did move


@pytest.mark.parametrize("safeguard,h", [(False, 20.0), (True, 400.0)], ids=["as-printed", "safeguarded"])
def test_fsvrg_on_one_node_is_svrg_with_stepsize_h_over_n(safeguard, h):
    """Section 3.1's property (B) made concrete; with both safeguards on, at a step long enough to be
    rejected, the same trials are dropped and the same h halved."""
    pb = _problem("logistic", "iid", seed=10, K=1)
    assert pb.data.n_nodes == 1
    fsvrg = FSVRG(pb, stepsize=h, safeguard=safeguard)
    svrg = SVRG(pb, stepsize=h / pb.n, inner_steps=pb.n, sampling="permutation", safeguard=safeguard)
    for _ in range(6):
        fsvrg.step()
        svrg.step()
        np.testing.assert_allclose(fsvrg.w, svrg.w, rtol=0, atol=1e-12 * max(1.0, np.abs(svrg.w).max()))
        assert svrg.h == pytest.approx(fsvrg.h / pb.n, rel=1e-15)
    assert (svrg.rejected > 0) == safeguard and svrg.rejected == getattr(fsvrg, "rejected", 0)


# ----------------------------------------------------------------------------- properties of Section 3.1
@pytest.mark.parametrize("make", [
    lambda pb, w: FSVRG(pb, w0=w),
    lambda pb, w: NaiveFSVRG(pb, w0=w),
    lambda pb, w: SVRG(pb, w0=w),
    lambda pb, w: DANE(pb, w0=w),
    lambda pb, w: DANE(pb, w0=w, solver="svrg", local_passes=2),
], ids=["fsvrg", "naive-fsvrg", "svrg", "dane-exact", "dane-svrg"])
@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_property_a_started_at_the_optimum_it_stays(make, loss):
    pb = _problem(loss, "noniid", seed=11, lam=0.05)
    from fedviz.properties import stays_at_optimum

    opt = solve(pb, gtol=1e-14, use_cache=False)
    algo = make(pb, opt.w)
    measured = stays_at_optimum(algo, opt.w, iterations=3)
    assert measured.max_abs_drift <= 1e-10
    assert np.abs(algo.w - opt.w).max() <= 1e-10


def _identical_nodes(m=40, d=8, K=5, seed=12):
    """K nodes holding copies of the same m logistic-regression rows (property (D)'s data)."""
    rng = np.random.default_rng(seed)
    X1 = rng.normal(size=(m, d))
    y1 = np.where(X1 @ rng.normal(size=d) + 0.5 * rng.normal(size=m) > 0, 1.0, -1.0)
    ds = FederatedDataset.from_assignment(np.tile(X1, (K, 1)), np.tile(y1, K), np.repeat(np.arange(K), m))
    return Problem(ds, "logistic", 0.01)


def test_property_d_exact_dane_solves_identical_nodes_in_one_iteration():
    pb = _identical_nodes()
    f_star = solve(pb).objective
    algo = DANE(pb, safeguard=False)  # the paper's default setting, μ = 0 and η = 1 (Algorithm 2 as printed)
    assert pb.value(algo.w) - f_star > 0.1
    from fedviz.properties import converges_in_few_rounds

    measured = converges_in_few_rounds(algo, f_star, case="D", tol=1e-12, max_rounds=2)
    assert measured.data_condition and measured.holds and measured.iterations == 1
    assert pb.value(algo.w) - f_star <= 1e-12
    assert algo.rounds == measured.rounds == 2


def test_exact_dane_at_the_optimum_takes_no_newton_step():
    """Once w^t is the optimum up to rounding, every subproblem's gradient at w^t is rounding: the exact
    solver stops there instead of chasing rtol · ‖∇Φ_k(w^t)‖ through noise (50 Newton steps of up to 500
    CG iterations a round before), and w^t stays the optimum to rounding."""
    pb = _identical_nodes()
    opt = solve(pb)
    algo = DANE(pb, w0=opt.w)
    for _ in range(3):
        algo.step()
        assert algo.local.newton_iterations == 0
    kappa = pb.smoothness / pb.lam
    assert np.abs(algo.w - opt.w).max() <= 1e3 * kappa * np.finfo(float).eps * max(1.0, np.abs(opt.w).max())


# ----------------------------------------------------------------------------- convergence with defaults
@pytest.mark.parametrize("cls", [FSVRG, SVRG], ids=["fsvrg", "svrg"])
@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("partition", ["iid", "noniid"])
def test_converges_with_default_hyperparameters(cls, loss, partition):
    pb = _problem(loss, partition, seed=13, n=300, d=15, K=5, lam=1e-2, density=0.4)
    f_star = solve(pb).objective
    budget = 40  # iterations; each is two rounds (FSVRG) or two passes over the data (SVRG)
    algo = cls(pb)
    for _ in range(budget):
        algo.step()
        if pb.value(algo.w) - f_star <= 1e-6:
            break
    assert pb.value(algo.w) - f_star <= 1e-6


# ----------------------------------------------------------------------------- DANE and K
def _ridge_partitioned(K, how, seed=14, n=960, d=10, lam=1e-2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.linspace(0.3, 2.0, d)
    y = X @ rng.normal(size=d) + 0.5 * rng.normal(size=n)
    if how == "iid":
        nodes = np.arange(n) % K
    else:  # node k holds the k-th slice of the examples sorted by their first feature
        nodes = np.argsort(np.argsort(X[:, 0])) * K // n
    ds = FederatedDataset.from_assignment(X, y, nodes, meta={"task": "regression"})
    return Problem(ds, "squared", lam)


def _dane_gaps(pb, T, **hyper):
    """f(w^t) − f* for t = 0..T."""
    f_star = solve(pb).objective
    algo = DANE(pb, **{"safeguard": False, **hyper})
    gaps = [pb.value(algo.w) - f_star]
    for _ in range(T):
        algo.step()
        gaps.append(pb.value(algo.w) - f_star)
    return np.array(gaps)


def test_dane_with_mu_0_degrades_as_k_grows_and_diverges_on_non_iid_data():
    """Section 3.4: 'For small number of nodes K, the algorithm converges quickly with
    μ = 0.  However [...] it can diverge quickly with growing K.'  Observed here on ridge
    regression (n = 960, d = 10), after T = 4 iterations: IID, the gap grows with K and
    DANE diverges once n_k = 15 is near d; non-IID (nodes hold slices of the data sorted
    by a feature), it diverges from K = 4 on, faster for larger K."""
    Ks = (2, 4, 8, 16, 32, 64)
    for how, diverging in (("iid", (64,)), ("sorted", (4, 8, 16, 32, 64))):
        runs = {K: _dane_gaps(_ridge_partitioned(K, how), 4) for K in Ks}
        finals = [runs[K][-1] for K in Ks]
        assert all(a < b for a, b in zip(finals[:-1], finals[1:])), (how, finals)
        assert runs[2][-1] <= 1e-10
        for K in diverging:  # every iteration after the first is worse than the one before
            assert np.all(np.diff(runs[K][1:]) > 0), (how, K, runs[K])
        for K in set(Ks) - set(diverging):
            assert np.all(np.diff(runs[K]) < 0), (how, K, runs[K])


def test_dane_mu_stabilises_at_the_cost_of_speed():
    """'Bigger μ makes the algorithm more stable at the cost of slower convergence.'"""
    pb = _ridge_partitioned(8, "sorted")
    g0, g1, g2 = (_dane_gaps(pb, 20, mu=mu) for mu in (0.0, 0.1, 1.0))
    assert g0[-1] > g0[0]
    assert g1[-1] <= 1e-8 and g1[-1] < g2[-1] < g2[0]


# ----------------------------------------------------------------------------- bookkeeping
def test_counters_follow_the_conventions():
    pb = _problem("logistic", "noniid", seed=15)
    n, K = pb.n, pb.data.n_nodes
    algos = {"fsvrg": FSVRG(pb), "naive": NaiveFSVRG(pb, local_steps=7),
             "dane": DANE(pb, solver="svrg", local_steps=7, local_passes=2)}
    for a in algos.values():
        a.step()
        a.step()
        assert a.rounds == 4 and a.vectors_up == 4 * K and a.vectors_down == 4 * K
    assert algos["fsvrg"].grad_evals == 2 * (n + n)
    assert algos["naive"].grad_evals == 2 * (n + 7 * K)
    assert algos["dane"].grad_evals == 2 * (n + 2 * 7 * K + n)


@pytest.mark.parametrize("make", [lambda pb, s: FSVRG(pb, seed=s),
                                  lambda pb, s: DANE(pb, seed=s, solver="svrg"),
                                  lambda pb, s: SGD(pb, seed=s)], ids=["fsvrg", "dane-svrg", "sgd"])
def test_same_seed_same_iterates(make):
    pb = _problem("logistic", "iid", seed=16)
    runs = []
    for seed in (3, 3, 4):
        a = make(pb, seed)
        for _ in range(2):
            a.step()
        runs.append(a.w)
    assert np.array_equal(runs[0], runs[1]) and not np.allclose(runs[0], runs[2])


@pytest.mark.parametrize("make", [
    lambda pb: FSVRG(pb, seed=5),
    lambda pb: NaiveFSVRG(pb, seed=5, local_steps=9),
    lambda pb: DANE(pb, seed=5, solver="svrg", local_passes=3, local_steps=7, mu=0.1),
    lambda pb: SVRG(pb, seed=5),
    lambda pb: SVRG(pb, seed=5, sampling="permutation", inner_steps=250),
], ids=["fsvrg", "naive-fsvrg", "dane-svrg-3-passes", "svrg", "svrg-permutation"])
def test_iterates_do_not_depend_on_the_batch_size(make, monkeypatch):
    """Batches only set how often Stop is checked: cut every few steps — inside nodes, across
    DANE's passes, and through the centralised SVRG's single node — the iterates are
    bitwise those of one uncut call."""
    pb = _problem("logistic", "noniid", seed=21, K=6)
    runs = []
    monkeypatch.setattr(kernels, "batch_target", lambda target: target)  # the batch size as given, whatever the threads
    for target in (1e18, 40.0, 1.0):
        monkeypatch.setattr(kernels, "BATCH_WORK", target)
        algo = make(pb)
        calls = []
        algo.stop_requested = lambda: calls.append(1) and False
        for _ in range(2):
            algo.step()
        runs.append((algo.w.copy(), len(calls)))
    (w_one, one), (w_some, some), (w_many, many) = runs
    assert one == 2 and 2 < some < many  # one check per batch, after it
    assert np.array_equal(w_one, w_some) and np.array_equal(w_one, w_many)
    assert np.all(np.isfinite(w_one)) and np.linalg.norm(w_one) > 0


def test_sgd_iterates_do_not_depend_on_the_steps_per_call(monkeypatch):
    pb = _problem("logistic", "iid", seed=22)
    runs = []
    for per_call in (10**9, 7, 1):
        monkeypatch.setattr(sgd_module, "STEPS_PER_CALL", per_call)
        algo = SGD(pb, seed=2)
        for _ in range(3):
            algo.step()
        runs.append(algo.w.copy())
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2])


@pytest.mark.parametrize("make", [lambda pb: FSVRG(pb), lambda pb: DANE(pb), lambda pb: SGD(pb)],
                         ids=["fsvrg", "dane-exact", "sgd"])
def test_stop_is_honoured_between_batches(make, monkeypatch):
    monkeypatch.setattr(kernels, "BATCH_WORK", 1.0)  # every node a batch of its own
    monkeypatch.setattr(sgd_module, "STEPS_PER_CALL", 10)
    pb = _problem("logistic", "noniid", seed=17, K=8)
    algo = make(pb)
    calls = []
    algo.stop_requested = lambda: calls.append(1) or len(calls) >= 2
    w0 = algo.w
    with pytest.raises(StopRequested):
        algo.step()
    assert len(calls) == 2 and algo.w is w0 and algo.iteration == 0


@pytest.mark.parametrize("cls,hyper,name,allowed", [
    (FSVRG, {"stepsize": -1.0}, "fsvrg.stepsize", "> 0"),
    (FSVRG, {"gradient_scaling": "maybe"}, "fsvrg.gradient_scaling", "true or false"),
    (NaiveFSVRG, {"local_steps": 0}, "naive-fsvrg.local_steps", "integer in [1, 1000000]"),
    (SVRG, {"sampling": "cyclic"}, "svrg.sampling", "'uniform', 'permutation'"),
    (SVRG, {"inner_steps": 2.5}, "svrg.inner_steps", "integer"),
    (DANE, {"mu": -0.1}, "dane.mu", ">= 0"),
    (DANE, {"eta": 0.0}, "dane.eta", "> 0"),
    (DANE, {"solver": "lbfgs"}, "dane.solver", "'exact', 'svrg'"),
    (DANE, {"local_tol": 1.0}, "dane.local_tol", "(0, 1)"),
    (DANE, {"local_passes": 0}, "dane.local_passes", "[1, 1000]"),
    (SGD, {"stepsize": 50.0}, "sgd.stepsize", "(0, 1/λ) = (0, 20)"),
    (SGD, {"schedule": "cosine"}, "sgd.schedule", "'decaying', 'constant'"),
    (OneShotAveraging, {"local_tol": 0.0}, "one-shot.local_tol", "(0, 1)"),
    (FSVRG, {"steps": 3}, "fsvrg.steps", "known hyperparameter"),
])
def test_bad_hyperparameters_name_the_parameter_and_range(cls, hyper, name, allowed):
    pb = _problem("logistic", "iid", seed=18)
    with pytest.raises(ParameterError) as e:
        cls(pb, **hyper)
    assert e.value.name == name
    assert allowed in str(e.value)
