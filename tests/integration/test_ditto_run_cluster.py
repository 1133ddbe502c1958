"""A Ditto run on a Dask cluster (issue 23, point 3): the worker solves the exact v_k(λ_D) as the
thread executor does, and the personal fields of every record come back through the stream, equal to
those of the same job run in this process; the page's λ_D arrives in the summary; and every per-node
vector the page draws (the histogram, the node picker) arrives too, as a run in this process has them."""

import math

import numpy as np
import pytest

from fedviz.algorithms.spec import AlgorithmSpec
from fedviz.data.build import DataSpec
from fedviz.problems import metrics
from fedviz.runner import cluster
from fedviz.runner.cluster import DaskExecutor
from fedviz.runner.execute import ThreadExecutor
from fedviz.runner.job import ProblemSpec, RunJob
from fedviz.runner.serve.manager import RunManager
from test_cluster import DaskProcesses

#: The record keys of the personal models' metrics (the registry's "personal" scope).
PERSONAL_FIELDS = tuple(k for m in metrics.of_scope("personal") for k in m.keys)


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    procs = DaskProcesses(tmp_path_factory.mktemp("dask")).start(1)
    try:
        yield procs
    finally:
        cluster.close()
        procs.close()


def _plain(x):
    return None if isinstance(x, float) and not math.isfinite(x) else x


def test_the_cluster_carries_the_personal_fields_and_the_target(dask_cluster):
    problem = ProblemSpec(DataSpec(source="preset:fedprox-synthetic-binary?nodes=8", seed=3))
    specs = (AlgorithmSpec.of("ditto", {"ditto_lambda": 0.5}, label="ditto"), AlgorithmSpec.of("gd", label="gd"))
    job = RunJob(problem, specs, iterations=6, seed=3)
    got = {}
    for name, executor in (("dask", DaskExecutor(dask_cluster.address)), ("thread", ThreadExecutor())):
        manager = RunManager(1, store=None, reaper=False, executor=executor)
        try:
            handle = manager.submit(job, "s")
            assert handle.wait(120)
            snap = handle.snapshot()
            assert snap.status == "done", (name, snap.message)
            got[name] = ({label: [[_plain(getattr(r, f)) for f in PERSONAL_FIELDS] for r in snap.records(label)]
                          for label in ("ditto", "gd")}, dict(snap.summary["personal_targets"]), dict(snap.nodes))
        finally:
            manager.close(10)
    (dask, targets, dask_nodes), (thread, _, thread_nodes) = got["dask"], got["thread"]
    assert targets == {"ditto": 0.5}
    assert all(None not in row for row in dask["ditto"]) and len(dask["ditto"]) == 7
    assert all(row == [None] * len(PERSONAL_FIELDS) for row in dask["gd"])
    # Personal errors are counts over rows: equal; the distance is a float sum, equal to rounding.
    for a, b in zip(dask["ditto"], thread["ditto"]):
        assert a[:-1] == b[:-1] and a[-1] == pytest.approx(b[-1], rel=1e-9)
    _check_nodes(dask_nodes, thread_nodes)


def test_a_job_sent_to_the_cluster_keeps_every_field():
    """to_run_job rebuilds the picklable job a worker validates again: every field of RunJob survives,
    each given a value other than its default (two optional ones once swapped places when both were
    added side by side; a field added later is walked here by itself)."""
    from dataclasses import MISSING, fields

    from fedviz.runner.cluster import to_run_job

    spec = AlgorithmSpec.of("ditto", {"ditto_lambda": 0.5}, label="ditto")
    given = dict(make_problem=ProblemSpec(DataSpec(source="preset:fedprox-synthetic-binary?nodes=8", seed=3)),
                 algorithms=(spec,), iterations=2, seed=3, config={"note": "x"}, f_star=0.25, tune=True,
                 scales={"ditto": ("stepsize", 2.0)}, dissimilarity=True, personal_targets=False)
    assert set(given) == {f.name for f in fields(RunJob)}, "give every field of RunJob a value here"
    for f in fields(RunJob):
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        assert given[f.name] != default, f.name
    back = to_run_job(RunJob(**given).validate())
    want = {**given, "config": {"note": "x", "iterations": 2, "seed": 3}}
    assert {f.name: getattr(back, f.name) for f in fields(RunJob)} == want


def _check_nodes(dask_nodes, thread_nodes):
    """The per-node vectors of a cluster run: every metric's at the last record, and the history of the
    node picker, as the same job's in this process (error counts over rows exactly; the rest are float
    sums in another order on a single-threaded worker, equal to float32 rounding)."""
    for label in ("ditto", "gd"):
        d, t = dask_nodes[label], thread_nodes[label]
        assert d.latest is not None and d.latest.iteration == t.latest.iteration == 6
        assert set(d.latest.values) == set(t.latest.values)
        assert d.iterations.tolist() == t.iterations.tolist() == list(range(7))
        for name, v in t.latest.values.items():
            exact = metrics.get(name).kind == "error"
            np.testing.assert_allclose(d.latest[name], v, rtol=0 if exact else 1e-5, equal_nan=True, err_msg=name)
        np.testing.assert_array_equal(d.error, t.error)
        np.testing.assert_allclose(d.loss, t.loss, rtol=1e-5)
    assert {"personal_error", "personal_distance"} <= set(dask_nodes["ditto"].latest.values)
