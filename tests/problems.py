"""The small random problems the unit tests share: one generator per kind of data, each test
module calling it with its own sizes.

- :func:`sparse_problem`: SciPy's random sparse pattern with normal values, labels from a
  planted linear model, nodes at random, by label (non-IID) or equal-sized.
- :func:`masked_data`: dense normal values under a random mask, with a bias column (on every
  node) and a column in no example (ω = 0), labels from a planted model, nodes at random,
  sorted by the target into unbalanced contiguous groups, or of given sizes.
- :func:`random_rows`: dense normal values under a random mask and labels drawn at random (no
  model to learn: for identities and bookkeeping, not for convergence), nodes at random.

The random draws come in a fixed order, so a seed names one data set.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fedviz.data.dataset import FederatedDataset
from fedviz.problems.losses import make_loss
from fedviz.problems.objective import Problem


def sparse_problem(loss="logistic", *, n: int, d: int, K: int, lam: float | None, seed: int = 0,
                   density: float, partition: str = "noniid") -> Problem:
    """Partitions: 'iid' (random nodes, unequal sizes), 'noniid' (nodes by label or by the sign of
    the target, unequal), 'equal-iid' and 'equal-noniid' (n/K rows per node, shuffled or sorted by
    the first feature).  ``lam=None`` is 1/n."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=seed, format="csr")
    X.data = rng.normal(size=X.nnz)
    loss = make_loss(loss) if isinstance(loss, str) else loss
    w_true = rng.normal(size=d)
    if loss.task == "regression":
        y = X @ w_true + 0.1 * rng.normal(size=n)
    else:
        y = np.where(X @ w_true + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    if partition == "iid":
        nodes = rng.integers(0, K, n)
    elif partition == "noniid":
        nodes = (y > 0) * (K // 2) + rng.integers(0, K // 2, n)
    elif partition in ("equal-iid", "equal-noniid"):
        assert n % K == 0
        order = rng.permutation(n) if partition == "equal-iid" else np.argsort(X[:, 0].toarray().ravel())
        nodes = np.empty(n, dtype=np.int64)
        nodes[order] = np.repeat(np.arange(K), n // K)
    else:
        raise ValueError(f"unknown partition {partition!r}")
    return Problem(FederatedDataset.from_assignment(X, y, nodes), loss, 1.0 / n if lam is None else lam)


def masked_data(*, n: int, d: int, K: int, density: float, seed: int = 0, regression: bool = False,
                partition: str = "iid", sizes=None, explicit_zero: bool = False):
    """(data set, dense X, y).  Partitions: 'iid' (random nodes), 'sorted' (contiguous groups of
    the rows ranked by a noisy target, at random cut points: non-IID and unbalanced), or the node
    ``sizes`` given.  ``explicit_zero`` stores one zero value (stored, but not an appearance of its
    feature)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    X[:, 0] = 1.0   # a bias column: on every node
    X[:, -1] = 0.0  # a feature in no example
    t = X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
    y = t if regression else np.where(t > 0, 1.0, -1.0)
    if sizes is not None:
        nodes = np.repeat(np.arange(len(sizes)), sizes)
    elif partition == "iid":
        nodes = rng.integers(0, K, n)
    elif partition == "sorted":
        cuts = np.sort(rng.choice(np.arange(1, n), K - 1, replace=False))
        rank = np.argsort(np.argsort(t + 0.3 * rng.normal(size=n)))
        nodes = np.searchsorted(cuts, rank, side="right")
    else:
        raise ValueError(f"unknown partition {partition!r}")
    Xs = sp.csr_matrix(X)
    if explicit_zero:
        Xs.data[3] = 0.0
    meta = {"task": "regression" if regression else "classification"}
    return FederatedDataset.from_assignment(Xs, y, nodes, meta=meta), X, y


def random_rows(*, n: int, d: int, density: float, seed: int = 0, regression: bool = False,
                positive_rate: float = 0.5, nodes: int = 4, assigned: int | None = None):
    """(X, y, node_of_row): masked normal rows, random labels (+1 with ``positive_rate``, or normal
    targets), and a random node for each of the first ``assigned`` rows (default: all)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    y = rng.normal(size=n) if regression else np.where(rng.random(n) < positive_rate, 1.0, -1.0)
    return X, y, rng.integers(0, nodes, size=n if assigned is None else assigned)


# -- a dense logistic-regression oracle (NumPy and SciPy, no fedviz) ------------------------------------
def logistic_f(X, y, lam, w) -> float:
    """mean log(1 + exp(−y·Xw)) + λ/2‖w‖², densely."""
    return float(np.mean(np.logaddexp(0, -y * (X @ w))) + 0.5 * lam * w @ w)


def logistic_grad(X, y, lam, w) -> np.ndarray:
    return -(X.T @ (y / (1 + np.exp(y * (X @ w))))) / len(y) + lam * w


def dense_gd(X, y, lam, h, T) -> np.ndarray:
    """T steps of GD at step h on :func:`logistic_f` from w = 0."""
    w = np.zeros(X.shape[1])
    for _ in range(T):
        w = w - h * logistic_grad(X, y, lam, w)
    return w


def dense_bb_gd_path(X, y, lam, h, T, f_and_g=None, size=None, w0=None) -> list[np.ndarray]:
    """fedviz's default GD written out densely: each of T rounds evaluates f and ∇f at the trial point
    (``f_and_g``, default :func:`logistic_f` and :func:`logistic_grad`); a trial where f did not rise is
    accepted and the next step is sᵀy/yᵀy (Barzilai–Borwein, from the last two accepted points), else the
    last accepted point is kept and h halved.  The first step is h from ``w0`` (default 0, of ``size`` entries,
    default d).  Returns the last accepted
    point after each round (the model the algorithm shows)."""
    if f_and_g is None:
        def f_and_g(w):
            return logistic_f(X, y, lam, w), logistic_grad(X, y, lam, w)
    trial = np.zeros(X.shape[1] if size is None else size) if w0 is None else np.array(w0, dtype=float)
    accepted, path = None, []
    for _ in range(T):
        f, g = f_and_g(trial)
        if accepted is None or f <= accepted[1]:
            if accepted is not None:
                s, dg = trial - accepted[0], g - accepted[2]
                h = (s @ dg) / (dg @ dg)
            accepted = (trial, f, g)
        else:
            h /= 2
        path.append(accepted[0])
        trial = accepted[0] - h * accepted[2]
    return path


def dense_bb_gd(X, y, lam, h, T) -> np.ndarray:
    """The model after T rounds of :func:`dense_bb_gd_path` on :func:`logistic_f`."""
    return dense_bb_gd_path(X, y, lam, h, T)[-1]


def logistic_f_star(X, y, lam) -> float:
    """min :func:`logistic_f` by SciPy's L-BFGS-B, to its tightest tolerances."""
    from scipy.optimize import minimize

    res = minimize(lambda w: logistic_f(X, y, lam, w), np.zeros(X.shape[1]), method="L-BFGS-B",
                   jac=lambda w: logistic_grad(X, y, lam, w),
                   options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000})
    return float(res.fun)
