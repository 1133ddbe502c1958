"""The experiment figures (fedviz.plots.experiments) against plain NumPy on known records.

An experiment is stored by hand in an in-memory history: every cell's f − f* curve is a
geometric sequence whose start and ratio are drawn from a seeded generator, so the medians,
minima and maxima over seeds are known from NumPy alone (no fedviz code computes the oracle).
"""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from fedviz.data.build import DataSpec
from fedviz.experiments import Arm, Axis, Experiment
from fedviz.experiments.results import load
from fedviz.plots import experiments as E
from fedviz.runner.loop import IterationRecord
from fedviz.runner.history.store import RunStore

SEEDS = (0, 1, 2)
NODES = (2, 5, 10)
GRID = (0.1, 1.0)
ITER = 5
TARGET = 1e-2


def _curve(setting: int, arm: str, step, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(f − f*, test error) of one cell, iteration 0…ITER (a diverged cell stops early)."""
    rng = np.random.default_rng([setting, {"GD": 1, "FedAvg": 2}[arm], int(1000 * (step or 0)), seed])
    start, ratio = rng.uniform(0.5, 2.0), rng.uniform(0.05, 0.9)
    length = ITER + 1 if not (arm == "FedAvg" and seed == 2 and setting == 1) else 3
    sub = start * ratio ** np.arange(length)
    return sub, rng.uniform(0.1, 0.4, size=length)


def _records(sub, err, algorithm):
    n = len(sub)
    return [IterationRecord(algorithm=algorithm, iteration=t, objective=float(sub[t]) + 0.5,
                            suboptimality=float(sub[t]), test_error=float(err[t]), train_error=float(err[t]),
                            grad_norm=1.0, rounds=2 * t, vectors_up=t, vectors_down=t, grad_evals=t, passes=float(t),
                            seconds=0.01 * t, status="running" if t < n - 1 else "done") for t in range(n)]


def _experiment(axis=None) -> Experiment:
    return Experiment("plots", DataSpec(source="preset:identical-nodes"),
                      (Arm.of("gd", step="grid", values=GRID), Arm.of("fedavg", step="tuned")),
                      (axis or Axis.of("nodes", NODES),), SEEDS, iterations=ITER, target=TARGET,
                      claim="GD beats FedAvg", description="a made-up experiment")


def _stored(exp: Experiment):
    store = RunStore(":memory:")
    info = store.open_experiment(exp.name, exp.as_json())
    truth = {}
    for s in range(len(exp.axes[0].values)):
        for seed in SEEDS:
            for arm, algorithm, steps in (("GD", "gd", GRID), ("FedAvg", "fedavg", (None,))):
                for step in steps:
                    sub, err = _curve(s, arm, step, seed)
                    stepsize = step if step is not None else round(0.01 * (1 + s + seed), 4)
                    truth[(s, arm, step, seed)] = (sub, err, stepsize)
                    store.save_cell(info.id, key=f"{s}-{arm}-{step}-{seed}", setting=(s,), arm=arm, step=step,
                                    seed=seed, label=f"{arm} {stepsize}", algorithm=algorithm,
                                    hyper={"stepsize": stepsize}, config={}, status="done",
                                    records=_records(sub, err, algorithm))
    store.finish_experiment(info.id, "done")
    return load(store, exp.name), truth


@pytest.fixture(scope="module")
def stored():
    return _stored(_experiment())


def _best(truth, s):
    """The oracle's best GD grid value in setting s: lowest median final f − f* over seeds."""
    return min(GRID, key=lambda g: np.median([truth[(s, "GD", g, seed)][0][-1] for seed in SEEDS]))


def _steps(arm, truth, s):
    return (_best(truth, s),) if arm == "GD" else (None,)


def _trace(fig, **meta):
    found = [t for t in fig.data if isinstance(t.meta, dict) and all(t.meta.get(k) == v for k, v in meta.items())]
    assert len(found) == 1, (meta, [t.meta for t in fig.data])
    return found[0]


def test_band_traces_are_the_median_min_and_max_over_seeds(stored):
    results, truth = stored
    fig = E.band_figure(results)
    for s in range(len(NODES)):
        for arm in ("GD", "FedAvg"):
            (step,) = _steps(arm, truth, s)
            curves = [truth[(s, arm, step, seed)][0] for seed in SEEDS]
            length = max(len(c) for c in curves)
            table = np.full((len(curves), length), np.nan)
            for i, c in enumerate(curves):
                table[i, :len(c)] = c
            # Per iteration, over the seeds that reached it (one FedAvg seed stops after 2 in setting 1).
            med = np.array([np.median(col[~np.isnan(col)]) for col in table.T])
            lo = np.array([col[~np.isnan(col)].min() for col in table.T])
            hi = np.array([col[~np.isnan(col)].max() for col in table.T])
            for part, want in (("median", med), ("min", lo), ("max", hi)):
                tr = _trace(fig, arm=arm, setting=[s], part=part)
                np.testing.assert_allclose(np.asarray(tr.y, float), want, rtol=1e-12)
                np.testing.assert_array_equal(np.asarray(tr.x, float), np.arange(length))
            assert _trace(fig, arm=arm, setting=[s], part="median").meta["step"] == step
    assert fig.layout.yaxis.type == "log"
    assert len(fig.layout.annotations) == len(NODES)  # one titled facet per setting


def test_band_of_test_error_is_linear_and_of_the_chosen_settings(stored):
    results, truth = stored
    fig = E.band_figure(results, settings=[(2,)], metric="test_error")
    tr = _trace(fig, arm="FedAvg", setting=[2], part="median")
    want = np.median([truth[(2, "FedAvg", None, seed)][1] for seed in SEEDS], axis=0)
    np.testing.assert_allclose(np.asarray(tr.y, float), want, rtol=1e-12)
    assert fig.layout.yaxis.type != "log"
    assert {t.meta["setting"][0] for t in fig.data} == {2}


def test_final_metric_against_a_positive_numeric_axis_has_log_x_and_min_max_bars(stored):
    results, truth = stored
    fig = E.axis_figure(results, "suboptimality")
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    for arm in ("GD", "FedAvg"):
        tr = _trace(fig, arm=arm)
        finals = np.array([[truth[(s, arm, _steps(arm, truth, s)[0], seed)][0][-1] for seed in SEEDS]
                           for s in range(len(NODES))])
        med = np.median(finals, axis=1)
        np.testing.assert_array_equal(np.asarray(tr.x, float), NODES)
        np.testing.assert_allclose(np.asarray(tr.y, float), med, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(tr.error_y.array, float), finals.max(axis=1) - med, rtol=1e-9)
        np.testing.assert_allclose(np.asarray(tr.error_y.arrayminus, float), med - finals.min(axis=1), rtol=1e-9)


def test_rounds_to_target_counts_communication_rounds_and_never_is_left_out(stored):
    results, truth = stored
    fig = E.axis_figure(results, "rounds")
    tr = _trace(fig, arm="GD")
    for s in range(len(NODES)):
        step = _best(truth, s)
        # rounds = 2 × iteration in the records; ∞ when the curve never reaches the target.
        hits = []
        for seed in SEEDS:
            sub = truth[(s, "GD", step, seed)][0]
            k = np.flatnonzero(sub <= TARGET)
            hits.append(2.0 * k[0] if k.size else math.inf)
        med = float(np.median(hits))
        got = tr.y[s]
        if math.isfinite(med):
            assert got == pytest.approx(med)
        else:
            assert got is None or math.isnan(got)


def test_categorical_and_zero_including_axes():
    exp = _experiment(Axis.of("loss", ["logistic", "squared", "smoothed-hinge"]))
    results, _ = _stored(exp)
    fig = E.axis_figure(results, "test_error")
    assert fig.layout.xaxis.type == "category"
    assert list(_trace(fig, arm="GD").x) == ["logistic", "squared", "smoothed-hinge"]
    exp = _experiment(Axis.of("data.alpha", [0.0, 0.5, 1.0]))
    results, _ = _stored(exp)
    assert E.axis_x(results) == ([0.0, 0.5, 1.0], "linear")


def test_heatmap_is_log10_of_the_median_final_suboptimality(stored):
    results, truth = stored
    fig = E.heatmap_figure(results)
    (hm,) = fig.data
    assert list(hm.y) == ["GD", "FedAvg"]
    assert list(hm.x) == [f"nodes = {n}" for n in NODES]
    for a, arm in enumerate(("GD", "FedAvg")):
        for s in range(len(NODES)):
            med = np.median([truth[(s, arm, _steps(arm, truth, s)[0], seed)][0][-1] for seed in SEEDS])
            assert hm.z[a][s] == pytest.approx(np.log10(med), rel=1e-12)
            assert hm.text[a][s] == f"{med:.2e}"
    lin = E.heatmap_figure(results, "test_error").data[0]
    med = np.median([truth[(0, "FedAvg", None, seed)][1][-1] for seed in SEEDS])
    assert lin.z[1][0] == pytest.approx(med, rel=1e-12)


def test_sensitivity_is_every_grid_value_with_the_best_ringed(stored):
    results, truth = stored
    fig = E.sensitivity_figure(results)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    for s in range(len(NODES)):
        tr = _trace(fig, arm="GD", setting=[s])
        finals = np.array([[truth[(s, "GD", g, seed)][0][-1] for seed in SEEDS] for g in GRID])
        np.testing.assert_array_equal(np.asarray(tr.x, float), GRID)
        np.testing.assert_allclose(np.asarray(tr.y, float), np.median(finals, axis=1), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(tr.error_y.array, float),
                                   finals.max(axis=1) - np.median(finals, axis=1), rtol=1e-9)
    rings = [t for t in fig.data if isinstance(t.meta, dict) and "best" in t.meta]
    assert [t.meta["best"] for t in rings] == [_best(truth, s) for s in range(len(NODES))]
    assert not any(t.meta["arm"] == "FedAvg" for t in fig.data if isinstance(t.meta, dict))  # tuned: no grid


def test_tuned_rows_and_figure_show_each_tuned_cells_stepsize(stored):
    results, truth = stored
    rows = E.tuned_rows(results)
    tuned = {(r["setting"], r["seed"]): r["value"] for r in rows if r["how"] == "tuned"}
    assert tuned == {(f"nodes = {NODES[s]}", str(seed)): truth[(s, "FedAvg", None, seed)][2]
                     for s in range(len(NODES)) for seed in SEEDS}
    best = [r for r in rows if r["how"] == "best of grid"]
    assert [r["value"] for r in best] == [_best(truth, s) for s in range(len(NODES))]
    fig = E.tuned_figure(results)
    dots = _trace(fig, arm="FedAvg", how="tuned")
    assert sorted(dots.y) == sorted(tuned.values())
    assert fig.layout.yaxis.type == "log"


def test_the_report_is_one_standalone_document_with_every_figure_and_the_verdict(stored):
    results, _ = stored
    verdict = SimpleNamespace(held=False, text="The claim did not hold: FedAvg <beat> GD at K = 10",
                              lines=lambda: ["GD beats FedAvg: did not hold (0.1 against 0.01)"])
    page = E.report_html(results, verdict)
    assert page.count("<html") == 1 and page.count("</html>") == 1 and page.lstrip().startswith("<!DOCTYPE html>")
    names = list(E.figures(results))
    assert {"curves", "heatmap", "stepsize sensitivity", "chosen stepsizes", "final vs axis"} <= set(names)
    ids = re.findall(r'<div id="(fig-[^"]+)"', page)
    assert ids == [f"fig-{E._slug(n)}" for n in names]
    assert "The claim did not hold: FedAvg &lt;beat&gt; GD at K = 10" in page  # escaped
    assert "<li>GD beats FedAvg: did not hold (0.1 against 0.01)</li>" in page
    # plotly.js inline exactly once, and nothing fetched from the network.
    assert page.count("plotly.js v") == 1 and "<script src=" not in page
    # the table of cells: a row per stored cell
    assert page.count("<tr>") == 1 + len(results.cells)
    assert "GD beats FedAvg" in page  # the claim
    assert 'class="verdict"' not in E.report_html(results)  # no verdict: none shown


def test_progress_counts_reused_and_stored_of_total():
    snap = SimpleNamespace(total=20, reused=5, stored=7, failed=1, running=(object(), object()), queued=6,
                           status="running", seconds=12.3, finished=False)
    frac, text = E.progress(snap)
    assert frac == pytest.approx(12 / 20)
    assert text.startswith("12 of 20 cells") and "5 reused" in text and "2 running" in text and "6 queued" in text
    assert text.endswith("running · 12 s")
    done = SimpleNamespace(total=20, reused=5, stored=15, failed=0, running=(), queued=0, status="done",
                           seconds=99.0, finished=True)
    assert E.progress(done) == (1.0, "20 of 20 cells · 5 reused · done")


def test_live_figure_draws_each_running_cells_records_and_the_recent_ended_ones_dotted():
    recs = _records(np.array([1.0, 0.1, 0.0]), np.zeros(3), "gd")
    cell = SimpleNamespace(key="a", label="GD", seed=4, setting=(1,), records=tuple(recs))
    old = SimpleNamespace(key="b", label="FedAvg", seed=0, setting=(0,), records=tuple(recs[:2]))
    fig = E.live_figure(SimpleNamespace(running=(cell,)), recent=(old, cell))
    ended, live = fig.data
    assert live.meta == {"key": "a", "live": True} and ended.meta == {"key": "b", "live": False}
    assert list(live.x) == [0, 1, 2] and ended.line.dash == "dot" and "(ended)" in ended.name
    np.testing.assert_allclose(np.asarray(live.y, float), [1.0, 0.1, E.FLOOR])  # 0 drawn at the log floor
    assert "seed 4" in live.name


def test_a_scales_line_names_each_seeds_stepsize_and_its_best_factor():
    """'scales' runs a factor × each seed's derived default: the chosen stepsize differs by seed."""
    exp = Experiment("scales", DataSpec(source="preset:identical-nodes"),
                     (Arm.of("gd", step="scales", values=(0.5, 2.0)),), (Axis.of("nodes", (2, 5)),), SEEDS,
                     iterations=2)
    store = RunStore(":memory:")
    info = store.open_experiment(exp.name, exp.as_json())
    default = {seed: 0.1 * (seed + 1) for seed in SEEDS}
    final = {(s, f, seed): 10.0 ** -(1 + s + seed / 10) * (1 if (f == 2.0) == (s == 0) else 5)
             for s in (0, 1) for f in (0.5, 2.0) for seed in SEEDS}  # factor 2 best at 2 nodes, 0.5 at 5
    for (s, f, seed), v in final.items():
        store.save_cell(info.id, key=f"{s}{f}{seed}", setting=(s,), arm="GD", step=f, seed=seed, label=f"GD ×{f:g}",
                        algorithm="gd", hyper={"stepsize": f * default[seed]}, config={}, status="done",
                        records=_records(np.array([1.0, v]), np.zeros(2), "gd"))
    results = load(store, exp.name)
    rows = E.tuned_rows(results)
    want = [(f"nodes = {n}", f"best factor ×{f:g}", str(seed), f * default[seed])
            for n, f in ((2, 2.0), (5, 0.5)) for seed in SEEDS]
    # The labels exactly, the stepsize (a product of floats) to rounding.
    assert [(r["setting"], r["how"], r["seed"]) for r in rows] == [w[:3] for w in want]
    assert [r["value"] for r in rows] == pytest.approx([w[3] for w in want], rel=1e-12)
    assert [r["final f − f*"] for r in rows] == [final[(s, f, seed)]
                                                 for s, f in ((0, 2.0), (1, 0.5)) for seed in SEEDS]
