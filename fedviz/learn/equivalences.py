"""The paper's two equivalences as overlaid runs whose distance is measured.

- **Proposition 1** (Section 3.5): DANE (Algorithm 2) with η = 1, μ = 0 and one SVRG pass
  (Algorithm 1, started at w^t) as the solver of its subproblem, eq. (10), generates the same
  iterates as naive FSVRG (Algorithm 3), given the same samples (the Remark after it).
- **Theorem 5** (Appendix A, "Equivalence of Algorithms 5 and 6 for Quadratic Loss"): for ridge
  regression and the same α^0, the Primal Method's iterates w^t are the image (1/(λn)) X α^t,
  eq. (14), of the Dual Method's α^t.

Each function steps both methods side by side, from the same start, and records both curves
(f(w^t) − f*) and the distance between the two iterates at every t — the same figures
:func:`fedviz.properties.proposition_1` and :func:`fedviz.properties.theorem_5` check, plus the
curves a page overlays.  The distance, not the curves, is the evidence: two different sequences
can have close objective values, two equal ones cannot be apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..problems.objective import Problem

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
    from ..algorithms.dane import DANE
    from ..algorithms.naive_fsvrg import NaiveFSVRG

    hyper = {k: v for k, v in (("local_steps", local_steps), ("stepsize", stepsize)) if v is not None}
    dane = DANE(problem, seed=seed, eta=1.0, mu=0.0, solver="svrg", local_passes=1, **hyper)
    naive = NaiveFSVRG(problem, seed=seed, **hyper)
    first, second, dist = [], [], []
    scale, ok = 0.0, True
    for t in range(T + 1):
        if t:
            dane.step()
            naive.step()
        wd, wn = np.asarray(dane.w), np.asarray(naive.w)
        first.append(problem.value(wd) - f_star)
        second.append(problem.value(wn) - f_star)
        size = float(np.abs(wn).max(initial=0.0))
        diff = float(np.abs(wd - wn).max(initial=0.0))
        dist.append(diff)
        scale = max(scale, size)
        ok = ok and diff <= rtol * max(1.0, size)
    m = naive.m
    settings = (f"η = 1, μ = 0, one SVRG pass of m = {m} steps with h = {naive.h:.3g} on each of "
                f"K = {problem.data.n_nodes} nodes; seed {seed}")
    return Overlay(name="Proposition 1", labels=("DANE, one SVRG pass", "naive FSVRG"),
                   iterations=tuple(range(T + 1)), first=tuple(map(float, first)), second=tuple(map(float, second)),
                   distances=tuple(dist), distance=max(dist), scale=scale, rtol=rtol, holds=bool(ok),
                   settings=settings)


def theorem_5_overlay(problem: Problem, f_star: float, *, iterations: int = 10, sigma: float | None = None,
                      start: str = "zero", seed: int = 0, rtol: float = 1e-9) -> Overlay:
    """Theorem 5: the Primal Method (Algorithm 5) against the image (1/(λn)) X α^t of the Dual
    Method (Algorithm 6), both with ``sigma`` (None: K) and the same α^0: 0 (``start="zero"``) or
    drawn N(0, 1) with ``seed`` (``start="random"``).  Ridge regression only (the squared loss)."""
    from .matrix import one_thread

    T = _check_iterations(iterations)
    if problem.loss.name != "squared":
        raise ParameterError("loss", problem.loss.name, "squared (Theorem 5 is about ridge regression)")
    if start not in ("zero", "random"):
        raise ParameterError("start", start, "zero or random")
    alpha0 = (np.zeros(problem.n) if start == "zero"
              else np.random.default_rng(seed).normal(size=problem.n))
    with one_thread():
        return _theorem_5(problem, f_star, T, sigma, alpha0, start, seed, rtol)


def _theorem_5(problem, f_star, T, sigma, alpha0, start, seed, rtol) -> Overlay:
    from ..algorithms.dual_method import DualMethod, primal_image
    from ..algorithms.primal_method import PrimalMethod

    primal = PrimalMethod(problem, sigma=sigma, alpha0=alpha0)
    dual = DualMethod(problem, sigma=sigma, alpha0=alpha0)
    first, second, dist = [], [], []
    scale = 0.0
    for t in range(T + 1):
        if t:
            primal.step()
            dual.step()
        image = primal_image(problem, dual.alpha)
        wp = np.asarray(primal.w)
        first.append(problem.value(wp) - f_star)
        second.append(problem.value(image) - f_star)
        size = float(np.abs(image).max(initial=0.0))
        dist.append(float(np.abs(wp - image).max(initial=0.0)) / max(1.0, size))
        scale = max(scale, size)
    holds = all(x <= rtol for x in dist)
    K = problem.data.n_nodes
    settings = (f"σ = {primal.sigma:g} (η = K/σ = {K / primal.sigma:.3g}) on K = {K} nodes; α⁰ = "
                + ("0" if start == "zero" else f"N(0, 1) draws, seed {seed}"))
    if not all(math.isfinite(x) for x in first + second):
        settings += "; the runs left the finite numbers"
    return Overlay(name="Theorem 5", labels=("Primal method (Alg. 5)", "image of the dual method (Alg. 6)"),
                   iterations=tuple(range(T + 1)), first=tuple(map(float, first)), second=tuple(map(float, second)),
                   distances=tuple(dist), distance=max(dist), scale=scale, rtol=rtol, holds=bool(holds),
                   settings=settings)


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
