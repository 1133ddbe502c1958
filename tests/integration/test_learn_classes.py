"""The Learn pages on many classes (issue 22, point 7), in AppTest with dna.scale (3 classes) in force:
Efficiency runs its setup as softmax, leaving out CoCoA+ with the registry's sentence; Rare features runs
FSVRG's ablation as softmax with the per-bucket error of the d × C model; Drift says it draws its own
two-class problem.  The per-bucket error of a d × C model is checked against a loop over the features."""

import time

import numpy as np
import pytest

from fedviz.algorithms import ALGORITHMS
from fedviz.data.build import DataSpec
from fedviz.learn.rare_features import bucket_errors, omega_buckets
from fedviz.runner.config import RunConfig

from apptest import long_sessions, open_page  # noqa: F401 - a fixture
from conftest import DATA

DNA = DataSpec(source=str(DATA / "dna.scale"))
#: What a session holds after the Data page changed the data to dna.scale: the binary loss and the paper's line-up.
STALE = RunConfig(data=DNA, iterations=3)


def _wait(at, key, timeout=300.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if at.session_state[key].done:
            at.run()
            return at.session_state[key].snapshot()
        time.sleep(0.3)
    pytest.fail("the run did not finish in time")


def test_efficiency_runs_its_setup_as_softmax_and_says_why_cocoa_plus_is_left_out(long_sessions):  # noqa: F811
    at = open_page("pages/learn_efficiency.py", STALE)
    assert not at.error
    why = ALGORITHMS["cocoa-plus"].softmax_refusal()
    assert f"Left out on these 3 classes (softmax): {why}." in [c.value for c in at.caption]
    assert any("FSVRG and GD on" in m.value and "the settings in force;" in m.value for m in at.markdown)
    next(b for b in at.button if b.label.startswith(":material/play_arrow: Run FSVRG and GD")).click().run()
    snap = _wait(at, "eff-run")
    assert snap.summary["loss"] == "softmax" and set(snap.statuses.values()) == {"done"}
    assert not at.error and not at.exception


def test_rare_features_runs_the_ablation_as_softmax_with_its_bucket_errors(long_sessions):  # noqa: F811
    at = open_page("pages/learn_rare_features.py", STALE)
    assert not at.error
    at.multiselect(key="rare-variants").set_value(["fsvrg", "no-aggregate-scaling"]).run()
    at.number_input(key="rare-iterations").set_value(3).run()
    next(b for b in at.button if b.label.endswith("Run the ablation")).click().run()
    snap = _wait(at, "rare-run")
    assert snap.summary["loss"] == "softmax" and set(snap.statuses.values()) == {"done"}
    tracker = at.session_state["rare-run-meta"]["tracker"].snapshot()
    assert tracker.message == ""
    assert set(tracker.labels) == {"FSVRG", "FSVRG without A"}
    assert all(len(tracker.iterations[label]) == 4 for label in tracker.labels)  # w⁰ and three iterations
    assert not at.error and not at.exception


def test_drift_says_it_draws_its_own_two_class_problem():
    at = open_page("pages/learn_drift.py", STALE)
    assert not at.error and not at.exception
    assert any("its own small two-class problem" in c.value for c in at.caption)


def test_bucket_errors_of_a_d_by_c_model_sum_each_feature_s_row():
    rng = np.random.default_rng(3)
    d, C, K = 40, 3, 16
    omega = rng.integers(0, K + 1, d)
    buckets = omega_buckets(omega, K)
    w, w_star = rng.normal(size=d * C), rng.normal(size=d * C)
    got = bucket_errors(w, w_star, buckets)
    W, S = w.reshape(d, C), w_star.reshape(d, C)
    total = sum(float(np.sum((W[j] - S[j]) ** 2)) for j in range(d) if buckets.index[j] >= 0)
    for b in range(buckets.size):
        feats = [j for j in range(d) if buckets.index[j] == b]
        if not feats:
            assert np.isnan(got.relative[b]) and np.isnan(got.mean_abs[b])
            continue
        sq = sum(float(np.sum((W[j] - S[j]) ** 2)) for j in feats)
        ref = sum(float(np.sum(S[j] ** 2)) for j in feats)
        mean_abs = np.mean([abs(W[j, c] - S[j, c]) for j in feats for c in range(C)])
        assert got.relative[b] == pytest.approx(np.sqrt(sq / ref), rel=1e-12)
        assert got.mean_abs[b] == pytest.approx(mean_abs, rel=1e-12)
        assert got.share[b] == pytest.approx(sq / total, rel=1e-12)
    # C = 1 is the vector's own, unchanged: the same numbers as the first column alone, taken as a vector.
    one = bucket_errors(W[:, 0].copy(), S[:, 0].copy(), buckets)
    e = W[:, 0] - S[:, 0]
    for b in range(buckets.size):
        feats = buckets.index == b
        if feats.any():
            assert one.mean_abs[b] == pytest.approx(np.mean(np.abs(e[feats])), rel=1e-12)


def test_the_properties_page_measures_softmax_and_says_why_cocoa_plus_is_not():
    at = open_page("pages/learn_properties.py", timeout=300)
    at.selectbox(key="learn-props-loss").set_value("softmax").run(timeout=300)
    assert not at.error and not at.exception
    at.selectbox(key="learn-props-algorithm").set_value("cocoa-plus").run()
    text = " ".join(m.value for m in at.markdown)
    assert "**Not measured.** " + ALGORITHMS["cocoa-plus"].softmax_refusal() + "." in text
    at.selectbox(key="learn-props-algorithm").set_value("dane").run()
    at.selectbox(key="learn-props-property").set_value("D").run()
    assert any(m.value.startswith(":green[**Measured: has it.**]") for m in at.markdown)
    assert any("Softmax: its rows in three classes" in c.value for c in at.caption)
