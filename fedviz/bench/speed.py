"""``python -m fedviz bench``: speed and memory of fedviz against references run in the same process.

References: one full-gradient pass with SciPy (``X @ w`` and ``Xᵀ r``), the memory-bound
floor of every first-order method, and one epoch of scikit-learn's SAGA on the same data
and loss, the compiled peer of the stochastic methods.  Algorithms are reported as the
median seconds per iteration over a few iterations and as ratios to both.  Nothing here
asserts a time; the tests only check that the command runs and prints sane JSON.  Unless
``--no-experiment``, :func:`run` ends with the experiment end to end and the experiment
figure (:mod:`.cluster`).
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np

from ._common import SCALES, _median_time, _rss_gb, _threads
from .cluster import cluster_figure, format_cluster

#: (label, algorithm, hyperparameters) benchmarked per iteration.
ALGORITHMS = (("FSVRG", "fsvrg", {}), ("GD", "gd", {}), ("CoCoA+ (1 local pass)", "cocoa-plus", {}),
              ("FedAvg (C=1, 1 local epoch)", "fedavg", {"client_fraction": 1.0, "local_epochs": 1}))


def run(scale: str = "small", *, iterations: int = 5, sklearn_solvers=("newton-cg", "lbfgs", "liblinear"),
        experiment: bool = True, log=lambda s: None) -> dict:
    from ..data.presets import make_preset
    from ..problems.objective import Problem
    from ..problems.optimum import solve
    from ..runner.loop import iterate

    out: dict = {"scale": scale, "threads": _threads(), "cpus": os.cpu_count()}
    t = time.perf_counter()
    ds = make_preset("google-plus", nodes=SCALES[scale])
    out["generate_seconds"] = time.perf_counter() - t
    out["peak_memory_gb_after_generate"] = _rss_gb()
    out.update(n=ds.n, d=ds.d, nnz=int(ds.X.nnz), nodes=ds.n_nodes)
    log(f"generated n={ds.n:,} d={ds.d:,} nnz={ds.X.nnz:,} K={ds.n_nodes:,} in {out['generate_seconds']:.1f}s")
    # Loading the compiled statistics kernel from numba's disk cache happens once per process;
    # it is reported on its own so that it does not pass for the cost of the statistics.
    from ..data.dataset import FederatedDataset
    t = time.perf_counter()
    FederatedDataset.from_assignment(ds.X[:2], ds.y[:2], [0, 1]).stats
    out["kernel_load_seconds"] = time.perf_counter() - t
    t = time.perf_counter()
    ds.stats
    out["stats_seconds"] = time.perf_counter() - t

    problem = Problem(ds, "logistic")
    X = problem.X
    w = np.random.default_rng(0).normal(size=ds.d) * 0.01
    r = np.random.default_rng(1).normal(size=ds.n)
    X @ w
    out["gradient_pass_seconds"] = _median_time(lambda: (X @ w, X.T @ r), 5)
    log(f"gradient pass {out['gradient_pass_seconds']:.3f}s")
    # fedviz's own products spread X's row blocks over the cores (problems/_blocks.py).
    problem.matvec(w), problem.rmatvec(r)
    out["gradient_pass_all_cores_seconds"] = _median_time(lambda: (problem.matvec(w), problem.rmatvec(r)), 5)
    log(f"gradient pass on all cores {out['gradient_pass_all_cores_seconds']:.3f}s")
    out["saga_epoch_seconds"] = _saga_epoch(ds, problem.lam)
    log(f"SAGA epoch {out['saga_epoch_seconds']}")

    t = time.perf_counter()
    opt = solve(problem, use_cache=False)
    out["optimum_seconds"] = time.perf_counter() - t
    out["optimum_grad_norm"] = opt.grad_norm
    out["optimum_objective"] = opt.objective
    out["sklearn"] = _sklearn_optimum(ds, problem, sklearn_solvers, log)
    fastest = [v["seconds"] for v in out["sklearn"].values() if isinstance(v, dict)]
    out["optimum_ratio_to_fastest_sklearn"] = out["optimum_seconds"] / min(fastest) if fastest else None
    log(f"optimum {out['optimum_seconds']:.1f}s (sklearn: {out['sklearn']})")

    rows = {}
    for label, name, hyper in ALGORITHMS:
        # Timed as the runner times a run: its own-work clock, metrics included (objective,
        # gradient norm, training and test error); the first iteration also pays the setup.
        recs = list(iterate(problem, name, iterations=iterations + 1, seed=0, hyper=hyper))
        clock = [r.seconds for r in recs]
        times = np.diff(clock[1:])
        med = float(np.median(times))
        rows[label] = {"seconds_per_iteration": med, "first_iteration_seconds": clock[1] - clock[0],
                       "ratio_to_gradient_pass": med / out["gradient_pass_seconds"],
                       "ratio_to_saga_epoch": med / out["saga_epoch_seconds"]
                       if isinstance(out["saga_epoch_seconds"], float) else None}
        log(f"{label}: {med:.3f}s/iteration")
    out["algorithms"] = rows

    out["stop_latency_seconds"] = stop_latency(problem, ("fsvrg", "gd", "cocoa-plus"))
    log(f"stop latency {out['stop_latency_seconds']}")

    if experiment:
        # The paper's experiment end to end: generation, the optimum, 30 iterations of each line.
        t = time.perf_counter()
        ds2 = make_preset("google-plus", nodes=SCALES[scale], seed=1)
        p2 = Problem(ds2, "logistic")
        f_star = solve(p2, use_cache=False).objective
        for name in ("fsvrg", "gd", "cocoa-plus"):
            for _ in iterate(p2, name, iterations=30, f_star=f_star):
                pass
        out["experiment_seconds"] = time.perf_counter() - t
        log(f"whole experiment {out['experiment_seconds']:.1f}s")
    out["first_record_seconds_small"] = _first_record_small()
    out["peak_memory_gb"] = _rss_gb()
    if experiment:
        # Last: it pins this process's numba and BLAS to one thread for the serial reference.
        out["cluster"] = cluster_figure(log=log)
    return out


def stop_latency(problem, names) -> dict:
    """Seconds from Stop, pressed mid-iteration through the run manager, to the run's end."""
    from ..algorithms.spec import AlgorithmSpec
    from ..runner.serve.manager import RunJob, RunManager

    manager = RunManager(1, store=None, reaper=False)
    out = {}
    try:
        for name in names:
            spec = AlgorithmSpec.of(name, label=name)
            handle = manager.submit(RunJob(make_problem=lambda: problem, algorithms=(spec,),
                                           iterations=10_000, f_star=0.0), "bench")
            while True:
                cols = handle.snapshot().columns.get(name)
                if cols is not None and len(cols["iteration"]) >= 3:
                    break
                time.sleep(0.02)
            time.sleep(0.37)  # land inside an iteration rather than between two
            t = time.perf_counter()
            handle.stop("bench")
            handle.wait(60)
            out[name] = time.perf_counter() - t
    finally:
        manager.close(5)
    return out


def _saga_epoch(ds, lam):
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        return "skipped: scikit-learn is not installed"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression(solver="saga", C=1.0 / (lam * ds.n), fit_intercept=False, max_iter=1, tol=0.0)
        return _median_time(lambda: clf.fit(ds.X, ds.y), 3)


def _sklearn_optimum(ds, problem, solvers, log):
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        return {"note": "skipped: scikit-learn is not installed"}
    out = {}
    for solver in solvers:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf = LogisticRegression(solver=solver, C=1.0 / (problem.lam * ds.n), fit_intercept=False, tol=1e-10,
                                     max_iter=10_000)
            t = time.perf_counter()
            clf.fit(ds.X, ds.y)
            seconds = time.perf_counter() - t
        w = clf.coef_.ravel()
        out[solver] = {"seconds": seconds, "grad_norm": float(np.linalg.norm(problem.grad(w)))}
        log(f"sklearn {solver}: {seconds:.1f}s")
    return out


def _first_record_small() -> float:
    """Seconds from 'Run' to FSVRG's first iteration record on google-plus-small, with the data
    set and the optimum cached as the dashboard caches them (kernels cached on disk)."""
    from ..data.presets import make_preset
    from ..problems.objective import Problem
    from ..problems.optimum import solve
    from ..runner.loop import iterate

    ds = make_preset("google-plus-small")
    p = Problem(ds, "logistic")
    f_star = solve(p).objective
    t = time.perf_counter()
    it = iterate(p, "fsvrg", iterations=30, f_star=f_star)
    next(it), next(it)
    return time.perf_counter() - t


def format_table(r: dict) -> str:
    lines = [f"google-plus at scale '{r['scale']}': n = {r['n']:,}, d = {r['d']:,}, nnz = {r['nnz']:,}, "
             f"K = {r['nodes']:,}, {r['threads']} threads", "",
             "| measure | seconds | ÷ gradient pass | ÷ SAGA epoch |", "|---|---:|---:|---:|"]
    saga = r["saga_epoch_seconds"]
    lines.append(f"| gradient pass (SciPy X@w and Xᵀr) | {r['gradient_pass_seconds']:.3f} | 1 | "
                 f"{r['gradient_pass_seconds'] / saga:.2f} |" if isinstance(saga, float) else "")
    if "gradient_pass_all_cores_seconds" in r:
        g = r["gradient_pass_all_cores_seconds"]
        lines.append(f"| gradient pass, fedviz's products on all cores | {g:.3f} | {g / r['gradient_pass_seconds']:.2f} | "
                     + (f"{g / saga:.2f} |" if isinstance(saga, float) else "n/a |"))
    lines.append(f"| SAGA epoch (scikit-learn) | {saga:.3f} | {saga / r['gradient_pass_seconds']:.2f} | 1 |"
                 if isinstance(saga, float) else f"| SAGA epoch | {saga} | | |")
    for label, a in r["algorithms"].items():
        ratio = f"{a['ratio_to_saga_epoch']:.2f}" if a["ratio_to_saga_epoch"] is not None else "n/a"
        lines.append(f"| {label}, per iteration | {a['seconds_per_iteration']:.3f} | "
                     f"{a['ratio_to_gradient_pass']:.2f} | {ratio} |")
    lines += ["", f"generation {r['generate_seconds']:.1f} s (peak memory then "
                  f"{r['peak_memory_gb_after_generate']:.2f} GB), statistics {r['stats_seconds']:.2f} s "
                  f"(+ {r['kernel_load_seconds']:.2f} s to load the kernel, once per process), "
                  f"optimum {r['optimum_seconds']:.1f} s (‖∇f‖ = {r['optimum_grad_norm']:.1e})"]
    for solver, v in r["sklearn"].items():
        if isinstance(v, dict):
            lines.append(f"scikit-learn {solver}: {v['seconds']:.1f} s (‖∇f‖ = {v['grad_norm']:.1e})")
    if r.get("optimum_ratio_to_fastest_sklearn") is not None:
        lines.append(f"optimum ÷ fastest scikit-learn solver: {r['optimum_ratio_to_fastest_sklearn']:.2f}")
    if "experiment_seconds" in r:
        lines.append(f"whole experiment (generation, optimum, 30 iterations of FSVRG, GD, CoCoA+): "
                     f"{r['experiment_seconds']:.1f} s")
    lines.append("stop latency: " + ", ".join(f"{k} {v:.2f} s" for k, v in r["stop_latency_seconds"].items()))
    lines.append(f"first record on google-plus-small: {r['first_record_seconds_small']:.2f} s; "
                 f"peak memory {r['peak_memory_gb']:.2f} GB")
    if "cluster" in r:
        lines += ["", format_cluster(r["cluster"])]
    return "\n".join(lines)
