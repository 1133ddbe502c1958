"""A softmax run's history exports (issue 22, point 7): the JSON export names the loss and the data's classes
as the file writes them, and the test error it holds is the argmax error of the run's iterate, recomputed
here with NumPy; a binary run's summary gains no key."""

import json

import numpy as np
import pytest

from fedviz.algorithms import get_algorithm
from fedviz.algorithms.spec import AlgorithmSpec
from fedviz.data.build import DataSpec, build
from fedviz.problems.objective import Problem
from fedviz.runner import ProblemSpec, RunJob
from fedviz.runner.config import RunConfig
from fedviz.runner.serve.manager import RunManager
from fedviz.runner.history.store import RunStore

from conftest import DATA


def _run(store, data, loss):
    m = RunManager(1, store=store, reaper=False)
    try:
        handle = m.submit(RunJob(ProblemSpec(data, loss), (AlgorithmSpec.of("gd"),), iterations=2, seed=0,
                                 config=RunConfig(data=data, loss=loss, algorithms=(("gd", ()),),
                                                  iterations=2).as_json()), "s")
        assert handle.wait(300) and handle.status == "done", handle.snapshot().messages
    finally:
        m.close()
    return store.list_runs(limit=1)[0].id


def test_a_softmax_run_exports_its_classes_and_its_argmax_error(tmp_path):
    store = RunStore(str(tmp_path / "runs.sqlite"))
    data = DataSpec(source=str(DATA / "dna.scale"), partition="iid", nodes=10)
    run_id = _run(store, data, "softmax")
    doc = json.loads(store.export_json([run_id]))["runs"][0]
    assert doc["dataset_summary"]["loss"] == "softmax"
    labels = sorted({line.split()[0] for line in (DATA / "dna.scale").read_text().splitlines() if line.strip()})
    assert doc["dataset_summary"]["classes"] == labels == ["1", "2", "3"]
    gd = get_algorithm("gd")(Problem(build(data), "softmax"), seed=0)
    for _ in range(2):
        gd.step()
    ds = gd.problem.data
    want = np.mean(np.argmax(ds.X_test @ np.asarray(gd.w).reshape(ds.d, 3), axis=1) != ds.y_test)
    assert doc["records"]["test_error"][-1] == pytest.approx(want, abs=1e-12)
    assert "softmax loss" in store.export_csv([run_id]).splitlines()[1]  # the settings in words


def test_a_binary_run_s_summary_has_no_classes_key(tmp_path):
    store = RunStore(str(tmp_path / "runs.sqlite"))
    run_id = _run(store, DataSpec(source="preset:identical-nodes"), "logistic")
    assert "classes" not in json.loads(store.export_json([run_id]))["runs"][0]["dataset_summary"]
