"""``python -m fedviz bench --softmax``: seconds per iteration of softmax regression against logistic
regression on the same rows (issue 22's bar: at most 1.5 × C × the binary iteration)."""

from __future__ import annotations

import os

import numpy as np

from ._common import _threads

#: Classes of the softmax figure (issue 22's bar: one iteration ≤ 1.5 × C × the binary one on the same rows).
SOFTMAX_CLASSES = 10
SOFTMAX_BAR = 1.5
#: (label, algorithm, hyperparameters) of the softmax figure: the algorithms the bar names.
SOFTMAX_ALGORITHMS = (("FSVRG", "fsvrg", {}), ("GD", "gd", {}),
                      ("FedAvg (C=1, 1 local epoch)", "fedavg", {"client_fraction": 1.0, "local_epochs": 1}))


def softmax_cost(source: str = "google-plus-small", *, classes: int = SOFTMAX_CLASSES, iterations: int = 5,
                 repeats: int = 3, log=lambda s: None) -> dict:
    """Seconds per iteration of softmax regression against logistic regression on the same rows.

    The binary problem is the preset's (its ±1 labels, logistic loss); the softmax problem has the same
    X, nodes and test rows with ``classes`` class codes drawn uniformly (seed 0), softmax loss.  Each
    algorithm runs ``iterations`` × ``repeats`` iterations on each, one of each in turn, as the runner
    runs them (records included: objective, gradient, errors, per-node scores); the figure is the
    minimum over the iterations (the undisturbed cost on a shared machine).  ``ratio`` = softmax ÷
    binary, ``ratio_over_bar`` = ratio ÷ (1.5 C): the bar is met when it is ≤ 1.
    """
    from ..data.dataset import FederatedDataset
    from ..data.presets import make_preset
    from ..problems.objective import Problem
    from ..runner.loop import iterate

    ds = make_preset(source)
    rng = np.random.default_rng(0)
    soft = FederatedDataset(X=ds.X, y=rng.integers(0, classes, size=ds.n).astype(np.float64), offsets=ds.offsets,
                            X_test=ds.X_test, y_test=rng.integers(0, classes, size=ds.y_test.size).astype(np.float64),
                            test_nodes=ds.test_nodes)
    binary, multi = Problem(ds, "logistic"), Problem(soft, "softmax")
    C = multi.n_classes

    def per_iteration_pair(name, hyper) -> tuple[float, float]:
        """Both runs side by side, one iteration of each in turn (a load change hits both alike; the
        runner's clock counts a run's own work only): the least seconds of an iteration of each."""
        runs = [iterate(p, name, iterations=10 ** 6, seed=0, hyper=hyper) for p in (binary, multi)]
        clocks = ([], [])
        for run, clock in zip(runs, clocks):
            next(run)
            clock.append(next(run).seconds)  # the first iteration pays the setup
        for _ in range(iterations * repeats):
            for run, clock in zip(runs, clocks):
                clock.append(next(run).seconds)
        for run in runs:
            run.close()
        return tuple(float(np.min(np.diff(c))) for c in clocks)

    out = {"source": source, "n": ds.n, "d": ds.d, "nnz": int(ds.X.nnz), "nodes": ds.n_nodes, "classes": C,
           "bar": SOFTMAX_BAR * C, "threads": _threads(), "load_average": os.getloadavg()[0], "algorithms": {}}
    for label, name, hyper in SOFTMAX_ALGORITHMS:
        b, m = per_iteration_pair(name, hyper)
        out["algorithms"][label] = {"binary_seconds": b, "softmax_seconds": m, "ratio": m / b,
                                    "ratio_over_bar": m / b / (SOFTMAX_BAR * C)}
        log(f"{label}: binary {b:.4f} s, softmax {m:.4f} s")
    return out


def format_softmax(r: dict) -> str:
    lines = [f"Softmax (C = {r['classes']}) against binary labels on the same rows: {r['source']}, n = {r['n']:,}, "
             f"d = {r['d']:,}, nnz = {r['nnz']:,}, K = {r['nodes']:,}, {r['threads']} threads (load average "
             f"{r['load_average']:.1f} on {os.cpu_count()} CPUs); the bar (issue 22) is "
             f"softmax ≤ {SOFTMAX_BAR} × C = {r['bar']:g} × binary per iteration.", "",
             "| algorithm | binary s/it | softmax s/it | softmax ÷ binary | ÷ (1.5 C) | bar met |",
             "|---|---:|---:|---:|---:|---|"]
    for label, a in r["algorithms"].items():
        lines.append(f"| {label} | {a['binary_seconds']:.4f} | {a['softmax_seconds']:.4f} | {a['ratio']:.2f} | "
                     f"{a['ratio_over_bar']:.2f} | {'yes' if a['ratio_over_bar'] <= 1 else 'no'} |")
    return "\n".join(lines)
