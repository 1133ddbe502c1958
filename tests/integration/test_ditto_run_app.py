"""The Run page with Ditto (issue 23, point 3) in AppTest: the personal models' error per node beside the
global model's, and the distance to the exact v_k(λ_D) on a log axis with the sentence that says what the
target is, the run's λ_D and node count in it; APFL draws its personal errors and no distance."""

import base64
import json
import time

import numpy as np
import pytest

from fedviz.data.build import DataSpec, build
from fedviz.plots.pernode import personal_caption
from fedviz.runner.config import RunConfig
from fedviz.personal.target import CONVERGENCE_NOTE, target_sentence

from apptest import long_sessions, open_page  # noqa: F401 - a fixture

TINY = DataSpec(source="preset:identical-nodes")


def _wait(at, key="run", timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if at.session_state[key].done:
            at.run()
            return at.session_state[key].snapshot()
        time.sleep(0.2)
    pytest.fail("the run did not finish in time")


def _array(v):
    """A figure's array: Plotly writes NumPy arrays as base64 ('bdata' with its dtype)."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
    return np.asarray(v, dtype=float)


def _chart(at, title):
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return next((s for s in specs if s["layout"].get("title", {}).get("text") == title), None)


def test_ditto_draws_its_personal_errors_and_the_distance_to_its_exact_models(long_sessions):  # noqa: F811
    hyper = (("ditto_lambda", 0.1), ("client_fraction", 1.0), ("batch_size", 0))
    at = open_page("pages/run.py", RunConfig(data=TINY, algorithms=(("ditto", hyper),), iterations=5))
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    snap = _wait(at)
    assert not at.exception and set(snap.statuses.values()) == {"done"}
    (label,) = snap.labels
    assert snap.summary["personal_targets"] == {label: 0.1}
    dist = _chart(at, "Distance of the personal models to the exact Ditto models")
    assert dist is not None and dist["layout"]["yaxis"]["type"] == "log"
    (line,) = dist["data"]
    np.testing.assert_allclose(_array(line["y"]), snap.columns[label]["personal_distance"], rtol=1e-12)
    personal = _chart(at, "Personal models: test error per node")
    assert personal is not None
    names = [t.get("name") for t in personal["data"]]
    assert f"{label}: personal models, median node (band 10th–90th)" in names
    assert f"{label}: global model, median node" in names
    captions = [c.value for c in at.caption]
    K = build(TINY).n_nodes
    assert target_sentence({label: 0.1}, K) + " " + CONVERGENCE_NOTE in captions
    assert "this run's λ_D = 0.1" in target_sentence({label: 0.1}, K)
    assert personal_caption({label: snap.columns[label]}) in captions


def test_apfl_draws_its_personal_errors_and_no_distance(long_sessions):  # noqa: F811
    at = open_page("pages/run.py", RunConfig(data=TINY, algorithms=(("apfl", ()), ("gd", ())), iterations=3))
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    snap = _wait(at)
    assert not at.exception
    assert _chart(at, "Personal models: test error per node") is not None
    assert _chart(at, "Distance of the personal models to the exact Ditto models") is None
    assert "personal_targets" not in snap.summary
