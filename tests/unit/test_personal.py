"""fedviz.personal (issue 23, point 3) against independent oracles: scikit-learn per node, SciPy's
L-BFGS on each node's (proximal) objective, dense NumPy loops for fine-tuning and scoring."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from fedviz.data.dataset import FederatedDataset
from fedviz.errors import ParameterError
from fedviz.personal import (PersonalEvaluator, PersonaliseConfig, Personaliser, apfl_models, ditto_models,
                             finetune_models, local_models, personalise)
from fedviz.personal.models import draw_batches
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve
from fedviz.problems.pernode import NodeEvaluator, summarize


def _data(n=240, d=10, K=6, seed=0, density=0.45, regression=False, C=1):
    """Nodes with their own bias (so that personal models differ), test rows on every node but the
    last, and three test rows of no node."""
    rng = np.random.default_rng(seed)

    def rows(m):
        return rng.normal(size=(m, d)) * (rng.random((m, d)) < density)

    X, Xt = rows(n), rows(90)
    nodes = rng.integers(0, K, n)
    # Off the supports: feature k is absent from node k's rows, the last feature from every
    # training row (it appears in test rows only).
    for k in range(K):
        X[nodes == k, k % (d - 1)] = 0.0
    X[:, d - 1] = 0.0
    tnodes = rng.integers(0, K - 1, 90)
    tnodes[:3] = -1
    if C > 1:
        W = rng.normal(size=(d, C))
        shift = rng.normal(size=(K, C)) * 2
        y = np.argmax(X @ W + shift[nodes] + rng.gumbel(size=(n, C)), axis=1).astype(float)
        yt = np.argmax(Xt @ W + shift[np.maximum(tnodes, 0)] + rng.gumbel(size=(90, C)), axis=1).astype(float)
        y[:C] = np.arange(C)
    else:
        w = rng.normal(size=d)
        bias = rng.normal(size=K) * 2
        y = X @ w + bias[nodes] + 0.5 * rng.normal(size=n)
        yt = Xt @ w + bias[np.maximum(tnodes, 0)] + 0.5 * rng.normal(size=90)
        if not regression:
            y, yt = np.where(y > 0, 1.0, -1.0), np.where(yt > 0, 1.0, -1.0)
    return FederatedDataset.from_assignment(sp.csr_matrix(X), y, nodes, X_test=sp.csr_matrix(Xt), y_test=yt,
                                            test_nodes=tnodes)


def _problem(loss="logistic", lam=0.02, **kw):
    return Problem(_data(regression=loss == "squared", **kw), loss, lam)


def _node_rows(pb, k):
    sl = pb.data.node_slice(k)
    return pb.X[sl].toarray(), pb.y[sl]


def _F(pb, k, v):
    """F_k(v) of eq. (6), dense, with its gradient."""
    X, y = _node_rows(pb, k)
    C = pb.n_classes
    if C == 1:
        z = X @ v
        val = pb.loss.value(z, y).mean() + 0.5 * pb.lam * v @ v
        g = X.T @ pb.loss.deriv(z, y) / len(y) + pb.lam * v
        return val, g
    W = v.reshape(-1, C)
    Z = X @ W
    val = pb.loss.value(Z, y).mean() + 0.5 * pb.lam * v @ v
    g = (X.T @ pb.loss.deriv(Z, y) / len(y)).ravel() + pb.lam * v
    return val, g


def _lbfgs(fun, x0):
    r = so.minimize(fun, x0, jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 20000})
    return r.x, r.fun


@pytest.mark.parametrize("lockstep", [False, True])
def test_local_models_are_scikit_learns_per_node_logistic_regressions(lockstep):
    pb = _problem()
    V = Personaliser(pb, lockstep=lockstep).local().dense()
    for k in range(pb.data.n_nodes):
        X, y = _node_rows(pb, k)
        # F_k = mean loss + (λ/2)‖v‖²  ⇔  scikit-learn's C Σ loss + ½‖v‖² with C = 1/(n_k λ).
        m = LogisticRegression(C=1.0 / (len(y) * pb.lam), fit_intercept=False, tol=1e-12, max_iter=100_000)
        m.fit(X, y)
        assert np.allclose(V[k], m.coef_.ravel(), atol=1e-6)


@pytest.mark.parametrize("loss", ["squared", "smoothed-hinge"])
def test_local_models_minimise_each_node_objective_as_lbfgs_does(loss):
    pb = _problem(loss)
    V = local_models(pb).dense()
    for k in range(pb.data.n_nodes):
        x, f = _lbfgs(lambda v: _F(pb, k, v), np.zeros(pb.d))
        assert _F(pb, k, V[k])[0] <= f + 1e-10
        assert np.linalg.norm(_F(pb, k, V[k])[1]) < 1e-7


@pytest.mark.parametrize("lam_d", [1e-3, 0.1, 10.0])
def test_ditto_is_the_proximal_minimiser_lbfgs_finds(lam_d):
    pb = _problem()
    w = solve(pb).w
    V = ditto_models(pb, lam_d, w).dense()
    for k in range(pb.data.n_nodes):
        def prox(v):
            f, g = _F(pb, k, v)
            return f + 0.5 * lam_d * (v - w) @ (v - w), g + lam_d * (v - w)

        x, f = _lbfgs(prox, np.zeros(pb.d))
        assert prox(V[k])[0] <= f + 1e-11
        assert np.allclose(V[k], x, atol=1e-5)


def test_the_ends_of_the_ditto_path_are_local_and_the_global_optimum():
    pb = _problem()
    w = solve(pb).w
    s = Personaliser(pb)
    ev = PersonalEvaluator(pb)
    local = s.local()
    zero = s.ditto(0.0, w)  # solved from w*, Local from 0
    assert np.max(np.abs(ev.losses(zero, s.solver) - ev.losses(local, s.solver))) <= 1e-8
    assert np.array_equal(s.ditto(math.inf, w).dense(), np.tile(w, (pb.data.n_nodes, 1)))
    big = s.ditto(1e10, w)
    Fw = np.array([_F(pb, k, w)[0] for k in range(pb.data.n_nodes)])
    assert np.max(np.abs(ev.losses(big, s.solver) - Fw)) <= 1e-8
    # Between them the path moves every node from its Local model towards w*.
    path = s.ditto_path([10.0, 0.0, 0.1], w)
    dist = [np.linalg.norm(m.dense() - w, axis=1) for m in path]
    assert np.all(dist[1] >= dist[2] - 1e-12) and np.all(dist[2] >= dist[0] - 1e-12)


def test_finetuning_is_a_dense_gradient_descent_loop():
    pb = _problem()
    w = solve(pb).w
    h = 0.7 / pb.node_smoothness
    V = finetune_models(pb, w, steps=4, step=h).dense()
    for k in range(pb.data.n_nodes):
        v = w.copy()
        for _ in range(4):
            v = v - h[k] * _F(pb, k, v)[1]
        assert np.allclose(V[k], v, atol=1e-12)
    # The default step is 1/L_k on node k.
    V1 = finetune_models(pb, w, steps=1).dense()
    for k in range(pb.data.n_nodes):
        assert np.allclose(V1[k], w - _F(pb, k, w)[1] / pb.node_smoothness[k], atol=1e-12)


def _documented_draws(seed, ds, b, steps):
    """The draws as the docstring words them, written out here: node after node, min(b, n_k) rows
    starts[k] + floor(u · n_k), u from one rng.random per step."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        m = [min(b, int(n)) for n in ds.node_sizes]
        u = iter(rng.random(sum(m)))
        out.append([[int(ds.offsets[k]) + min(int(next(u) * int(n)), int(n) - 1) for _ in range(m[k])]
                    for k, n in enumerate(ds.node_sizes)])
    return out


@pytest.mark.parametrize("b", [4, 10 ** 8])  # under every node's rows; far over them (clamped to n_k)
def test_minibatch_finetuning_is_a_dense_sgd_loop_on_the_documented_draws(b):
    pb = _problem()
    w = solve(pb).w
    steps, h, seed = 3, 0.05, 7
    V = finetune_models(pb, w, steps=steps, step=h, batch=b, seed=seed).dense()
    ds = pb.data
    draws = _documented_draws(seed, ds, b, steps)
    X = pb.X.toarray()
    for k in range(ds.n_nodes):
        v = w.copy()
        for t in range(steps):
            rows = np.array(draws[t][k])
            assert len(rows) == min(b, ds.node_sizes[k])
            assert np.all((rows >= ds.offsets[k]) & (rows < ds.offsets[k + 1]))
            Xb = X[rows]
            v = v - h * (Xb.T @ pb.loss.deriv(Xb @ v, pb.y[rows]) / len(rows) + pb.lam * v)
        assert np.allclose(V[k], v, atol=1e-12)


def test_a_batch_under_every_node_draws_bitwise_what_a_k_by_b_draw_gives():
    """The clamp changes nothing below the smallest node: the stream is rng.random((K, b))'s, row by row."""
    ds = _problem().data
    b = int(ds.node_sizes.min())
    rows, counts = draw_batches(np.random.default_rng(3), ds.offsets[:-1], ds.node_sizes, b)
    u = np.random.default_rng(3).random((ds.n_nodes, b))
    expected = ds.offsets[:-1, None] + np.minimum((u * ds.node_sizes[:, None]).astype(np.int64),
                                                  ds.node_sizes[:, None] - 1)
    assert np.array_equal(counts, np.full(ds.n_nodes, b)) and np.array_equal(rows, expected.ravel())


def test_apfl_is_the_mixture_and_apfls_own_fixed_point_is_local():
    pb = _problem()
    w = solve(pb).w
    local = local_models(pb)
    A = apfl_models(pb, 0.3, w, local).dense()
    assert np.allclose(A, 0.3 * local.dense() + 0.7 * w, atol=1e-14)
    # The module's claim: argmin_v F_k(αv + (1 − α)w*) mixed back is the Local model.
    alpha = 0.3
    for k in range(2):
        def f(v):
            m = alpha * v + (1 - alpha) * w
            val, g = _F(pb, k, m)
            return val, alpha * g

        v, _ = _lbfgs(f, np.zeros(pb.d))
        assert np.allclose(alpha * v + (1 - alpha) * w, local.dense()[k], atol=1e-5)


def _dense_errors(pb, V):
    ds = pb.data
    Xt = ds.X_test.toarray()
    out = np.full(ds.n_nodes, np.nan)
    for k in range(ds.n_nodes):
        rows = ds.test_nodes == k
        if not rows.any():
            continue
        if pb.n_classes > 1:
            pred = np.argmax(Xt[rows] @ V[k].reshape(-1, pb.n_classes), axis=1)
        else:
            pred = np.where(Xt[rows] @ V[k] > 0, 1.0, -1.0)
        out[k] = np.mean(pred != ds.y_test[rows])
    return out


def test_each_node_is_scored_by_its_own_model_on_its_own_test_rows():
    pb = _problem()
    w = solve(pb).w
    ev = PersonalEvaluator(pb)
    s = Personaliser(pb)
    for models in (s.local(), s.ditto(0.05, w), s.finetune(w, 3)):
        e = ev.errors(models)
        assert np.allclose(e, _dense_errors(pb, models.dense()), equal_nan=True)
    # The last node has no test row: NaN, and counted.
    assert np.isnan(e[-1]) and ev.untested == 1 and ev.scored_rows == 87
    # The global model: the same numbers as the run's per-node evaluation.
    assert np.array_equal(ev.errors(s.global_models(w)), NodeEvaluator(pb).node_test_error(
        NodeEvaluator(pb).test_margins(w)), equal_nan=True)
    # The per-node majority: each node's majority training label on its test rows.
    ds = pb.data
    maj = ev.majority_errors()
    for k in range(ds.n_nodes - 1):
        label = 1.0 if np.sum(ds.y[ds.node_slice(k)] > 0) > ds.node_sizes[k] / 2 else -1.0
        if np.sum(ds.y[ds.node_slice(k)] > 0) * 2 == ds.node_sizes[k]:
            continue  # a tie takes the global majority
        assert maj[k] == pytest.approx(np.mean(ds.y_test[ds.test_nodes == k] != label))


def test_own_losses_are_each_nodes_objective():
    pb = _problem()
    w = solve(pb).w
    s = Personaliser(pb)
    m = s.finetune(w, 2)
    V = m.dense()
    got = PersonalEvaluator(pb).losses(m, s.solver)
    assert np.allclose(got, [_F(pb, k, V[k])[0] for k in range(pb.data.n_nodes)], atol=1e-13)
    assert np.allclose(m.sq_norms(), (V ** 2).sum(axis=1))
    other = s.ditto(0.1, w)
    assert np.allclose(m.distance_to(other), np.linalg.norm(V - other.dense(), axis=1))
    assert np.allclose(m.node(2), V[2])
    assert np.array_equal(m.rows(2, 5), V[2:5])
    W = other.dense() + 0.01
    assert np.allclose(m.distance_to_dense(W, chunk=4), np.linalg.norm(V - W, axis=1))


def test_softmax_local_and_ditto_against_scikit_learn_and_lbfgs():
    pb = Problem(_data(C=3, n=300, d=6, K=4, density=0.6), "softmax", 0.05)
    assert pb.n_classes == 3
    V = local_models(pb).dense()
    for k in range(pb.data.n_nodes):
        X, y = _node_rows(pb, k)
        if len(np.unique(y)) < 3:
            continue
        m = LogisticRegression(C=1.0 / pb.lam, fit_intercept=False, tol=1e-12, max_iter=100_000)
        m.fit(X, y.astype(int), sample_weight=np.full(len(y), 1.0 / len(y)))
        assert np.allclose(V[k], m.coef_.T.ravel(), atol=1e-5)
    w = solve(pb).w
    D = ditto_models(pb, 0.2, w).dense()
    for k in range(pb.data.n_nodes):
        def prox(v):
            f, g = _F(pb, k, v)
            return f + 0.1 * (v - w) @ (v - w), g + 0.2 * (v - w)

        x, f = _lbfgs(prox, np.zeros(pb.size))
        assert prox(D[k])[0] <= f + 1e-11
    ev = PersonalEvaluator(pb)
    assert np.allclose(ev.errors(ditto_models(pb, 0.2, w)), _dense_errors(pb, D), equal_nan=True)


def test_the_report_summarises_every_method_and_picks_the_lambda_for_the_worst_tenth():
    pb = _problem()
    cfg = PersonaliseConfig(lambdas=(1.0, 0.0, 0.01, math.inf, 0.1), finetune_steps=2)
    r = personalise(pb, cfg)
    assert r.methods == ("majority", "global", "local", "finetune", "ditto", "apfl")
    assert list(r.lambdas) == [0.0, 0.01, 0.1, 1.0, math.inf]
    for m in r.methods:
        e = r.errors[m]
        s = r.summaries[m]
        assert {k: s[k] for k in summarize(e)} == summarize(e)
        ok = np.isfinite(e)
        counts = np.array([np.sum(pb.data.test_nodes == k) for k in range(pb.data.n_nodes)])
        assert s["pooled"] == pytest.approx(np.sum(e[ok] * counts[ok]) / counts[ok].sum())
    assert r.summaries["global"]["pooled"] == pytest.approx(
        np.mean((np.where(pb.data.X_test.toarray() @ r.w > 0, 1.0, -1.0) != pb.data.y_test)[pb.data.test_nodes >= 0]))
    worst = [s["worst10"] for s in r.path_summaries]
    assert r.best_lambda == r.lambdas[int(np.argmin(worst))] == r.ditto_lambda
    assert np.array_equal(r.errors["ditto"], r.path_errors[int(np.argmin(worst))], equal_nan=True)
    assert np.array_equal(r.path_errors[-1], r.errors["global"], equal_nan=True)
    assert r.checks["ditto0_minus_local"] <= 1e-8 and r.checks["ditto_limit_minus_global"] <= 1e-8
    assert r.checks["residual"] <= 1e-9  # every solve behind a column converged (the limit check's aside)
    assert r.loss_summaries["global"]["pooled"] == pytest.approx(pb.value(r.w), abs=1e-12)
    assert r.untested == 1 and r.unassigned_rows == 3
    with pytest.raises(ValueError):
        r.errors["local"][0] = 0.0
    assert r.to_dict()["errors"]["local"][-1] is None


def test_a_given_global_model_is_the_start_of_every_method():
    """Held-out nodes: the caller passes the federation's model; nothing solves this problem's w*."""
    pb = _problem()
    w = np.random.default_rng(3).normal(size=pb.d)
    r = personalise(pb, PersonaliseConfig(lambdas=(0.0, math.inf), methods=("global", "finetune")), w_star=w)
    assert r.methods == ("global", "finetune")
    assert np.array_equal(r.w, w) and w.flags.writeable  # the caller's model is left writable
    assert np.allclose(r.errors["global"], _dense_errors(pb, np.tile(w, (pb.data.n_nodes, 1))), equal_nan=True)
    assert np.allclose(r.models["finetune"].dense(), finetune_models(pb, w, 5).dense())
    assert r.path_errors.shape == (0, pb.data.n_nodes)


@pytest.mark.parametrize("kwargs, name", [
    ({"finetune_steps": -1}, "finetune_steps"), ({"apfl_alpha": 1.5}, "apfl_alpha"),
    ({"finetune_step": 0.0}, "finetune_step"), ({"lambdas": (0.0, -1.0)}, "lambdas"),
    ({"lambdas": ()}, "lambdas"), ({"methods": ("local", "fedavg")}, "methods"),
    ({"finetune_batch": 0}, "finetune_batch"), ({"ditto_lambda": -2.0}, "ditto_lambda"),
])
def test_bad_settings_are_refused_by_name_and_range(kwargs, name):
    with pytest.raises(ParameterError) as e:
        PersonaliseConfig(**kwargs)
    assert e.value.name == name and e.value.allowed


def test_the_dense_view_is_refused_when_too_large(monkeypatch):
    from fedviz.personal import models as m

    pb = _problem()
    monkeypatch.setattr(m, "DENSE_LIMIT", 10)
    with pytest.raises(ParameterError, match="node"):
        local_models(pb).dense()


def test_a_chosen_ditto_lambda_off_the_grid_is_solved_for_the_column():
    pb = _problem()
    w = solve(pb).w
    r = personalise(pb, PersonaliseConfig(lambdas=(0.0, math.inf), ditto_lambda=0.05, methods=("ditto",)))
    assert r.ditto_lambda == 0.05
    assert np.allclose(r.models["ditto"].dense(), ditto_models(pb, 0.05, w).dense(), atol=1e-7)
    assert r.methods == ("ditto",) and set(r.errors) == {"ditto"}


def test_regression_targets_are_scored_by_squared_error_and_have_no_majority():
    pb = _problem("squared")
    r = personalise(pb, PersonaliseConfig(lambdas=(0.0, 1.0, math.inf), finetune_steps=2))
    assert np.all(np.isnan(r.errors["majority"]))
    V = r.models["local"].dense()
    ds = pb.data
    Xt = ds.X_test.toarray()
    for k in range(ds.n_nodes - 1):
        rows = ds.test_nodes == k
        assert r.errors["local"][k] == pytest.approx(np.mean((Xt[rows] @ V[k] - ds.y_test[rows]) ** 2))


def test_the_stop_check_is_called_between_groups_of_nodes():
    pb = _problem()
    calls = []
    Personaliser(pb, check_stop=lambda: calls.append(1)).local()
    assert len(calls) >= 2


def test_the_sentence_names_the_global_figures_and_the_best_personal_method_for_the_worst_tenth():
    pb = _problem()
    r = personalise(pb, PersonaliseConfig(lambdas=(0.0, 0.1, math.inf), finetune_steps=1))
    g = r.summaries["global"]
    text = r.sentence()
    assert f"errs {100 * g['pooled']:.2f}% over the nodes' test rows and {100 * g['worst10']:.2f}%" in text
    worst = {m: r.summaries[m]["worst10"] for m in ("local", "finetune", "ditto", "apfl")}
    best = min(worst, key=worst.get)
    from fedviz.personal import TITLES
    assert f"; {TITLES[best]}" in text and f"{100 * worst[best]:.2f}% there" in text
    assert personalise(pb, PersonaliseConfig(methods=("global",))).sentence().count(";") == 0


def test_a_test_set_of_no_node_leaves_every_node_untested_and_says_so():
    ds = _data()
    ds = FederatedDataset.from_assignment(ds.X, ds.y, ds.node_of_row, X_test=ds.X_test, y_test=ds.y_test,
                                          test_nodes=np.full(ds.y_test.size, -1))
    pb = Problem(ds, "logistic", 0.02)
    r = personalise(pb, PersonaliseConfig(lambdas=(0.0, 1.0, math.inf)))
    assert r.untested == pb.data.n_nodes and r.unassigned_rows == ds.y_test.size and r.scored_rows == 0
    assert all(np.all(np.isnan(r.errors[m])) for m in r.methods)
    assert math.isnan(r.best_lambda) and r.ditto_lambda == 0.0 and r.sentence() == ""
    assert all(math.isnan(r.summaries[m]["pooled"]) for m in r.methods)


def test_a_finetuning_step_that_overflows_is_refused_by_name():
    pb = _problem()
    w = solve(pb).w
    with pytest.raises(ParameterError) as e:
        finetune_models(pb, w, steps=400, step=1e3)
    assert e.value.name == "finetune_step" and "2/L_k" in e.value.allowed


def test_nodes_whose_loss_finetuning_raised_are_counted():
    pb = _problem()
    safe = personalise(pb, PersonaliseConfig(lambdas=(0.0,), finetune_steps=20, methods=("finetune",)))
    assert safe.checks["finetune_nodes_worse"] == 0  # GD at 1/L_k descends on every node
    big = 5.0 / pb.node_smoothness.min()
    r = personalise(pb, PersonaliseConfig(lambdas=(0.0,), finetune_steps=20, finetune_step=big, methods=("finetune",)))
    Fw = np.array([_F(pb, k, r.w)[0] for k in range(pb.data.n_nodes)])
    worse = np.sum(r.losses["finetune"] > Fw + 1e-12)
    assert worse > 0 and r.checks["finetune_nodes_worse"] == worse


def test_a_node_whose_rows_hold_no_feature_has_an_empty_support():
    ds = _data()
    X = ds.X.tolil()
    last = ds.node_slice(ds.n_nodes - 1)
    X[last.start:last.stop, :] = 0.0
    ds = FederatedDataset.from_assignment(X.tocsr(), ds.y, ds.node_of_row, X_test=ds.X_test, y_test=ds.y_test,
                                          test_nodes=ds.test_nodes)
    pb = Problem(ds, "logistic", 0.02)
    assert ds.support.sizes[-1] == 0
    w = solve(pb).w
    m = ditto_models(pb, 0.1, w)
    V = m.dense()
    assert np.allclose(V[-1], 0.1 / (0.02 + 0.1) * w)  # F_k is the regulariser alone there
    assert np.allclose(m.sq_norms(), (V ** 2).sum(axis=1))
    other = local_models(pb)
    assert np.allclose(m.distance_to(other), np.linalg.norm(V - other.dense(), axis=1))
