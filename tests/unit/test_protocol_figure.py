"""FedProx's Figure 2 view (fedviz.plots.experiments.protocol_figure) against NumPy on known records: every
cell's training loss, f − f* and dissimilarity curves are drawn from a seeded generator, so the median and
min–max over seeds of each row are known from NumPy alone."""

from __future__ import annotations

import numpy as np
import pytest

from fedviz.data.build import DataSpec
from fedviz.experiments import Arm, Axis, Experiment
from fedviz.experiments.results import load
from fedviz.plots import experiments as E
from fedviz.runner.loop import IterationRecord
from fedviz.runner.history.store import RunStore

SEEDS = (0, 1, 2)
ITER = 6
ARMS = (("FedAvg", "fedavg"), ("FedProx", "fedprox"))


def _curves(setting: int, arm: str, seed: int):
    rng = np.random.default_rng([setting, len(arm), seed])
    sub = rng.uniform(0.5, 2) * rng.uniform(0.1, 0.9) ** np.arange(ITER + 1)
    return sub + 0.3, sub, rng.uniform(1, 100) * rng.uniform(0.2, 1.0) ** np.arange(ITER + 1)


def _experiment(dissimilarity: bool) -> Experiment:
    return Experiment("proto", DataSpec("preset:fedprox-synthetic"),
                      (Arm.of("fedavg", label="FedAvg"), Arm.of("fedprox", label="FedProx")),
                      (Axis.of("data.beta", (0.0, 1.0)),), SEEDS, iterations=ITER, loss="softmax",
                      dissimilarity=dissimilarity)


@pytest.fixture(scope="module")
def stored():
    exp = _experiment(True)
    store = RunStore(":memory:")
    info = store.open_experiment(exp.name, exp.as_json())
    truth = {}
    for s in range(2):
        for seed in SEEDS:
            for arm, algorithm in ARMS:
                obj, sub, dis = truth[(s, arm, seed)] = _curves(s, arm, seed)
                recs = [IterationRecord(algorithm, t, float(obj[t]), float(sub[t]), 0.2, 0.2, 1.0, t, t, t, t, float(t),
                                        0.0, "running" if t < ITER else "done", "", dissimilarity=float(dis[t]))
                        for t in range(ITER + 1)]
                store.save_cell(info.id, key=f"{s}-{arm}-{seed}", setting=(s,), arm=arm, step=None, seed=seed,
                                label=arm, algorithm=algorithm, hyper={}, config={}, status="done", records=recs)
    store.finish_experiment(info.id, "done")
    return load(store, "proto"), truth


def test_each_row_is_the_median_and_range_over_seeds(stored):
    results, truth = stored
    fig = E.protocol_figure(results)
    rows = {m: i for i, (m, _) in enumerate(E.PROTOCOL_ROWS)}
    seen = set()
    for tr in fig.data:
        meta = tr.meta
        s, arm, metric = meta["setting"][0], meta["arm"], meta["row"]
        table = np.array([truth[(s, arm, seed)][rows[metric]] for seed in SEEDS])
        want = {"median": np.median(table, axis=0), "min": table.min(axis=0), "max": table.max(axis=0)}[meta["part"]]
        np.testing.assert_allclose(np.asarray(tr.y, dtype=float), want, rtol=1e-12)
        seen.add((s, arm, metric, meta["part"]))
    assert len(seen) == 2 * 2 * 3 * 3  # settings × lines × rows × (median, min, max)
    # f − f* and the dissimilarity on log axes (rows 2 and 3), the training loss linear, as Li et al. draw them
    assert fig.layout.yaxis.type != "log" and fig.layout.yaxis3.type == "log" and fig.layout.yaxis5.type == "log"


def test_the_report_and_the_curve_choice_show_it_only_when_recorded(stored):
    results, _ = stored
    assert "dissimilarity" in E.curve_choices(results)
    assert any("dissimilarity" in name for name in E.figures(results))
    page = E.report_html(results)
    assert "FedProx&#x27;s Figure 2" in page or "FedProx's Figure 2" in page
    plain = _experiment(False)
    assert "dissimilarity" not in plain.as_json() and plain.content_hash == _experiment(True).content_hash
    store = RunStore(":memory:")
    info = store.open_experiment(plain.name, plain.as_json())
    store.finish_experiment(info.id, "done")
    assert "dissimilarity" not in E.curve_choices(load(store, "proto"))


def test_toml_asks_for_it_with_a_boolean_and_it_reaches_every_cell():
    from fedviz.errors import ParameterError
    from fedviz.experiments.spec import from_json, from_toml

    head = 'name = "d"\ndata = "preset:fedprox-synthetic?nodes=4"\nloss = "softmax"\n[[algorithm]]\nname = "fedavg"\n'
    exp = from_toml("dissimilarity = true\n" + head)
    assert exp.dissimilarity and all(c.job.dissimilarity for c in exp.cells())
    assert from_json(exp.as_json()).dissimilarity  # stored and read back
    assert not from_toml(head).dissimilarity and not any(c.job.dissimilarity for c in from_toml(head).cells())
    with pytest.raises(ParameterError, match=r"experiment\.dissimilarity.*true or false"):
        from_toml("dissimilarity = 1\n" + head)
