"""``python -m fedviz bench --pernode``: what the per-node evaluation (:mod:`fedviz.problems.pernode`)
adds to an iteration, in test passes (issue 23's bar: at most one)."""

from __future__ import annotations

import os
import time

import numpy as np

from ._common import SCALES, _threads

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
