"""The memory a problem's model costs, estimated from its sizes before anything of that size is allocated.

The data are budgeted where they are read (a file's bytes, rows and width; a preset's entries,
``FEDVIZ_MAX_ENTRIES``), but the model d × C is not bounded by them (issue 32, point 1): a 143 KB file
of 200 classes over 5,000 features asked the optimum's block preconditioner for d C² = 200 million
floats twice (3.2 GB; the server reached 9 GB), and 5,000 classes × 20,000 features met numpy's
"Unable to allocate 3.64 TiB" after 10 s.  Every run, the Data page and every experiment cell compute
the optimum f* (:mod:`fedviz.problems.optimum`), the most memory any of them asks for, so a
:class:`~fedviz.problems.objective.Problem` checks its estimate when it is made, in microseconds, and
refuses in one sentence naming the sizes and the limit: the same gate for uploads, links, the command
line and experiments.

The estimate follows the optimum's code path by path, in 8-byte floats (``tests/unit/test_budget.py``
holds it above the allocations tracemalloc counts and within a few times of them):

- every path: the model-sized vectors of Newton-CG (w, ∇f, the step, CG's four vectors, ...) and the
  margin-sized ones (X w, X p, the loss's derivatives and curvatures; the test rows' margins);
- C = 1: the squared entries of X (the diagonal preconditioner);
- C > 1 with a small model: the dense Hessian (dC)² three times (itself, a slab's Yᵀ Y, its Cholesky
  factor) and a slab of rows of X made dense;
- C > 1 otherwise: each feature's C × C curvature block and its inverse, 2 d C².

Each algorithm declares the same for itself (:class:`StateSize`, ``Algorithm.state``): the floats it holds per
entry, support slot, row, weight and node model, of which the model's part is checked when it is made
(:func:`check_state`).

``FEDVIZ_MAX_MODEL_MB`` sets the limit (default :data:`MAX_MODEL_MB`) per problem; a server's runs
are bounded by its run slots (``FEDVIZ_MAX_RUNS``), so its whole use is at most the slots times this.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import FedvizError
from ..validation import env_int

#: Megabytes the optimum of one problem, or an algorithm's model, may use, unless ``FEDVIZ_MAX_MODEL_MB`` says
#: otherwise: the paper's google-plus at full scale needs about 326; a 200-class softmax over 5,000 features 3,300.
MAX_MODEL_MB = 1024

_FLOAT = 8
#: Model-sized vectors Newton-CG holds at once (w, ∇f, step, trial w, CG's x, r, z, p, Hp; slack for temporaries).
_MODEL_VECTORS = 12
#: Margin-sized arrays (z, trial z, X p, φ', φ'' and a temporary).
_MARGIN_VECTORS = 6


def max_model_mb() -> int:
    return env_int("FEDVIZ_MAX_MODEL_MB", MAX_MODEL_MB, low=1)


@dataclass(frozen=True)
class ModelMemory:
    """What the optimum of a problem would allocate: ``bytes`` in all, ``method`` the path its sizes
    choose, ``largest`` the biggest part in words (for the refusal)."""

    bytes: int
    method: str
    largest: str

    @property
    def mb(self) -> float:
        return self.bytes / 1e6


def optimum_memory(*, n: int, n_test: int, d: int, classes: int, nnz: int) -> ModelMemory:
    """The optimum's working memory for n training rows (nnz stored entries), n_test test rows, d features
    and a model of ``classes`` columns (1: binary or regression)."""
    from .optimum import _DENSE_ROWS, dense_ok  # the optimum's own rule for its path

    C, dC = classes, d * classes
    base = _FLOAT * (_MODEL_VECTORS * dC + _MARGIN_VECTORS * n * C + n_test * C)
    if C == 1:
        return ModelMemory(base + _FLOAT * nnz, "Newton-CG, diagonal preconditioner",
                           f"the squared entries of X ({nnz:,})")
    if dense_ok(n=n, size=dC):
        slab = min(n, _DENSE_ROWS)
        return ModelMemory(base + _FLOAT * (3 * dC * dC + slab * (2 * d + 2 * dC)), "Newton with the dense Hessian",
                           f"the Hessian ({dC:,} × {dC:,})")
    return ModelMemory(base + _FLOAT * 2 * d * C * C, "Newton-CG, block preconditioner",
                       f"each feature's {C:,} × {C:,} curvature block and its inverse")


def check_model(*, n: int, n_test: int, d: int, classes: int, nnz: int, budget_mb: int | None = None) -> ModelMemory:
    """The estimate of :func:`optimum_memory`, or :class:`FedvizError` in one sentence when it is over
    ``budget_mb`` (default: :func:`max_model_mb`)."""
    need = optimum_memory(n=n, n_test=n_test, d=d, classes=classes, nnz=nnz)
    budget = max_model_mb() if budget_mb is None else budget_mb
    if need.mb > budget:
        model = (f"{d:,} features × {classes:,} classes = {d * classes:,} weights" if classes > 1
                 else f"{d:,} weights")
        fix = "fewer classes or fewer features" if classes > 1 else "fewer features or rows"
        raise FedvizError(f"this model ({model}, {n:,} rows) needs about {_size_text(need.mb)} to find its optimum "
                          f"f* ({need.largest}), over this server's limit of {budget:,} MB per problem "
                          f"(FEDVIZ_MAX_MODEL_MB); use {fix}")
    return need


@dataclass(frozen=True)
class StateSize:
    """The floats an algorithm holds while it runs, per unit of its problem's sizes: per stored entry of X
    (copies, orders, per-entry scratch), per (node, feature) pair of the nodes' supports, per training
    row, per weight of the model (dC) and per node's dense model (K dC: Ditto's and APFL's personal
    models).  The support, row and weight terms count C floats each (a softmax model's slots, margins
    and weights); threads' scratch is a model each, counted in ``model``.

    Each algorithm declares its own (``Algorithm.state``); ``tests/unit/test_budget.py`` runs every
    algorithm of the registry and holds the estimate above what tracemalloc counts."""

    entries: float = 0
    support: float = 0
    rows: float = 2
    model: float = 4
    node_models: float = 0

    def bytes(self, *, n: int, nnz: int, support: int, d: int, classes: int, nodes: int) -> int:
        """Everything: what tracemalloc is held against."""
        C = classes
        floats = (self.entries * nnz + C * (self.support * support + self.rows * n + self.model * d)
                  + self.node_models * nodes * d * C)
        return int(_FLOAT * floats)

    def model_bytes(self, *, n: int, nnz: int, support: int, d: int, classes: int, nodes: int) -> int:
        """The part the model's size makes: the weights (dC) and what the C − 1 classes beyond a binary
        model add per row and per support slot.  A binary model's per-entry, per-row and per-slot floats grow
        with the data alone and are bounded by the data's budget (``FEDVIZ_MAX_ENTRIES``; the paper-scale
        google-plus runs every algorithm within it); the node models (K dC) are refused by their own budget,
        with their own sentence (:data:`fedviz.algorithms.ditto.PERSONAL_VALUES`)."""
        C = classes
        floats = (C - 1) * (self.support * support + self.rows * n) + C * self.model * d
        return int(_FLOAT * floats)


def _sizes(problem, support: bool = True) -> dict:
    """The sizes a :class:`StateSize` counts; ``support=False`` leaves the nodes' supports uncounted (0), so
    that a binary problem's check does not build them (at paper scale, seconds and 240 MB GD never needs)."""
    data = problem.data
    return dict(n=data.n, nnz=data.X.nnz, support=int(data.support.col.size) if support else 0, d=data.d,
                classes=problem.n_classes, nodes=data.n_nodes)


def state_bytes(state: StateSize, problem) -> int:
    """``state``'s bytes on ``problem``'s sizes, everything counted."""
    return state.bytes(**_sizes(problem))


def state_model_bytes(state: StateSize, problem) -> int:
    """The part of ``state``'s bytes on ``problem`` that the model's size makes (:meth:`StateSize.model_bytes`)."""
    # The supports count only through the C − 1 classes beyond a binary model.
    return state.model_bytes(**_sizes(problem, support=problem.n_classes > 1 and state.support > 0))


def node_block_bytes(problem, cache_bytes: int) -> int:
    """The node blocks of the primal and dual methods (Algorithms 5 and 6): node k's m × m matrix, m =
    min(n_k, |S_k|), formed and factored (two of the largest at once) and the factors cached up to
    ``cache_bytes``: quadratic in a node's size, so not a :class:`StateSize` term."""
    data = problem.data
    m = np.minimum(np.diff(data.offsets), np.diff(data.support.ptr)).astype(np.float64)
    if m.size == 0:
        return 0
    return int(_FLOAT * (2 * float(m.max()) ** 2) + min(cache_bytes, _FLOAT * float(np.sum(m * m))))


def check_state(title: str, need: int, problem, budget_mb: int | None = None) -> int:
    """``need`` (the bytes an algorithm's model would make it hold on ``problem``), or :class:`FedvizError` in
    one sentence when it is over ``budget_mb`` (default: :func:`max_model_mb`): before any of it exists."""
    data = problem.data
    budget = max_model_mb() if budget_mb is None else budget_mb
    if need / 1e6 > budget:
        raise FedvizError(f"{title} would hold about {_size_text(need / 1e6)} on this problem ({data.n:,} rows, "
                          f"{data.d:,} features × {problem.n_classes:,} classes, {data.n_nodes:,} nodes), over this "
                          f"server's limit of {budget:,} MB per run (FEDVIZ_MAX_MODEL_MB); use fewer classes, "
                          "features or nodes")
    return need


def _size_text(mb: float) -> str:
    """1,234 MB; 12.3 GB; 8.0 TB: a size in the unit that keeps it short."""
    if mb < 10_000:
        return f"{mb:,.0f} MB"
    if mb < 1_000_000:
        return f"{mb / 1e3:,.1f} GB"
    return f"{mb / 1e6:,.1f} TB"
