"""FedProx's gradient dissimilarity: how far the nodes' gradients stray from the global one.

Li et al. (2020, FedProx), Definition 3 (B-local dissimilarity) bounds E_k‖∇F_k(w)‖² ≤ B²‖∇f(w)‖²
with E_k over the devices weighted by p_k = n_k/n.  Their Figure 2 (bottom row) plots instead
"the variance of local gradients", which their code (``flearn/trainers/fedprox.py``, the
"gradient difference" it prints) computes as the *unweighted* mean over devices

    D(w) = (1/K) Σ_k ‖∇F_k(w) − ∇f(w)‖²,   ∇f(w) = Σ_k p_k ∇F_k(w)   (the paper's eq. (6)).

:func:`local_dissimilarity` returns this D (the figure's quantity); with ``weighted`` it returns
Σ_k p_k ‖∇F_k(w) − ∇f(w)‖², the variance term of Definition 3, for which
E_k‖∇F_k‖² = ‖∇f‖² + Σ_k p_k ‖∇F_k − ∇f‖² exactly.  The regulariser λw is in every ∇F_k alike
(each f_i carries it, eq. (1)), so it cancels in each difference: only the data parts of
:meth:`~fedviz.problems.objective.Problem.node_grads_data` enter.  The cost is one pass over the
data (one full gradient, or none more than the margins the caller has), for any C (a node's
gradient is its d × C block, the model's shape).
"""

from __future__ import annotations

import numpy as np

from .objective import Problem

def local_dissimilarity(problem: Problem, w: np.ndarray, *, weighted: bool = False,
                        z: np.ndarray | None = None) -> float:
    """(1/K) Σ_k ‖∇F_k(w) − ∇f(w)‖² (``weighted``: Σ_k p_k ‖∇F_k(w) − ∇f(w)‖²) at the flat model ``w``
    (``z``: its margins X W, when the caller has them).

    Nodes without training rows have no F_k and are left out of the mean (they are counted in
    neither K nor the weights)."""
    w = np.asarray(w, dtype=np.float64)
    z = problem.margins(w) if z is None else z
    r = problem.loss.deriv(z, problem.y)                 # φ'_i(x_iᵀW): n, or n × C
    r = r.reshape(problem.n, -1)
    X, data = problem.X, problem.data
    sizes = np.asarray(data.node_sizes, dtype=np.float64)
    g = np.asarray(X.T @ r) / sizes.sum()                # ∇f's data part, (1/n) Xᵀ φ' = Σ_k p_k ∇F_k, d × C
    present = sizes > 0
    weights = sizes / sizes.sum() if weighted else present / max(int(present.sum()), 1)
    total = 0.0
    # Node by node, ‖G_k − g‖² directly with G_k = (1/n_k) X_kᵀ φ'_k (d × C): no K × dC matrix, and
    # no ‖G_k‖² − 2G_k·g + ‖g‖², which cancels catastrophically when the nodes agree (IID data).
    for k in np.flatnonzero(present):
        rows = data.node_slice(int(k))
        diff = np.asarray(X[rows].T @ r[rows]) / sizes[k] - g
        total += float(weights[k]) * float(np.einsum("ij,ij->", diff, diff))
    return total


__all__ = ["local_dissimilarity"]
