"""Client drift traced through the real FedAvg, SCAFFOLD and FSVRG, each local iterate checked
against a plain dense NumPy re-implementation of the local updates (the oracle), the node optima
against SciPy, the plane against an eigendecomposition, and the claims the view makes."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from fedviz.algorithms import get_algorithm
from fedviz.errors import ParameterError
from fedviz.learn.drift import (DriftSettings, drift_problem, drift_view, hyper_for, node_optima, principal_plane,
                                trace)
from fedviz.plots.learn_drift import drift_figure
from problems import sparse_problem

SETTINGS = DriftSettings(nodes=4, rows_per_node=30, features=5, rounds=4, local_steps=6, seed=3)


# -- the oracle: dense NumPy ------------------------------------------------------------------------
def dense(problem):
    X = problem.X.toarray()
    return X, problem.y, problem.data.offsets, problem.lam


def dphi(z, y):
    """φ'(z) of the logistic loss log(1 + exp(−y z))."""
    return -y * expit(-y * z)


def grad_data(X, y, w):
    return X.T @ dphi(X @ w, y) / len(y)


def fedavg_locals(problem, x, eta, E):
    """E full-batch gradient steps on F_k = (1/n_k) Σ φ + (λ/2)‖w‖² from x, on every node."""
    X, y, off, lam = dense(problem)
    out = []
    for k in range(len(off) - 1):
        Xk, yk = X[off[k]:off[k + 1]], y[off[k]:off[k + 1]]
        w = x.copy()
        for _ in range(E):
            w = w - eta * (grad_data(Xk, yk, w) + lam * w)
        out.append(w)
    return np.array(out)


def scaffold_rounds(problem, eta, E, rounds, w0):
    """SCAFFOLD, option II, as fedviz documents it: the data parts s_k of the control variates,
    s = Σ (n_k/n) s_k, local steps y ← y − η (∇F_k(y) + s − s_k), s_k⁺ = the mean data gradient used."""
    X, y, off, lam = dense(problem)
    K, n = len(off) - 1, len(y)
    sizes = np.diff(off)
    s_k = np.zeros((K, X.shape[1]))
    x, servers, locals_ = w0.copy(), [w0.copy()], []
    for _ in range(rounds):
        s = (sizes / n) @ s_k
        ys, new = [], []
        for k in range(K):
            Xk, yk = X[off[k]:off[k + 1]], y[off[k]:off[k + 1]]
            w, used = x.copy(), np.zeros_like(x)
            for _ in range(E):
                g = grad_data(Xk, yk, w)
                used += g
                w = w - eta * (g + lam * w + s - s_k[k])
            ys.append(w)
            new.append(used / E)
        ys = np.array(ys)
        x = x + (sizes / n) @ (ys - x)
        s_k = np.array(new)
        servers.append(x.copy())
        locals_.append(ys)
    return np.array(servers), np.array(locals_)


def fsvrg_locals(problem, x, h, seed, iteration):
    """Algorithm 4 on every node from x: one pass over the node's rows in the order of the documented
    sample stream (keys = default_rng([seed, t, 1]).random(n), a stable argsort per node), local step
    h_k = h/n_k, w ← w − h_k (S_k [∇f_i(w) − ∇f_i(x)]_data + λ(w − x) + ∇f(x)), S_k = Diag(φ^j/φ_k^j)."""
    X, y, off, lam = dense(problem)
    n, d = X.shape
    K = len(off) - 1
    g = grad_data(X, y, x) + lam * x
    keys = np.random.default_rng([seed, iteration, 1]).random(n)
    phi = (X != 0).sum(axis=0) / n
    out = []
    for k in range(K):
        Xk, yk = X[off[k]:off[k + 1]], y[off[k]:off[k + 1]]
        nk = len(yk)
        phik = (Xk != 0).sum(axis=0) / nk
        S = np.where(phik > 0, phi / np.where(phik > 0, phik, 1), 1.0)
        hk = h / nk
        w = x.copy()
        for i in np.argsort(keys[off[k]:off[k + 1]], kind="stable"):
            xi = Xk[i]
            diff = (dphi(xi @ w, yk[i]) - dphi(xi @ x, yk[i])) * S * xi
            w = w - hk * (diff + lam * (w - x) + g)
        out.append(w)
    return np.array(out), g


def aggregate_fsvrg(problem, x, ys):
    X, _, off, _ = dense(problem)
    K = len(off) - 1
    omega = np.array([sum((X[off[k]:off[k + 1], j] != 0).any() for k in range(K)) for j in range(X.shape[1])])
    A = np.where(omega > 0, K / np.maximum(omega, 1), 1.0)
    alpha = np.diff(off) / off[-1]
    return x + A * (alpha @ (ys - x))


# -- the tests --------------------------------------------------------------------------------------
@pytest.mark.parametrize("split", ["iid", "non-iid"])
def test_fedavg_local_iterates_are_E_gradient_steps_on_F_k(split):
    pb = drift_problem(split, SETTINGS)
    hp = hyper_for("fedavg", pb, SETTINGS)
    run = trace(pb, "fedavg", rounds=SETTINGS.rounds, seed=1, hyper=hp)
    sizes = pb.data.node_sizes
    for t in range(SETTINGS.rounds):
        want = fedavg_locals(pb, run.servers[t], hp["stepsize"], SETTINGS.local_steps)
        np.testing.assert_allclose(run.locals[t], want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(run.servers[t + 1], (sizes / sizes.sum()) @ want, rtol=1e-10, atol=1e-12)
    assert run.server_gap < 1e-12


@pytest.mark.parametrize("split", ["iid", "non-iid"])
def test_scaffold_local_iterates_and_server_follow_option_II(split):
    pb = drift_problem(split, SETTINGS)
    hp = hyper_for("scaffold", pb, SETTINGS)
    run = trace(pb, "scaffold", rounds=SETTINGS.rounds, seed=1, hyper=hp)
    servers, locals_ = scaffold_rounds(pb, hp["stepsize"], SETTINGS.local_steps, SETTINGS.rounds, run.servers[0])
    np.testing.assert_allclose(run.locals, locals_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(run.servers, servers, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("split", ["iid", "non-iid"])
def test_fsvrg_local_iterates_are_algorithm_4s_pass(split):
    pb = drift_problem(split, SETTINGS)
    seed = 5
    run = trace(pb, "fsvrg", rounds=SETTINGS.rounds, seed=seed)
    h = get_algorithm("fsvrg").derived_defaults(pb, {"safeguard": False})["stepsize"]
    for t in range(SETTINGS.rounds):
        ys, _ = fsvrg_locals(pb, run.servers[t], h, seed, t)
        np.testing.assert_allclose(run.locals[t], ys, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(run.servers[t + 1], aggregate_fsvrg(pb, run.servers[t], ys), rtol=1e-9,
                                   atol=1e-12)


def test_fsvrg_traced_on_sparse_data_applies_S_k_and_A():
    """Sparse features make S_k and A differ from the identity: the traced pass still matches."""
    pb = sparse_problem(n=120, d=15, K=4, lam=0.05, density=0.3, seed=2)
    run = trace(pb, "fsvrg", rounds=2, seed=0)
    h = get_algorithm("fsvrg").derived_defaults(pb, {"safeguard": False})["stepsize"]
    for t in range(2):
        ys, _ = fsvrg_locals(pb, run.servers[t], h, 0, t)
        np.testing.assert_allclose(run.locals[t], ys, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(run.servers[t + 1], aggregate_fsvrg(pb, run.servers[t], ys), rtol=1e-9,
                                   atol=1e-12)


@pytest.mark.parametrize("name", ["fedavg", "scaffold", "fsvrg"])
def test_tracing_leaves_the_algorithm_unchanged(name):
    """The server iterates are bitwise those of the same algorithm stepped on its own (minibatches
    and partial participation included: the extra passes use the algorithm's own samples)."""
    pb = sparse_problem(n=160, d=12, K=8, lam=0.02, density=0.4, seed=4)
    hyper = ({"safeguard": False} if name == "fsvrg"  # the view traces Algorithm 4 as printed
             else {"client_fraction": 0.5, "local_epochs": 2, "batch_size": 5})
    run = trace(pb, name, rounds=3, seed=7, hyper=hyper)
    algo = get_algorithm(name)(pb, seed=7, **hyper)
    for t in range(3):
        algo.step()
        np.testing.assert_array_equal(run.servers[t + 1], algo.w)
    assert run.server_gap < 1e-12


def test_node_optima_minimise_each_nodes_F_k():
    pb = drift_problem("non-iid", SETTINGS)
    X, y, off, lam = dense(pb)
    opt = node_optima(pb)
    for k in range(len(off) - 1):
        Xk, yk = X[off[k]:off[k + 1]], y[off[k]:off[k + 1]]

        def F(w):
            return np.mean(np.logaddexp(0, -yk * (Xk @ w))) + 0.5 * lam * w @ w, grad_data(Xk, yk, w) + lam * w

        ref = minimize(F, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 0})
        np.testing.assert_allclose(opt[k], ref.x, atol=1e-5)


def test_the_principal_plane_is_the_top_eigenspace():
    rng = np.random.default_rng(0)
    origin = rng.normal(size=6)
    P = origin + rng.normal(size=(50, 6)) * np.array([5, 3, 1, 0.5, 0.2, 0.1])
    plane = principal_plane(P, origin)
    np.testing.assert_allclose(plane.basis @ plane.basis.T, np.eye(2), atol=1e-12)
    vals, vecs = np.linalg.eigh((P - origin).T @ (P - origin))
    top = vecs[:, -2:]
    # The same subspace: projecting the top eigenvectors on the plane loses nothing.
    np.testing.assert_allclose(np.linalg.norm(plane.basis @ top, axis=0), 1.0, atol=1e-10)
    assert plane.explained == pytest.approx(vals[-2:].sum() / vals.sum(), rel=1e-12)
    np.testing.assert_allclose(plane.project(origin), 0.0, atol=1e-12)


def test_the_non_iid_split_gives_each_node_one_label_and_the_iid_split_both():
    noniid, iid = drift_problem("non-iid", SETTINGS), drift_problem("iid", SETTINGS)
    for pb, labels in ((noniid, {1}), (iid, {2})):
        off = pb.data.offsets
        assert {len(set(pb.y[off[k]:off[k + 1]])) for k in range(len(off) - 1)} == labels
    with pytest.raises(ParameterError, match="split"):
        drift_problem("sorted", SETTINGS)


def test_settings_out_of_range_name_the_parameter():
    with pytest.raises(ParameterError, match="nodes"):
        DriftSettings(nodes=1)
    with pytest.raises(ParameterError, match="rounds"):
        DriftSettings(rounds=0)
    with pytest.raises(ParameterError, match="local_steps"):
        DriftSettings(local_steps=10_000)


def test_the_view_shows_drift_on_non_iid_data_and_its_correction():
    """What the page says: on the non-IID split FedAvg's server stays far from w* (more so with more
    local work), SCAFFOLD's and FSVRG's reach it; on the IID split FedAvg's gap is much smaller."""
    noniid = drift_view("non-iid", DriftSettings(rounds=10, local_steps=10))
    iid = drift_view("iid", DriftSettings(rounds=10, local_steps=10))
    d = noniid.final_distances()
    assert d["FedAvg"] > 20 * max(d["SCAFFOLD"], d["FSVRG"])
    assert iid.final_distances()["FedAvg"] < d["FedAvg"] / 5
    more = drift_view("non-iid", DriftSettings(rounds=10, local_steps=40)).final_distances()["FedAvg"]
    assert more > d["FedAvg"]
    # FedAvg's local models go towards their own optima: closer to w*_k than where they started.
    run = noniid.runs[0]
    start = np.linalg.norm(run.servers[-2] - noniid.optima, axis=1)
    end = np.linalg.norm(run.locals[-1] - noniid.optima, axis=1)
    assert np.all(end < start)


def test_the_figure_has_a_frame_per_round_with_the_projected_iterates():
    views = [drift_view(split, SETTINGS) for split in ("iid", "non-iid")]
    fig = drift_figure(views)
    assert len(fig.frames) == SETTINGS.rounds + 1
    assert len(fig.layout.sliders[0].steps) == SETTINGS.rounds + 1
    t = 3
    frame = fig.frames[t]
    locals_ = [tr for tr in frame.data if tr.name.startswith("local iterates")]
    assert len(locals_) == 6
    for tr, (v, r) in zip(locals_, [(v, r) for v in views for r in v.runs]):
        xy = v.plane.project(r.locals[t - 1])
        np.testing.assert_allclose(np.c_[tr.x, tr.y], xy, rtol=1e-12)
    paths = [tr for tr in frame.data if tr.name.startswith("server")]
    assert all(len(tr.x) == t + 1 for tr in paths)
