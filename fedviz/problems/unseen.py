"""The problem of the unseen nodes (issue 23, point 2): the held-out nodes' data with the training
problem's loss, λ and model shape, so that a model trained on the seen nodes can be scored on them,
or fine-tuned from (their F_k of eq. (6) with the same λ).  See :mod:`fedviz.data.unseen`."""

from __future__ import annotations

import numpy as np

from .objective import Problem

__all__ = ["unseen_problem", "unseen_baselines"]


def unseen_problem(problem: Problem) -> Problem | None:
    """The :class:`Problem` on ``problem.data.unseen`` with ``problem``'s loss, λ and number of
    outputs C; None when the data set holds no unseen nodes.

    λ is the training problem's own (1/n of the *seen* rows by default), not 1/n of the unseen
    rows: a new client's F_k(w) = (1/n_k) Σ φ_i(x_iᵀw) + (λ/2)‖w‖² is the same function of w as a
    seen node's.  C is the training problem's too: the model is d × C whatever classes the unseen
    nodes hold (a class the seen nodes never showed is one the global model cannot predict, and
    its test rows count as errors).

    For fine-tuning the new clients (pFL-Bench's "fine-tune before evaluation"), hand it to the
    personalisation API as the training problem was: ``personalise(unseen_problem(p), config, w_star)``
    with ``w_star`` the global model trained on ``p``."""
    unseen = getattr(problem.data, "unseen", None)
    if unseen is None:
        return None
    p = Problem.__new__(Problem)
    # Problem.__init__ would re-derive C from the unseen labels alone (fewer classes, or a softmax
    # code beyond the model's): the fields are set as __init__ sets them, with C the model's.
    for name, value in (("data", unseen), ("loss", problem.loss), ("lam", problem.lam),
                        ("n_classes", problem.n_classes)):
        object.__setattr__(p, name, value)
    return p


def unseen_baselines(problem: Problem, w_star) -> dict:
    """The Data page's baselines on the unseen nodes' test rows (Section 4.1's, for new clients):
    ``majority``, the seen training rows' majority class for every row; ``node_majority``, each
    unseen node's own majority training class (a personal baseline: it reads the node's training
    rows, as fine-tuning does); ``optimum``, the global optimum ``w_star`` of the seen nodes.
    Empty without unseen nodes; the first two only for classification; NaN without test rows."""
    from ..data.baselines import node_majority_test_error
    from ..data.labels import dataset_classes, dataset_label_counts, majority_class

    u = unseen_problem(problem)
    if u is None:
        return {}
    out = {"optimum": u.test_error(w_star)}
    ds = problem.data
    if ds.task == "classification":
        top = dataset_classes(ds)[majority_class(dataset_label_counts(ds))]
        out["majority"] = float(np.mean(u.data.y_test != top)) if u.data.y_test.size else float("nan")
        out["node_majority"] = node_majority_test_error(u.data)
    return out
