"""Learn › Rare features: the ω^j buckets, the error per bucket, the ablation's variants and the live tracker,
each against a plain NumPy / SciPy oracle or an exact identity of the paper's Algorithm 4."""

import numpy as np
import pytest
import scipy.optimize

from fedviz.algorithms import get_algorithm
from fedviz.errors import ParameterError
from fedviz.learn.rare_features import (METRICS, VARIANTS, AblationConfig, BucketTracker, ablation_job,
                                        bucket_errors, observed, omega_buckets, rare_share)
from fedviz.plots.learn_rare import rare_features_figure
from fedviz.problems.losses import make_loss
from fedviz.problems.objective import Problem
from fedviz.runner.execute import Stop, execute
from fedviz.runner.serve.handle import RunHandle
from fedviz.runner.job import RunJob

from problems import masked_data


# -- the buckets of ω^j -----------------------------------------------------------------------------------------
def _bucket_oracle(o: int) -> int:
    """Bucket b holds 2^b ≤ ω < 2^(b+1): the position of ω's highest bit (plain integers)."""
    return -1 if o == 0 else int(o).bit_length() - 1


@pytest.mark.parametrize("K", [1, 2, 7, 64, 500, 512])
def test_buckets_are_powers_of_two_from_1_to_K(K):
    rng = np.random.default_rng(K)
    omega = rng.integers(0, K + 1, size=400)
    omega[:3] = (0, 1, K)
    b = omega_buckets(omega, K)
    assert [int(i) for i in b.index] == [_bucket_oracle(o) for o in omega]
    m = K.bit_length()
    assert b.size == m
    expected = np.zeros(m, dtype=int)
    for o in omega:
        if o:
            expected[_bucket_oracle(o)] += 1
    np.testing.assert_array_equal(b.counts, expected)
    # The bins tile 1 … K without a gap or an overlap.
    assert b.low[0] == 1 and b.high[-1] == K
    assert all(b.low[i + 1] == b.high[i] + 1 for i in range(m - 1))


def test_bucket_labels_read_as_ranges_of_omega():
    assert omega_buckets(np.array([1, 3, 500]), 500).labels == (
        "1", "2–3", "4–7", "8–15", "16–31", "32–63", "64–127", "128–255", "256–500")
    assert omega_buckets(np.array([512]), 512).labels[-1] == "512"
    with pytest.raises(ParameterError, match="omega"):
        omega_buckets(np.array([0, 9]), 8)


def test_buckets_of_a_data_set_count_the_nodes_each_feature_appears_on():
    """ω^j from the dense matrix and the node of every row (Section 3.6.1's definition), bucketed by hand."""
    ds, X, _ = masked_data(n=300, d=40, K=12, density=0.08, seed=3)
    node = ds.node_of_row
    Xs = ds.X.toarray()
    omega = np.array([len({int(node[i]) for i in np.flatnonzero(Xs[:, j])}) for j in range(ds.d)])
    b = omega_buckets(ds.stats.omega, ds.n_nodes)
    assert [int(i) for i in b.index] == [_bucket_oracle(o) for o in omega]
    assert omega[-1] == 0 and b.index[-1] == -1          # the column in no example belongs to no bucket
    assert omega[0] == 12 and b.labels[b.index[0]] == "8–12"  # the bias column is on every node
    assert rare_share(ds.stats.omega, ds.n_nodes, 0.5) == pytest.approx(np.mean(omega[omega > 0] < 6))


# -- the error per bucket ---------------------------------------------------------------------------------------
def test_bucket_errors_match_plain_loops():
    rng = np.random.default_rng(0)
    K, d = 100, 300
    omega = rng.integers(0, K + 1, size=d)
    w, w_star = rng.normal(size=d), rng.normal(size=d)
    w_star[omega == 5] = 0.0          # a bucket whose optimum is 0: its relative error is undefined
    b = omega_buckets(omega, K)
    e = bucket_errors(w, w_star, b)
    total = sum((w[j] - w_star[j]) ** 2 for j in range(d) if omega[j] > 0)
    for k in range(b.size):
        members = [j for j in range(d) if omega[j] > 0 and _bucket_oracle(omega[j]) == k]
        if not members:
            assert np.isnan(e.relative[k]) and np.isnan(e.mean_abs[k]) and np.isnan(e.share[k])
            continue
        diff = [w[j] - w_star[j] for j in members]
        ref = sum(w_star[j] ** 2 for j in members)
        assert e.mean_abs[k] == pytest.approx(sum(abs(x) for x in diff) / len(members))
        assert e.share[k] == pytest.approx(sum(x * x for x in diff) / total)
        if ref > 0:
            assert e.relative[k] == pytest.approx(np.sqrt(sum(x * x for x in diff) / ref))
        else:
            assert np.isnan(e.relative[k])
    assert np.nansum(e.share) == pytest.approx(1.0)
    # At the start w = 0 every bucket is still all the way from w*.
    start = bucket_errors(np.zeros(d), w_star, b)
    assert np.all((start.relative == 1.0) | np.isnan(start.relative))


# -- the ablation ------------------------------------------------------------------------------------------------
def _problem(seed: int = 1) -> Problem:
    ds, _, _ = masked_data(n=400, d=30, K=8, density=0.03, seed=seed, partition="sorted")
    return Problem(ds, make_loss("logistic"), 1.0 / ds.n)


def test_each_variant_switches_off_exactly_one_modification():
    specs = {s.label: s for s in AblationConfig().specs()}
    assert list(specs) == [v.label for v in VARIANTS.values()]
    on = {"local_stepsize": True, "size_weights": True, "gradient_scaling": True, "aggregate_scaling": True}
    for key, flag in (("no-local-stepsize", "local_stepsize"), ("no-size-weights", "size_weights"),
                      ("no-gradient-scaling", "gradient_scaling"), ("no-aggregate-scaling", "aggregate_scaling")):
        resolved = specs[VARIANTS[key].label].resolved
        assert {k: resolved[k] for k in on} == {**on, flag: False}
    assert {k: specs["FSVRG"].resolved[k] for k in on} == on
    assert specs["Naive FSVRG"].name == "naive-fsvrg"


def test_without_A_one_iteration_is_A_inverse_times_FSVRG_s():
    """Algorithm 4's aggregation w⁺ = w + A Σ_k (n_k/n)(w_k − w): from the same w, seed and samples the only
    difference A makes is the factor a^j = K/ω^j on coordinate j (and 1 where ω^j = 0)."""
    pb = _problem()
    full, no_a = (get_algorithm("fsvrg")(pb, seed=4, stepsize=0.3, **hyper)
                  for hyper in ({}, VARIANTS["no-aggregate-scaling"].hyper))
    full.step()
    no_a.step()
    omega, K = pb.data.stats.omega, pb.data.n_nodes
    a = np.where(omega > 0, K / np.maximum(omega, 1), 1.0)
    assert np.any(a > 1)  # some feature is not on every node, so the identity says something
    np.testing.assert_allclose(full.w, a * no_a.w, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("bad, name", [(dict(iterations=0), "iterations"), (dict(iterations=10**6), "iterations"),
                                       (dict(variants=()), "variants"), (dict(variants=("fsvrg", "nope")), "variants"),
                                       (dict(seed=-1), "seed"), (dict(lam=0.0), "lam")])
def test_a_bad_ablation_is_refused_naming_the_parameter(bad, name):
    with pytest.raises(ParameterError) as e:
        AblationConfig(**bad)
    assert name in str(e.value)


# -- the live tracker ----------------------------------------------------------------------------------------
def _w_star(pb: Problem) -> np.ndarray:
    """The optimum by SciPy's L-BFGS on the dense problem: not fedviz's Newton-CG."""
    X, y, lam = pb.X.toarray(), pb.y, pb.lam

    def f(w):
        z = y * (X @ w)
        value = np.mean(np.logaddexp(0.0, -z)) + lam / 2 * w @ w
        grad = X.T @ (-y / (1.0 + np.exp(z))) / len(y) + lam * w
        return value, grad

    res = scipy.optimize.minimize(f, np.zeros(pb.d), jac=True, method="L-BFGS-B",
                                  options=dict(gtol=1e-12, ftol=1e-15, maxiter=10_000))
    return res.x


def test_the_tracker_sees_every_iterate_of_every_curve_and_changes_no_record():
    pb = _problem(2)
    config = AblationConfig(iterations=4, seed=5)
    tracker = BucketTracker()

    def run(job):
        h = RunHandle(job.validate(), "test")
        execute(h.job, h, Stop())
        h.finish()
        return h.snapshot()

    watched = run(RunJob(lambda: pb, tuple(observed(s, tracker) for s in config.specs()), iterations=4, seed=5))
    plain = run(RunJob(lambda: pb, config.specs(), iterations=4, seed=5))
    assert set(watched.statuses.values()) == {"done"}
    for label in plain.labels:  # the same records, field by field (times aside)
        for field in ("objective", "test_error", "rounds", "grad_evals"):
            np.testing.assert_array_equal(watched.columns[label][field], plain.columns[label][field])
    assert dict(watched.algorithms) == dict(plain.algorithms)

    snap = tracker.snapshot()
    assert snap.message == "" and snap.labels == plain.labels
    w_star = _w_star(pb)
    omega = pb.data.stats.omega
    for spec in config.specs():
        algo = spec.cls(pb, seed=5, **spec.values)
        ws = [algo.w.copy()]
        for _ in range(4):
            algo.step()
            ws.append(algo.w.copy())
        np.testing.assert_array_equal(snap.iterations[spec.label], np.arange(5))
        for t, w in enumerate(ws):
            for k in range(snap.buckets.size):
                members = [j for j in range(pb.d) if omega[j] > 0 and _bucket_oracle(omega[j]) == k]
                if not members:
                    continue
                err = np.abs(w[members] - w_star[members])
                assert snap.values[spec.label]["mean_abs"][t, k] == pytest.approx(err.mean(), rel=1e-5, abs=1e-8)
                ref = np.linalg.norm(w_star[members])
                assert snap.values[spec.label]["relative"][t, k] == pytest.approx(np.linalg.norm(err) / ref, rel=1e-5)
    latest = snap.latest("relative")
    assert set(latest) == set(plain.labels)


def test_an_iterate_at_iteration_0_starts_a_series_again():
    """Tuning's pilot runs report too; the run proper starts at iteration 0 and replaces them."""
    pb = _problem(3)
    tracker = BucketTracker()
    spec = observed(AblationConfig().specs()[0], tracker)
    for steps in (3, 2):
        algo = spec.cls(pb, seed=0, **spec.values)
        for _ in range(steps):
            algo.step()
    np.testing.assert_array_equal(tracker.snapshot().iterations["FSVRG"], [0, 1, 2])


def test_the_ablation_job_runs_every_variant_on_one_problem():
    config = AblationConfig(iterations=3, variants=("fsvrg", "no-aggregate-scaling", "naive"), tune=True)
    job = ablation_job(config, BucketTracker()).validate()
    assert job.labels == ("FSVRG", "FSVRG without A", "Naive FSVRG")
    assert job.iterations == 3 and job.tune
    assert [e.name for e in job.entries] == ["fsvrg", "fsvrg", "naive-fsvrg"]
    # Stored as a Run config is (the history reads it alike), each run's hyperparameters naming its variant.
    assert job.config["algorithms"] == {"fsvrg": {}, "naive-fsvrg": {}} and job.config["learn"] == "rare-features"
    assert job.config["data"]["source"] == "preset:google-plus-small" and job.config["iterations"] == 3


# -- the figure ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("metric", list(METRICS))
def test_the_figure_draws_the_populated_buckets_and_one_line_per_curve(metric):
    omega = np.array([1, 1, 5, 6, 40, 40, 40, 100])
    b = omega_buckets(omega, 100)
    values = {"FSVRG": np.arange(b.size, dtype=float) / 10, "FSVRG without A": np.ones(b.size)}
    fig = rare_features_figure(b, values, metric=metric, iterations={"FSVRG": 3, "FSVRG without A": 3})
    bars, *lines = fig.data
    assert list(bars.x) == ["1", "4–7", "32–63", "64–100"] and list(bars.y) == [2, 2, 3, 1]
    assert [t.name for t in lines] == ["FSVRG (iteration 3)", "FSVRG without A (iteration 3)"]
    np.testing.assert_array_equal(lines[0].y, values["FSVRG"][[0, 2, 5, 6]])


def test_the_ablation_s_findings_are_generated_from_its_curves():
    """Issue 20: the lesson named only A while 'FSVRG without h/n_k' ended 100× below FSVRG.  The page now
    says, for every curve, how its final f − f* compares with FSVRG's (the ratio, by direct division)."""
    from fedviz.learn.rare_features import ablation_findings

    final = {"FSVRG": 1e-4, "FSVRG without h/n_k": 1e-6, "FSVRG without A": 5.7e-3, "FSVRG without S_k": 1.2e-4,
             "Naive FSVRG": float("nan")}
    text = ablation_findings(final, iteration=30)
    assert text.startswith("**At iteration 30**, FSVRG's f − f* is 0.0001: ")
    assert "Naive FSVRG diverged, FSVRG without A 57× above, FSVRG without h/n_k 100× below it" in text
    assert "FSVRG without S_k ends within a factor 1.5 of it" in text
    assert "does not help on these data" in text  # a curve below FSVRG is named as such
    # The rare bins: who lags more than twice FSVRG's remaining error there, largest first.
    rare = {"FSVRG": 0.1, "FSVRG without h/n_k": 0.15, "FSVRG without A": 0.9, "Naive FSVRG": 0.5}
    text = ablation_findings({"FSVRG": 1e-4, "FSVRG without A": 2e-4}, iteration=5, rare=rare, rare_bin="1")
    assert "On the rarest features (those on 1 node), FSVRG has 0.1 of the way to w* still to go; " \
           "FSVRG without A 0.9, Naive FSVRG 0.5: they lag behind there." in text
    assert "does not help" not in text and "FSVRG without A 2.0× above it" in text
    text = ablation_findings({"FSVRG": 1e-4}, iteration=5, rare={"FSVRG": 0.1, "X": 0.15}, rare_bin="2–3")
    assert "those on 2–3 nodes), no curve has more than 2× FSVRG's remaining 0.1" in text
    assert ablation_findings({"FSVRG": 0.0}, iteration=3) == ""  # no ratio to a zero
