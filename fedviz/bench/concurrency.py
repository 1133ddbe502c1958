"""``python -m fedviz bench --concurrent``: what idle OpenMP threads cost when two computations share the cores.

numba's parallel kernels run on GNU OpenMP (libgomp), whose threads, once a kernel ends, spin for
``GOMP_SPINCOUNT`` = 300,000 iterations before they sleep.  Alone, the spin saves the next kernel a wake-up;
with two computations on the same cores (two visitors' runs on one server, two test workers), each one's
spinning threads hold the cores the other is waiting for.  fedviz therefore sets ``OMP_WAIT_POLICY=PASSIVE``
(in ``fedviz/__init__.py``) unless the user set either variable.

This times the small-scale ``fedviz bench`` (seconds per iteration of each algorithm) in one process alone and
in two processes at once, under libgomp's default spin (``GOMP_SPINCOUNT=300000``, the documented default,
which fedviz leaves alone) and under ``PASSIVE``, alternated over rounds; every measurement is a process of
its own, since libgomp reads its environment once.  The figure is the median over rounds.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

#: The two policies compared: libgomp's default spin, written out (so fedviz leaves it alone), and fedviz's.
POLICIES = {"spin": {"GOMP_SPINCOUNT": "300000"}, "passive": {"OMP_WAIT_POLICY": "PASSIVE"}}


def _bench_processes(count: int, policy: dict, iterations: int) -> list[dict]:
    """``count`` small-scale benches started together; each one's JSON."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(policy)
    cmd = [sys.executable, "-m", "fedviz", "bench", "--scale", "small", "--json", "--sklearn-solvers", "",
           "--no-experiment", "--iterations", str(iterations)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(count)]
    done = [(p, *p.communicate()) for p in procs]  # every process waited for, failed or not
    for p, stdout, stderr in done:
        if p.returncode != 0:
            raise RuntimeError(f"fedviz bench failed (exit {p.returncode}): {stderr.strip()[-500:]}")
    return [json.loads(stdout) for _, stdout, _ in done]


def concurrency(rounds: int = 2, iterations: int = 5, log=lambda s: None) -> dict:
    """Seconds per iteration of each algorithm of the small bench: alone and two at once, per policy.

    Returns ``{"algorithms": [...], "seconds": {policy: {"alone"|"two": {algorithm: median s/it}}}}``;
    "two" is the mean of the two simultaneous processes, then the median over rounds.
    """
    samples: dict = {p: {"alone": {}, "two": {}} for p in POLICIES}
    names: list[str] = []
    for r in range(rounds):
        for policy, env in POLICIES.items():
            for mode, count in (("alone", 1), ("two", 2)):
                runs = _bench_processes(count, env, iterations)
                names = list(runs[0]["algorithms"])
                for a in names:
                    mean = statistics.fmean(run["algorithms"][a]["seconds_per_iteration"] for run in runs)
                    samples[policy][mode].setdefault(a, []).append(mean)
                log(f"round {r + 1}/{rounds}: {policy}, {mode} done")
    seconds = {p: {m: {a: statistics.median(v) for a, v in by.items()} for m, by in modes.items()}
               for p, modes in samples.items()}
    return {"algorithms": names, "rounds": rounds, "seconds": seconds}


def format_concurrency(result: dict) -> str:
    s = result["seconds"]
    lines = ["| algorithm | spin: alone | spin: two at once | passive: alone | passive: two at once "
             "| two at once, passive ÷ spin | alone, passive ÷ spin |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for a in result["algorithms"]:
        sa, st, pa, pt = s["spin"]["alone"][a], s["spin"]["two"][a], s["passive"]["alone"][a], s["passive"]["two"][a]
        lines.append(f"| {a} | {sa:.4f} | {st:.4f} | {pa:.4f} | {pt:.4f} | {pt / st:.2f} | {pa / sa:.2f} |")
    lines.append("")
    lines.append(f"Seconds per iteration, small scale, median of {result['rounds']} alternated rounds; "
                 "'two at once' is the mean of two benches started together on the same cores.")
    return "\n".join(lines)
