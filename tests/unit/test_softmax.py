"""Softmax regression in the model's shape (d, C) (issue 22, points 2 and 4), against independent
oracles: finite differences, a dense NumPy transcription of f, ∇f and the Hessian, and scikit-learn's
multinomial LogisticRegression for the optimum."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import check_grad
from scipy.special import logsumexp, softmax
from sklearn.linear_model import LogisticRegression

from conftest import DATA
from problems import dense_bb_gd_path
from fedviz.data.dataset import FederatedDataset
from fedviz.data.libsvm import load_libsvm
from fedviz.errors import ParameterError
from fedviz.problems.losses import LOSSES, Softmax
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve


def _data(n=120, d=9, C=4, K=5, seed=0, density=0.5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    W = rng.normal(size=(d, C))
    y = np.argmax(X @ W + rng.gumbel(size=(n, C)), axis=1).astype(float)
    Xt = rng.normal(size=(40, d)) * (rng.random((40, d)) < density)
    yt = np.argmax(Xt @ W + rng.gumbel(size=(40, C)), axis=1).astype(float)
    y[:C] = np.arange(C)  # every class present
    return FederatedDataset.from_assignment(sp.csr_matrix(X), y, rng.integers(0, K, n),
                                            X_test=sp.csr_matrix(Xt), y_test=yt)


def _dense(p):
    return p.X.toarray(), p.y.astype(int)


def test_the_problem_owns_c_and_the_model_shape():
    p = Problem(_data(C=4), Softmax(), 0.1)
    assert p.n_classes == 4 and p.shape == (9, 4) and p.size == 36 and p.margin_shape == (120, 4)
    w = np.arange(36.0)
    assert np.array_equal(p.as_model(w)[2], [8, 9, 10, 11])  # row-major: feature 2's C weights together
    assert "softmax" not in LOSSES  # not offered on the pages until an algorithm takes C > 1


def test_objective_gradient_and_hessian_match_a_dense_transcription():
    p = Problem(_data(), Softmax(), 0.05)
    X, y = _dense(p)
    n, C = p.n, p.n_classes
    rng = np.random.default_rng(1)
    w, v = rng.normal(size=p.size), rng.normal(size=p.size)
    W = w.reshape(p.d, C)
    Z = X @ W
    f = np.mean(logsumexp(Z, axis=1) - Z[np.arange(n), y]) + 0.5 * p.lam * np.sum(W * W)
    P = softmax(Z, axis=1)
    G = X.T @ (P - np.eye(C)[y]) / n + p.lam * W
    f2, g2, train = p.value_grad_error(w)
    assert f2 == pytest.approx(f, rel=1e-13)
    np.testing.assert_allclose(g2, G.ravel(), rtol=1e-12, atol=1e-15)
    assert p.value(w) == pytest.approx(f, rel=1e-13)
    assert train == np.mean(np.argmax(Z, axis=1) != y)
    # ∇²f = Σ_i (x_i x_iᵀ) ⊗ (diag p_i − p_i p_iᵀ) / n + λI in the row-major (j, c) order.
    H = sum(np.kron(np.outer(X[i], X[i]), np.diag(P[i]) - np.outer(P[i], P[i])) for i in range(n)) / n
    H += p.lam * np.eye(p.size)
    np.testing.assert_allclose(p.hessp(p.curvature(w), v), H @ v, rtol=1e-11, atol=1e-14)
    assert check_grad(p.value, p.grad, w) < 1e-6
    # The preconditioner's diagonals: those of every example's block diag p_i − p_i p_iᵀ.
    blocks = np.array([np.diag(np.diag(P[i]) - np.outer(P[i], P[i])) for i in range(n)])
    np.testing.assert_allclose(p.loss.curvature_diagonal(p.curvature(w)), blocks, rtol=1e-11, atol=1e-16)
    np.testing.assert_allclose(p.loss.curvature_diagonal(p.loss.curvature(Z, p.y, divisor=n)), blocks / n,
                               rtol=1e-11, atol=1e-18)
    Xt, yt = p.data.X_test.toarray(), p.data.y_test.astype(int)
    assert p.test_error(w) == np.mean(np.argmax(Xt @ W, axis=1) != yt)


def test_node_gradients_are_the_model_shaped_rows_of_each_node():
    p = Problem(_data(), Softmax(), 0.05)
    X, y = _dense(p)
    w = np.random.default_rng(2).normal(size=p.size)
    W = w.reshape(p.shape)
    G = p.node_grads_data(w).toarray()
    assert G.shape == (p.data.n_nodes, p.size)
    for k in range(p.data.n_nodes):
        rows = p.data.node_slice(k)
        Xk, yk = X[rows], y[rows]
        ref = Xk.T @ (softmax(Xk @ W, axis=1) - np.eye(p.n_classes)[yk]) / len(yk)
        np.testing.assert_allclose(G[k], ref.ravel(), rtol=1e-12, atol=1e-15)


def _sklearn_objective(p):
    """scikit-learn's multinomial optimum of the same objective: sample weights 1/n, C = 1/λ."""
    m = LogisticRegression(C=1.0 / p.lam, fit_intercept=False, tol=1e-14, max_iter=100_000)
    m.fit(p.X, p.y.astype(int), sample_weight=np.full(p.n, 1.0 / p.n))
    assert m.coef_.shape == (p.n_classes, p.d)
    return p.flat(np.ascontiguousarray(m.coef_.T))


@pytest.mark.parametrize("case", ["dna.scale", "random-10-classes"])
def test_the_optimum_is_scikit_learns_multinomial_optimum(case):
    if case == "dna.scale":
        train = load_libsvm(DATA / "dna.scale")
        test = load_libsvm(DATA / "dna.scale.t", n_features=train.X.shape[1])
        nodes = np.random.default_rng(0).integers(0, 8, train.X.shape[0])
        # Class codes 0..2 for the file's labels 1..3 (the labels module of point 5 will own this).
        ds = FederatedDataset.from_assignment(train.X, train.y - 1, nodes, X_test=test.X, y_test=test.y - 1)
        lam = None
    else:
        ds, lam = _data(n=400, d=12, C=10, K=6, seed=4), 1e-2
    p = Problem(ds, Softmax(), lam)
    opt = solve(p, use_cache=False)
    assert opt.grad_norm <= 1e-10
    w_sk = _sklearn_objective(p)
    assert opt.objective == pytest.approx(p.value(w_sk), rel=1e-8)
    assert opt.objective <= p.value(w_sk)
    np.testing.assert_allclose(opt.w, w_sk, atol=1e-4 * max(1.0, np.abs(w_sk).max()))


def test_labels_that_are_not_class_codes_are_refused_by_name():
    ds = _data()
    bad = FederatedDataset.from_assignment(ds.X, np.where(ds.y > 0, 1.0, -1.0), ds.node_of_row)
    with pytest.raises(ParameterError, match=r"loss.*class codes 0, 1, …, C − 1"):
        Problem(bad, Softmax())
    one = FederatedDataset.from_assignment(ds.X, np.zeros(ds.n), ds.node_of_row)
    with pytest.raises(ParameterError, match=r"loss.*one class only"):
        Problem(one, Softmax())


def test_an_algorithm_takes_softmax_exactly_when_its_class_says_so():
    """Walks the registry: ``multiclass`` is behaviour, not a label — an algorithm that declares it takes a
    step on a 4-class model and keeps its shape, one that does not refuses with the registry's sentence."""
    from fedviz.algorithms import ALGORITHMS

    p = Problem(_data(), Softmax(), 0.1)
    assert any(cls.multiclass for cls in ALGORITHMS.values()) and not all(cls.multiclass for cls in ALGORITHMS.values())
    for name, cls in ALGORITHMS.items():
        if cls.multiclass:
            a = cls(p, seed=0)
            a.step()
            assert np.shape(a.w) == np.shape(p.flat(np.zeros((p.d, p.n_classes)))) and np.all(np.isfinite(a.w)), name
            continue
        with pytest.raises(ParameterError, match=rf"{name}\.loss.*C = 4.*binary and regression models only"):
            cls(p)


def test_gd_on_ten_classes_is_the_dense_update():
    """GD (Section 4.1) on the d × C model: W ← W − h (Xᵀ(softmax(XW) − Y)/n + λW), h = 1/L with
    L = ½ λ_max(XᵀX)/n + λ (Böhning's bound), densely, to 1e-10 — with fixed steps, and with the default
    Barzilai–Borwein steps (tests/problems.py's dense method on the flat d·C vector)."""
    from fedviz.algorithms.gd import GD
    from fedviz.runner.loop import iterate

    p = Problem(_data(n=300, d=10, C=10, K=4, seed=5), Softmax(), 1e-2)
    X, y = _dense(p)
    n, C = p.n, p.n_classes
    L = 0.5 * np.linalg.eigvalsh(X.T @ X)[-1] / n + p.lam
    algo = GD(p, seed=0, steps="fixed")
    assert algo.h == pytest.approx(1.0 / L, rel=2e-9)  # the problem rounds λ_max up past rounding error
    W = np.zeros((p.d, C))
    for _ in range(5):
        algo.step()
        W = W - algo.h * (X.T @ (softmax(X @ W, axis=1) - np.eye(C)[y]) / n + p.lam * W)
        np.testing.assert_allclose(algo.w, W.ravel(), rtol=1e-10, atol=1e-12)
    recs = list(iterate(p, "gd", iterations=5, hyper={"steps": "fixed"}, f_star=solve(p).objective))
    assert recs[-1].status == "done"
    objectives = [r.objective for r in recs]
    assert all(b < a for a, b in zip(objectives, objectives[1:]))
    assert recs[-1].test_error == np.mean(np.argmax(p.data.X_test.toarray() @ W, axis=1) != p.data.y_test)

    Y = np.eye(C)[y]

    def f_and_g(v):
        M = X @ v.reshape(p.d, C)
        f = np.mean(logsumexp(M, axis=1) - np.sum(M * Y, axis=1)) + p.lam / 2 * v @ v
        return f, (X.T @ (softmax(M, axis=1) - Y) / n).ravel() + p.lam * v
    path = dense_bb_gd_path(X, y, p.lam, 4.0 / L, 8, f_and_g, size=p.d * C)
    algo = GD(p, seed=0, stepsize=4.0 / L)
    for v in path:
        algo.step()
        np.testing.assert_allclose(algo.w, v, rtol=1e-10, atol=1e-12)
    with pytest.raises(ParameterError, match=r"w0.*length dC = 100 \(d = 10, C = 10\)"):
        GD(p, w0=np.zeros(10))


@pytest.mark.parametrize("values", ["float64", "float32", "ones"])
def test_row_block_products_move_c_values_per_nonzero(monkeypatch, values):
    """X W and Xᵀ R over row blocks on every core against SciPy's products, for each compact form
    of X's values (issue 22: a feature's C weights are contiguous)."""
    from fedviz.problems import _blocks

    monkeypatch.setattr(_blocks, "MIN_BLOCK_NNZ", 50)
    rng = np.random.default_rng(7)
    X = sp.random(500, 40, density=0.2, random_state=7, format="csr")
    X.data = {"float64": rng.normal(size=X.nnz), "float32": rng.normal(size=X.nnz).astype(np.float32),
              "ones": np.ones(X.nnz)}[values].astype(np.float64)
    blocks = _blocks.RowBlocks(X)
    assert blocks.n_blocks > 1
    W, R = rng.normal(size=(40, 5)), rng.normal(size=(500, 5))
    Z = blocks.matmat(W)
    assert Z.shape == (500, 5) and Z.flags.c_contiguous
    np.testing.assert_allclose(Z, X @ W, rtol=1e-13, atol=1e-13)
    G = blocks.rmatmat(R)
    assert G.shape == (40, 5) and G.flags.c_contiguous
    np.testing.assert_allclose(G, X.T @ R, rtol=1e-12, atol=1e-12)


def test_softmax_through_row_blocks_and_lanczos(monkeypatch):
    """f and ∇f with X in blocks, and L = ½ λ_max(XᵀX)/n + λ by Lanczos (d > 200) against a dense eigensolver."""
    from fedviz.problems import _blocks

    monkeypatch.setattr(_blocks, "MIN_BLOCK_NNZ", 200)
    ds = _data(n=600, d=230, C=3, K=4, seed=8, density=0.05)
    p = Problem(ds, Softmax(), 1e-3)
    assert p.blocks.n_blocks > 1
    X, y = _dense(p)
    w = np.random.default_rng(3).normal(size=p.size) * 0.3
    W = w.reshape(p.shape)
    Z = X @ W
    f = np.mean(logsumexp(Z, axis=1) - Z[np.arange(p.n), y]) + 0.5 * p.lam * np.sum(W * W)
    G = X.T @ (softmax(Z, axis=1) - np.eye(3)[y]) / p.n + p.lam * W
    f2, g2, _ = p.value_grad_error(w)
    assert f2 == pytest.approx(f, rel=1e-13)
    np.testing.assert_allclose(g2, G.ravel(), rtol=1e-11, atol=1e-15)
    L = 0.5 * np.linalg.eigvalsh(X.T @ X)[-1] / p.n + p.lam
    assert L <= p.smoothness <= 1.02 * L


@pytest.mark.parametrize("hyper", [{}, {"schedule": "constant", "sampling": "permutation"}],
                         ids=["default", "constant"])
def test_sgd_on_ten_classes_is_the_dense_update(hyper):
    """Centralised SGD (Section 2.1) on the d × C model, W ← (1 − h_t λ) W − h_t x_i (softmax(Wᵀx_i) −
    e_{y_i})ᵀ step by step, eagerly and densely, against the kernel's lazy regulariser, to 1e-10."""
    from fedviz.algorithms.sgd import SGD

    p = Problem(_data(n=200, d=10, C=10, K=3, seed=9), Softmax(), 1e-2)
    X, y = _dense(p)
    algo = SGD(p, seed=4, **hyper)
    W = np.zeros(p.shape)
    for _ in range(3):
        samples, h = algo.samples(), algo.stepsizes()
        algo.step()
        for i, ht in zip(samples, h):
            g = softmax(X[i] @ W) - np.eye(p.n_classes)[y[i]]
            W = (1 - ht * p.lam) * W - ht * np.outer(X[i], g)
        np.testing.assert_allclose(algo.w, W.ravel(), rtol=1e-10, atol=1e-12)
    assert algo.grad_evals == 3 * p.n


def _local_svrg(X, Wt, G, rows, order, hk, lam, scale):
    """One node's local SVRG pass on the d × C model, eagerly and densely (Algorithms 1, 3, 4):
    V ← (1 − h_k λ) V − h_k G − h_k (S_k x_i)(softmax(Wᵀx_i) − softmax(W̃ᵀx_i))ᵀ, V = W − W̃."""
    V = np.zeros_like(Wt)
    for li in order:
        x = X[rows[li]]
        diff = softmax(x @ (Wt + V)) - softmax(x @ Wt)
        V = (1 - hk * lam) * V - hk * G - hk * np.outer(scale * x, diff)
    return V


def _gradient(X, y, W, lam):
    return X.T @ (softmax(X @ W, axis=1) - np.eye(W.shape[1])[y]) / len(y) + lam * W


@pytest.mark.parametrize("name", ["fsvrg", "naive-fsvrg", "svrg"])
def test_the_svrg_family_on_ten_classes_is_the_dense_update(name):
    """FSVRG (Algorithm 4, as printed: no safeguard; S_k = Diag(φ^j/φ_k^j) and A = Diag(K/ω^j)
    scaling a feature's row of C values), naive FSVRG (Algorithm 3) and SVRG (Algorithm 1) on a
    10-class problem against a dense NumPy transcription, the same samples, to 1e-10."""
    from fedviz.algorithms import get_algorithm
    from fedviz.algorithms._svrg_kernels import SAMPLE_STREAM, permutation_samples, uniform_samples

    base = _data(n=240, d=10, C=10, K=4, seed=11, density=0.4)
    Xb = base.X.toarray()
    node = base.node_of_row
    Xb[node != 0, 0] = 0.0  # feature 0 on node 0 only (ω = 1), feature 1 on nodes 0 and 1 (ω = 2)
    Xb[node >= 2, 1] = 0.0
    p = Problem(FederatedDataset.from_assignment(sp.csr_matrix(Xb), base.y, node), Softmax(), 1e-2)
    X, y = _dense(p)
    ds, n, d = p.data, p.n, p.d
    sizes, offsets = ds.node_sizes, ds.offsets
    algo = get_algorithm(name)(p, seed=2, **({"safeguard": False} if name in ("fsvrg", "svrg") else {}))
    present = X != 0
    phi = present.sum(axis=0) / n
    W = np.zeros(p.shape)
    for _ in range(3):
        G = _gradient(X, y, W, p.lam)
        if name == "svrg":
            order = algo.samples()
            W = W + _local_svrg(X, W, G, np.arange(n), order, algo.h, p.lam, np.ones(d))
        else:
            if name == "fsvrg":
                samples = permutation_samples(algo.rng(SAMPLE_STREAM), offsets)
                ptr = offsets
            else:
                samples = uniform_samples(algo.rng(SAMPLE_STREAM), sizes, np.full(len(sizes), algo.m))
                ptr = np.arange(len(sizes) + 1) * algo.m
            delta = np.zeros(p.shape)
            for k in range(ds.n_nodes):
                rows = np.arange(offsets[k], offsets[k + 1])
                order = samples[ptr[k]:ptr[k + 1]]
                if name == "fsvrg":
                    phi_k = present[rows].sum(axis=0) / len(rows)
                    scale = np.where(phi_k > 0, phi / np.where(phi_k > 0, phi_k, 1.0), 1.0)
                    V = _local_svrg(X, W, G, rows, order, algo.h / sizes[k], p.lam, scale)
                    delta += sizes[k] / n * V
                else:
                    delta += _local_svrg(X, W, G, rows, order, algo.h, p.lam, np.ones(d)) / ds.n_nodes
            if name == "fsvrg":
                omega = np.array([sum(present[offsets[k]:offsets[k + 1], j].any() for k in range(ds.n_nodes))
                                  for j in range(d)])
                A = np.where(omega > 0, ds.n_nodes / np.maximum(omega, 1), 1.0)
                assert sorted(set(A)) == [1.0, 2.0, 4.0]
                delta = A[:, None] * delta
            W = W + delta
        algo.step()
        np.testing.assert_allclose(algo.w, W.ravel(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["fsvrg", "svrg", "fedavg"])
def test_the_softmax_local_loop_does_not_depend_on_how_it_is_cut(monkeypatch, name):
    """Stop is checked between batches; batches may end inside a node's loop (the SVRG family) or
    between nodes (FedAvg), whose state then resumes: the iterates are bitwise the same for any cut."""
    from fedviz.algorithms import _local_sgd_kernels, _softmax_kernels, get_algorithm

    p = Problem(_data(n=300, d=12, C=5, K=20, seed=12), Softmax(), 1e-2)
    hyper = {"client_fraction": 1.0} if name == "fedavg" else {}

    def run():
        algo = get_algorithm(name)(p, seed=1, **hyper)
        for _ in range(2):
            algo.step()
        return np.array(algo.w)

    whole = run()
    calls = []
    if name == "fedavg":
        monkeypatch.setattr(_local_sgd_kernels, "BATCH_WORK", 40)
        original = _softmax_kernels.LocalSGDSoftmax._run_batch
        monkeypatch.setattr(_softmax_kernels.LocalSGDSoftmax, "_run_batch",
                            lambda self, *a: calls.append(1) or original(self, *a))
    else:
        monkeypatch.setattr(_softmax_kernels, "BATCH_WORK", 40)
        original = _softmax_kernels._batch_softmax
        monkeypatch.setattr(_softmax_kernels, "_batch_softmax", lambda *a: calls.append(1) or original(*a))
    cut = run()
    assert len(calls) > 4  # many batches per iteration
    assert np.array_equal(whole, cut)


@pytest.mark.parametrize("name,hyper", [
    ("fedavg", {}),
    ("fedavg", {"batch_size": 0, "client_fraction": 1.0, "local_epochs": 3}),
    ("fedprox", {"mu": 0.5, "local_epochs": 2, "batch_size": 7, "client_fraction": 0.5}),
], ids=["fedavg", "fedavg-full-batch", "fedprox"])
def test_the_fedavg_family_on_ten_classes_is_the_dense_update(name, hyper):
    """FedAvg (McMahan et al., Algorithm 1) and FedProx (Li et al., Algorithm 2) on the d × C model:
    each sampled node takes E epochs of minibatch steps Y ← Y − η [mean_b x_i (softmax(Yᵀx_i) −
    e_{y_i})ᵀ + λY + μ(Y − W)] from the server's W, which moves by Σ (n_k/n_S)(Y_k − W); densely,
    with the algorithm's own node samples and row orders, to 1e-10."""
    from fedviz.algorithms import get_algorithm

    p = Problem(_data(n=240, d=10, C=10, K=6, seed=13, density=0.4), Softmax(), 1e-2)
    X, y = _dense(p)
    ds = p.data
    algo = get_algorithm(name)(p, seed=3, **hyper)
    mu = algo.local.mu
    E, B = algo.local.epochs, algo.local.batch_size
    W = np.zeros(p.shape)
    for _ in range(3):
        nodes = algo.sample_nodes()
        orders = algo.local.orders(nodes, algo.rng(1))
        sizes = ds.node_sizes[nodes]
        delta = np.zeros(p.shape)
        pos = 0
        for k, nk in zip(nodes, sizes):
            rows = np.arange(ds.offsets[k], ds.offsets[k + 1])
            Y = W.copy()
            for e in range(E):
                order = np.arange(nk) if B == 0 else orders[pos + e * nk: pos + (e + 1) * nk]
                step = nk if B == 0 else B
                for lo in range(0, nk, step):
                    batch = rows[order[lo:lo + step]]
                    G = X[batch].T @ (softmax(X[batch] @ Y, axis=1) - np.eye(p.n_classes)[y[batch]]) / len(batch)
                    Y = Y - algo.eta * (G + p.lam * Y + mu * (Y - W))
            pos += 0 if B == 0 else E * nk
            delta += nk / sizes.sum() * (Y - W)
        W = W + delta
        algo.step()
        assert np.array_equal(algo.sampled, nodes)
        np.testing.assert_allclose(algo.w, W.ravel(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("hyper", [{}, {"batch_size": 5, "client_fraction": 0.5, "local_epochs": 2}],
                         ids=["full-batch", "minibatch"])
def test_scaffold_on_ten_classes_is_the_dense_update(hyper):
    """SCAFFOLD (Karimireddy et al., Algorithm 1, option II) on the d × C model: Y ← Y − η (g_b(Y) + λY
    + S − S_k) with S_k, S the data parts of the control variates; S_k⁺ the mean data gradient the node
    used; W ← W + η_g Σ (n_k/n_S)(Y_k − W), S ← S + Σ (n_k/n)(S_k⁺ − S_k); densely, to 1e-10."""
    from fedviz.algorithms.scaffold import Scaffold

    p = Problem(_data(n=240, d=10, C=10, K=6, seed=14, density=0.4), Softmax(), 1e-2)
    X, y = _dense(p)
    ds, C = p.data, p.n_classes
    algo = Scaffold(p, seed=5, **hyper)
    E, B, eta = algo.local.epochs, algo.local.batch_size, algo.eta
    W, S = np.zeros(p.shape), np.zeros(p.shape)
    Sk = np.zeros((ds.n_nodes, *p.shape))
    for _ in range(3):
        nodes = algo.sample_nodes()
        orders = algo.local.orders(nodes, algo.rng(1))
        sizes = ds.node_sizes[nodes]
        delta, dS, pos = np.zeros(p.shape), np.zeros(p.shape), 0
        for k, nk in zip(nodes, sizes):
            rows = np.arange(ds.offsets[k], ds.offsets[k + 1])
            Y, used, T = W.copy(), np.zeros(p.shape), 0
            for e in range(E):
                order = np.arange(nk) if B == 0 else orders[pos + e * nk: pos + (e + 1) * nk]
                step = nk if B == 0 else B
                for lo in range(0, nk, step):
                    b = rows[order[lo:lo + step]]
                    G = X[b].T @ (softmax(X[b] @ Y, axis=1) - np.eye(C)[y[b]]) / len(b)
                    Y = Y - eta * (G + p.lam * Y + S - Sk[k])
                    used, T = used + G, T + 1
            pos += 0 if B == 0 else E * nk
            delta += nk / sizes.sum() * (Y - W)
            dS += nk / p.n * (used / T - Sk[k])
            Sk[k] = used / T
        W, S = W + algo.hp["global_stepsize"] * delta, S + dS
        algo.step()
        np.testing.assert_allclose(algo.w, W.ravel(), rtol=1e-10, atol=1e-12)
    c, Smat = algo.control_variates()
    np.testing.assert_allclose(c, (S + p.lam * W).ravel(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Smat.toarray(), Sk.reshape(ds.n_nodes, -1), rtol=1e-10, atol=1e-12)


def test_scaffold_on_ten_classes_stays_at_the_optimum_from_its_fixed_point():
    """Property (A), Section 3.1: from W* with c_k = ∇F_k(W*) and c = ∇f(W*) SCAFFOLD does not move."""
    from fedviz.algorithms.scaffold import Scaffold

    p = Problem(_data(n=240, d=10, C=10, K=6, seed=15), Softmax(), 1e-2)
    opt = solve(p)
    Ck = p.node_grads_data(opt.w).toarray() + p.lam * opt.w
    algo = Scaffold(p, w0=opt.w, control0=(p.grad(opt.w), Ck), client_fraction=1.0)
    for _ in range(3):
        algo.step()
    assert np.linalg.norm(algo.w - opt.w) < 1e-9 * np.linalg.norm(opt.w)


def _dense_newton(X, y, C, lam, lin, center, mu, W0):
    """argmin_W (1/n) Σ φ_i(Wᵀx_i) + (λ/2)‖W‖² − ⟨lin, W⟩ + (μ/2)‖W − center‖², by Newton's
    method with the dense dC × dC Hessian Σ (x_i x_iᵀ) ⊗ (diag p_i − p_i p_iᵀ)/n + (λ + μ)I."""
    n, d = X.shape
    W = W0.copy()
    for _ in range(50):
        P = softmax(X @ W, axis=1)
        G = X.T @ (P - np.eye(C)[y]) / n + lam * W - lin + mu * (W - center)
        if np.linalg.norm(G) < 1e-14:
            break
        H = sum(np.kron(np.outer(X[i], X[i]), np.diag(P[i]) - np.outer(P[i], P[i])) for i in range(n)) / n
        H += (lam + mu) * np.eye(d * C)
        W = W - np.linalg.solve(H, G.ravel()).reshape(d, C)
    return W


@pytest.mark.parametrize("name,hyper", [("dane", {"safeguard": False}),
                                        ("dane", {"mu": 0.1, "eta": 0.5, "safeguard": False}), ("one-shot", {})],
                         ids=["dane", "dane-mu-eta", "one-shot"])
def test_dane_and_one_shot_on_ten_classes_solve_the_dense_subproblems(name, hyper):
    """DANE (Algorithm 2, exact solver): W ← mean_k argmin F_k(W) − ⟨∇F_k(W^t) − η∇f(W^t), W⟩ +
    (μ/2)‖W − W^t‖²; one-shot averaging (Section 3.4): W = Σ (n_k/n) argmin F_k; each node's
    subproblem solved densely by Newton's method, to 1e-8."""
    from fedviz.algorithms import get_algorithm

    p = Problem(_data(n=120, d=6, C=10, K=4, seed=16, density=0.5), Softmax(), 2e-2)
    X, y = _dense(p)
    ds, C, lam = p.data, p.n_classes, p.lam
    algo = get_algorithm(name)(p, seed=0, **hyper)
    eta, mu = hyper.get("eta", 1.0), hyper.get("mu", 0.0)
    W = np.zeros(p.shape)
    for _ in range(2 if name == "dane" else 1):
        G = _gradient(X, y, W, lam)
        parts = []
        for k in range(ds.n_nodes):
            rows = slice(ds.offsets[k], ds.offsets[k + 1])
            Xk, yk = X[rows], y[rows]
            if name == "one-shot":
                parts.append(ds.node_sizes[k] / p.n * _dense_newton(Xk, yk, C, lam, 0.0, W, 0.0, W))
            else:
                lin = _gradient(Xk, yk, W, lam) - eta * G
                parts.append(_dense_newton(Xk, yk, C, lam, lin, W, mu, W) / ds.n_nodes)
        W = sum(parts)
        algo.step()
        np.testing.assert_allclose(algo.w, W.ravel(), rtol=1e-8, atol=1e-9)


def test_inexact_dane_refuses_softmax_by_name():
    from fedviz.algorithms.dane import DANE

    p = Problem(_data(), Softmax(), 0.1)
    with pytest.raises(ParameterError, match=r"dane\.solver.*'exact' for a softmax model \(C = 4\)"):
        DANE(p, solver="svrg")
