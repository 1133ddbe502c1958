"""The experiment figure of ``python -m fedviz bench`` (skipped by ``--no-experiment``): the same cells of
an experiment grid run serially in this process, then on a local Dask cluster of 1 and of 2 worker
processes (one thread each, as :mod:`fedviz.runner.cluster` starts them): cells per second, the speed-up,
the cluster's overhead per cell against the in-process run, and the bytes a cell moves, from which the
figure projects N machines.
"""

from __future__ import annotations

import os
import time

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
