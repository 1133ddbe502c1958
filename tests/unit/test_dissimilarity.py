"""FedProx's gradient dissimilarity (1/K) Σ_k ‖∇F_k(w) − ∇f(w)‖² (Li et al. 2020, Figure 2's bottom row)
against a dense NumPy computation written from the definitions: each node's rows made dense, the loss's
gradient by hand (logistic for ±1 labels; softmax's P − Y for class codes), ∇F_k with its λw, and
∇f = Σ_k (n_k/n) ∇F_k.  And in the loop and the store: recorded only when asked, never changing the run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedviz.data.presets import make_preset
from fedviz.problems.dissimilarity import local_dissimilarity
from fedviz.problems.objective import Problem
from fedviz.runner.loop import iterate
from fedviz.runner.history.store import RunStore

SMALL = dict(nodes=6, size_log_mean=2.0, size_log_sigma=0.5, size_offset=15, n_features=8)


def _problem(kind: str, **over) -> Problem:
    if kind == "binary":
        return Problem(make_preset("fedprox-synthetic-binary", **{**SMALL, **over}), "logistic", lam=0.01)
    return Problem(make_preset("fedprox-synthetic", **{**SMALL, **over}), "softmax", lam=0.01)


def _dense_node_gradients(problem: Problem, w: np.ndarray) -> np.ndarray:
    """K × (d·C) rows ∇F_k(w) = (1/n_k) Σ_{i ∈ P_k} ∇φ_i(w) + λw, the model flat feature-major."""
    data = problem.data
    X, y = data.X.toarray(), np.asarray(data.y)
    C = problem.n_classes
    rows = []
    start = 0
    for n_k in data.node_sizes:
        Xk, yk = X[start:start + n_k], y[start:start + n_k]
        start += n_k
        if C == 1:
            z = Xk @ w
            g = Xk.T @ (-yk / (1.0 + np.exp(yk * z)))           # d/dw log(1 + exp(−y wᵀx))
        else:
            W = w.reshape(X.shape[1], C)
            Z = Xk @ W
            P = np.exp(Z - Z.max(axis=1, keepdims=True))
            P /= P.sum(axis=1, keepdims=True)
            Y = np.eye(C)[yk.astype(int)]
            g = (Xk.T @ (P - Y)).ravel()                          # d × C, row-major as the model
        rows.append(g / n_k + problem.lam * w)
    return np.array(rows)


def _dense(problem: Problem, w: np.ndarray, weighted: bool = False) -> float:
    G = _dense_node_gradients(problem, w)
    p = problem.data.node_sizes / problem.data.node_sizes.sum()
    g = p @ G
    sq = ((G - g) ** 2).sum(axis=1)
    return float(p @ sq if weighted else sq.mean())


@pytest.mark.parametrize("kind", ["binary", "classes"])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_equals_a_dense_numpy_computation(kind, alpha):
    problem = _problem(kind, alpha=alpha, beta=alpha)
    rng = np.random.default_rng(7)
    for w in (np.zeros(problem.size), rng.normal(0, 0.3, problem.size)):
        want = _dense(problem, w)
        assert want > 0
        np.testing.assert_allclose(local_dissimilarity(problem, w), want, rtol=1e-10)
        np.testing.assert_allclose(local_dissimilarity(problem, w, weighted=True), _dense(problem, w, True),
                                   rtol=1e-10)


@pytest.mark.parametrize("kind", ["binary", "classes"])
def test_definition_3s_variance_identity(kind):
    """E_k‖∇F_k‖² = ‖∇f‖² + Σ_k p_k‖∇F_k − ∇f‖² (Definition 3's expectation, weights p_k), with ∇f the
    problem's own full gradient: the weighted variant is the variance term of B-local dissimilarity."""
    problem = _problem(kind)
    w = np.random.default_rng(3).normal(0, 0.2, problem.size)
    G = _dense_node_gradients(problem, w)
    p = problem.data.node_sizes / problem.data.node_sizes.sum()
    second_moment = float(p @ (G ** 2).sum(axis=1))
    g = problem.grad(w)
    variance = local_dissimilarity(problem, w, weighted=True)
    np.testing.assert_allclose(second_moment, g @ g + variance, rtol=1e-9)


def test_identical_nodes_have_none():
    """Every node a copy of the same rows: every ∇F_k is ∇f, so the dissimilarity is 0 (to rounding)."""
    problem = _problem("classes")
    data = problem.data
    rows = data.node_slice(0)
    import scipy.sparse as sp

    from fedviz.data.dataset import FederatedDataset

    K = 4
    X = sp.vstack([data.X[rows]] * K, format="csr")
    y = np.tile(np.asarray(data.y)[rows], K)
    same = FederatedDataset.from_assignment(X, y, np.repeat(np.arange(K), rows.stop - rows.start))
    p = Problem(same, "softmax", lam=0.01)
    w = np.random.default_rng(1).normal(0, 0.3, p.size)
    g = p.grad(w)
    assert local_dissimilarity(p, w) <= 1e-24 * max(1.0, float(g @ g))


@pytest.mark.parametrize("kind", ["binary", "classes"])
def test_the_loop_records_it_only_when_asked_and_it_changes_nothing(kind, tmp_path):
    problem = _problem(kind)
    hyper = {"local_epochs": 2, "batch_size": 5, "stepsize": 0.05, "client_fraction": 0.5}
    plain = list(iterate(problem, "fedavg", iterations=4, hyper=hyper, seed=2, f_star=0.0))
    asked = list(iterate(problem, "fedavg", iterations=4, hyper=hyper, seed=2, f_star=0.0, dissimilarity=True))
    assert [r.objective for r in plain] == [r.objective for r in asked]
    assert all(math.isnan(r.dissimilarity) for r in plain)
    # at the start w = 0 (every method's default start): the value of the definition there
    np.testing.assert_allclose(asked[0].dissimilarity, _dense(problem, np.zeros(problem.size)), rtol=1e-10)
    assert all(np.isfinite(r.dissimilarity) and r.dissimilarity > 0 for r in asked)
    with RunStore(tmp_path / "h.sqlite") as s:
        rid = s.create_run(label="fedavg", algorithm="fedavg", group_id="g", f_star=0.0)
        s.append_records(rid, asked)
        assert s.columns(rid)["dissimilarity"].tolist() == [r.dissimilarity for r in asked]
        assert [r.dissimilarity for r in s.records(rid)] == [r.dissimilarity for r in asked]
