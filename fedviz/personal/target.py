"""The exact target of an iterative personalised run (issue 23, point 3, and its acceptance: "the
iterative Ditto run's personal models approach the exact v_k(λ)").

Ditto (Li, Hu, Beirami & Smith 2021, eq. (2); :mod:`fedviz.algorithms.ditto`) solves, per node k,

    v_k(λ_D) = argmin_v  F_k(v) + (λ_D/2)‖v − w*‖²,

F_k the paper's local objective, eq. (6), and w* the optimum of f, eq. (1).  For a linear model the
problem is strongly convex and :class:`~fedviz.personal.models.Personaliser` solves it exactly
(Newton per node on its support, closed form off it).  The execution seam
(:func:`fedviz.runner.execute.execute`) solves it for every job that asks (``RunJob.personal_targets``,
on by default: a Run click, ``fedviz run`` and an experiment's cells alike) and gives a run that
K × d array once, before its first iteration; each record then carries the root mean square over the
nodes of ‖v_k − v_k(λ_D)‖ (``personal_distance``) beside the personal models' test errors.

The array is dense (row k is v_k(λ_D)), the layout of Ditto's own models, so it is made only within
Ditto's budget :data:`~fedviz.algorithms.ditto.PERSONAL_VALUES` (a problem beyond it is refused by
Ditto itself).  APFL has no such target here: its mixture's exact counterpart is the Local model
mixed with w, which its iterate approaches only as its local model converges (its own paper).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import numpy as np

from ..algorithms.base import Algorithm
from ..algorithms.ditto import PERSONAL_VALUES, Ditto
from .models import Personaliser

__all__ = ["CONVERGENCE_NOTE", "target_lambda", "exact_target", "target_sentence"]


def target_lambda(cls: type[Algorithm], hp) -> float | None:
    """λ_D of a run whose personal models have an exact target (Ditto and its subclasses), else None."""
    if not (isinstance(cls, type) and issubclass(cls, Ditto)):
        return None
    return float(hp["ditto_lambda"])


def exact_target(problem, cls: type[Algorithm], hp, w_star: np.ndarray,
                 check_stop: Callable[[], None] | None = None) -> np.ndarray | None:
    """The K × d array of the exact Ditto models v_k(λ_D) (row k: node k's) for the run of ``cls``
    with hyperparameters ``hp`` on ``problem``, w* = ``w_star``; None when ``cls`` has no exact
    target or K · d exceeds :data:`~fedviz.algorithms.ditto.PERSONAL_VALUES` (Ditto refuses that
    run).  Solved by :meth:`Personaliser.ditto <fedviz.personal.models.Personaliser.ditto>`;
    ``check_stop`` is called between its large operations (it raises to stop)."""
    lam_d = target_lambda(cls, hp)
    if lam_d is None or problem.data.n_nodes * problem.size > PERSONAL_VALUES:
        return None
    return Personaliser(problem, check_stop).ditto(lam_d, w_star).dense()


def target_sentence(lambdas: Mapping[str, float], K: int) -> str:
    """What the distance chart measures against, in one sentence: ``lambdas`` maps each run given a
    target (label) to its λ_D; ``K`` is the number of nodes (the seen ones)."""
    def show(x):
        return f"{x:.4g}" if math.isfinite(x) else "∞"

    values = list(dict.fromkeys(float(v) for v in lambdas.values()))
    if len(values) == 1:
        which = f"this run's λ_D = {show(values[0])}"
    else:
        which = "each run's λ_D (" + ", ".join(f"{label}: {show(v)}" for label, v in lambdas.items()) + ")"
    return (f"The exact target is v_k(λ_D) = argmin_v F_k(v) + (λ_D/2)‖v − w*‖² with {which} and w* the "
            f"optimum of f, solved node by node by Newton's method; the line is the root mean square over the "
            f"{K:,} nodes of ‖v_k − v_k(λ_D)‖.")


#: When the distance falls to 0 (tested on google-plus-small, from w*): the conditions under which
#: Ditto's global model is GD on f (:mod:`fedviz.algorithms.ditto`).
CONVERGENCE_NOTE = ("With every node each round, full local batches and one local epoch the global model is "
                    "gradient descent on f, and the distance falls towards 0; sampled nodes or minibatches leave "
                    "the personal models in a noise ball around v_k(λ_D) whose size falls with the step.")
