"""The softmax per-node solver of fedviz.personal (dense Hessian per node, :mod:`fedviz.personal._softmax`)
against independent oracles: SciPy's L-BFGS on every node's (proximal) objective and scikit-learn's
multinomial logistic regression per node, on a 10-class problem; the two ends of the Ditto path on
FedProx's Synthetic(1, 1) preset; and λ_D = ∞ as a setting."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from fedviz.data.build import DataSpec, build
from fedviz.data.dataset import FederatedDataset
from fedviz.errors import ParameterError
from fedviz.personal import PersonaliseConfig, Personaliser, personalise
from fedviz.personal import _softmax
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve

C10 = 10


def _ten_classes(seed=0):
    """Four nodes, 10 classes, 5 features, each node with its own class shift and a feature it lacks."""
    rng = np.random.default_rng(seed)
    n, d, K = 400, 5, 4
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.8)
    nodes = np.repeat(np.arange(K), [160, 120, 80, 40])
    for k in range(K):
        X[nodes == k, k] = 0.0
    W = rng.normal(size=(d, C10)) * 2
    shift = rng.normal(size=(K, C10)) * 2
    y = np.argmax(X @ W + shift[nodes] + rng.gumbel(size=(n, C10)), axis=1).astype(float)
    y[:C10] = np.arange(C10)  # every class in the data
    Xt = rng.normal(size=(40, d))
    tn = rng.integers(0, K, 40)
    yt = np.argmax(Xt @ W + shift[tn] + rng.gumbel(size=(40, C10)), axis=1).astype(float)
    return FederatedDataset.from_assignment(sp.csr_matrix(X), y, nodes, X_test=sp.csr_matrix(Xt), y_test=yt,
                                            test_nodes=tn)


def _F(pb, k, v):
    """F_k(v) of eq. (6) for softmax, dense NumPy, with its gradient."""
    sl = pb.data.node_slice(k)
    X, y = pb.X[sl].toarray(), pb.y[sl].astype(int)
    Z = X @ v.reshape(-1, pb.n_classes)
    m = Z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(Z - m).sum(axis=1))
    P = np.exp(Z - lse[:, None])
    P[np.arange(len(y)), y] -= 1.0
    val = float(np.mean(lse - Z[np.arange(len(y)), y])) + 0.5 * pb.lam * v @ v
    return val, (X.T @ P / len(y)).ravel() + pb.lam * v


def _lbfgs(fun, x0):
    r = so.minimize(fun, x0, jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 50_000})
    return r.x, r.fun


@pytest.fixture(scope="module")
def ten():
    return Problem(_ten_classes(), "softmax", 0.01)


def test_the_ten_class_problem_takes_the_dense_path(ten):
    assert ten.n_classes == C10 and Personaliser(ten).method == "dense"


@pytest.mark.parametrize("direct", [True, False])
def test_local_and_ditto_models_minimise_each_nodes_objective_as_lbfgs_does(ten, direct, monkeypatch):
    # direct: every Newton step forms and factors the Hessian (these nodes are small); else the
    # steps first try CG preconditioned by an earlier inverse Hessian, as a large node's do.
    monkeypatch.setattr(_softmax, "DIRECT_MAX_SLOTS", 10 ** 6 if direct else 0)
    pb = ten
    per = Personaliser(pb)
    w = solve(pb).w
    local = per.local().dense()
    for lam_d in (0.0, 0.3, 30.0):
        V = local if lam_d == 0.0 else per.ditto(lam_d, w).dense()
        for k in range(pb.data.n_nodes):
            def phi(v, lam_d=lam_d):
                f, g = _F(pb, k, v)
                return f + 0.5 * lam_d * (v - w) @ (v - w), g + lam_d * (v - w)

            _, best = _lbfgs(phi, np.zeros(pb.size))
            assert abs(phi(V[k])[0] - best) <= 1e-8
            assert phi(V[k])[0] <= best + 1e-12  # never worse than L-BFGS
            assert np.linalg.norm(phi(V[k])[1]) <= 1e-8


def test_local_models_are_scikit_learns_multinomial_regressions(ten):
    pb = ten
    V = Personaliser(pb).local().dense()
    for k in range(pb.data.n_nodes):
        sl = pb.data.node_slice(k)
        X, y = pb.X[sl].toarray(), pb.y[sl].astype(int)
        present = np.unique(y)
        m = LogisticRegression(C=1.0 / pb.lam, fit_intercept=False, tol=1e-12, max_iter=100_000)
        m.fit(X, y, sample_weight=np.full(len(y), 1.0 / len(y)))
        # scikit-learn fits the classes present; an absent class's column is the regulariser's
        # minimiser given the rest, which scikit-learn does not return: compare the objective.
        ours = _F(pb, k, V[k])[0]
        if present.size == C10:
            assert np.allclose(V[k], m.coef_.T.ravel(), atol=1e-5)
        W = np.zeros((pb.d, C10))
        W[:, present] = m.coef_.T
        assert ours <= _F(pb, k, W.ravel())[0] + 1e-10


def test_the_dense_path_and_the_lockstep_solver_agree(ten, monkeypatch):
    pb = ten
    w = solve(pb).w
    dense = Personaliser(pb).ditto(0.05, w).dense()
    lock = Personaliser(pb, lockstep=True)
    assert lock.method == "lockstep"
    assert np.allclose(lock.ditto(0.05, w).dense(), dense, atol=1e-7)
    # Nodes too large for their dense Hessian fall back to the lockstep solver.
    monkeypatch.setattr(_softmax, "DENSE_MAX_SLOTS", 10)
    assert Personaliser(pb).method == "lockstep"


def test_dense_ok_bounds_the_nodes_and_the_work():
    rows, slots = np.array([0, 100, 300]), np.array([0, 50, 60])
    assert _softmax.dense_ok(rows, slots, 10)
    assert not _softmax.dense_ok(rows, slots, 50)  # 50 slots × 50 classes > DENSE_MAX_SLOTS
    assert not _softmax.dense_ok(np.array([0, 10 ** 7]), np.array([0, 100]), 10)  # n_k m² = 1e13


@pytest.fixture(scope="module")
def synthetic():
    ds = build(DataSpec(source="preset:fedprox-synthetic-10"))
    pb = Problem(ds, "softmax")
    assert (pb.data.n_nodes, pb.n_classes) == (30, 10)
    return pb


@pytest.mark.slow  # three exact solves on 30 nodes × 10 classes: ~3 s quiet
def test_ditto_zero_is_local_and_ditto_infinity_is_the_optimum_on_fedprox_synthetic(synthetic):
    pb = synthetic
    per = Personaliser(pb)
    assert per.method == "dense"
    w = solve(pb).w
    local = per.local()
    assert per.residual <= 1e-10
    zero = per.ditto(0.0, w)  # the same problem, solved from w* instead of 0
    far = per.ditto(1e10, w)
    K = pb.data.n_nodes
    F = lambda m, k: _F(pb, k, m.node(k))[0]  # noqa: E731  (dense NumPy, not the solver's code)
    for k in range(K):
        v = local.node(k)
        assert np.linalg.norm(_F(pb, k, v)[1]) <= 1e-8  # stationary: the minimiser of F_k
        assert abs(F(zero, k) - F(local, k)) <= 1e-8
        assert abs(F(far, k) - _F(pb, k, w)[0]) <= 1e-8
    inf = per.ditto(math.inf, w)
    assert np.array_equal(inf.dense(), np.tile(w, (K, 1)))


def test_ditto_lambda_infinity_is_the_global_model(ten):
    cfg = PersonaliseConfig(ditto_lambda=math.inf, lambdas=(0.0, 1.0), methods=("global", "ditto"))
    assert cfg.ditto_lambda == math.inf
    r = personalise(ten, cfg)
    assert r.ditto_lambda == math.inf and "∞" in r.ditto_label()
    assert np.array_equal(r.models["ditto"].dense(), np.tile(r.w, (ten.data.n_nodes, 1)))
    assert np.array_equal(r.errors["ditto"], r.errors["global"], equal_nan=True)
    assert r.to_dict()["config"]["ditto_lambda"] == "inf"


@pytest.mark.parametrize("value", [-math.inf, math.nan, -1.0, "inf", True])
def test_other_ditto_lambdas_are_refused_with_inf_in_the_message(value):
    with pytest.raises(ParameterError) as e:
        PersonaliseConfig(ditto_lambda=value)
    assert e.value.name == "ditto_lambda" and "inf (the global model)" in e.value.allowed


def test_the_command_line_takes_ditto_lambda_inf():
    from fedviz.cli.personalise import FLAGS, config_from_args

    values = {flag[2:].replace("-", "_"): None for flag in FLAGS}
    args = argparse.Namespace(**{**values, "ditto_lambda": "inf", "lambdas": None})
    assert config_from_args(args).ditto_lambda == math.inf
    args = argparse.Namespace(**{**values, "ditto_lambda": "-1", "lambdas": None})
    with pytest.raises(ParameterError):
        config_from_args(args)


def test_a_stop_request_ends_the_solve_between_newton_steps(ten):
    calls = []
    per = Personaliser(ten, lambda: calls.append(1))
    per.local()
    # Asked before every node and every Newton step: more often than there are nodes.
    assert len(calls) > ten.data.n_nodes + per.newton_iterations

    class Stop(Exception):
        pass

    def stop():
        raise Stop

    with pytest.raises(Stop):
        Personaliser(ten, stop).local()
