"""A Ditto run measured against its exact target (issue 23, point 3 and the acceptance "the iterative
Ditto run's personal models approach the exact v_k(λ)"): the target against SciPy's L-BFGS per node,
the recorded personal fields against a dense NumPy recomputation from the algorithm's own models, the
distance falling on google-plus-small, the job path that solves the target, and the fields in the
history, its exports and the cluster's stream."""

import csv
import io
import json
import math
import sqlite3

import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp

from fedviz.algorithms.apfl import APFL
from fedviz.algorithms.ditto import Ditto
from fedviz.algorithms.spec import AlgorithmSpec
from fedviz.data.build import DataSpec
from fedviz.data.dataset import FederatedDataset
from fedviz.errors import FedvizError, ParameterError
from fedviz.personal import Personaliser
from fedviz.plots.pernode import personal_caption
from fedviz.problems.objective import Problem
from fedviz.runner import cache
from fedviz.runner.history import store as store_mod
from fedviz.runner.execute import Stop, execute
from fedviz.runner.job import RunJob
from fedviz.runner.loop import FIELDS, IterationRecord, iterate
from fedviz.problems import metrics
from fedviz.personal.target import exact_target, target_sentence
from fedviz.runner.history.store import RunStore


#: The record keys of the personal models' metrics (the registry's "personal" scope).
PERSONAL_FIELDS = tuple(k for m in metrics.of_scope("personal") for k in m.keys)


def make_problem(K=5, n=160, d=10, lam=0.02, seed=0, n_test=80):
    """Non-IID nodes (a planted model each), a feature per node of its own, test rows on every node."""
    rng = np.random.default_rng(seed)
    node = np.sort(rng.integers(0, K, n))
    tnode = np.sort(rng.integers(0, K, n_test))

    def rows(nodes):
        A = rng.normal(size=(nodes.size, d)) * (rng.random((nodes.size, d)) < 0.5)
        A[:, 0] = 1.0
        A[:, 1:K + 1] = 0.0
        A[np.arange(nodes.size), 1 + nodes] = rng.normal(size=nodes.size)
        return A

    A, At = rows(node), rows(tnode)
    truth = rng.normal(size=(K, d)) * 2

    def labels(M, nodes):
        return np.where(np.einsum("ij,ij->i", M, truth[nodes]) + 0.3 * rng.normal(size=nodes.size) > 0, 1.0, -1.0)

    ds = FederatedDataset.from_assignment(sp.csr_matrix(A), labels(A, node), node, X_test=sp.csr_matrix(At),
                                          y_test=labels(At, tnode), test_nodes=tnode)
    return Problem(ds, "logistic", lam)


def _node_rows(pb, k):
    sl = pb.data.node_slice(k)
    return pb.data.X[sl].toarray(), pb.data.y[sl]


def _lbfgs(fun, x0):
    res = so.minimize(fun, x0, jac=True, method="L-BFGS-B", options=dict(gtol=1e-12, ftol=1e-16, maxiter=20000))
    return res.x


def scipy_optimum(pb):
    """w* = argmin f (eq. (1)), dense NumPy and SciPy's L-BFGS."""
    X, y, lam, n = pb.data.X.toarray(), pb.data.y, pb.lam, pb.n

    def f(w):
        z = y * (X @ w)
        return np.logaddexp(0, -z).sum() / n + 0.5 * lam * w @ w, X.T @ (-y / (1 + np.exp(z))) / n + lam * w
    return _lbfgs(f, np.zeros(pb.d))


def scipy_ditto(pb, lam_d, w_star):
    """v_k(λ_D) = argmin F_k(v) + (λ_D/2)‖v − w*‖² per node (F_k: eq. (6)), SciPy's L-BFGS."""
    out = []
    for k in range(pb.data.n_nodes):
        X, y = _node_rows(pb, k)

        def h(v):
            z = y * (X @ v)
            val = np.logaddexp(0, -z).mean() + 0.5 * pb.lam * v @ v + 0.5 * lam_d * (v - w_star) @ (v - w_star)
            return val, X.T @ (-y / (1 + np.exp(z))) / len(y) + pb.lam * v + lam_d * (v - w_star)
        out.append(_lbfgs(h, w_star.copy()))
    return np.array(out)


def dense_personal(pb, V, target):
    """The record's personal fields from the models V (K × d), dense: each node's sign error on its own
    test rows under its own v_k, pooled over the rows, the unweighted statistics over the nodes, and the
    root mean square over the nodes of ‖v_k − target_k‖."""
    ds = pb.data
    Xt, yt, tn = ds.X_test.toarray(), ds.y_test, ds.test_nodes
    wrong = np.array([np.sum(np.where(Xt[tn == k] @ V[k] > 0, 1.0, -1.0) != yt[tn == k]) for k in range(len(V))])
    counts = np.array([np.sum(tn == k) for k in range(len(V))])
    err = wrong / counts
    m = math.ceil(len(V) / 10)
    return {"personal_test_error": wrong.sum() / counts.sum(), "personal_error_mean": err.mean(),
            "personal_error_p10": np.percentile(err, 10), "personal_error_p50": np.median(err),
            "personal_error_p90": np.percentile(err, 90), "personal_error_worst10": np.sort(err)[-m:].mean(),
            "personal_distance": np.sqrt(np.mean(np.sum((V - target) ** 2, axis=1)))}


class ListSink:
    """Every sink call, in order."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, method):
        return lambda *args, **kw: self.calls.append((method, args, kw))

    def records(self, label):
        return [a[1] for m, a, _ in self.calls if m == "record" and a[0] == label]

    def summary(self):
        return next(kw["summary"] for m, _, kw in self.calls if m == "started")


# ---------------------------------------------------------------------------------------------
# The target
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lam_d", [0.05, 1.0, 30.0])
def test_the_target_is_scipys_argmin_per_node(lam_d):
    pb = make_problem()
    w_star = scipy_optimum(pb)
    got = exact_target(pb, Ditto, {"ditto_lambda": lam_d}, w_star)
    want = scipy_ditto(pb, lam_d, w_star)
    assert got.shape == (pb.data.n_nodes, pb.d)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * max(1.0, np.abs(want).max()))


def test_only_ditto_has_a_target_and_only_within_its_budget(monkeypatch):
    pb = make_problem()
    w = np.zeros(pb.d)
    assert exact_target(pb, APFL, {"apfl_alpha": 0.5}, w) is None
    from fedviz.personal import target as personal_target
    monkeypatch.setattr(personal_target, "PERSONAL_VALUES", pb.data.n_nodes * pb.d - 1)
    assert exact_target(pb, Ditto, {"ditto_lambda": 1.0}, w) is None


def test_the_run_measures_against_the_problems_optimum_and_the_runs_lambda():
    """Through the job path (a job asks for the target by default): at iteration 0 every v_k is w0 = 0,
    so the recorded distance is the root mean square of ‖v_k(λ_D)‖ — SciPy's, with SciPy's w*."""
    pb = make_problem()
    lam_d = 0.3
    job = RunJob(lambda: pb, (AlgorithmSpec.of("ditto", {"ditto_lambda": lam_d}, label="D"),
                              AlgorithmSpec.of("fedavg", {}, label="F")), iterations=2).validate()
    sink = ListSink()
    execute(job, sink, Stop())
    want = scipy_ditto(pb, lam_d, scipy_optimum(pb))
    first = sink.records("D")[0]
    assert first.iteration == 0
    assert first.personal_distance == pytest.approx(np.sqrt(np.mean(np.sum(want ** 2, axis=1))), rel=1e-6)
    assert sink.summary()["personal_targets"] == {"D": lam_d}
    assert all(math.isnan(getattr(r, f)) for r in sink.records("F") for f in PERSONAL_FIELDS)
    assert any(m == "preparing" and "exact Ditto models v_k(λ_D = 0.3)" in a[0] for m, a, _ in sink.calls)


def test_a_job_that_asks_for_no_target_has_no_distance():
    pb = make_problem()
    job = RunJob(lambda: pb, (AlgorithmSpec.of("ditto", {}, label="D"),), iterations=1, personal_targets=False)
    sink = ListSink()
    execute(job.validate(), sink, Stop())
    assert "personal_targets" not in sink.summary()
    recs = sink.records("D")
    assert all(math.isnan(r.personal_distance) and math.isfinite(r.personal_test_error) for r in recs)


def test_a_target_that_fails_is_a_warning_and_the_run_goes_on(monkeypatch):
    from fedviz.personal import target as personal_target

    def broken(*a, **k):
        raise FedvizError("no Newton today")
    monkeypatch.setattr(personal_target, "exact_target", broken)
    pb = make_problem()
    sink = ListSink()
    execute(RunJob(lambda: pb, (AlgorithmSpec.of("ditto", {}, label="D"),), iterations=2).validate(), sink, Stop())
    warns = [a[0] for m, a, _ in sink.calls if m == "warn"]
    assert warns == ["the exact Ditto models are unavailable: no distance to them is drawn (no Newton today)"]
    assert [a for m, a, _ in sink.calls if m == "end"] == [("D", "done", "")]


@pytest.mark.parametrize("value", ["no", 0, None])
def test_personal_targets_other_than_true_or_false_are_refused_by_name(value):
    """'no' would be true as a truth value: the flag is a bool or refused, naming itself."""
    with pytest.raises(ParameterError, match="personal_targets") as e:
        RunJob(make_problem, (AlgorithmSpec.of("ditto", {}, label="D"),), iterations=1,
               personal_targets=value).validate()
    assert e.value.allowed == "True or False"


def test_a_stop_while_solving_the_target_stops_the_run(monkeypatch):
    from fedviz.personal import target as personal_target
    stop = Stop()

    def stopping(problem, cls, hp, w, check_stop):
        stop.request("stopped by the user")
        check_stop()
    monkeypatch.setattr(personal_target, "exact_target", stopping)
    pb = make_problem()
    sink = ListSink()
    execute(RunJob(lambda: pb, (AlgorithmSpec.of("ditto", {}, label="D"),), iterations=2).validate(), sink, stop)
    assert [a for m, a, _ in sink.calls if m == "end"] == [("D", "stopped", "stopped by the user (before the first "
                                                                            "iteration)")]


# ---------------------------------------------------------------------------------------------
# The recorded fields against the algorithm's own models
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("hyper", [dict(client_fraction=0.6, batch_size=4, local_epochs=2, ditto_lambda=0.5),
                                   dict(client_fraction=1.0, batch_size=0, ditto_lambda=2.0)])
def test_the_records_personal_fields_are_a_dense_recomputation_of_the_algorithms_models(hyper):
    pb = make_problem(seed=3)
    target = scipy_ditto(pb, hyper["ditto_lambda"], scipy_optimum(pb))
    twin = Ditto(pb, seed=4, **hyper)   # the same seed: the same run, step for step
    for t, rec in enumerate(iterate(pb, "ditto", iterations=6, hyper=hyper, seed=4, personal_target=target)):
        if t:
            twin.step()
        want = dense_personal(pb, np.array(twin.personal_models()), target)
        for f in PERSONAL_FIELDS:
            assert getattr(rec, f) == pytest.approx(want[f], rel=1e-9, abs=1e-12), (t, f)


def test_apfl_records_its_personal_errors_and_no_distance():
    pb = make_problem()
    recs = list(iterate(pb, "apfl", iterations=2, hyper=dict(client_fraction=1.0)))
    assert all(math.isfinite(r.personal_test_error) and math.isnan(r.personal_distance) for r in recs)


def test_the_distance_falls_on_google_plus_small_from_w_star():
    """Every node, full batches, one epoch (the global model is GD on f): from w* the personal models
    move to v_k(λ_D), the distance shrinking every round (measured: 0.84 → 8e-7 in 400 rounds)."""
    spec = DataSpec("preset:google-plus-small?nodes=40")
    pb, opt = cache.problem(spec), cache.optimum(spec)
    hyper = dict(ditto_lambda=0.1, client_fraction=1.0, batch_size=0, local_epochs=1)
    target = exact_target(pb, Ditto, hyper, opt.w)
    dist = [r.personal_distance for r in iterate(pb, "ditto", iterations=120, hyper=hyper, w0=opt.w,
                                                 personal_target=target)]
    # At the start every v_k = w*: the distance is that of the exact models to w*, computed densely.
    assert dist[0] == pytest.approx(np.sqrt(np.mean(np.sum((target - opt.w) ** 2, axis=1))), rel=1e-10)
    assert dist[0] > 0.5
    assert all(b < a for a, b in zip(dist, dist[1:]))
    assert dist[-1] < 1e-2 * dist[0]


# ---------------------------------------------------------------------------------------------
# History, exports and the cluster's stream
# ---------------------------------------------------------------------------------------------

def _rec(i, personal=True):
    extra = {f: (j + 3) / 11 + i for j, f in enumerate(PERSONAL_FIELDS)} if personal else {}
    return IterationRecord(algorithm="ditto", iteration=i, objective=1.0, suboptimality=0.5, test_error=0.25,
                           train_error=0.125, grad_norm=1.0, rounds=i, vectors_up=i, vectors_down=i,
                           grad_evals=i, passes=float(i), seconds=0.0, status="running", summaries=extra)


def test_the_personal_fields_round_trip_through_the_store_and_both_exports(tmp_path):
    assert FIELDS[-len(PERSONAL_FIELDS):] == PERSONAL_FIELDS
    with RunStore(tmp_path / "a.sqlite") as s:
        rid = s.create_run(label="ditto", algorithm="ditto")
        recs = [_rec(0), _rec(1), _rec(2, personal=False)]
        s.append_records(rid, recs)
        for got, want in zip(s.records(rid), recs):
            for f in PERSONAL_FIELDS:
                x, y = getattr(got, f), getattr(want, f)
                assert x == y or (math.isnan(x) and math.isnan(y)), f
        assert s.columns(rid)["personal_distance"][:2].tolist() == [recs[0].personal_distance,
                                                                    recs[1].personal_distance]
        rows = list(csv.DictReader(io.StringIO(s.export_csv([rid]))))
        assert [float(r["personal_error_p50"]) for r in rows[:2]] == [r.personal_error_p50 for r in recs[:2]]
        assert rows[2]["personal_distance"] == "nan"
        text = s.export_json([rid])
        assert json.loads(text)["runs"][0]["records"]["personal_test_error"][:2] == [
            r.personal_test_error for r in recs[:2]]
        (new,) = s.import_json(text)
        assert [r.personal_distance for r in s.records(new)][:2] == [r.personal_distance for r in recs[:2]]
        doc = json.loads(text)  # an export written before the personal fields: NaN in them
        for f in PERSONAL_FIELDS:
            del doc["runs"][0]["records"][f]
        (old,) = s.import_json(json.dumps(doc))
        assert all(math.isnan(getattr(r, f)) for r in s.records(old) for f in PERSONAL_FIELDS)


def test_a_version_6_history_gains_the_personal_columns_and_reads_nan(tmp_path):
    path = tmp_path / "v6.sqlite"
    con = sqlite3.connect(path)
    for v in range(1, 7):
        for statement in store_mod._MIGRATIONS[v].split(";"):
            if statement.strip():
                con.execute(statement)
    con.execute("PRAGMA user_version = 6")
    con.execute("INSERT INTO runs (id, created, group_id, label, algorithm, hyper_json, config_json, status) "
                "VALUES (1, '2026-01-01', 'g', 'ditto', 'ditto', '{}', '{}', 'done')")
    con.execute("INSERT INTO records (run_id, iteration, algorithm, objective, suboptimality, test_error, "
                "train_error, grad_norm, rounds, vectors_up, vectors_down, grad_evals, passes, seconds, status, "
                "message, unseen_test_error) VALUES (1, 0, 'ditto', 0.5, 0.1, 0.2, 0.2, 1.0, 0, 0, 0, 0, 0.0, 0.0, "
                "'done', '', 0.3)")
    con.commit()
    con.close()
    with RunStore(path) as s:
        (rec,) = s.records(1)
        assert rec.unseen_test_error == 0.3 and all(math.isnan(getattr(rec, f)) for f in PERSONAL_FIELDS)
        s.append_records(1, [_rec(1)])
        assert s.records(1)[1].personal_distance == _rec(1).personal_distance
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION


def test_the_cluster_stream_carries_the_personal_fields():
    from fedviz.runner.cluster import decode_calls, encode_calls
    recs = [_rec(4), _rec(5, personal=False)]
    (_, (_, a)), (_, (_, b)) = decode_calls(encode_calls([("record", ("ditto", r)) for r in recs]))
    assert [getattr(a, f) for f in PERSONAL_FIELDS] == [getattr(recs[0], f) for f in PERSONAL_FIELDS]
    assert all(math.isnan(getattr(b, f)) for f in PERSONAL_FIELDS)


# ---------------------------------------------------------------------------------------------
# What the page says
# ---------------------------------------------------------------------------------------------

def test_the_target_sentence_names_the_runs_lambda_and_nodes():
    one = target_sentence({"Ditto": 0.1}, 40)
    assert one == ("The exact target is v_k(λ_D) = argmin_v F_k(v) + (λ_D/2)‖v − w*‖² with this run's "
                   "λ_D = 0.1 and w* the optimum of f, solved node by node by Newton's method; the line is the "
                   "root mean square over the 40 nodes of ‖v_k − v_k(λ_D)‖.")
    # "node by node": Ditto's problems (one weight vector, a loss the kernels know) take the per-node
    # Newton solver, not the lockstep one.
    for loss in ("logistic", "squared", "smoothed-hinge"):
        assert not Personaliser(Problem(make_problem().data, loss)).lockstep, loss
    two = target_sentence({"A": 0.1, "B": 2.0}, 1000)
    assert "each run's λ_D (A: 0.1, B: 2)" in two and "over the 1,000 nodes" in two
    assert "this run's λ_D = 0.5" in target_sentence({"A": 0.5, "B": 0.5}, 3)   # a sweep's variants share it


def test_the_personal_caption_reads_the_last_record():
    pb = make_problem()
    target = scipy_ditto(pb, 1.0, scipy_optimum(pb))
    recs = list(iterate(pb, "ditto", iterations=3, hyper=dict(ditto_lambda=1.0), personal_target=target))
    cols = {f: np.array([getattr(r, f) for r in recs]) for f in FIELDS if f not in ("algorithm", "status", "message")}
    last = recs[-1]
    text = personal_caption({"Ditto": cols, "FedAvg": {**cols, "personal_error_p50": np.full(4, np.nan)}})
    assert text == (f"Ditto at iteration 3: its personal models' error is {100 * last.personal_test_error:.1f}% "
                    f"pooled and {100 * last.personal_error_p50:.1f}% at the median node, the global model's "
                    f"{100 * last.test_error:.1f}% and {100 * last.node_error_p50:.1f}%; their distance to the "
                    f"exact models went from {recs[0].personal_distance:.3g} at iteration 0 to "
                    f"{last.personal_distance:.3g}.")
