"""The paper's experiment (Section 4.1, Figure 2) as one function, shared by the CLI, the test
and the README's figure.

FSVRG, GD and CoCoA+ run on the google-plus stand-in with its natural (per-author)
nodes, and FSVRG again on the same data reshuffled over nodes of the same sizes
(FSVRGR).  OPT is the optimum's objective and test error.
"""

from __future__ import annotations

from dataclasses import dataclass

from .data.baselines import majority_test_error, node_majority_test_error
from .data.dataset import FederatedDataset
from .data.partition import make_partitioner
from .data.presets import make_preset
from .problems.objective import Problem
from .problems.optimum import Optimum, solve
from .runner.loop import IterationRecord, iterate

#: Figure 2's lines: (label, algorithm, partition).
LINES = (("FSVRG", "fsvrg", "natural"), ("GD", "gd", "natural"), ("CoCoA+", "cocoa-plus", "natural"),
         ("FSVRGR", "fsvrg", "reshuffle"))


@dataclass(frozen=True)
class Figure2:
    runs: dict[str, list[IterationRecord]]
    optimum: Optimum
    baselines: dict[str, float]
    data: FederatedDataset


def reshuffled(ds: FederatedDataset, seed: int = 0) -> FederatedDataset:
    """The same rows on nodes of the same sizes, filled at random (the paper's FSVRGR)."""
    part = make_partitioner("reshuffle", n_nodes=None, seed=seed)
    node_of_row = part.assign(ds.X, ds.y, groups=ds.node_of_row)
    return ds.with_nodes(node_of_row, meta_update={"partition": "reshuffle"})


def figure2(preset: str = "google-plus-small", *, iterations: int = 30, seed: int = 0,
            progress=None) -> Figure2:
    """Run Figure 2's four lines for ``iterations`` iterations each (λ = 1/n, logistic loss)."""
    ds = make_preset(preset)
    problem = Problem(ds, "logistic")
    opt = solve(problem)
    shuffled = Problem(reshuffled(ds, seed), "logistic", problem.lam)
    runs = {}
    for label, name, partition in LINES:
        p = problem if partition == "natural" else shuffled
        runs[label] = list(iterate(p, name, iterations=iterations, seed=seed, f_star=opt.objective,
                                   label=label))
        if progress:
            progress(label, runs[label][-1])
    baselines = {"optimum": opt.test_error, "majority": majority_test_error(ds),
                 "node_majority": node_majority_test_error(ds)}
    return Figure2(runs=runs, optimum=opt, baselines=baselines, data=ds)
