"""The Data page's node × class heatmap and its sentence (issue 22, point 5), in Streamlit's AppTest:
the cells are each node's labels counted here, node by node, on the same data set built again, and
the sentence's numbers are those of np.unique on every node's labels."""

import base64
import json
import re

import numpy as np
import pytest

from fedviz.data.build import DataSpec, build

from apptest import open_page
from conftest import DATA


@pytest.fixture(autouse=True)
def _no_heartbeat_timeout(monkeypatch):
    """AppTest has no browser to heartbeat (test_app.py says why)."""
    from fedviz.runner import get_manager

    monkeypatch.setattr(get_manager(), "session_timeout", 24 * 3600.0)


def _array(v):
    """A Plotly JSON array: a list, or the typed-array encoding ({"dtype", "bdata", "shape"})."""
    if isinstance(v, dict):
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
        return a.reshape([int(s) for s in str(v["shape"]).split(",")]) if "shape" in v else a
    return np.asarray(v, dtype=float)


def _heatmap(at):
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if json.loads(c.proto.spec)["layout"]["title"]["text"].startswith("Labels on each node"))
    return next(t for t in spec["data"] if t["type"] == "heatmap")


def _check(at, ds, colour="share"):
    """The heatmap's cells against each node's labels, and the sentence against np.unique per node."""
    heat = _heatmap(at)
    z = _array(heat["z"]).astype(float)
    nodes = heat["meta"]
    assert heat["y"] == ["−1", "+1"]
    # At most 400 distinct nodes (google-plus-small's 500 are sampled, dna.scale's 100 all drawn).
    assert len(set(nodes)) == len(nodes) == min(400, ds.n_nodes) and set(nodes) <= set(range(ds.n_nodes))
    for j, k in enumerate(nodes):
        y = ds.y[ds.node_slice(k)]
        plain = np.array([np.sum(y < 0), np.sum(y > 0)], dtype=float)
        np.testing.assert_allclose(z[:, j], plain if colour == "count" else plain / y.size, rtol=1e-12)
    # The sentence: majority per node and TV per node from np.unique, written out.
    values, freq = np.unique(ds.y, return_counts=True)
    p = dict(zip(values, freq / ds.y.size))
    top = max(values, key=lambda v: (p[v], -v))  # ties to −1, the lower class
    differ, tvs = 0, []
    for k in range(ds.n_nodes):
        v, f = np.unique(ds.y[ds.node_slice(k)], return_counts=True)
        mine = dict(zip(v, f / f.sum()))
        best = [c for c in v if mine[c] == max(mine.values())]
        differ += max(best, key=lambda c: (p[c], -c)) != top
        tvs.append(0.5 * sum(abs(mine.get(c, 0.0) - p.get(c, 0.0)) for c in (-1.0, 1.0)))
    sentences = [c.value for c in at.caption if "total variation" in c.value]
    assert len(sentences) == 1, [c.value for c in at.caption]
    m = re.match(r"(?:(\d+) of the (\d+) nodes \([\d.]+%\) ha(?:s|ve) a majority class other than the whole's"
                 r"|Every one of the (\d+) nodes has the whole's majority class) \(([−+]1)\); a node's label "
                 r"distribution lies on average ([\d.]+) from", sentences[0])
    assert m, sentences[0]
    assert int(m[1] or 0) == differ and int(m[2] or m[3]) == ds.n_nodes
    assert m[4] == ("−1" if top < 0 else "+1")
    assert float(m[5]) == pytest.approx(np.mean(tvs), abs=0.005)


def test_google_plus_small_shows_each_nodes_labels_and_how_far_they_are_from_the_whole():
    at = open_page("pages/data.py")
    assert not at.error
    ds = build(at.session_state["config"].data)  # the page's default preset, built again here
    assert ds.n_nodes == 500
    _check(at, ds)
    at.radio(key="data-label-colour").set_value("count").run()
    assert not at.exception and not at.error
    _check(at, ds, colour="count")


def test_an_uploaded_dna_scale_one_vs_rest_shows_its_two_model_classes():
    at = open_page("pages/data.py")
    at.radio[0].set_value("Upload a LIBSVM file").run()
    at.file_uploader(key="upload-train").set_value(
        ("dna.scale", (DATA / "dna.scale").read_bytes(), "application/octet-stream")).run()
    at.text_input(key="upload-positive").set_value("2").run()
    assert not at.exception and not at.error
    ds = build(DataSpec(source=str(DATA / "dna.scale"), positive=2))  # the page's defaults: 100 iid nodes, seed 0
    _check(at, ds)
