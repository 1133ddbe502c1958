"""``python -m fedviz bench --personal``: the exact Local models of every node (issue 23's bar: at paper
scale, 10,000 nodes, under a minute), against one gradient pass."""

from __future__ import annotations

import time

import numpy as np

from ._common import SCALES, _median_time, _rss_gb, _threads

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
