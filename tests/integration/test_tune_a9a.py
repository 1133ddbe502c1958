"""Tuning by pilot runs on a9a (with a9a.t) over 100 nodes, λ = 1/n, logistic: the issue's acceptance
(tuned FSVRG reaches f − f* ≤ 1e-3 in 30 iterations on a Dirichlet(0.5) split) and the client-sampling
methods whose 10-iteration pilots once misled the choice.  Each builds and solves a9a and runs the
pilots and full-length runs, so they live here, not with the unit tests of tests/unit/test_tune.py.
Oracle for f*: the a9a optimum of tests/data/README.md (scikit-learn)."""

import time

import pytest

from conftest import DATA
from fedviz.algorithms import ALGORITHMS
from fedviz.data.build import DataSpec, build
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve
from fedviz.runner import iterate
from fedviz.runner import tune as tune_module
from fedviz.runner.tune import tune


_A9A: dict = {}


def _a9a(partition):
    """a9a (with a9a.t) over 100 nodes, λ = 1/n, logistic, built and solved once per partition."""
    if partition not in _A9A:
        ds = build(DataSpec(source=str(DATA / "a9a"), test=str(DATA / "a9a.t"), partition=partition,
                            nodes=100, seed=0))
        problem = Problem(ds, "logistic", None)
        _A9A[partition] = (problem, solve(problem).objective)
    return _A9A[partition]


def test_tuned_fsvrg_reaches_1e3_on_a9a_dirichlet_in_30_iterations():
    """The issue's acceptance: a9a (with a9a.t), dirichlet:alpha=0.5 over 100 nodes, λ = 1/n, logistic."""
    problem, f_star = _a9a("dirichlet:alpha=0.5")
    assert f_star == pytest.approx(0.32337958246, rel=1e-9)  # the data README's reference
    start = time.perf_counter()
    result = tune(problem, "fsvrg", iterations=30, seed=0, f_star=f_star)
    recs = list(iterate(problem, "fsvrg", iterations=30, hyper=result.hyper, seed=0, f_star=f_star))
    assert recs[-1].status == "done" and recs[-1].suboptimality <= 1e-3, (result, recs[-1])
    assert not result.edge
    assert time.perf_counter() - start < 60  # pilots run on the same Problem: no rebuild, no re-solve




@pytest.mark.parametrize("partition, name, old_pick", [("dirichlet:alpha=0.5", "fedavg", 4.0),
                                                       ("dirichlet:alpha=0.5", "fedprox", 4.0),
                                                       ("iid", "cocoa", 0.5)])
def test_tuning_does_not_make_client_sampling_methods_worse_on_a9a(partition, name, old_pick):
    """Where a 10-iteration pilot's last value misleads: FedAvg/FedProx at 4× the step and CoCoA at
    σ' = 0.5 lead at 10 iterations and end 2–4× behind the default after 30 (the old choice, shown
    here).  The tuned value, run the full 30 iterations, is no worse than the default."""
    problem, f_star = _a9a(partition)
    result = tune(problem, name, iterations=30, seed=0, f_star=f_star)
    param = result.param
    base = tune_module.resolved_default(ALGORITHMS[name], problem, {}, param)

    def final(value):
        recs = list(iterate(problem, name, iterations=30, hyper={param: value}, seed=0, f_star=f_star))
        assert recs[-1].status == "done"
        return recs[-1].suboptimality

    default = final(base)
    assert final(base * old_pick) > 2 * default  # the trap is real
    assert final(result.value) <= default * (1 + 1e-9)
