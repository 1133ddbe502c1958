"""``python -m fedviz bench --scaling``: seconds per iteration at every scale with 2 threads, and at paper
scale with 1 thread, each measurement in a process of its own."""

from __future__ import annotations

import json
import os
import sys

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
