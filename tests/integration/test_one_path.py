"""One path for a run (issue 29, point 5): the dashboard's executor, ``fedviz run`` and an experiment's cell
hand a job to the same seam, :func:`fedviz.runner.execute.execute`, which computes f*, the tuning pilots and
Ditto's exact target v_k(λ_D) itself, from what the job asks.  So one job run the three ways gives the same
records, bit for bit in one process (with tuning on as well as off), Ditto's distance to its exact target
among them; and every personalised algorithm of the registry is treated alike on all three.

The cell runs as a Dask worker runs it (:func:`fedviz.runner.cluster.run_job`, its calls replayed as the
experiment driver replays them), here in this process: a worker pins numba to one thread, so that pin is
lifted for the comparison (summation order follows the thread count; bits are promised per thread count).
"""

import json
import math

import numpy as np
import pytest
import scipy.optimize as so

from fedviz import cli
from fedviz.algorithms import ALGORITHMS
from fedviz.algorithms.spec import AlgorithmSpec
from fedviz.data.build import DataSpec
from fedviz.experiments.spec import Arm, Experiment
from fedviz.runner import cache, cluster
from fedviz.runner.execute import Stop, ThreadExecutor
from fedviz.runner.job import ProblemSpec, RunJob

DATA = "preset:fedprox-synthetic-binary?nodes=8"   # FedProx's Synthetic(1, 1), binary: K = 8, d = 61
SEED = 3
ITERATIONS = 4
PERSONALISED = tuple(name for name, cls in ALGORITHMS.items() if cls.personalised)


class ListSink:
    """Every sink call, in order."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, method):
        return lambda *args, **kw: self.calls.append((method, args, kw))

    def records(self) -> dict:
        out = {}
        for method, args, _ in self.calls:
            if method == "record":
                out.setdefault(args[0], []).append(args[1])
        return out

    def targets(self) -> dict:
        started = [kw["summary"] for m, _, kw in self.calls if m == "started"]
        assert len(started) == 1
        return dict(started[0].get("personal_targets", {}))


def _rows(records) -> str:
    """A run's records as JSON text without the timings: Python's float repr is exact, so equal text is
    equal bits (NaN written as null, as the command line's --out writes it)."""
    def plain(v):
        return None if isinstance(v, float) and math.isnan(v) else v

    return json.dumps([{k: plain(v) for k, v in r.as_dict().items() if k != "seconds"} for r in records])


def _cli_rows(rows) -> str:
    return json.dumps([{k: v for k, v in r.items() if k not in ("seconds", "tuned_param", "tuned_value")}
                       for r in rows])


def via_cli(tmp_path, capsys, hyper: dict, tune: bool) -> dict:
    """label → the records' text, from ``fedviz run`` (in this process) with --out."""
    out = tmp_path / "cli.json"
    sets = [x for name, hp in hyper.items() for k, v in hp.items() for x in ("--set", f"{name}.{k}={v!r}")]
    argv = ["run", DATA, "--algorithms", ",".join(hyper), "--iterations", str(ITERATIONS), "--seed", str(SEED),
            "--out", str(out), *sets, *(["--tune"] if tune else [])]
    assert cli.main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    rows = json.loads(out.read_text())
    labels = list(dict.fromkeys(r["algorithm"] for r in rows))
    return {label: _cli_rows([r for r in rows if r["algorithm"] == label]) for label in labels}


def via_thread(hyper: dict, tune: bool) -> tuple[dict, dict]:
    """(label → the records' text, label → λ_D of its target) from the dashboard's executor."""
    job = RunJob(ProblemSpec(DataSpec(source=DATA, seed=SEED)),
                 tuple(AlgorithmSpec.of(name, hp, label=name) for name, hp in hyper.items()),
                 iterations=ITERATIONS, seed=SEED, tune=tune)
    sink = ListSink()
    ThreadExecutor().start("one-path", job.validate(), sink, Stop(), lambda: None).join(600)
    return {label: _rows(recs) for label, recs in sink.records().items()}, sink.targets()


def via_cells(hyper: dict, tune: bool, monkeypatch) -> tuple[dict, dict]:
    """The same from an experiment's cells (one algorithm each), run as a worker runs them."""
    monkeypatch.setattr(cluster.worker, "_pin_threads", lambda: None)
    arms = tuple(Arm.of(name, hp, label=name, step="tuned" if tune else "default") for name, hp in hyper.items())
    experiment = Experiment("one path", DataSpec(source=DATA), arms, seeds=(SEED,), iterations=ITERATIONS)
    records, targets = {}, {}
    for cell in experiment.cells():
        optimum = cluster.optimum_of(cell.job.make_problem)   # the experiment's one f* task per setting
        result = cluster.run_job(cell.job, optimum=optimum, tag=cell.key)
        sink = ListSink()
        cluster.Replay(sink, (cell.label,)).apply(0, result["calls"])
        records.update({label: _rows(recs) for label, recs in sink.records().items()})
        targets.update(sink.targets())
    return records, targets


def _distances(text: str) -> list:
    return [row["personal_distance"] for row in json.loads(text)]


@pytest.mark.parametrize("tune", [False, True], ids=["default", "tuned"])
def test_one_job_gives_the_same_records_through_the_cli_the_executor_and_a_cell(tmp_path, capsys, monkeypatch,
                                                                                  tune):
    hyper = {"ditto": {"ditto_lambda": 0.5, "client_fraction": 0.5}, "gd": {}}
    cli_records = via_cli(tmp_path, capsys, hyper, tune)
    thread, thread_targets = via_thread(hyper, tune)
    cells, cell_targets = via_cells(hyper, tune, monkeypatch)
    assert list(thread) == list(cli_records) == list(cells)   # tuned labels carry the chosen value
    if tune:
        assert all("tuned" in label for label in thread), list(thread)
    for label in thread:
        assert cli_records[label] == thread[label] == cells[label], label
    ditto = next(label for label in thread if label.startswith("ditto"))
    assert thread_targets == cell_targets == {ditto: 0.5}
    assert all(d is not None for d in _distances(thread[ditto]))   # Ditto's distance to v_k(λ_D), every record
    gd = next(label for label in thread if label.startswith("gd"))
    assert all(d is None for d in _distances(thread[gd]))


@pytest.mark.parametrize("name", PERSONALISED)
def test_every_personalised_algorithm_is_measured_alike_on_every_path(tmp_path, capsys, monkeypatch, name):
    """Walks the registry: an algorithm with personal models gets its exact target (if it has one) on all
    three paths or on none, and the same records on each; Ditto's is the SciPy oracle's."""
    hyper = {name: {}}
    cli_records = via_cli(tmp_path, capsys, hyper, False)
    thread, thread_targets = via_thread(hyper, False)
    cells, cell_targets = via_cells(hyper, False, monkeypatch)
    assert cli_records[name] == thread[name] == cells[name]
    assert thread_targets == cell_targets
    distances = _distances(thread[name])
    if name in thread_targets:
        assert all(d is not None for d in distances)
    else:
        assert all(d is None for d in distances)
    if name == "ditto":   # the paper's exact target: v_k(λ_D) per node (Li et al. 2021, eq. (2))
        lam_d = ALGORITHMS[name].validate({})["ditto_lambda"]
        assert thread_targets == {name: lam_d}
        # At iteration 0 every v_k is w0 = 0: the distance is the root mean square of ‖v_k(λ_D)‖.
        want, bound = scipy_ditto_norm(lam_d)
        assert abs(distances[0] - want) <= bound, (distances[0], want, bound)


# -- the oracle ----------------------------------------------------------------------------------------------
def _lbfgs(fun, x0):
    res = so.minimize(fun, x0, jac=True, method="L-BFGS-B", options=dict(gtol=1e-13, ftol=1e-16, maxiter=50000))
    return res.x, float(np.linalg.norm(res.jac))


def scipy_ditto_norm(lam_d: float) -> tuple[float, float]:
    """(the root mean square over the nodes of ‖v_k(λ_D)‖ by dense NumPy and SciPy's L-BFGS, a bound on how
    far the run's figure may lie from it).

    w* = argmin f (eq. (1)) and v_k(λ_D) = argmin F_k(v) + (λ_D/2)‖v − w*‖² (F_k: eq. (6)).  f is
    λ-strongly convex and node k's objective μ = λ + λ_D-strongly convex, so a point where the gradient has
    norm g lies within g/λ (g/μ) of the minimiser, and v_k(λ_D) moves by at most λ_D/μ times a move of w*.
    SciPy's answers are bounded by their gradients; the code's w* by its gradient computed here, and the
    code's v_k by its solver's stop (a relative gradient of :data:`fedviz.personal.models.EXACT_RTOL` from
    its start, w*, whose gradient is computed here).  |rms(a) − rms(b)| ≤ max_k ‖a_k − b_k‖.
    """
    from fedviz.personal.models import EXACT_RTOL
    from fedviz.problems.optimum import solve

    pb = cache.problem(DataSpec(source=DATA, seed=SEED))
    ds = pb.data
    X, y, lam, n = ds.X.toarray(), ds.y, pb.lam, pb.n

    def f(w):
        z = y * (X @ w)
        return np.logaddexp(0, -z).sum() / n + 0.5 * lam * w @ w, X.T @ (-y / (1 + np.exp(z))) / n + lam * w

    w_star, g_scipy = _lbfgs(f, np.zeros(pb.d))
    w_code = np.asarray(solve(pb).w)
    g_code = float(np.linalg.norm(f(w_code)[1]))
    mu = lam + lam_d
    norms, error = [], 0.0
    for k in range(ds.n_nodes):
        sl = ds.node_slice(k)
        Xk, yk = X[sl], y[sl]

        def h(v, center):
            z = yk * (Xk @ v)
            return (np.logaddexp(0, -z).mean() + 0.5 * lam * v @ v + 0.5 * lam_d * (v - center) @ (v - center),
                    Xk.T @ (-yk / (1 + np.exp(z))) / len(yk) + lam * v + lam_d * (v - center))

        v, g_v = _lbfgs(lambda v: h(v, w_star), w_star.copy())
        norms.append(v @ v)
        start = float(np.linalg.norm(h(w_code, w_code)[1]))   # the code's solve starts from its w*
        error = max(error, g_v / mu + EXACT_RTOL * start / mu)
    error += lam_d / mu * (g_scipy + g_code) / lam
    rms = math.sqrt(np.mean(norms))
    return rms, error + 4 * pb.d * np.finfo(float).eps * rms   # and the rounding of the norms' sums
