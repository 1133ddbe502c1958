"""Per-node evaluation (issue 23, point 1) against an independent plain-Python loop over the nodes."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from fedviz.data.dataset import FederatedDataset
from fedviz.problems.objective import Problem
from fedviz.problems import metrics
from fedviz.problems.pernode import FIELDS, NodeEvaluator, summarize, untested_sentence, worst_count


def _dataset(seed=0, K=13, d=7, untested=(3, 8), unassigned=5, regression=False):
    """K nodes of random sizes; the nodes in ``untested`` get no test rows; ``unassigned`` test rows
    belong to no node (-1)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, size=K)
    node = np.repeat(np.arange(K), sizes)
    n = node.size
    X = sp.random(n, d, density=0.5, random_state=seed, format="csr")
    y = rng.normal(size=n) if regression else rng.choice([-1.0, 1.0], size=n)
    tsizes = rng.integers(1, 6, size=K)
    tsizes[list(untested)] = 0
    tn = np.concatenate([np.repeat(np.arange(K), tsizes), np.full(unassigned, -1)])
    rng.shuffle(tn)
    Xt = sp.random(tn.size, d, density=0.5, random_state=seed + 1, format="csr")
    yt = rng.normal(size=tn.size) if regression else rng.choice([-1.0, 1.0], size=tn.size)
    return FederatedDataset.from_assignment(X, y, node, X_test=Xt, y_test=yt, test_nodes=tn)


def _oracle(p, w):
    """Each node's test error and own loss by a plain loop, dense, from the definitions."""
    ds = p.data
    Xt, X = ds.X_test.toarray(), ds.X.toarray()
    err, loss = [], []
    for k in range(ds.n_nodes):
        rows = [i for i in range(len(ds.y_test)) if ds.test_nodes[i] == k]
        if not rows:
            err.append(math.nan)
        else:
            if p.error_metric == "mse":
                e = sum((float(Xt[i] @ w) - ds.y_test[i]) ** 2 for i in rows) / len(rows)
            else:
                e = sum((1.0 if float(Xt[i] @ w) > 0 else -1.0) != ds.y_test[i] for i in rows) / len(rows)
            err.append(e)
        sl = ds.node_slice(k)
        z = X[sl] @ w
        phi = [float(p.loss.value(np.array([zi]), np.array([yi]))[0]) for zi, yi in zip(z, ds.y[sl])]
        loss.append(sum(phi) / len(phi) + 0.5 * p.lam * float(w @ w))
    return np.array(err), np.array(loss)


def _evaluate(p, w):
    ev = NodeEvaluator(p)
    z, zt = p.X @ w, ev.test_margins(w)
    return ev, ev.evaluate(w, z, zt, iteration=4)


@pytest.mark.parametrize("loss, regression", [("logistic", False), ("squared", True), ("smoothed-hinge", False)])
def test_node_values_match_a_plain_loop(loss, regression):
    p = Problem(_dataset(regression=regression), loss, lam=0.1)
    w = np.random.default_rng(2).normal(size=p.d)
    ev, (pooled, fields, scores) = _evaluate(p, w)
    err, own = _oracle(p, w)
    np.testing.assert_array_equal(np.isnan(ev.node_test_error(p.data.X_test @ w)), np.isnan(err))
    np.testing.assert_allclose(ev.node_test_error(p.data.X_test @ w), err, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(ev.node_loss(w, p.X @ w), own, rtol=1e-12)
    assert scores.iteration == 4 and scores.error.dtype == np.float32
    np.testing.assert_allclose(scores.loss, own, rtol=1e-6)
    # The pooled test error is Problem.test_error's own number, bit for bit.
    assert pooled == p.test_error(w)
    # The row-weighted mean of the own losses is the objective (eq. (1) = Σ n_k/n F_k, eq. (6)).
    assert np.sum(p.data.node_sizes * own) / p.n == pytest.approx(p.value(w), rel=1e-13)
    assert fields["nodes_untested"] == 2 and ev.unassigned_rows == 5
    # The seen nodes' keys only: UnseenEvaluator and PersonalEvaluator add theirs in the loop.
    assert set(fields) == {k for m in metrics.of_scope("seen") for k in m.keys}


def test_pooled_test_error_over_nodes_when_every_row_has_a_node():
    # Without rows of no node, the row-weighted mean of the node errors is the pooled error (to 1e-15).
    p = Problem(_dataset(seed=4, unassigned=0), "logistic", lam=0.1)
    w = np.random.default_rng(5).normal(size=p.d)
    ev, (pooled, fields, _) = _evaluate(p, w)
    err = ev.node_test_error(p.data.X_test @ w)
    ok = ~np.isnan(err)
    assert np.sum(ev.test_counts[ok] * err[ok]) / ev.test_counts.sum() == pytest.approx(pooled, abs=1e-15)
    assert pooled == p.test_error(w)


def test_summary_against_numpy_percentile_and_a_sorted_list():
    v = np.random.default_rng(7).uniform(size=37)
    v[[2, 30]] = np.nan   # nodes without test rows: left out
    s = summarize(v)
    kept = sorted(x for x in v.tolist() if not math.isnan(x))
    k = len(kept)
    m = math.ceil(k * 10 / 100)            # 35 nodes → the worst 4
    assert m == worst_count(k) == 4
    assert s["worst10"] == pytest.approx(sum(kept[-m:]) / m, rel=1e-15)
    assert s["mean"] == pytest.approx(sum(kept) / k, rel=1e-15)
    mu = sum(kept) / k
    assert s["std"] == pytest.approx(math.sqrt(sum((x - mu) ** 2 for x in kept) / k), rel=1e-13)
    for q in (10, 50, 90):
        assert s[f"p{q}"] == np.percentile(kept, q, method="linear")
        # Type 7 by hand: the order statistic at h = (k-1) q/100, interpolated linearly.
        h = (k - 1) * q / 100
        lo = math.floor(h)
        assert s[f"p{q}"] == pytest.approx(kept[lo] + (h - lo) * (kept[min(lo + 1, k - 1)] - kept[lo]), rel=1e-14)
    assert (s["min"], s["max"]) == (kept[0], kept[-1])


@pytest.mark.parametrize("k, m", [(1, 1), (9, 1), (10, 1), (11, 2), (20, 2), (21, 3), (100, 10), (10_000, 1000)])
def test_worst_count_is_the_ceiling_of_a_tenth(k, m):
    assert worst_count(k) == m == math.ceil(k / 10)


def test_no_tested_node_gives_nan_statistics_and_says_so():
    ds = _dataset(seed=1, untested=tuple(range(13)), unassigned=6)
    p = Problem(ds, "logistic", lam=0.1)
    w = np.ones(p.d)
    ev, (pooled, fields, _) = _evaluate(p, w)
    assert all(math.isnan(fields[f"node_error_{s}"]) for s in ("mean", "p10", "worst10", "min"))
    assert fields["nodes_untested"] == 13
    assert pooled == p.test_error(w)             # the separate test file still has its pooled error
    assert not math.isnan(fields["node_loss_mean"])
    assert untested_sentence(ev.untested, ev.K, ev.unassigned_rows) == (
        "No node has test rows (the test set's 6 rows belong to no node (a separate test file, or a preset split "
        "into other nodes)): the per-node test error is undefined; the band shows the own losses F_k. To score "
        "every node, tick 'Deal the test rows to the nodes' on Data (fedviz --deal-test): each test row goes to a "
        "node drawn by the nodes' shares of its class, and the pooled test error stays as it is.")
    assert untested_sentence(2, 13) == ("2 of 13 nodes have no test rows and are left out of the per-node "
                                        "test error (counted, not scored).")
    assert untested_sentence(0, 13) == ""


# -- the record ---------------------------------------------------------------------------------------
def test_every_record_carries_the_summary_of_a_plain_loop():
    from fedviz.runner import iterate
    p = Problem(_dataset(seed=3), "logistic", lam=0.05)
    w0 = np.random.default_rng(8).normal(size=p.d)
    (rec,) = iterate(p, "gd", iterations=0, w0=w0)
    err, own = _oracle(p, w0)
    for name, v in (("error", err), ("loss", own)):
        kept = v[~np.isnan(v)]
        m = math.ceil(len(kept) / 10)
        want = {"mean": kept.mean(), "std": kept.std(), "min": kept.min(), "max": kept.max(),
                "worst10": np.sort(kept)[-m:].mean(),
                **{f"p{q}": np.percentile(kept, q, method="linear") for q in (10, 50, 90)}}
        for s, x in want.items():
            assert getattr(rec, f"node_{name}_{s}") == pytest.approx(x, rel=1e-12, abs=1e-15), (name, s)
    assert rec.test_error == p.test_error(w0) and rec.nodes_untested == 2
    np.testing.assert_allclose(rec.nodes.error, err, rtol=1e-6)
    assert "nodes" not in rec.as_dict()


def test_the_own_losses_of_a_run_average_to_its_objective():
    from fedviz.runner import iterate
    p = Problem(_dataset(seed=6, unassigned=0), "logistic", lam=0.05)
    recs = list(iterate(p, "gd", iterations=3))
    assert [r.nodes.iteration for r in recs] == [0, 1, 2, 3]
    sizes = p.data.node_sizes
    for r in recs:
        # float32 vectors: the row-weighted mean of F_k is f(w) (eqs. (1), (6)) to float32 precision.
        assert np.sum(sizes * r.nodes.loss.astype(float)) / p.n == pytest.approx(r.objective, rel=1e-6)
        err = r.nodes.error.astype(float)
        ok = ~np.isnan(err)
        counts = np.bincount(p.data.test_nodes, minlength=p.data.n_nodes)
        assert np.sum(counts[ok] * err[ok]) / counts.sum() == pytest.approx(r.test_error, abs=1e-6)


def test_a_diverged_model_has_nan_node_fields():
    from fedviz.runner import iterate
    p = Problem(_dataset(seed=2), "logistic", lam=0.05)
    w0 = np.full(p.d, np.nan)
    (rec,) = iterate(p, "gd", iterations=0, w0=w0)
    assert rec.nodes is None and all(math.isnan(getattr(rec, f)) for f in FIELDS)


# -- the bounded history ------------------------------------------------------------------------------
def _scores(t, K):
    from fedviz.problems.pernode import NodeScores
    return NodeScores(t, {"node_error": np.full(K, t, dtype=np.float32), "node_loss": np.full(K, -t, dtype=np.float32)})


def test_node_history_keeps_everything_within_its_budget_and_snapshots_do_not_change():
    from fedviz.problems.pernode import NodeHistory
    h = NodeHistory(budget=1000)
    for t in range(50):
        h.add(_scores(t, 10))
    first = h.track()
    assert first.stride == 1 and first.iterations.tolist() == list(range(50))
    h.add(_scores(49, 10))   # a final record re-reporting the last iteration
    h.add(_scores(50, 10))
    assert first.iterations.tolist() == list(range(50)) and first.error[-1, 0] == 49
    tr = h.track()
    assert tr.iterations.tolist() == list(range(51))
    it, e, loss = tr.node(3)
    assert e.tolist() == list(range(51)) and loss.tolist() == [-t for t in range(51)]
    with pytest.raises(ValueError):
        tr.error[0, 0] = 1.0


@pytest.mark.parametrize("K", [7, 10, 33])
def test_node_history_thins_to_every_stride_th_iteration_and_the_latest(K):
    from fedviz.problems.pernode import NodeHistory
    budget = 400
    h = NodeHistory(budget=budget)
    for t in range(1000):
        h.add(_scores(t, K))
        tr = h.track()
        assert tr.error.size <= budget + K   # within the budget (the latest may sit past a full buffer)
        assert tr.iterations[-1] == t and tr.latest.iteration == t
        body = tr.iterations[:-1].tolist()
        assert body == list(range(0, t, tr.stride))[:len(body)] and all(i % tr.stride == 0 for i in body)
    assert tr.stride > 1 and tr.iterations[0] == 0


def test_more_nodes_than_the_budget_keeps_only_the_latest():
    from fedviz.problems.pernode import NodeHistory
    h = NodeHistory(budget=100)
    for t in range(5):
        h.add(_scores(t, 300))
    tr = h.track()
    assert tr.iterations.tolist() == [4] and tr.latest.iteration == 4


def test_the_handle_keeps_node_vectors_in_its_history_not_in_every_record():
    from fedviz.runner import iterate
    from fedviz.runner.serve.handle import _Series
    p = Problem(_dataset(seed=9), "logistic", lam=0.05)
    s = _Series()
    recs = list(iterate(p, "gd", iterations=4))
    for r in recs:
        s.add(r)
    assert all(r.nodes is None for r in s.records)
    tr = s.nodes.track()
    assert tr.iterations.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(tr.latest.error, recs[-1].nodes.error)
    np.testing.assert_array_equal(tr.node(5)[2], [r.nodes.loss[5] for r in recs])


@pytest.mark.parametrize("loss, regression", [("logistic", False), ("squared", True)])
def test_test_rows_not_grouped_by_node_give_the_same_errors(loss, regression):
    # from_assignment groups the test rows by node (the compiled path); a data set built otherwise
    # takes the bincount path: the same numbers.
    ds = _dataset(seed=11, regression=regression)
    perm = np.random.default_rng(0).permutation(len(ds.y_test))
    shuffled = FederatedDataset(X=ds.X, y=ds.y, offsets=ds.offsets, X_test=ds.X_test[perm], y_test=ds.y_test[perm],
                                test_nodes=ds.test_nodes[perm])
    w = np.random.default_rng(1).normal(size=ds.d)
    a, b = NodeEvaluator(Problem(ds, loss, lam=0.1)), NodeEvaluator(Problem(shuffled, loss, lam=0.1))
    assert a._test_offsets is not None and b._test_offsets is None
    ea, eb = a.node_test_error(ds.X_test @ w), b.node_test_error(shuffled.X_test @ w)
    np.testing.assert_allclose(ea, eb, rtol=1e-13, equal_nan=True)
    np.testing.assert_allclose(ea, _oracle(Problem(ds, loss, lam=0.1), w)[0], rtol=1e-12, equal_nan=True)


def test_many_classes_score_every_node_by_argmax_and_its_softmax_loss():
    """dna.scale's three classes (softmax): each node's test error is the share of its test rows whose largest
    margin is not their class, its own loss F_k the mean softmax loss of its rows plus (λ/2)‖W‖², a loop over
    rows and nodes here; the pooled error is Problem.test_error's."""
    from conftest import DATA
    from fedviz.data.build import DataSpec, build

    ds = build(DataSpec(str(DATA / "dna.scale"), test_fraction=0.3, nodes=12))
    problem = Problem(ds, "softmax")
    C, d = problem.n_classes, problem.d
    assert C == 3
    w = np.random.default_rng(4).normal(scale=0.3, size=problem.size)
    W = w.reshape(d, C)
    ev = NodeEvaluator(problem)
    z = np.asarray(ds.X @ W)
    z_test = ev.test_margins(w)
    pooled, fields, scores = ev.evaluate(w, z, z_test)
    assert pooled == problem.test_error(w)
    Zt = np.asarray(ds.X_test @ W)
    for k in range(ds.n_nodes):
        rows = np.flatnonzero(ds.test_nodes == k)
        want = np.mean([int(np.argmax(Zt[i]) != int(ds.y_test[i])) for i in rows]) if rows.size else math.nan
        assert scores.error[k] == pytest.approx(want, nan_ok=True, abs=1e-6)
        own = ds.node_slice(k)
        losses = [np.log(np.sum(np.exp(z[i]))) - z[i, int(ds.y[i])] for i in range(own.start, own.stop)]
        assert scores.loss[k] == pytest.approx(np.mean(losses) + 0.5 * problem.lam * float(w @ w), rel=1e-6)


# -- the fused sums (the bar of issue 23: no more than one test pass) ----------------------------------
@pytest.mark.parametrize("K", [1, 2, 37, 4000])
def test_node_sums_of_the_fused_logistic_pass_are_each_nodes_losses(K):
    """Above 50,000 rows the logistic pass runs in fixed chunks on every core; its node sums (nodes cut by
    the chunks included) are each node's Σ log(1 + e^(−y z)) by math.fsum, and its total, derivatives and
    error count are value_deriv's, bit for bit."""
    from fedviz.problems.losses import Logistic

    rng = np.random.default_rng(K)
    n = 140_001
    z, y = rng.normal(scale=2.0, size=n), rng.choice([-1.0, 1.0], size=n)
    z[::11] = 0.0
    off = np.concatenate([[0], np.sort(rng.choice(np.arange(1, n), size=K - 1, replace=False)), [n]])
    total, d, errors, sums = Logistic().value_deriv_nodes(z, y, off)
    t0, d0, e0 = Logistic().value_deriv(z, y)
    assert total == t0 and errors == e0 and np.array_equal(d, d0)
    phi = np.logaddexp(0.0, -y * z)
    want = np.array([math.fsum(phi[off[k]:off[k + 1]]) for k in range(K)])
    np.testing.assert_allclose(sums, want, rtol=1e-12)


@pytest.mark.parametrize("loss", ["logistic", "softmax"])
def test_the_loops_node_losses_come_from_the_objective_pass_and_equal_a_plain_loop(loss):
    """The record's F_k are those of the pass that computed f(w) (GD, and FSVRG whose safeguard keeps the
    accepted point's pass): equal to the evaluator's own sums and to a plain loop over each node's rows."""
    from fedviz.runner import iterate

    rng = np.random.default_rng(3)
    K, d = 9, 6
    sizes = rng.integers(1, 12, size=K)
    n = int(sizes.sum())
    X = sp.random(n, d, density=0.6, random_state=3, format="csr")
    y = rng.integers(0, 3, size=n).astype(float) if loss == "softmax" else rng.choice([-1.0, 1.0], size=n)
    ds = FederatedDataset.from_assignment(X, y, np.repeat(np.arange(K), sizes))
    p = Problem(ds, loss, lam=0.05)
    from fedviz.algorithms import get_algorithm
    for name in ("gd", "fsvrg"):  # FSVRG's safeguard (on by default) keeps its accepted point's pass
        *_, rec = iterate(p, name, iterations=2)
        algo = get_algorithm(name)(p, seed=0)
        algo.node_sums = True
        algo.step()
        algo.step()
        z = algo.margins()
        algo.objective_and_gradient()
        sums = algo.node_loss_sums()
        assert sums is not None
        ev = NodeEvaluator(p)
        own = ev.node_loss(algo.w, z, sums)
        np.testing.assert_allclose(own, ev.node_loss(algo.w, z), rtol=1e-13)
        np.testing.assert_allclose(rec.nodes.loss, own, rtol=1e-6)  # the record's float32 vector
        W = algo.w.reshape(d, -1)
        Z = X.toarray() @ W
        for k in range(K):
            rows = range(*ds.offsets[k:k + 2])
            if loss == "softmax":
                phi = [np.log(np.sum(np.exp(Z[i]))) - Z[i, int(y[i])] for i in rows]
            else:
                phi = [np.log1p(np.exp(-y[i] * Z[i, 0])) for i in rows]
            assert sums[k] == pytest.approx(sum(phi), rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 7, 10, 11, 64, 500, 1001])
def test_compiled_summary_is_numpy_on_random_vectors(k):
    rng = np.random.default_rng(k)
    v = rng.uniform(size=k) * rng.choice([1.0, 1e-3, 1e3])
    if k > 3:
        v[rng.choice(k, size=k // 4, replace=False)] = rng.choice([np.nan, np.inf], size=k // 4)
    s = summarize(v)
    kept = v[np.isfinite(v)]
    if kept.size == 0:
        assert all(math.isnan(x) for x in s.values())
        return
    for q in (10, 50, 90):
        assert s[f"p{q}"] == np.percentile(kept, q, method="linear")
    assert s["min"] == kept.min() and s["max"] == kept.max()
    assert s["mean"] == pytest.approx(kept.mean(), rel=1e-14)
    assert s["std"] == pytest.approx(kept.std(), rel=1e-12, abs=1e-300)
    m = worst_count(kept.size)
    assert s["worst10"] == pytest.approx(np.sort(kept)[-m:].mean(), rel=1e-14)


@pytest.mark.parametrize("loss, regression", [("logistic", False), ("squared", True)])
def test_personal_models_all_equal_to_w_score_as_w(loss, regression):
    """Every row of V equal to w: each node's error, own loss F_k(v_k) = F_k(w) and pooled error are the
    global model's (the personal scope's computation against the seen scope's and the plain loop)."""
    from fedviz.problems.pernode import PersonalEvaluator, PersonalScope

    p = Problem(_dataset(seed=4, regression=regression), loss, lam=0.1)
    w = np.random.default_rng(5).normal(size=p.d)
    ev = NodeEvaluator(p)
    V = np.tile(w, (p.data.n_nodes, 1))
    view = PersonalScope(PersonalEvaluator(ev), V, np.sum(V * V, axis=1))
    err, own = _oracle(p, w)
    got_err, pooled = view.test_errors()
    np.testing.assert_allclose(got_err, err, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(view.own_losses()[0], own, rtol=1e-12)
    # Pooled over the test rows of the nodes (the 5 rows of no node have no personal model).
    counts = np.array([np.sum(p.data.test_nodes == k) for k in range(p.data.n_nodes)])
    assert pooled == pytest.approx(np.nansum(err * counts) / counts.sum(), rel=1e-12)
    assert view.distances() is None
