"""The paper's two equivalences as overlaid runs whose distance is measured.

- **Proposition 1** (Section 3.5): DANE (Algorithm 2) with η = 1, μ = 0 and one SVRG pass
  (Algorithm 1, started at w^t) as the solver of its subproblem, eq. (10), generates the same
  iterates as naive FSVRG (Algorithm 3), given the same samples (the Remark after it).
- **Theorem 5** (Appendix A, "Equivalence of Algorithms 5 and 6 for Quadratic Loss"): for ridge
  regression and the same α^0, the Primal Method's iterates w^t are the image (1/(λn)) X α^t,
  eq. (14), of the Dual Method's α^t.

Each function reads the run :func:`fedviz.properties.proposition_1` or
:func:`fedviz.properties.theorem_5` makes and checks (both methods stepped side by side from the
same start, :class:`fedviz.properties.SideBySide`) and adds what a page overlays: both curves
f(w^t) − f* and the distance between the two iterates at every t.  The distance, not the curves,
is the evidence: two different sequences can have close objective values, two equal ones cannot
be apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..problems.objective import Problem
from ..properties import SideBySide, proposition_1, theorem_5

__all__ = ["EQUIVALENCE_DATA", "Overlay", "equivalence_problem", "proposition_1_overlay", "theorem_5_overlay"]


@dataclass(frozen=True)
class Overlay:
    """Two methods' runs side by side.

    name : "Proposition 1" or "Theorem 5"
    labels : the two methods' names, in the order of ``first`` and ``second``
    iterations : t = 0 .. T
    first, second : f(w^t) − f* of each method
    distances : ‖w_first^t − w_second^t‖_∞ (Theorem 5: relative, ÷ max(1, ‖image‖_∞), as
                :func:`fedviz.properties.theorem_5`)
    distance : the largest of them
    scale : max_t ‖w_second^t‖_∞, that the iterates moved at all
    rtol : the equivalence holds if every distance ≤ rtol (Proposition 1: × max(1, ‖w^t‖_∞))
    holds : bool
    settings : the run's settings in words (for the page's caption)
    """

    name: str
    labels: tuple[str, str]
    iterations: tuple[int, ...]
    first: tuple[float, ...]
    second: tuple[float, ...]
    distances: tuple[float, ...]
    distance: float
    scale: float
    rtol: float
    holds: bool
    settings: str

    def describe(self) -> str:
        return (f"{self.name}: {self.labels[0]} and {self.labels[1]} are at most {self.distance:.2g} apart over "
                f"{self.iterations[-1]} iterations (iterates up to {self.scale:.3g}) — "
                + ("the same sequence, as the paper states." if self.holds else "NOT the same sequence."))


def _check_iterations(iterations) -> int:
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or not 1 <= iterations <= 200:
        raise ParameterError("iterations", iterations, "an integer in [1, 200]")
    return int(iterations)


def proposition_1_overlay(problem: Problem, f_star: float, *, iterations: int = 10, seed: int = 0,
                          local_steps: int | None = None, stepsize: float | None = None,
                          rtol: float = 1e-12) -> Overlay:
    """Proposition 1: DANE(η = 1, μ = 0, one SVRG pass from w^t) against naive FSVRG, the same
    seed (so the same samples, the Remark after the proposition), from w^0 = 0.

    ``local_steps`` (m) and ``stepsize`` (h) are both algorithms' (None: their shared default,
    m = n/K and h = 1/(2L̄))."""
    from .matrix import one_thread

    with one_thread():  # small problems: one thread beats a contended parallel region
        return _proposition_1(problem, f_star, _check_iterations(iterations), seed, local_steps, stepsize, rtol)


def _proposition_1(problem, f_star, T, seed, local_steps, stepsize, rtol) -> Overlay:
    r = proposition_1(problem, local_steps=local_steps, stepsize=stepsize, iterations=T, seed=seed, rtol=rtol)
    settings = (f"η = 1, μ = 0, one SVRG pass of m = {r.m} steps with h = {r.h:.3g} on each of "
                f"K = {problem.data.n_nodes} nodes; seed {seed}")
    return _overlay("Proposition 1", ("DANE, one SVRG pass", "naive FSVRG"), r.run, f_star, rtol, r.holds,
                    settings)


def _overlay(name: str, labels: tuple[str, str], run: SideBySide, f_star: float, rtol: float, holds: bool,
             settings: str) -> Overlay:
    """The run of an equivalence, as a page shows it: objective values become gaps to f*."""
    first = tuple(float(v - f_star) for v in run.first)
    second = tuple(float(v - f_star) for v in run.second)
    if not all(math.isfinite(x) for x in first + second):
        settings += "; the runs left the finite numbers"
    return Overlay(name=name, labels=labels, iterations=tuple(range(len(run.distances))), first=first,
                   second=second, distances=run.distances, distance=max(run.distances), scale=max(run.sizes),
                   rtol=rtol, holds=bool(holds), settings=settings)


def theorem_5_overlay(problem: Problem, f_star: float, *, iterations: int = 10, sigma: float | None = None,
                      start: str = "zero", seed: int = 0, rtol: float = 1e-9) -> Overlay:
    """Theorem 5: the Primal Method (Algorithm 5) against the image (1/(λn)) X α^t of the Dual
    Method (Algorithm 6), both with ``sigma`` (None: K) and the same α^0: 0 (``start="zero"``) or
    drawn N(0, 1) with ``seed`` (``start="random"``).  Ridge regression only (the squared loss)."""
    from .matrix import one_thread

    T = _check_iterations(iterations)
    if problem.loss.name != "squared":  # checked by theorem_5 too; named here before the start
        raise ParameterError("loss", problem.loss.name, "squared (Theorem 5 is about ridge regression)")
    if start not in ("zero", "random"):
        raise ParameterError("start", start, "zero or random")
    alpha0 = (np.zeros(problem.n) if start == "zero"
              else np.random.default_rng(seed).normal(size=problem.n))
    with one_thread():
        return _theorem_5(problem, f_star, T, sigma, alpha0, start, seed, rtol)


def _theorem_5(problem, f_star, T, sigma, alpha0, start, seed, rtol) -> Overlay:
    r = theorem_5(problem, sigma=sigma, alpha0=alpha0, iterations=T, rtol=rtol)
    K = problem.data.n_nodes
    settings = (f"σ = {r.sigma:g} (η = K/σ = {K / r.sigma:.3g}) on K = {K} nodes; α⁰ = "
                + ("0" if start == "zero" else f"N(0, 1) draws, seed {seed}"))
    return _overlay("Theorem 5", ("Primal method (Alg. 5)", "image of the dual method (Alg. 6)"), r.run, f_star,
                    rtol, r.holds, settings)


#: The data sets the equivalences page offers (preset specs, small enough to run in a second).
EQUIVALENCE_DATA = ("google-plus-small?nodes=40", "iid?nodes=40", "disjoint-features", "identical-nodes",
                    "one-node")


def equivalence_problem(spec: str, loss: str) -> tuple[Problem, float]:
    """The problem of preset ``spec`` with ``loss`` (λ = 1/n, Section 4) and its f* (Newton-CG to
    ‖∇f‖ ≤ 1e-12)."""
    from ..data.presets import make_preset, parse_preset_spec
    from ..problems.optimum import solve

    name, overrides = parse_preset_spec(spec)
    problem = Problem(make_preset(name, **overrides), loss)
    return problem, float(solve(problem, gtol=1e-12, use_cache=False).objective)
