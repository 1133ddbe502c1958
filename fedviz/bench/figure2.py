"""The paper's experiment (Section 4.1, Figure 2) as one function, shared by the CLI, the test
and the README's figure.

FSVRG, GD and CoCoA+ run on the google-plus stand-in with its natural (per-author)
nodes, and FSVRG again on the same data reshuffled over nodes of the same sizes
(FSVRGR).  OPT is the optimum's objective and test error.

Two protocols.  ``"default"``: every line with its default hyperparameters (FSVRG's is
the safeguarded h = 4 n̄/L̄).  ``"paper"``: Section 4.1's, for FSVRG — "we tried a set of
stepsizes, and retrospectively choose one that works best": Algorithm 4 exactly as
printed (no safeguard) with each h = 2^k/L of :data:`PAPER_GRID`, keeping the run with the
lowest final f − f* that did not diverge (FSVRGR chooses its own); GD and CoCoA+ keep
their defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..data.baselines import majority_test_error, node_majority_test_error
from ..data.dataset import FederatedDataset
from ..data.partition import make_partitioner
from ..data.presets import make_preset
from ..problems.objective import Problem
from ..problems.optimum import Optimum, solve
from ..runner.loop import IterationRecord, iterate

#: Figure 2's lines: (label, algorithm, partition).
LINES = (("FSVRG", "fsvrg", "natural"), ("GD", "gd", "natural"), ("CoCoA+", "cocoa-plus", "natural"),
         ("FSVRGR", "fsvrg", "reshuffle"))


#: The paper protocol's stepsizes for FSVRG: h = 2^k / L for these k (the best lies at 8/L to
#: 256/L on google-plus-small and the real files of ``python -m fedviz.bench.stepsize_check``).
PAPER_GRID = tuple(range(12))
PROTOCOLS = ("default", "paper")


@dataclass(frozen=True)
class Figure2:
    runs: dict[str, list[IterationRecord]]
    optimum: Optimum
    baselines: dict[str, float]
    data: FederatedDataset
    #: The stepsize h each FSVRG line used (the default's starting h, or the one the paper
    #: protocol chose), by label.
    stepsizes: dict[str, float] | None = None
    protocol: str = "default"


def reshuffled(ds: FederatedDataset, seed: int = 0) -> FederatedDataset:
    """The same rows on nodes of the same sizes, filled at random (the paper's FSVRGR)."""
    part = make_partitioner("reshuffle", n_nodes=None, seed=seed)
    node_of_row = part.assign(ds.X, ds.y, groups=ds.node_of_row)
    return ds.with_nodes(node_of_row, meta_update={"partition": "reshuffle"})


def figure2(preset: str = "google-plus-small", *, iterations: int = 30, seed: int = 0,
            protocol: str = "default", progress=None, settings=None) -> Figure2:
    """Run Figure 2's four lines for ``iterations`` iterations each (λ = 1/n, logistic loss).
    ``settings``: {algorithm: hyperparameters} over the defaults (the golden figures pin the defaults
    they were recorded with)."""
    from ..validation import check_choice
    protocol = check_choice("protocol", protocol, PROTOCOLS)
    ds = make_preset(preset)
    problem = Problem(ds, "logistic")
    opt = solve(problem)
    shuffled = Problem(reshuffled(ds, seed), "logistic", problem.lam)
    runs, stepsizes = {}, {}
    for label, name, partition in LINES:
        p = problem if partition == "natural" else shuffled
        if name == "fsvrg" and protocol == "paper":
            h, runs[label] = _best_of_grid(p, iterations, seed, opt.objective, label)
            stepsizes[label] = h
        else:
            runs[label] = list(iterate(p, name, iterations=iterations, seed=seed, f_star=opt.objective,
                                       label=label, hyper=dict((settings or {}).get(name, {}))))
            if name == "fsvrg":
                from ..algorithms.fsvrg import FSVRG
                stepsizes[label] = FSVRG.derived_defaults(p)["stepsize"]
        if progress:
            progress(label, runs[label][-1])
    baselines = {"optimum": opt.test_error, "majority": majority_test_error(ds),
                 "node_majority": node_majority_test_error(ds)}
    return Figure2(runs=runs, optimum=opt, baselines=baselines, data=ds, stepsizes=stepsizes, protocol=protocol)


def _best_of_grid(p: Problem, iterations: int, seed: int, f_star: float, label: str):
    """Algorithm 4 as printed with every h of :data:`PAPER_GRID`; the best final f − f*, retrospectively."""
    best = None
    for k in PAPER_GRID:
        h = 2.0 ** k / p.smoothness
        recs = list(iterate(p, "fsvrg", iterations=iterations, seed=seed, f_star=f_star, label=label,
                            hyper={"stepsize": h, "safeguard": False}))
        last = recs[-1]
        if last.status == "done" and (best is None or last.suboptimality < best[1][-1].suboptimality):
            best = (h, recs)
    if best is None:
        raise RuntimeError(f"{label}: every stepsize of the paper protocol's grid diverged")
    return best
