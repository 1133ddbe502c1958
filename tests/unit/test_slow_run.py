"""The estimate of DANE's first iteration (fedviz.algorithms.dane.DANE.first_iteration_cost) and the warning
before a slow run (fedviz.runner.slow): the formula against operation counts, never against a clock.

The issue: DANE's default on the default data ran its exact solver for minutes without a word before it
diverged.  Here the CG iterations the solver really makes are counted (one call of its update kernel
each), the work of one CG iteration is read off the matrices it multiplies, and κ is computed from the
rows by NumPy."""

import math

import numpy as np
import pytest

from fedviz.algorithms.dane import CG_PER_BOUND, DANE, MAX_CG, NEWTON_STEPS, ROW_OPS, SLOT_OPS, LocalNewton
from fedviz.algorithms.spec import AlgorithmSpec
from fedviz.data.build import DataSpec
from fedviz.runner import cache
from fedviz.runner.loop import iterate
from fedviz.runner.slow import SECONDS_PER_OP, SLOW_SECONDS, count_cg, first_iteration_seconds, slow_run_warnings

from conftest import DATA

GPLUS = DataSpec("preset:google-plus-small")
#: The paper's DANE: μ = 0 fixed (its default starts μ at L̄/1024 and adapts it).
PAPER = {"mu": 0.0, "safeguard": False}
A9A = DataSpec(str(DATA / "a9a"), test=str(DATA / "a9a.t"))


@pytest.mark.slow  # the count runs DANE's exact first iteration on the whole data set: 2-3 s quiet each
@pytest.mark.parametrize("spec", [GPLUS, A9A], ids=["google-plus-small", "a9a"])
def test_the_cg_count_and_the_work_of_one_cg_iteration_match_the_solver(spec):
    problem = cache.problem(spec)
    cost = DANE.first_iteration_cost(problem, PAPER)
    # The work of one CG iteration: two products with B, which holds X's nonzeros, and passes over the slots.
    local = LocalNewton(problem)
    slots = sum(np.unique(problem.data.X.indices[problem.data.X.indptr[a]:problem.data.X.indptr[b]]).size
                for a, b in zip(problem.data.offsets[:-1], problem.data.offsets[1:]))  # Σ_k |support of node k|
    assert local.B.nnz == problem.data.X.nnz and local.B.shape == (problem.n, slots)
    assert cost["ops_per_cg"] == 2 * problem.data.X.nnz + SLOT_OPS * slots + ROW_OPS * problem.n
    # κ from the rows: (1/4)·mean ‖x_i‖² + λ over λ (logistic, μ = 0).
    X = problem.data.X
    lam = 1.0 / problem.n
    kappa = (0.25 * np.mean(np.asarray(X.multiply(X).sum(axis=1)).ravel()) + lam) / lam
    per_newton = min(MAX_CG, math.ceil(0.5 * math.sqrt(kappa) * math.log(2 / 1e-10)))  # μ = 0 < λ: the bound
    assert cost["cg_iterations"] == NEWTON_STEPS * per_newton
    assert cost["ops"] == cost["cg_iterations"] * cost["ops_per_cg"]
    # The CG iterations the solver really makes in DANE's first iteration: the estimate within a factor 2, at
    # the paper's μ = 0 and at the default's first μ = L̄/1024.
    for hyper in (PAPER, {}):
        estimate = DANE.first_iteration_cost(problem, hyper)["cg_iterations"]
        counted = count_cg(lambda: [None for _ in iterate(problem, "dane", iterations=1, f_star=0.0, hyper=hyper)])
        assert 0.5 <= estimate / counted <= 2.0, (hyper, estimate, counted)


def test_a_larger_mu_or_the_squared_loss_or_the_svrg_solver_costs_less():
    problem = cache.problem(GPLUS)
    base = DANE.first_iteration_cost(problem, PAPER)
    stiff = DANE.first_iteration_cost(problem, {"mu": 1.0})
    # μ = 1: κ = (L̄ + 1)/(λ + 1) ≈ 2.2, so a handful of CG iterations per Newton step.
    kappa = (problem.average_example_smoothness + 1.0) / (problem.lam + 1.0)
    assert stiff["cg_iterations"] == NEWTON_STEPS * math.ceil(CG_PER_BOUND * 0.5 * math.sqrt(kappa) * math.log(2e10))
    assert stiff["ops"] < base["ops"] / 10
    ridge = DANE.first_iteration_cost(cache.problem(GPLUS, "squared"), PAPER)
    assert ridge["cg_iterations"] == MAX_CG  # one Newton step: the quadratic is one CG run
    svrg = DANE.first_iteration_cost(problem, {"solver": "svrg"})
    assert svrg["solver"] == "svrg" and svrg["ops"] < base["ops"] / 100


def test_the_warning_names_the_estimate_and_only_for_a_slow_first_iteration():
    problem = cache.problem(GPLUS)
    paper = AlgorithmSpec("dane", tuple(PAPER.items()))
    seconds, cost = first_iteration_seconds(problem, paper)
    assert seconds == pytest.approx(cost["ops"] * SECONDS_PER_OP) and seconds > SLOW_SECONDS
    (text,) = slow_run_warnings(problem, [AlgorithmSpec("fsvrg"), paper, AlgorithmSpec("gd")])
    assert text.startswith(f"DANE's first iteration will take about {seconds:.0f} s here")
    assert f"about {cost['cg_iterations']:,} CG iterations" in text and "'svrg' local solver" in text
    assert slow_run_warnings(problem, [AlgorithmSpec("dane", (("solver", "svrg"),))]) == []
    assert slow_run_warnings(problem, [AlgorithmSpec("dane")]) == []  # the default starts at μ = L̄/1024: fast
    assert first_iteration_seconds(problem, AlgorithmSpec("fsvrg")) is None  # no estimate, no warning
    # A limit above the estimate: nothing to say.
    assert slow_run_warnings(problem, [paper], limit=seconds * 2) == []
