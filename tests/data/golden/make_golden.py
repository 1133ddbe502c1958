"""Record the binary figures whose arithmetic later changes must keep.

Each recording is a pair beside this script: ``<name>.npz``, every figure listed below, and
``<name>.json``, the commit whose code computed them and the fingerprint of the machine that did
(``tests/machine.py``: CPU, BLAS and its kernel, library versions), so that
``tests/unit/test_golden_binary.py`` compares bitwise on that arithmetic and within rounding bounds
on any other.

- ``binary_6512b3b``: made at 6512b3b, before issue 22's shape refactor ("every existing figure
  bitwise unchanged"); the machine was not recorded then (its json says so).
- ``binary_0b33c0a``: made at 0b33c0a, before issue 29 rewrote the loss dispatch and the per-node
  metrics (their acceptance: "binary records bitwise as before on the recording machine").

NEVER re-run this script to make a failing golden test pass: a recording is what the code computed
at its commit, and a difference is a change in arithmetic (a new order of operations, a different
kernel) that a refactor promised not to make.  A new recording is right only for a deliberate change
of the binary figures, or before a refactor that must keep them, made in its own commit that says why.

What is recorded (all float64 or int64 arrays, keys ``<group>/<case>/<figure>``):

- ``run/<data>/<algorithm>/<loss>/…``: every algorithm of the registry
  (:data:`fedviz.algorithms.ALGORITHMS`) with its default hyperparameters, seed 0, for
  :data:`ITERATIONS` outer iterations, on each loss it supports, on two small data sets (the
  ``google-plus-small`` preset with 40 nodes and 500 words: sparse, non-IID, unbalanced; and the
  first 2,000 rows of the real a9a with the first 1,000 of a9a.t as test, dealt to 10 nodes at
  random): the runner's records (objective, test and train error, gradient norm, counters) and
  the final w's raw float64 values;
- ``opt/<data>/<loss>/…``: the optimum (Newton-CG) f*, w*, ‖∇f(w*)‖, errors and step counts;
- ``problem/<data>/<loss>/…``: f, ∇f, the training error, a Hessian-vector product and the
  per-node gradients at a seeded point, on two larger sets whose products take the compiled
  paths (row blocks on every core; the fused logistic kernel for n ≥ 50,000): the full
  ``google-plus-small`` (n = 50,000) and ``fedprox-synthetic-binary`` (dense, 482,449 nonzeros);
- ``figure2/…``: Figure 2 (:func:`fedviz.bench.figure2.figure2`) on google-plus-small, 3 iterations:
  every line's objectives and test errors, the optimum and the baselines;
- ``cell/<property>/<algorithm>/…``: every cell of the properties matrix
  (:func:`fedviz.learn.matrix.properties_matrix`, default config, with :data:`RECORDED_SETTINGS` in place
  of the defaults changed since): its value, verdict and the curve of every run.

Run from the repository root at the commit to record:
``PYTHONPATH=. python tests/data/golden/make_golden.py binary_<commit>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
ITERATIONS = 3
#: The record fields kept per iteration (seconds is a time, message is text: not figures).
FIELDS = ("objective", "suboptimality", "test_error", "train_error", "grad_norm", "rounds", "vectors_up",
          "vectors_down", "grad_evals", "passes")


def small_sets():
    """The two small data sets every algorithm runs on: name → FederatedDataset."""
    from fedviz.data.dataset import FederatedDataset
    from fedviz.data.libsvm import load_libsvm
    from fedviz.data.presets import make_preset

    data = ROOT / "tests" / "data"
    train = load_libsvm(data / "a9a", n_features=123)
    test = load_libsvm(data / "a9a.t", n_features=123)
    nodes = np.random.default_rng(0).integers(0, 10, 2000)
    a9a = FederatedDataset.from_assignment(train.X[:2000], train.y[:2000], nodes,
                                           X_test=test.X[:1000], y_test=test.y[:1000])
    return {"gplus40": make_preset("google-plus-small", nodes=40, words=500), "a9a2000": a9a}


def large_sets():
    from fedviz.data.presets import make_preset
    return {"gplus": make_preset("google-plus-small"), "fedprox": make_preset("fedprox-synthetic-binary")}


def _runs(out: dict, name: str, ds, log) -> None:
    from fedviz.algorithms import ALGORITHMS
    from fedviz.problems.objective import Problem
    from fedviz.problems.optimum import solve
    from fedviz.runner.loop import _record
    from fedviz.problems.pernode import NodeEvaluator

    for loss in ("logistic", "squared", "smoothed-hinge"):
        problem = Problem(ds, loss)
        opt = solve(problem, use_cache=False)
        key = f"opt/{name}/{loss}"
        out[f"{key}/w"] = np.array(opt.w)
        out[f"{key}/figures"] = np.array([opt.objective, opt.grad_norm, opt.test_error, opt.train_error])
        out[f"{key}/steps"] = np.array([opt.newton_iterations, opt.hessian_products], dtype=np.int64)
        for algo, cls in ALGORITHMS.items():
            if loss not in cls.losses:
                continue
            log(f"{name} {loss} {algo}")
            # The runner's own loop, unrolled so that the final w is at hand: the records are
            # made by the runner's _record, under the runner's floating-point state.
            # (Since issue 23 _record also scores every node: the recorded FIELDS are the ones before it.)
            a, nodes = cls(problem, seed=0, **RECORDED_RUN_SETTINGS.get(algo, {})), NodeEvaluator(problem)
            recs = [_record(a, algo, opt.objective, 0.0, "running", nodes)]
            for _ in range(ITERATIONS):
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    a.step()
                recs.append(_record(a, algo, opt.objective, 0.0, "running", nodes))
            key = f"run/{name}/{algo}/{loss}"
            out[f"{key}/records"] = np.array([[float(getattr(r, f)) for f in FIELDS] for r in recs])
            out[f"{key}/w"] = np.array(a.w, dtype=np.float64)


def _problem_figures(out: dict, name: str, ds) -> None:
    from fedviz.problems.objective import Problem

    for loss in ("logistic", "squared", "smoothed-hinge"):
        problem = Problem(ds, loss)
        rng = np.random.default_rng(1)
        w = rng.normal(size=problem.d) * 0.1
        v = rng.normal(size=problem.d)
        key = f"problem/{name}/{loss}"
        f, g, train = problem.value_grad_error(w)
        out[f"{key}/f_train"] = np.array([f, train, problem.value(w), problem.test_error(w),
                                          problem.smoothness, problem.max_node_smoothness])
        out[f"{key}/g"] = g
        out[f"{key}/grad"] = problem.grad(w)
        out[f"{key}/hessp"] = problem.hessp(problem.curvature(w), v)
        G = problem.node_grads_data(w)
        out[f"{key}/node_grads_sum"] = np.asarray(G.sum(axis=0)).ravel()
        out[f"{key}/node_grads_norms"] = np.asarray(G.multiply(G).sum(axis=1)).ravel()


def _figure2(out: dict) -> None:
    from fedviz.bench.figure2 import figure2

    F = figure2("google-plus-small", iterations=ITERATIONS, settings=RECORDED_RUN_SETTINGS)
    for label, recs in F.runs.items():
        out[f"figure2/{label}/records"] = np.array([[float(getattr(r, f)) for f in FIELDS] for r in recs])
    out["figure2/optimum"] = np.array([F.optimum.objective, F.optimum.test_error, F.optimum.train_error,
                                       F.optimum.grad_norm])
    out["figure2/optimum_w"] = np.array(F.optimum.w)
    out["figure2/baselines"] = np.array([F.baselines[k] for k in ("optimum", "majority", "node_majority")])
    out["figure2/stepsizes"] = np.array([F.stepsizes[k] for k in sorted(F.stepsizes)])


#: The settings the recorded cells ran with where the registry's defaults have changed since: the matrix
#: then pinned FSVRG as Algorithm 4 is printed, the safeguard off, at h = min(n̄/(2L̄), 4/L) — the step
#: FSVRG derives with the safeguard off, by the same operations — and now runs the registry's defaults.
#: A default changed later is added here with the value it had, so the cells stay a guard of the arithmetic.
RECORDED_SETTINGS = {"fsvrg": {"safeguard": False}, "dane": {"safeguard": False}, "svrg": {"safeguard": False},
                     "gd": {"steps": "fixed"}}
#: The same for the runs (``run/…``): DANE's default became its safeguard (adaptive μ from L̄/1024) after
#: 0b33c0a, SVRG's its safeguard (h from 2/L̄, halved after a rising epoch) later; without them, μ = 0 and
#: h = 1/(2L̄) as recorded; GD's its Barzilai–Borwein steps later still (fixed h = 1/L as recorded, in the runs
#: and in Figure 2).
RECORDED_RUN_SETTINGS = {"dane": {"safeguard": False}, "svrg": {"safeguard": False}, "gd": {"steps": "fixed"}}


def _cells(out: dict) -> None:
    from fedviz.learn.matrix import properties_matrix

    for cell in properties_matrix(base=RECORDED_SETTINGS).cells:
        key = f"cell/{cell.prop}/{cell.algorithm}"
        out[f"{key}/value"] = np.array([np.nan if cell.value is None else float(cell.value)])
        out[f"{key}/has"] = np.array([-1 if cell.has is None else int(cell.has)], dtype=np.int64)
        for i, run in enumerate(cell.runs):
            out[f"{key}/run{i}"] = np.array([run.x, run.y], dtype=np.float64)


def compute(log=lambda s: None) -> dict[str, np.ndarray]:
    """Every recorded figure, by key (see the module docstring)."""
    out: dict[str, np.ndarray] = {}
    for name, ds in small_sets().items():
        _runs(out, name, ds, log)
    for name, ds in large_sets().items():
        _problem_figures(out, name, ds)
    _figure2(out)
    _cells(out)
    return out


def _commit() -> str:
    import subprocess

    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


if __name__ == "__main__":
    import json

    sys.path.insert(0, str(ROOT / "tests"))
    from machine import fingerprint

    if len(sys.argv) < 2 or not sys.argv[1].startswith("binary_"):
        sys.exit("usage: make_golden.py binary_<commit> [--force]")
    out = HERE / f"{sys.argv[1]}.npz"
    if out.exists() and "--force" not in sys.argv:
        sys.exit(f"{out.name} exists: a recording is never re-made to make a test pass (see this script's "
                 "docstring; --force for a deliberate change)")
    figures = compute(log=lambda s: print(s, file=sys.stderr))
    np.savez_compressed(out, **figures)
    out.with_suffix(".json").write_text(json.dumps({"commit": _commit(), "fingerprint": fingerprint()}, indent=1)
                                        + "\n", encoding="utf-8")
    print(f"wrote {out} ({out.stat().st_size:,} bytes, {len(figures)} arrays) and its fingerprint")
