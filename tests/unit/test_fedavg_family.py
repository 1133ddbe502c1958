"""FedAvg, FedProx and SCAFFOLD against plain dense NumPy references and exact identities.

The references below are the papers' pseudo-code written out densely (no lazy updates,
no sparse tricks, their own φ' formulas), fed the same node samples and row orders as
the compiled kernels.  The behavioural tests check what users are taught about these
methods: client drift away from w* for FedAvg/FedProx, none for SCAFFOLD with control
variates at their optimal values (the paper's property (A), Section 3.1), exactness on
identical nodes (property (D)), and SCAFFOLD's convergence on non-IID partitions.
"""

from fractions import Fraction

import numba
import numpy as np
import pytest
import scipy.sparse as sp

from fedviz.algorithms import _local_sgd_kernels as kern
from fedviz.algorithms.base import StopRequested
from fedviz.algorithms.fedavg import FedAvg
from fedviz.algorithms.fedprox import FedProx
from fedviz.algorithms.scaffold import Scaffold
from fedviz.data.dataset import FederatedDataset
from fedviz.errors import ParameterError
from fedviz.problems.losses import SmoothedHinge
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

def make_problem(loss="logistic", *, iid=False, K=6, n=240, d=30, lam=None, seed=0,
                 explicit_zeros=False):
    """A small sparse problem.  Non-IID: node k's rows use mostly its own block of features
    and follow their own true model, so the local optima differ strongly."""
    rng = np.random.default_rng(seed)
    node = np.sort(rng.integers(0, K, size=n)) if not iid else rng.integers(0, K, size=n)
    block = max(4, d // (K + 1))                               # block 0 shared, then one per node
    d = max(d, (K + 1) * block + 2)                            # the last 2 features are never used
    dense = np.zeros((n, d))
    for i in range(n):
        k = node[i] if not iid else rng.integers(0, K)
        own = (k + 1) * block + rng.choice(block, size=3, replace=False)
        shared = rng.choice(block, size=2, replace=False)
        dense[i, np.r_[own, shared]] = rng.normal(size=5)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    truth = rng.normal(size=(K, d)) * 3 if not iid else np.tile(rng.normal(size=d) * 3, (K, 1))
    score = np.einsum("ij,ij->i", dense, truth[node]) + 0.3 * rng.normal(size=n)
    if loss == "squared" or getattr(loss, "task", "") == "regression":
        y = score
    else:
        y = np.where(score > 0, 1.0, -1.0)
    X = sp.csr_matrix(dense)
    if explicit_zeros:
        # Explicit stored zeros must be skipped (they are no appearance of the feature).
        X = X.tocoo()
        X = sp.csr_matrix((np.r_[X.data, 0.0, 0.0], (np.r_[X.row, 0, 5], np.r_[X.col, d - 1, d - 2])),
                          shape=(n, d))
    ds = FederatedDataset.from_assignment(X, y, node)
    return Problem(ds, loss, lam)


def identical_nodes_problem(loss="logistic", *, K=5, m=40, d=12, lam=0.02, seed=3):
    """Every node holds an identical copy of the same m examples: F_k = f for all k."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, d)) * (rng.random((m, d)) < 0.5)
    A[np.arange(m), rng.integers(0, d, m)] += 1.0              # no empty row
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    score = A @ rng.normal(size=d) + 0.2 * rng.normal(size=m)
    y = score if loss == "squared" else np.where(score > 0, 1.0, -1.0)
    X = sp.csr_matrix(np.tile(A, (K, 1)))
    ds = FederatedDataset.from_assignment(X, np.tile(y, K), np.repeat(np.arange(K), m))
    return Problem(ds, loss, lam)


# ---------------------------------------------------------------------------------------------
# Dense references (the papers' pseudo-code, written plainly)
# ---------------------------------------------------------------------------------------------

def dphi(loss, z, y):
    """φ'(z) written out independently of fedviz.problems.losses."""
    if loss.name == "logistic":
        return -y / (1.0 + np.exp(y * z))
    if loss.name == "squared":
        return z - y
    return -y * np.clip((1.0 - y * z) / loss.gamma, 0.0, 1.0)


def reference_local(problem, k, x, *, eta, mu, epochs, batch, order, v=None):
    """Node k's E epochs of minibatch SGD on F_k + (μ/2)‖w − x‖² (+ vᵀw), densely.

    Returns the final iterate, the number of steps and the points where gradients were taken.
    """
    ds = problem.data
    sl = ds.node_slice(k)
    Xk = problem.X[sl].toarray()
    yk = ds.y[sl]
    nk = Xk.shape[0]
    v = np.zeros_like(x) if v is None else v
    w = x.copy()
    path = []
    for e in range(epochs):
        perm = np.arange(nk) if batch == 0 else order[e * nk:(e + 1) * nk]
        size = nk if batch == 0 else batch
        for lo in range(0, nk, size):
            rows = perm[lo:lo + size]
            A = Xk[rows]
            g = A.T @ dphi(problem.loss, A @ w, yk[rows]) / len(rows) + problem.lam * w
            path.append(w.copy())
            w = w - eta * (g + mu * (w - x) + v)
    return w, len(path), np.array(path)


def random_orders(problem, nodes, epochs, seed):
    rng = np.random.default_rng(seed)
    sizes = problem.data.node_sizes
    return np.concatenate([rng.permutation(sizes[k]) for k in nodes for _ in range(epochs)])


def node_orders(problem, nodes, epochs, orders):
    """Split a concatenated order array into per-node blocks."""
    out, pos = {}, 0
    for k in nodes:
        size = epochs * problem.data.node_sizes[k]
        out[k] = orders[pos:pos + size]
        pos += size
    return out


def dense_node_grads(problem, w):
    """∇F_k(w) for every node as a dense K × d array, straight from the definition (eq. 6)."""
    ds = problem.data
    out = np.zeros((ds.n_nodes, problem.d))
    for k in range(ds.n_nodes):
        sl = ds.node_slice(k)
        Xk = problem.X[sl].toarray()
        out[k] = Xk.T @ dphi(problem.loss, Xk @ w, ds.y[sl]) / Xk.shape[0] + problem.lam * w
    return out


# ---------------------------------------------------------------------------------------------
# Kernels vs references
# ---------------------------------------------------------------------------------------------

def test_geometric_tables_match_exact_rational_arithmetic():
    for h in (1e-9, 3e-4, 0.3, 0.7, 1.4):
        T = 60
        rp, qs = np.empty(T + 1), np.empty(T + 1)
        kern.geometric_tables(h, T, rp, qs)
        r = 1 - Fraction(h)
        for m in (0, 1, 2, 17, T):
            exact_r = r ** m
            exact_q = sum((r ** i for i in range(m)), Fraction(0))
            assert rp[m] == pytest.approx(float(exact_r), rel=1e-14, abs=1e-300)
            assert qs[m] == pytest.approx(float(exact_q), rel=1e-13, abs=1e-300)


def test_shuffle_segments_gives_permutations():
    sizes = np.array([1, 4, 7], dtype=np.int64)
    u = np.random.default_rng(0).random(2 * sizes.sum())
    out = np.empty(u.size, dtype=np.int64)
    kern.shuffle_segments(sizes, 2, u, out)
    pos = 0
    for n in sizes:
        for _ in range(2):
            assert sorted(out[pos:pos + n]) == list(range(n))
            pos += n


CASES = [
    # loss, epochs, batch, mu, nodes
    ("logistic", 1, 0, 0.0, "all"),
    ("logistic", 3, 4, 0.0, "some"),
    ("logistic", 2, 7, 0.3, "all"),
    ("squared", 2, 5, 0.0, "some"),
    ("squared", 1, 0, 0.5, "all"),
    (SmoothedHinge(0.5), 2, 3, 0.1, "all"),
    ("logistic", 2, 3, "large", "some"),   # η(λ+μ) > 1/2: the tables' recurrence branch
    ("logistic", 2, 1000, 0.0, "all"),     # B ≥ n_k: one shuffled batch per epoch
]


@pytest.mark.parametrize("loss,epochs,batch,mu,which", CASES)
@pytest.mark.parametrize("control", [False, True], ids=["plain", "control"])
def test_local_round_matches_dense_reference(loss, epochs, batch, mu, which, control):
    problem = make_problem(loss, lam=1e-3, explicit_zeros=True)
    K, d = problem.data.n_nodes, problem.d
    rng = np.random.default_rng(5)
    eta = 0.7 / problem.max_example_smoothness
    if mu == "large":
        mu = 2.0 * problem.max_example_smoothness
    local = kern.LocalSGD(problem, epochs=epochs, batch_size=batch, stepsize=eta, mu=mu,
                          control=control)
    nodes = np.arange(K) if which == "all" else np.array([0, 2, 3, 5])
    sizes = problem.data.node_sizes[nodes]
    weights = sizes / sizes.sum()
    x = rng.normal(size=d)
    orders = random_orders(problem, nodes, epochs, seed=9) if batch else None
    per_node = node_orders(problem, nodes, epochs, orders) if batch else {}

    # Control variates: c_k = s_k + λx with s_k on node k's features, c = s + λx.
    pattern = problem.data.stats.node_feature_counts
    S = sp.csr_matrix((rng.normal(size=pattern.nnz), pattern.indices, pattern.indptr),
                      shape=(K, d)).toarray()
    s = rng.normal(size=d)
    if control:
        local.ctrl[:] = S[pattern.nonzero()]
        local.s[:] = s
    C_nodes = S + problem.lam * x
    c = s + problem.lam * x

    delta, dS = local.round(x, nodes, weights, orders=orders)

    expect_delta = np.zeros(d)
    expect_dS = np.zeros(d)
    for k, w in zip(nodes, weights):
        v = c - C_nodes[k] if control else None
        yk, T, path = reference_local(problem, k, x, eta=eta, mu=mu, epochs=epochs, batch=batch,
                                      order=per_node.get(k), v=v)
        expect_delta += w * (yk - x)
        if control:
            # Option II, literally: c_k⁺ = c_k − c + (x − y_k)/(T η), the mean of the gradients
            # used along the path.  Its data part: minus the regulariser's (and here the
            # proximal term's) gradients averaged over the path.
            ck_new = C_nodes[k] - c + (x - yk) / (T * eta)
            mean_path = path.mean(axis=0)
            sk_new = ck_new - problem.lam * mean_path - mu * (mean_path - x)
            stored = sp.csr_matrix((local.ctrl, pattern.indices, pattern.indptr), shape=(K, d))
            np.testing.assert_allclose(stored[k].toarray().ravel(), sk_new, rtol=0, atol=1e-12)
            expect_dS += problem.data.node_sizes[k] / problem.n * (sk_new - S[k])
    np.testing.assert_allclose(delta, expect_delta, rtol=0, atol=1e-12)
    if control:
        np.testing.assert_allclose(dS, expect_dS, rtol=0, atol=1e-12)
        untouched = np.setdiff1d(np.arange(K), nodes)
        stored = sp.csr_matrix((local.ctrl, pattern.indices, pattern.indptr), shape=(K, d)).toarray()
        np.testing.assert_array_equal(stored[untouched], S[untouched])
    else:
        assert dS is None


def test_result_does_not_depend_on_thread_count():
    problem = make_problem("logistic", K=9, lam=1e-3)
    nodes = np.arange(problem.data.n_nodes)
    w = problem.data.node_sizes / problem.n
    x = np.random.default_rng(1).normal(size=problem.d)
    orders = random_orders(problem, nodes, 2, seed=2)
    old = numba.get_num_threads()
    out = []
    try:
        for threads in sorted({1, old}):
            numba.set_num_threads(threads)
            local = kern.LocalSGD(problem, epochs=2, batch_size=3, stepsize=1.0, control=True)
            out.append(local.round(x, nodes, w, orders=orders))
    finally:
        numba.set_num_threads(old)
    np.testing.assert_allclose(out[0][0], out[-1][0], rtol=0, atol=1e-14)
    np.testing.assert_allclose(out[0][1], out[-1][1], rtol=0, atol=1e-14)


# ---------------------------------------------------------------------------------------------
# The algorithms
# ---------------------------------------------------------------------------------------------

def test_fedavg_step_is_the_weighted_average_over_the_sampled_nodes():
    problem = make_problem("logistic", K=8, lam=1e-2)
    alg = FedAvg(problem, seed=4, client_fraction=0.5, local_epochs=2, batch_size=5)
    for _ in range(3):
        x = alg.w.copy()
        # The same row orders the algorithm will draw (stream 1 of this iteration).
        nodes = alg.sample_nodes()
        orders = alg.local.orders(nodes, alg.rng(1))
        per_node = node_orders(problem, nodes, 2, orders)
        up = alg.vectors_up
        alg.step()
        np.testing.assert_array_equal(alg.sampled, nodes)
        assert nodes.size == 4 and np.unique(nodes).size == 4
        assert alg.vectors_up - up == 4                      # only sampled nodes communicate
        sizes = problem.data.node_sizes[nodes]
        expect = sum(n_k / sizes.sum() * reference_local(
            problem, k, x, eta=alg.eta, mu=0.0, epochs=2, batch=5, order=per_node[k])[0]
            for k, n_k in zip(nodes, sizes))
        np.testing.assert_allclose(alg.w, expect, rtol=0, atol=1e-12)
    assert alg.rounds == 3 and alg.vectors_down == 12


@pytest.mark.parametrize("loss", ["logistic", "squared", SmoothedHinge(0.5)], ids=str)
def test_one_full_batch_step_on_all_nodes_is_a_gradient_step(loss):
    """C = 1, E = 1, B = full: x − η Σ_k (n_k/n) ∇F_k(x) = x − η ∇f(x), by eq. (7)."""
    problem = make_problem(loss, lam=1e-2)
    w0 = np.random.default_rng(0).normal(size=problem.d)
    for cls in (FedAvg, FedProx, Scaffold):
        alg = cls(problem, seed=0, w0=w0, client_fraction=1.0, local_epochs=1, batch_size="full",
                  stepsize=0.8)
        alg.step()
        np.testing.assert_allclose(alg.w, w0 - 0.8 * problem.grad(w0), rtol=0, atol=1e-13)


def test_counters():
    problem = make_problem("squared", K=10, lam=1e-2)
    sizes = problem.data.node_sizes
    for cls, per in ((FedAvg, 1), (FedProx, 1), (Scaffold, 2)):
        alg = cls(problem, seed=1, client_fraction=0.3, local_epochs=3)
        evals = 0
        for _ in range(4):
            alg.step()
            assert alg.sampled.size == 3
            evals += 3 * int(sizes[alg.sampled].sum())
        assert alg.rounds == 4
        assert alg.vectors_up == alg.vectors_down == 4 * 3 * per
        assert alg.grad_evals == evals


def test_fedprox_with_mu_zero_is_fedavg():
    problem = make_problem("logistic", K=8, lam=1e-3)
    hyper = dict(client_fraction=0.5, local_epochs=2, batch_size=4)
    a = FedAvg(problem, seed=11, **hyper)
    b = FedProx(problem, seed=11, mu=0.0, **hyper)
    c = FedProx(problem, seed=11, mu=0.1, **hyper)
    for _ in range(5):
        a.step(), b.step(), c.step()
        np.testing.assert_array_equal(a.w, b.w)
    assert (a.rounds, a.vectors_up, a.grad_evals) == (b.rounds, b.vectors_up, b.grad_evals)
    assert np.linalg.norm(c.w - a.w) > 1e-6                # and μ > 0 does change something


def test_same_seed_same_iterates():
    problem = make_problem("logistic", K=8, lam=1e-3)
    runs = []
    for seed in (3, 3, 4):
        alg = Scaffold(problem, seed=seed, client_fraction=0.5, batch_size=5, local_epochs=2)
        for _ in range(3):
            alg.step()
        runs.append(alg.w)
    np.testing.assert_array_equal(runs[0], runs[1])
    assert np.linalg.norm(runs[0] - runs[2]) > 1e-8


# ---------------------------------------------------------------------------------------------
# Property (A) and client drift
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_client_drift_and_property_A(loss):
    problem = make_problem(loss, lam=1e-2)
    opt = solve(problem)
    w_star = np.array(opt.w)
    C_star = dense_node_grads(problem, w_star)            # c_k* = ∇F_k(w*)
    c_star = np.zeros(problem.d)                          # c* = Σ (n_k/n) c_k* = ∇f(w*) = 0
    # The test's premise: the local gradients at w* differ (non-IID), their average vanishes.
    p = problem.data.node_sizes / problem.n
    assert np.linalg.norm(p @ C_star) < 1e-9 < 1e-2 < np.abs(C_star).max()

    # SCAFFOLD with control variates at their optimal values stays at w*, with full and with
    # partial participation.
    from fedviz.properties import stays_at_optimum

    for fraction in (1.0, 0.5):
        alg = Scaffold(problem, seed=0, w0=w_star, control0=(c_star, C_star), client_fraction=fraction)
        measured = stays_at_optimum(alg, w_star, iterations=5, tol=1e-10)
        assert measured.holds  # ‖w^t − w*‖ ≤ 1e-10 after each of the 5 rounds
        assert np.linalg.norm(alg.w - w_star) <= 1e-10

    # FedAvg and FedProx drift away from w* after one round of several local steps, and so
    # does SCAFFOLD started from zero control variates.
    drifters = [FedAvg(problem, seed=0, w0=w_star, client_fraction=1.0, local_epochs=2),
                FedAvg(problem, seed=0, w0=w_star, client_fraction=1.0, batch_size="full",
                       local_epochs=10),
                FedProx(problem, seed=0, w0=w_star, client_fraction=1.0, local_epochs=2),
                FedProx(problem, seed=0, w0=w_star, client_fraction=1.0, batch_size=0,
                        local_epochs=10, mu=0.1),
                Scaffold(problem, seed=0, w0=w_star)]
    for alg in drifters:
        alg.step()
        assert np.linalg.norm(alg.w - w_star) > 1e-4, alg.name


def test_scaffold_control_variates_stay_consistent():
    """c = Σ_k (n_k/n) c_k throughout, and after convergence c_k → ∇F_k(w*)."""
    problem = make_problem("squared", lam=1e-2)
    p = problem.data.node_sizes / problem.n
    alg = Scaffold(problem, seed=2, client_fraction=0.5)
    for _ in range(3):
        alg.step()
        c, S = alg.control_variates()
        nodes_c = S.toarray() + problem.lam * alg.w
        np.testing.assert_allclose(c, p @ nodes_c, rtol=0, atol=1e-13)


# ---------------------------------------------------------------------------------------------
# Convergence
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("cls,extra", [(FedAvg, {}), (FedProx, {"mu": 0.05})], ids=["fedavg", "fedprox"])
def test_full_batch_fedavg_and_fedprox_converge_on_identical_nodes(loss, cls, extra):
    """Property (D): identical nodes make every local objective equal f, so no drift."""
    problem = identical_nodes_problem(loss)
    f_star = solve(problem).objective
    from fedviz.properties import converges_in_few_rounds

    alg = cls(problem, seed=0, batch_size="full", local_epochs=5, **extra)
    budget = 150                                            # rounds
    measured = converges_in_few_rounds(alg, f_star, case="D", tol=1e-6, max_rounds=budget)
    assert measured.data_condition and measured.holds
    assert problem.value(alg.w) - f_star <= 1e-6
    assert alg.vectors_up == alg.rounds                     # C = 0.1 of K = 5 → one node a round


@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("iid", [True, False], ids=["iid", "non-iid"])
def test_scaffold_converges_with_default_hyperparameters(loss, iid):
    problem = make_problem(loss, iid=iid, seed=7)           # λ = 1/n
    f_star = solve(problem).objective
    alg = Scaffold(problem, seed=0)                         # C = 0.1: one of the 6 nodes a round
    budget = 250                                            # rounds
    for _ in range(budget):
        alg.step()
        if problem.value(alg.w) - f_star <= 1e-6:
            break
    assert problem.value(alg.w) - f_star <= 1e-6, f"not converged in {budget} rounds"


# ---------------------------------------------------------------------------------------------
# Stop and hyperparameters
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls,hyper", [
    (FedAvg, {"client_fraction": 0.7, "local_epochs": 2, "batch_size": 3}),
    (FedProx, {"client_fraction": 1.0, "batch_size": 4}),
    (Scaffold, {"client_fraction": 0.5, "local_epochs": 3}),
    (Scaffold, {"client_fraction": 1.0, "local_epochs": 2, "batch_size": 5}),
], ids=["fedavg-minibatch", "fedprox", "scaffold-full-batch", "scaffold-minibatch"])
def test_iterates_do_not_depend_on_the_batch_size(cls, hyper, monkeypatch):
    """Batches only set how often Stop is checked: the chunks (and so the order of every
    sum) and each node's row orders are the same for every batch size, so the iterates
    and control variates are bitwise equal."""
    problem = make_problem("logistic", K=40, lam=1e-2)  # five nodes a chunk
    runs = []
    work = cls(problem, **hyper).local.work
    monkeypatch.setattr(kern, "batch_target", lambda target: target)  # the batch size as given, whatever the threads
    # One batch; a few nodes per chunk and batch; a node per chunk and batch.
    for target in (10**18, 2.5 * np.median(work), 1):
        monkeypatch.setattr(kern, "BATCH_WORK", target)
        alg = cls(problem, seed=3, **hyper)
        calls = []
        alg.stop_requested = lambda: calls.append(1) and False
        for _ in range(3):
            alg.step()
        state = [alg.w.copy()]
        if alg.uses_control_variates():
            state += [alg.local.ctrl.copy(), alg.local.s.copy()]
        runs.append((state, len(calls)))
    (one, n_one), (some, n_some), (many, n_many) = runs
    assert n_one == 3 and 3 < n_some <= n_many  # one check per batch, after it
    for a, b, c in zip(one, some, many):
        assert np.array_equal(a, b) and np.array_equal(a, c)


def test_stop_between_batches_leaves_the_state_unchanged(monkeypatch):
    problem = make_problem("logistic", K=8, lam=1e-2)
    alg = Scaffold(problem, seed=0, client_fraction=1.0)
    alg.step()
    monkeypatch.setattr(kern, "BATCH_WORK", 50)             # many small batches
    before = (alg.w.copy(), alg.local.ctrl.copy(), alg.local.s.copy(), alg.rounds, alg.grad_evals)
    calls = []
    alg.stop_requested = lambda: calls.append(1) or len(calls) >= 2
    with pytest.raises(StopRequested):
        alg.step()
    assert len(calls) == 2
    np.testing.assert_array_equal(alg.w, before[0])
    np.testing.assert_array_equal(alg.local.ctrl, before[1])
    np.testing.assert_array_equal(alg.local.s, before[2])
    assert (alg.rounds, alg.grad_evals, alg.iteration) == (before[3], before[4], 1)


@pytest.mark.parametrize("cls,hyper,name,allowed", [
    (FedAvg, {"client_fraction": 0.0}, "fedavg.client_fraction", "(0, 1]"),
    (FedAvg, {"client_fraction": 1.5}, "fedavg.client_fraction", "(0, 1]"),
    (FedProx, {"client_fraction": -0.2}, "fedprox.client_fraction", "(0, 1]"),
    (FedProx, {"mu": -0.1}, "fedprox.mu", ">= 0"),
    (FedAvg, {"local_epochs": 0}, "fedavg.local_epochs", "[1, 10000]"),
    (FedAvg, {"local_epochs": 1.5}, "fedavg.local_epochs", "[1, 10000]"),
    (FedAvg, {"batch_size": -1}, "fedavg.batch_size", "'full'"),
    (FedAvg, {"batch_size": "half"}, "fedavg.batch_size", "'full'"),
    (FedAvg, {"stepsize": 0.0}, "fedavg.stepsize", "number > 0"),
    (Scaffold, {"global_stepsize": 0.0}, "scaffold.global_stepsize", "(0, 10]"),
    (Scaffold, {"mu": 0.1}, "scaffold.mu", "client_fraction"),  # unknown: lists known names
])
def test_hyperparameter_validation(cls, hyper, name, allowed):
    with pytest.raises(ParameterError) as err:
        cls.validate(hyper)
    assert err.value.name == name
    assert allowed in str(err.value)


def test_batch_size_accepts_full():
    assert FedAvg.validate({"batch_size": "full"})["batch_size"] == 0
    assert FedAvg.param("batch_size").parse("Full", "fedavg") == 0
    assert FedAvg.param("batch_size").parse("32", "fedavg") == 32
    assert Scaffold.validate({})["batch_size"] == 0
    with pytest.raises(ParameterError, match="'full'"):
        FedAvg.param("batch_size").parse("big", "fedavg")


def test_control0_is_checked():
    problem = make_problem("squared", K=4, lam=1e-2)
    K, d = problem.data.n_nodes, problem.d
    with pytest.raises(ParameterError, match="length d"):
        Scaffold(problem, control0=(np.zeros(d + 1), np.zeros((K, d))))
    with pytest.raises(ParameterError, match="K × d"):
        Scaffold(problem, control0=(np.zeros(d), np.zeros((K + 1, d))))
    # Mass where node 0 has no data (beyond λ·w0) cannot be stored: refused, naming the entry.
    C = np.zeros((K, d))
    j = int(np.setdiff1d(np.arange(d), problem.data.stats.node_feature_counts[0].indices)[0])
    C[0, j] = 1.0
    with pytest.raises(ParameterError, match=rf"C\[0, {j}\]"):
        Scaffold(problem, control0=(np.zeros(d), C))
    # Sparse input is accepted and round-trips.
    G = dense_node_grads(problem, np.zeros(d))
    alg = Scaffold(problem, control0=(np.ones(d), sp.csr_matrix(G)))
    c, S = alg.control_variates()
    np.testing.assert_allclose(S.toarray(), G, atol=1e-15)
    np.testing.assert_allclose(c, np.ones(d), atol=1e-15)
