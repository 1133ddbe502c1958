"""``python -m fedviz bench``: speed and memory of fedviz against references run in the same process.

References: one full-gradient pass with SciPy (``X @ w`` and ``Xᵀ r``), the memory-bound
floor of every first-order method, and one epoch of scikit-learn's SAGA on the same data
and loss, the compiled peer of the stochastic methods.  Algorithms are reported as the
median seconds per iteration over a few iterations and as ratios to both.  Nothing here
asserts a time; the tests only check that the command runs and prints sane JSON.

The experiment figure (:func:`cluster_figure`, with the end-to-end experiment; skipped by
``--no-experiment``): the same cells of an experiment grid run serially in this process,
then on a local Dask cluster of 1 and of 2 worker processes (one thread each, as
:mod:`fedviz.runner.cluster` starts them): cells per second, the speed-up, the
cluster's overhead per cell against the in-process run, and the bytes a cell moves, from
which the figure projects N machines.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
import warnings

import numpy as np

#: Scale → nodes of the google-plus preset (about 216.7 training rows per node).
SCALES = {"small": 231, "medium": 923, "paper": 10_000}
#: (label, algorithm, hyperparameters) benchmarked per iteration.
ALGORITHMS = (("FSVRG", "fsvrg", {}), ("GD", "gd", {}), ("CoCoA+ (1 local pass)", "cocoa-plus", {}),
              ("FedAvg (C=1, 1 local epoch)", "fedavg", {"client_fraction": 1.0, "local_epochs": 1}))


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux → GB


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


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


# -- the experiment figure: cells on a cluster against cells in-process ----------------------------------
#: The cells of the experiment figure: FSVRG (the paper's Algorithm 4, Section 3.6) on google-plus-small
#: (n = 50,000, d = 5,002), data fixed across seeds, about 1 s per cell at one thread (40 iterations of
#: ~25 ms, metrics included): the "cells of a second or more" of issue 14's 5 % overhead target.
CLUSTER_SOURCE = "preset:google-plus-small"
CLUSTER_ALGORITHM = "fsvrg"
CLUSTER_ITERATIONS = 40
CLUSTER_CELLS = 8
#: Trivial tasks timed to estimate the scheduler's own cost per task.
NOOP_TASKS = 200
#: The link of the projection (bytes per second): 1 Gbit/s.
PROJECTION_BANDWIDTH = 125e6


def _noop(i):
    return i


def _warm(job) -> float:
    """On a worker (and in this process): build the data set, f* and the kernels once, as the
    first cell on a worker would; the figure times cells, not start-up."""
    from ..runner.cluster import run_job

    t = time.perf_counter()
    run_job(job)
    return time.perf_counter() - t


def _own_seconds(records) -> float:
    """A run's own computing time: its last record's clock (setup included, preparing not)."""
    last = None
    for rec in records:
        last = rec
    return float(last.seconds) if last is not None else 0.0


def _comparable(records) -> list[tuple]:
    """Records without the clock (equal runs differ only in ``seconds``), one per iteration, the
    last word on an iteration winning (as the history stores them)."""
    by_iteration = {}
    for rec in records:
        by_iteration[rec.iteration] = tuple(sorted((k, repr(v)) for k, v in rec.as_dict().items() if k != "seconds"))
    return [by_iteration[k] for k in sorted(by_iteration)]


def cluster_figure(*, source: str = CLUSTER_SOURCE, algorithm: str = CLUSTER_ALGORITHM,
                   iterations: int = CLUSTER_ITERATIONS, cells: int = CLUSTER_CELLS, workers=(1, 2),
                   log=lambda s: None) -> dict:
    """Cells per second serially in-process and on local clusters of ``workers`` processes.

    The cells are one experiment's (:class:`~fedviz.experiments.spec.Experiment`: one arm,
    ``cells`` seeds, the data fixed by ``data_seed``), run (a) one after another in this
    process through :func:`~fedviz.runner.execute.execute` with one numba and BLAS thread,
    then (b) launched as an experiment (:func:`~fedviz.experiments.driver.launch`, stored in
    a temporary history) on a :class:`distributed.LocalCluster` of each size in ``workers``.
    Both sides first build the data set, f* and the kernels (a one-iteration cell on every
    worker), so the figure is the per-cell cost, not start-up.  The overhead per cell is
    ((b) on 1 worker − (a)) / (a) per cell; the bytes are the task (its arguments) and its result
    as Dask serialises them, and the stream (the sink calls as JSON, streamed once as events).  ``results_equal``
    says whether every cell on the cluster stored the records of its serial run.
    """
    import tempfile
    from dataclasses import replace

    import numba

    from ..data.build import DataSpec
    from ..experiments import Arm, Experiment
    from ..experiments.driver import launch
    from ..runner import cluster
    from ..runner.execute import Stop, execute
    from ..runner.job import ProblemSpec
    from ..runner.history.store import RunStore

    def grid(name: str):
        return Experiment(name, DataSpec(source=source), (Arm.of(algorithm),), seeds=tuple(range(cells)),
                          iterations=iterations, data_seed=0)

    exp = grid("bench")
    all_cells = exp.cells()
    warm_job = replace(all_cells[0].job, iterations=1, config={})
    out: dict = {"source": source, "algorithm": algorithm, "iterations": iterations, "cells": cells,
                 "load_average_before": os.getloadavg()[0]}

    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        out["warm_seconds_in_process"] = _warm(warm_job)
        serial_calls = []
        t = time.perf_counter()
        for cell in all_cells:
            sink = cluster.Recorder(None, "serial", None)
            execute(cell.job.validate(), sink, Stop())
            serial_calls.append(sink.calls)
        serial = time.perf_counter() - t
    finally:
        numba.set_num_threads(threads)
    compute = sum(_own_seconds(args[1] for method, args in c if method == "record") for c in serial_calls)
    out["serial"] = {"seconds": serial, "seconds_per_cell": serial / cells, "cells_per_second": cells / serial,
                     "compute_seconds_per_cell": compute / cells}
    log(f"{cells} cells serially in-process: {serial:.1f}s")

    # What a cell moves: its task's arguments (the job without data: a spec), its result, the stream.
    opt = ProblemSpec(DataSpec(source=source, seed=0)).optimum()
    task = (all_cells[0].job, {"topic": "t" * 28, "stop_event": "e" * 33, "optimum": (opt.objective, opt.test_error),
                               "uploads": None, "tag": all_cells[0].key})
    result = {"calls": serial_calls[0], "worker": "tcp://255.255.255.255:65535", "seconds": 1.0,
              "optimum": (opt.objective, opt.test_error), "attempt": "0" * 32}
    problem = ProblemSpec(DataSpec(source=source, seed=0))()
    X = problem.X
    from distributed.protocol import serialize_bytes

    from ..runner.cluster import encode_calls

    out["bytes"] = {"task": len(serialize_bytes(task)), "result": len(serialize_bytes(result)),
                    "stream": len(encode_calls(serial_calls[0]).encode()),
                    "data_set": int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + problem.y.nbytes)}
    out["bytes"]["per_cell"] = out["bytes"]["task"] + out["bytes"]["result"] + out["bytes"]["stream"]

    import dask
    from distributed import LocalCluster
    from distributed.security import Security

    want = [_comparable(args[1] for method, args in c if method == "record") for c in serial_calls]
    equal = True
    # The bench's clusters are reached by address, as an external one is: TLS with a certificate of
    # this process's own, given to fedviz's client through Dask's TLS settings (docs/cluster.md).
    sec = Security.temporary()
    tls = {"distributed.comm.tls.ca-file": sec.tls_ca_file, "distributed.comm.tls.client.cert": sec.tls_client_cert,
           "distributed.comm.tls.client.key": sec.tls_client_key}
    for n in workers:
        with tempfile.TemporaryDirectory(prefix="fedviz-bench-") as tmp, dask.config.set(tls), \
                LocalCluster(n_workers=n, threads_per_worker=1, processes=True, env=dict(cluster.PINNED),
                             protocol="tls://", security=sec, host="127.0.0.1",
                             dashboard_address="127.0.0.1:0", silence_logs=40) as lc:
            address = lc.scheduler_address
            client = cluster.get_client(address)
            try:
                client.wait_for_workers(n, timeout=120)
                warm = client.run(_warm, warm_job)
                if n == min(workers):
                    t = time.perf_counter()
                    client.gather(client.map(_noop, range(NOOP_TASKS), pure=False))
                    out["scheduler_seconds_per_task"] = (time.perf_counter() - t) / NOOP_TASKS
                store = RunStore(os.path.join(tmp, "bench.sqlite"))
                try:
                    t = time.perf_counter()
                    handle = launch(grid(f"bench on {n} workers"), store, address=address)
                    handle.wait()
                    seconds = time.perf_counter() - t
                    snap = handle.snapshot()
                    stored = {c.key: c for c in store.experiment_cells(snap.experiment_id)}
                    compute = 0.0
                    for cell, calls in zip(all_cells, want):
                        got = stored.get(cell.key)
                        recs = store.records(got.run_id) if got is not None else []
                        compute += _own_seconds(recs)
                        equal = equal and got is not None and _comparable(recs) == calls and got.status == "done"
                    workers_used = len({c.worker for c in stored.values()})
                finally:
                    store.close()
            finally:
                cluster.close()
        row = {"seconds": seconds, "seconds_per_cell": seconds / cells, "cells_per_second": cells / seconds,
               "compute_seconds_per_cell": compute / cells, "status": snap.status, "stored": snap.stored,
               "workers_used": workers_used,
               "warm_seconds": max(warm.values())}
        out[f"workers_{n}"] = row
        log(f"{cells} cells on a local cluster of {n} worker(s): {seconds:.1f}s ({snap.status}, {snap.stored} stored)")
    out["results_equal"] = equal
    one, serial_row = out[f"workers_{min(workers)}"], out["serial"]
    out["overhead_per_cell_seconds"] = one["seconds_per_cell"] - serial_row["seconds_per_cell"]
    out["overhead_percent"] = 100 * out["overhead_per_cell_seconds"] / serial_row["seconds_per_cell"]
    # The same difference without the cells' own computation (their records' clock): what Dask,
    # the stream and the history add, apart from a worker computing slower on a busy machine.
    wait_one = one["seconds_per_cell"] - one["compute_seconds_per_cell"]
    wait_serial = serial_row["seconds_per_cell"] - serial_row["compute_seconds_per_cell"]
    out["overhead_beyond_compute_seconds"] = wait_one - wait_serial
    out["compute_ratio"] = one["compute_seconds_per_cell"] / serial_row["compute_seconds_per_cell"]
    top = out[f"workers_{max(workers)}"]
    out["speedup"] = top["cells_per_second"] / serial_row["cells_per_second"]
    out["projection"] = _projection(out)
    out["load_average_after"] = os.getloadavg()[0]  # other work on the machine skews every time above
    return out


def _projection(r: dict) -> dict:
    """N machines of c cores from the measured per-cell cost: cells/s ≈ N·c / (t + o), until the
    scheduler (one task at a time, ``scheduler_seconds_per_task`` each) or the link (bytes per
    cell over :data:`PROJECTION_BANDWIDTH`) saturates first."""
    t = r["serial"]["seconds_per_cell"]
    o = max(r["overhead_per_cell_seconds"], 0.0)
    per_worker = 1 / (t + o)
    scheduler_cap = 1 / r["scheduler_seconds_per_task"] if r.get("scheduler_seconds_per_task") else float("inf")
    link_cap = PROJECTION_BANDWIDTH / r["bytes"]["per_cell"]
    cap = min(scheduler_cap, link_cap)
    return {"cells_per_second_per_worker": per_worker, "scheduler_cap_cells_per_second": scheduler_cap,
            "link_cap_cells_per_second": link_cap, "workers_until_cap": cap / per_worker,
            "bound_by": "scheduler" if scheduler_cap <= link_cap else "link"}


def format_cluster(c: dict) -> str:
    """The experiment figure as a table and the projection as a sentence."""
    lines = [f"experiment figure: {c['cells']} cells of {c['algorithm']} × {c['iterations']} iterations on "
             f"{c['source']} (one thread per worker; load average {c['load_average_before']:.1f} → "
             f"{c['load_average_after']:.1f} on {os.cpu_count()} CPUs)", "",
             "| where | seconds | s per cell | cells/s | ÷ serial |", "|---|---:|---:|---:|---:|"]
    base = c["serial"]["cells_per_second"]
    rows = [("serial, in-process", c["serial"])] + [
        (f"local cluster, {k.split('_')[1]} worker{'s' if k != 'workers_1' else ''}", v)
        for k, v in c.items() if k.startswith("workers_")]
    for label, v in rows:
        lines.append(f"| {label} | {v['seconds']:.2f} | {v['seconds_per_cell']:.3f} | {v['cells_per_second']:.2f} | "
                     f"{v['cells_per_second'] / base:.2f} |")
    b, p = c["bytes"], c["projection"]
    most = max(int(k.split('_')[1]) for k in c if k.startswith('workers_'))
    lines += ["", f"overhead per cell of the cluster (1 worker) against in-process: "
                  f"{c['overhead_per_cell_seconds']:+.3f} s ({c['overhead_percent']:+.1f}%), of which "
                  f"{c['overhead_beyond_compute_seconds']:+.3f} s beyond the cells' own computation (the worker "
                  f"computed {c['compute_ratio']:.2f}× the in-process time); speed-up of {most} workers over "
                  f"serial: {c['speedup']:.2f}×; cluster results equal to serial: {c['results_equal']}",
              f"bytes per cell: task {b['task']:,}, result {b['result']:,}, stream {b['stream']:,} "
              f"(the data set, {b['data_set']:,} bytes, is built on each worker from its spec, never sent); "
              f"scheduler cost per task {1e3 * c['scheduler_seconds_per_task']:.2f} ms",
              f"on N machines of c cores: cells/s ≈ N·c × {p['cells_per_second_per_worker']:.2f} "
              f"(1 / (per-cell cost + overhead)), until the {p['bound_by']} saturates: the scheduler at "
              f"~{p['scheduler_cap_cells_per_second']:,.0f} cells/s, a 1 Gbit/s link at "
              f"~{p['link_cap_cells_per_second']:,.0f} cells/s, i.e. beyond N·c ≈ "
              f"{p['workers_until_cap']:,.0f} workers"]
    return "\n".join(lines)


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


def _threads() -> int:
    import numba
    return numba.get_num_threads()


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


def scaling(log=lambda s: None) -> dict:
    """Per-iteration seconds at every scale with 2 threads, and at paper scale with 1 thread.

    Each measurement runs in its own process (numba fixes its thread count at start-up).
    """
    import subprocess

    runs = {}
    for scale, threads in [("small", 2), ("medium", 2), ("paper", 2), ("paper", 1)]:
        env = dict(os.environ, NUMBA_NUM_THREADS=str(threads))
        cmd = [sys.executable, "-m", "fedviz", "bench", "--scale", scale, "--json", "--sklearn-solvers", "",
               "--no-experiment"]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        runs[f"{scale}/{threads}"] = json.loads(proc.stdout)
        log(f"{scale} with {threads} thread(s) done")
    return runs


def format_scaling(runs: dict) -> str:
    names = list(next(iter(runs.values()))["algorithms"])
    lines = ["| scale | n | nnz | " + " | ".join(f"{a} s/it (μs per 1k nnz)" for a in names) + " |",
             "|---|---:|---:|" + "---:|" * len(names)]
    for key in ("small/2", "medium/2", "paper/2"):
        r = runs[key]
        cells = [f"{r['algorithms'][a]['seconds_per_iteration']:.3f} "
                 f"({1e9 * r['algorithms'][a]['seconds_per_iteration'] / r['nnz']:.1f})" for a in names]
        lines.append(f"| {key.split('/')[0]} | {r['n']:,} | {r['nnz']:,} | " + " | ".join(cells) + " |")
    one, two = runs["paper/1"], runs["paper/2"]
    lines += ["", "| paper scale | " + " | ".join(names) + " | gradient pass |",
              "|---|" + "---:|" * (len(names) + 1)]
    for label, r in (("1 thread, s/it", one), ("2 threads, s/it", two)):
        lines.append(f"| {label} | " + " | ".join(f"{r['algorithms'][a]['seconds_per_iteration']:.3f}"
                                                  for a in names) + f" | {r['gradient_pass_seconds']:.3f} |")
    lines.append("| speed-up | " + " | ".join(
        f"{one['algorithms'][a]['seconds_per_iteration'] / two['algorithms'][a]['seconds_per_iteration']:.2f}×"
        for a in names) + " | (SciPy: one thread) |")
    return "\n".join(lines)


def main(args) -> int:
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if not args.json else (lambda s: None)
    if getattr(args, "personal", False):
        result = personal_cost(args.scale, log=log)
        print(json.dumps(result, default=float) if args.json else format_personal(result))
        return 0
    if getattr(args, "softmax", False):
        result = softmax_cost(iterations=args.iterations, log=log)
        print(json.dumps(result, default=float) if args.json else format_softmax(result))
        return 0
    if getattr(args, "pernode", False):
        result = pernode_cost(args.scale, iterations=args.iterations, log=log)
        print(json.dumps(result, default=float) if args.json else format_pernode(result))
        return 0
    if args.scaling:
        runs = scaling(log)
        print(json.dumps(runs, default=float) if args.json else format_scaling(runs))
        return 0
    solvers = tuple(s for s in (args.sklearn_solvers or "").split(",") if s)
    result = run(args.scale, iterations=args.iterations, sklearn_solvers=solvers,
                 experiment=not args.no_experiment, log=log)
    if args.json:
        print(json.dumps(result, default=float))
    else:
        print(format_table(result))
    return 0


def pernode_cost(scale: str = "small", *, iterations: int = 5, repeats: int = 5, log=lambda s: None) -> dict:
    """The per-node evaluation's cost (issue 23: "no more than one test pass"), per data set:

    - ``test_pass``: one X_test w (what the pooled test error costs; the per-node scores reuse it);
    - ``sums_extra``: what summing each node's losses adds to the pass that computes f(w), ∇f(w)
      (``Problem.value_grad_error`` with ``node_sums`` minus without);
    - ``evaluate_extra``: the per-node errors, losses and summaries from margins and sums already
      computed (:meth:`NodeEvaluator.evaluate <fedviz.problems.pernode.NodeEvaluator.evaluate>` minus
      the pooled error it also returns);
    - ``extra_in_test_passes``: (``sums_extra`` + ``evaluate_extra``) / ``test_pass``, the bar (≤ 1);
    - ``iteration_with`` / ``iteration_without``: the seconds per GD and FSVRG iteration
      (records included) as the loop runs them, and with the evaluator replaced by one that
      returns only the pooled error and asks for no node sums (the loop before issue 23), the two
      runs advanced in turn, ``iterations`` × ``repeats`` iterations each; their difference in test
      passes is the same bar seen through a whole iteration, noisier: it is the difference of two
      larger times (an FSVRG iteration of google-plus-small is about 150 test passes).

    Every figure is the minimum over repeats, not the median: on a shared machine the parallel
    kernels' medians swing tenfold with the load, while the minimum is the undisturbed cost.
    """
    from ..data.presets import make_preset
    from ..problems.objective import Problem
    from ..problems import pernode
    from ..runner import loop
    from ..runner.loop import iterate

    class PooledOnly(pernode.NodeEvaluator):
        wants_node_sums = False

        def evaluate(self, w, z, z_test, iteration=0, loss_sums=None):
            return self.pooled_test_error(z_test), pernode.nan_fields(), None

    def started(p, name, evaluator):
        """A run of ``name`` whose loop scores with ``evaluator`` (built at the run's first record)."""
        real = loop.pernode.NodeEvaluator
        loop.pernode.NodeEvaluator = evaluator
        try:
            it = iterate(p, name, iterations=10 ** 6, seed=0)
            next(it)
        finally:
            loop.pernode.NodeEvaluator = real
        return it

    def per_iteration_pair(p, name) -> tuple[float, float]:
        """The two runs side by side, one iteration of each in turn (a load change hits both alike;
        the runner's clock counts a run's own work only): the least seconds of an iteration of each."""
        runs = (started(p, name, pernode.NodeEvaluator), started(p, name, PooledOnly))
        clocks = ([next(runs[0]).seconds], [next(runs[1]).seconds])  # the first iteration pays the setup
        for _ in range(iterations * repeats):
            for run, clock in zip(runs, clocks):
                clock.append(next(run).seconds)
        for run in runs:
            run.close()
        return tuple(float(np.min(np.diff(c))) for c in clocks)

    def least(fn, repeat: int = 30) -> float:
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    def least_pair(fa, fb, repeat: int = 30) -> tuple[float, float]:
        """The minima of two functions timed alternately (a load change hits both alike)."""
        ta, tb = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            fa()
            ta.append(time.perf_counter() - t)
            t = time.perf_counter()
            fb()
            tb.append(time.perf_counter() - t)
        return min(ta), min(tb)

    out = {"threads": _threads(), "load_average": os.getloadavg()[0]}
    for key, make in (("google-plus-small", lambda: make_preset("google-plus-small")),
                      (f"google-plus ({scale})", lambda: make_preset("google-plus", nodes=SCALES[scale]))):
        ds = make()
        p = Problem(ds, "logistic")
        ev = pernode.NodeEvaluator(p)
        w = np.random.default_rng(0).normal(scale=0.01, size=p.d)
        z = p.matvec(w)
        zt = ev.test_margins(w)
        sums = p.value_grad_error(w, z, node_sums=True)[3]
        ev.evaluate(w, z, zt, 0, sums)  # compiled (or loaded from the cache) outside the timing
        test_pass = least(lambda: ev.test_margins(w))
        with_sums, without_sums = least_pair(lambda: p.value_grad_error(w, z, node_sums=True),
                                             lambda: p.value_grad_error(w, z), repeat=60)
        full, pooled = least_pair(lambda: ev.evaluate(w, z, zt, 0, sums), lambda: ev.pooled_test_error(zt),
                                  repeat=60)
        train_pass = least(lambda: p.matvec(w))
        sums_extra, evaluate_extra = max(with_sums - without_sums, 0.0), full - pooled
        r = {"n": p.n, "n_test": int(ds.y_test.size), "nodes": ds.n_nodes, "untested": ev.untested,
             "test_pass_seconds": test_pass, "train_pass_seconds": train_pass,
             "value_grad_error_seconds": without_sums, "sums_extra_seconds": sums_extra,
             "evaluate_extra_seconds": evaluate_extra,
             "extra_over_test_pass": (sums_extra + evaluate_extra) / test_pass, "algorithms": {}}
        for name in ("gd", "fsvrg"):
            with_, without = per_iteration_pair(p, name)
            r["algorithms"][name] = {"iteration_with_seconds": with_, "iteration_without_seconds": without,
                                     "ratio": with_ / without,
                                     "extra_in_test_passes": (with_ - without) / test_pass}
        out[key] = r
        log(f"{key} done")
    return out


def _data_rows(result: dict) -> dict:
    """The per-data-set rows of :func:`pernode_cost`'s result (without its threads and load)."""
    return {k: v for k, v in result.items() if isinstance(v, dict)}


def format_pernode(result: dict) -> str:
    lines = ["Per-node evaluation (issue 23): its extra cost per iteration in test passes (X_test w), the bar "
             "being 1: node sums inside the f(w) pass + the per-node scores and summaries (negative where the "
             "compiled error count costs less than the pooled error alone did). "
             f"{result['threads']} threads, load average {result['load_average']:.1f} on {os.cpu_count()} CPUs.", "",
             "| data | K (untested) | test pass s (X w s) | node sums in f(w) s | per-node scores s | "
             "extra in test passes |", "|---|---:|---:|---:|---:|---:|"]
    for key, r in _data_rows(result).items():
        lines.append(f"| {key} | {r['nodes']:,} ({r['untested']:,}) | {r['test_pass_seconds']:.6f} "
                     f"({r['train_pass_seconds']:.6f}) | {r['sums_extra_seconds']:.6f} | "
                     f"{r['evaluate_extra_seconds']:.6f} | {r['extra_over_test_pass']:.2f} |")
    lines += ["", "The same through whole iterations (records included), with and without the per-node evaluation:",
              "", "| data | algorithm | s/it with | s/it without | ratio | extra in test passes |",
              "|---|---|---:|---:|---:|---:|"]
    for key, r in _data_rows(result).items():
        for name, a in r["algorithms"].items():
            lines.append(f"| {key} | {name} | {a['iteration_with_seconds']:.5f} | {a['iteration_without_seconds']:.5f} | "
                         f"{a['ratio']:.3f} | {a['extra_in_test_passes']:+.2f} |")
    return "\n".join(lines)


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


def personal_cost(scale: str = "small", *, log=lambda s: None) -> dict:
    """The exact Local models of every node (issue 23: "at paper scale, 10,000 nodes, under a minute"):

    - ``local_seconds`` (wall) and ``local_cpu_seconds``: :meth:`Personaliser.local
      <fedviz.personal.models.Personaliser.local>`, v_k = argmin F_k on all K nodes, node-by-node
      Newton-CG to ‖∇F_k‖ ≤ 1e-11·‖∇F_k(0)‖;
    - ``setup_seconds``: building the solver (the block matrix of the node supports and its transpose);
    - ``gradient_pass_seconds`` (and ``_cpu_seconds``): one SciPy X w and Xᵀ r in the same process, and the
      ratios to it (wall to wall, CPU to CPU);
    - ``peak_memory_gb``: the process's peak resident memory after the solve (the whole bench's peak
      at paper scale today: 3.70 GB, README).

    The solver's compiled code is loaded on a small problem first, so that it is not timed.
    """
    from ..data.presets import make_preset
    from ..personal.models import Personaliser
    from ..problems.objective import Problem

    Personaliser(Problem(make_preset("google-plus-small", nodes=20), "logistic")).local()  # load the kernels
    t = time.perf_counter()
    ds = make_preset("google-plus", nodes=SCALES[scale])
    out: dict = {"scale": scale, "threads": _threads(), "n": ds.n, "d": ds.d, "nnz": int(ds.X.nnz),
                 "nodes": ds.n_nodes, "generate_seconds": time.perf_counter() - t}
    log(f"generated n={ds.n:,} K={ds.n_nodes:,} in {out['generate_seconds']:.1f}s")
    problem = Problem(ds, "logistic")
    X = problem.X
    w = np.random.default_rng(0).normal(size=ds.d) * 0.01
    r = np.random.default_rng(1).normal(size=ds.n)
    out["gradient_pass_seconds"] = _median_time(lambda: (X @ w, X.T @ r), 5)
    c = time.process_time()
    for _ in range(5):
        X @ w, X.T @ r
    out["gradient_pass_cpu_seconds"] = (time.process_time() - c) / 5
    t = time.perf_counter()
    solver = Personaliser(problem)
    out["setup_seconds"] = time.perf_counter() - t
    out["slots"] = int(solver.index.size)
    t, c = time.perf_counter(), time.process_time()
    models = solver.local()
    out["local_seconds"] = time.perf_counter() - t
    out["local_cpu_seconds"] = time.process_time() - c
    out["newton_iterations_max"] = solver.newton_iterations
    out["residual"] = solver.residual
    out["ratio_to_gradient_pass"] = out["local_seconds"] / out["gradient_pass_seconds"]
    # CPU time against CPU time: the ratio a loaded machine distorts least.
    out["cpu_ratio_to_gradient_pass"] = out["local_cpu_seconds"] / out["gradient_pass_cpu_seconds"]
    out["finite"] = bool(np.all(np.isfinite(models.slots)))
    out["peak_memory_gb"] = _rss_gb()
    log(f"Local on {ds.n_nodes:,} nodes: {out['local_seconds']:.1f}s")
    return out


def format_personal(r: dict) -> str:
    return (f"google-plus at scale '{r['scale']}': n = {r['n']:,}, K = {r['nodes']:,}, {r['slots']:,} support "
            f"slots, {r['threads']} threads\n"
            f"Local models of all {r['nodes']:,} nodes: {r['local_seconds']:.1f} s "
            f"({r['local_cpu_seconds']:.1f} s CPU; {r['ratio_to_gradient_pass']:.0f} gradient passes of "
            f"{r['gradient_pass_seconds']:.3f} s, {r['cpu_ratio_to_gradient_pass']:.0f} in CPU time), at most {r['newton_iterations_max']} Newton iterations per node, "
            f"largest relative gradient left {r['residual']:.1e}; solver setup {r['setup_seconds']:.1f} s; "
            f"peak memory {r['peak_memory_gb']:.2f} GB")
