"""APFL with a fixed α (Deng, Kamani & Mahdavi 2020, Algorithm 1) against a dense NumPy
re-implementation, FedAvg bit for bit, and its two ends: α = 1 trains each v_k on F_k alone (local
SGD), α = 0 serves the global model."""

import numpy as np
import pytest

from fedviz.algorithms import ALGORITHMS
from fedviz.algorithms import ditto as ditto_mod
from fedviz.algorithms._local_sgd_kernels import LocalSGD
from fedviz.algorithms.apfl import APFL
from fedviz.algorithms.fedavg import FedAvg
from fedviz.errors import ParameterError
from fedviz.runner import iterate

from test_ditto import dphi, make_problem, split_orders


def reference_round(problem, w, V, nodes, orders, *, eta, alpha, epochs, batch):
    """One APFL round, densely: on each minibatch, from the same pre-step point,
    w_k ← w_k − η ∇F_b(w_k) and v_k ← v_k − η α ∇F_b(α v_k + (1 − α) w_k); the server averages the w_k."""
    per = split_orders(problem, nodes, epochs, orders) if batch else {}
    sizes = problem.data.node_sizes[nodes].astype(float)
    new_w, V = w.copy(), V.copy()
    lam = problem.lam
    for k, p in zip(nodes, sizes / sizes.sum()):
        sl = problem.data.node_slice(k)
        Xk, yk = problem.X[sl].toarray(), problem.data.y[sl]
        nk = Xk.shape[0]
        wk, v = w.copy(), V[k].copy()
        for e in range(epochs):
            perm = np.arange(nk) if batch == 0 else per[k][e * nk:(e + 1) * nk]
            size = nk if batch == 0 else batch
            for lo in range(0, nk, size):
                r = perm[lo:lo + size]
                A = Xk[r]
                mix = alpha * v + (1 - alpha) * wk
                gw = A.T @ dphi(problem.loss, A @ wk, yk[r]) / len(r) + lam * wk
                gm = A.T @ dphi(problem.loss, A @ mix, yk[r]) / len(r) + lam * mix
                wk, v = wk - eta * gw, v - eta * alpha * gm
        new_w += p * (wk - w)
        V[k] = v
    return new_w, V


@pytest.mark.parametrize("loss, batch, epochs, fraction, alpha", [
    ("logistic", 7, 2, 0.6, 0.5),
    ("logistic", 0, 1, 1.0, 0.25),
    ("squared", 5, 1, 0.4, 0.75),
    ("smoothed-hinge", 0, 3, 0.8, 0.9),
])
def test_rounds_match_the_dense_reference(loss, batch, epochs, fraction, alpha):
    pb = make_problem(loss, lam=0.05)
    eta = 0.5 / (np.max(np.sum(pb.X.toarray() ** 2, axis=1)) + pb.lam)
    alg = APFL(pb, seed=4, stepsize=eta, batch_size=batch, local_epochs=epochs, client_fraction=fraction, alpha=alpha)
    w, V = np.zeros(pb.d), np.zeros((pb.data.n_nodes, pb.d))
    for _ in range(4):
        nodes = alg.sample_nodes()
        orders = alg.local.orders(nodes, alg.rng(1))
        w, V = reference_round(pb, w, V, nodes, orders, eta=eta, alpha=alpha, epochs=epochs, batch=batch)
        alg.step()
        np.testing.assert_allclose(alg.w, w, rtol=0, atol=1e-10)
        np.testing.assert_allclose(alg.V, V, rtol=0, atol=1e-10)
        # Each node is served the mixture with the current global model.
        np.testing.assert_allclose(alg.personal_models(), alpha * V + (1 - alpha) * w, rtol=0, atol=1e-10)
    K = pb.data.n_nodes   # off its support v_k moves too (feature 1 + j is node j's alone)
    assert max(abs(V[k, 1 + j]) for k in range(K) for j in range(K) if j != k) > 1e-6


def test_global_model_is_fedavg_bit_for_bit():
    pb = make_problem()
    hyper = dict(stepsize=0.1, batch_size=3, client_fraction=0.5, local_epochs=2)
    a, f = APFL(pb, seed=11, **hyper), FedAvg(pb, seed=11, **hyper)
    for _ in range(5):
        a.step()
        f.step()
        assert np.array_equal(a.w, f.w)
    assert (a.rounds, a.vectors_up, a.vectors_down, a.grad_evals) == (f.rounds, f.vectors_up, f.vectors_down,
                                                                     2 * f.grad_evals)


def test_alpha_one_trains_each_local_model_on_F_k_alone():
    """α = 1: the mixture is v_k and its gradient ∇F_k(v_k): local SGD on F_k (FedAvg's local loop from
    v_k on node k alone, same row orders), whatever the global model does."""
    pb = make_problem()
    eta = 0.2
    alg = APFL(pb, seed=2, stepsize=eta, alpha=1.0, client_fraction=0.6, batch_size=4, local_epochs=2)
    engine = LocalSGD(pb, epochs=2, batch_size=4, stepsize=eta)
    V = np.zeros((pb.data.n_nodes, pb.d))
    for _ in range(4):
        nodes = alg.sample_nodes()
        per = split_orders(pb, nodes, 2, alg.local.orders(nodes, alg.rng(1)))
        for k in nodes:
            delta, _ = engine.round(V[k], np.array([k]), np.array([1.0]), orders=per[k])
            V[k] = V[k] + delta
        alg.step()
        np.testing.assert_allclose(alg.personal_models(), V, rtol=0, atol=1e-12)


def test_alpha_zero_serves_the_global_model():
    pb = make_problem()
    recs = list(iterate(pb, "apfl", iterations=3, hyper=dict(alpha=0.0, client_fraction=1.0)))
    last = recs[-1]
    assert last.personal_test_error == pytest.approx(last.test_error, abs=1e-12)
    for s in ("mean", "p10", "p50", "p90", "worst10"):
        assert getattr(last, f"personal_error_{s}") == pytest.approx(getattr(last, f"node_error_{s}"), rel=1e-12), s
    np.testing.assert_array_equal(last.nodes["personal_error"], last.nodes["node_error"])


def test_personal_models_over_the_budget_are_refused(monkeypatch):
    pb = make_problem()                                   # 2 arrays of K × d = 5 × 12
    monkeypatch.setattr(ditto_mod, "PERSONAL_VALUES", 119)
    with pytest.raises(ParameterError) as err:
        APFL(pb)
    text = str(err.value)
    assert "apfl.personal_models" in text and "2 × K × d = 2 × 5 × 12 = 120 values" in text
    assert "at most 119 values" in text
    monkeypatch.setattr(ditto_mod, "PERSONAL_VALUES", 120)
    APFL(pb)


def test_softmax_is_refused_and_alpha_is_validated():
    assert APFL.softmax_refusal() == ("APFL does not take softmax: its local-model loop works on one weight vector "
                                     "per node (binary and regression models only)")
    assert ALGORITHMS["apfl"] is APFL
    for bad in (-0.1, 1.5):
        with pytest.raises(ParameterError, match="apfl.alpha"):
            APFL(make_problem(), alpha=bad)
