"""The objective f(W) = (1/n) Σ_i φ_i(Wᵀx_i) + (λ/2)‖W‖²_F of the paper's eqs. (1) and (11).

:class:`Problem` binds a federated data set, a loss and λ.  It evaluates f, ∇f and
Hessian-vector products with two sparse matrix-vector products each (the memory-bound
floor every algorithm is measured against), and the per-node quantities F_k and ∇F_k
of eq. (6).

The model's shape (issue 22).  The problem owns the number of outputs C (the loss's, from the
labels: 1 for binary classification and regression) and the model's shape (d, C), row-major as
scikit-learn's ``coef``: a feature's C weights are contiguous.  Its methods take the model flat,
a vector of length :attr:`Problem.size` = dC (the layout the optimum and every algorithm work
in), and :meth:`Problem.as_model` / :meth:`Problem.flat` convert between the two views without
a copy.  Margins are n × C, kept as a vector of length n when C = 1: for C = 1 the flat model
*is* the weight vector w ∈ R^d of the paper, and every computation is the binary one, operation
for operation.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..data.baselines import classification_error
from ..data.dataset import FederatedDataset
from ..errors import ParameterError
from ._blocks import RowBlocks
from ._cores import single_threaded_blas
from .budget import check_model
from .losses import MULTICLASS_LOSSES, Loss, make_loss

#: λ_max(X_kᵀX_k) of every node, per data set (it depends on neither the loss nor λ).
_NODE_GRAM: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class Problem:
    """A federated L2-regularised empirical risk minimisation problem.

    Parameters
    ----------
    data : FederatedDataset
    loss : Loss or str
    lam : float or None
        The regulariser λ > 0; None means λ = 1/n as in the paper's experiment.
    """

    data: FederatedDataset
    loss: Loss
    lam: float
    #: C, the outputs per example (the model is d × C): 1 for binary classification and regression.
    #: Derived from the loss and the labels, never passed (``dataclasses.replace`` re-derives it).
    n_classes: int = field(init=False)

    def __init__(self, data: FederatedDataset, loss: Loss | str = "logistic", lam: float | None = None):
        loss = make_loss(loss)
        if lam is None:
            lam = 1.0 / data.n
        if not (isinstance(lam, (int, float, np.floating)) and np.isfinite(lam) and lam > 0):
            raise ParameterError("lam", lam, "number > 0 (default 1/n)")
        multiclass = bool(getattr(data, "multiclass", False))
        if multiclass and loss.name not in MULTICLASS_LOSSES:  # a binary or regression loss on class codes
            raise ParameterError("loss", loss.name, f"'softmax': the data hold {data.n_classes} classes; for a "
                                 "binary loss choose a positive class (one-vs-rest)")
        n_classes = int(loss.n_outputs(data.y, data.y_test))
        if loss.task == "classification" and n_classes == 1:
            bad = ~np.isin(data.y, (-1.0, 1.0))
            if np.any(bad):
                raise ParameterError("loss", loss.name,
                                     "a regression loss ('squared'): the labels are not ±1")
        # The model's memory, before anything of its size is allocated (issue 32: d × C is not bounded by
        # the data's budget); refused in one sentence over FEDVIZ_MAX_MODEL_MB.
        check_model(n=data.n, n_test=data.X_test.shape[0], d=data.d, classes=n_classes, nnz=data.X.nnz)
        single_threaded_blas()  # every computation starts from a Problem
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "loss", loss)
        object.__setattr__(self, "lam", float(lam))
        object.__setattr__(self, "n_classes", n_classes)

    # -- shorthands ------------------------------------------------------------------------
    @property
    def X(self) -> sp.csr_matrix:
        return self.data.X

    @property
    def y(self) -> np.ndarray:
        return self.data.y

    @property
    def n(self) -> int:
        return self.data.n

    @property
    def d(self) -> int:
        return self.data.d

    @property
    def shape(self) -> tuple[int, int]:
        """The model's shape (d, C), row-major."""
        return (self.data.d, self.n_classes)

    @property
    def size(self) -> int:
        """dC: the length of the flat model every method takes (d for C = 1)."""
        return self.data.d * self.n_classes

    @property
    def margin_shape(self) -> tuple[int, ...]:
        """The margins' shape: (n, C), or (n,) for C = 1 (the binary vector of margins)."""
        return (self.data.n,) if self.n_classes == 1 else (self.data.n, self.n_classes)

    def as_model(self, w: np.ndarray) -> np.ndarray:
        """The flat model ``w`` (length dC) as the d × C matrix W, a view (row j: feature j's C weights)."""
        w = np.asarray(w)
        if w.shape != (self.size,):
            raise ParameterError("w", f"shape {w.shape}", f"a flat model of length dC = {self.size}")
        return w.reshape(self.shape)

    def flat(self, W: np.ndarray) -> np.ndarray:
        """The d × C model ``W`` as the flat vector the methods take (a view of row-major W)."""
        W = np.asarray(W)
        if W.shape != self.shape:
            raise ParameterError("W", f"shape {W.shape}", f"a model of shape (d, C) = {self.shape}")
        return W.reshape(self.size)

    def zero_model(self) -> np.ndarray:
        """The flat model 0 (length dC)."""
        return np.zeros(self.size)

    @property
    def key(self) -> tuple:
        """Identifies the problem for caching: (data fingerprint, loss, λ)."""
        return (self.data.fingerprint, self.loss.key, self.lam)

    @property
    def XT(self):
        """Xᵀ as a CSC view of X (no copy): SciPy's Xᵀr over a CSR X is its fastest form,
        about five times faster than a materialised CSR transpose."""
        return self.X.T

    @cached_property
    def blocks(self) -> RowBlocks:
        """X as row blocks for products on every core (:meth:`matvec`, :meth:`rmatvec`)."""
        return RowBlocks(self.X)

    @cached_property
    def test_blocks(self) -> RowBlocks:
        return RowBlocks(self.data.X_test)

    def matvec(self, w: np.ndarray) -> np.ndarray:
        """The margins X W of the flat model ``w``: X w (length n) on every core for C = 1."""
        if self.n_classes == 1:
            return self.blocks.matvec(w)
        return self.blocks.matmat(self.as_model(w))

    def rmatvec(self, r: np.ndarray) -> np.ndarray:
        """Xᵀ R, flat (length dC), for ``r`` shaped like the margins: Xᵀ r on every core for C = 1."""
        if self.n_classes == 1:
            return self.blocks.rmatvec(r)
        return self.blocks.rmatmat(r).reshape(self.size)

    # -- objective ---------------------------------------------------------------------------
    def margins(self, w: np.ndarray) -> np.ndarray:
        """X W for the flat model ``w``: n × C, a vector of length n for C = 1."""
        return self.matvec(w)

    def value(self, w: np.ndarray, z: np.ndarray | None = None) -> float:
        z = self.matvec(w) if z is None else z
        return float(np.mean(self.loss.value(z, self.y)) + 0.5 * self.lam * (w @ w))

    def grad(self, w: np.ndarray, z: np.ndarray | None = None) -> np.ndarray:
        z = self.matvec(w) if z is None else z
        return self.rmatvec(self.loss.deriv(z, self.y) / self.n) + self.lam * w

    def value_grad(self, w: np.ndarray, z: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """f(w) and ∇f(w) with one pass over the margins (a fused kernel where the loss has one)."""
        f, g, _ = self.value_grad_error(w, z)
        return f, g

    def value_grad_error(self, w: np.ndarray, z: np.ndarray | None = None, node_sums: bool = False):
        """f(w), ∇f(w) and the training error (:attr:`error_metric`) together; with ``node_sums``
        also each node's Σ_{i ∈ P_k} φ_i (eq. (6) times n_k) from the same loss values."""
        z = self.matvec(w) if z is None else z
        # The loss's derivatives are shaped like the margins and its error count is the sign's
        # (C = 1); the rest is the same for every C with the model flat.
        if node_sums:
            total, d, errors, sums = self.loss.value_deriv_nodes(z, self.y, self.data.offsets)
        else:
            total, d, errors = self.loss.value_deriv(z, self.y)
        f = total / self.n + 0.5 * self.lam * float(w @ w)
        d /= self.n
        g = self.rmatvec(d)
        g += self.lam * w
        if errors is not None:
            train = errors / self.n if self.n else float("nan")
        else:  # the squared loss counts no sign errors: the metric of the labels, as train_error
            train = self._error(z, self.y)
        return (f, g, train, sums) if node_sums else (f, g, train)

    def curvature(self, w: np.ndarray, z: np.ndarray | None = None):
        """The per-example Hessian blocks D with ∇²f(w) = Xᵀ D X / n + λI (the loss's
        :meth:`~fedviz.problems.losses.Loss.curvature`): for C = 1 the diagonal φ''(x_iᵀw)."""
        z = self.matvec(w) if z is None else z
        return self.loss.curvature(z, self.y)

    def hessp(self, D, v: np.ndarray) -> np.ndarray:
        """∇²f(w) v for the curvature ``D = curvature(w)`` and a flat ``v``."""
        return self.rmatvec(self.loss.curvature_product(D, self.matvec(v))) / self.n + self.lam * v

    # -- per-node quantities (eq. 6: F_k(w) = (1/n_k) Σ_{i ∈ P_k} f_i(w)) -----------------------
    def node_grads_data(self, w: np.ndarray) -> sp.csr_matrix:
        """The data part of each ∇F_k as rows of a K × dC sparse matrix: (1/n_k) X_kᵀ φ'(X_k W),
        flat and row-major as the model (K × d for C = 1)."""
        if self.n_classes == 1:
            z = self.X @ w
            r = self.loss.deriv(z, self.y) / np.repeat(self.data.node_sizes, self.data.node_sizes)
            P = sp.csr_matrix((r, self.data.node_of_row, np.arange(self.n + 1)),
                              shape=(self.n, self.data.n_nodes))
            return (P.T @ self.X).tocsr()
        C, d = self.n_classes, self.d
        R = self.loss.deriv(self.matvec(w), self.y) / np.repeat(self.data.node_sizes, self.data.node_sizes)[:, None]
        parts = [sp.csr_matrix((R[:, c], self.data.node_of_row, np.arange(self.n + 1)),
                               shape=(self.n, self.data.n_nodes)).T @ self.X for c in range(C)]
        # Class blocks side by side put (c, j) at column c·d + j; the model's order is j·C + c.
        order = (np.arange(C)[None, :] * d + np.arange(d)[:, None]).ravel()
        return sp.hstack(parts, format="csr")[:, order]

    # -- constants -----------------------------------------------------------------------------
    @cached_property
    def row_norms_sq(self) -> np.ndarray:
        return np.asarray(self.X.multiply(self.X).sum(axis=1)).ravel()

    @cached_property
    def max_row_norm_sq(self) -> float:
        return float(self.row_norms_sq.max()) if self.n else 0.0

    @cached_property
    def smoothness(self) -> float:
        """L of f: (1/γ) λ_max(XᵀX)/n + λ, with λ_max from Lanczos (a few % accuracy suffices)."""
        return self.loss.smoothness * self.spectral_norm_sq / self.n + self.lam

    @cached_property
    def spectral_norm_sq(self) -> float:
        """λ_max(XᵀX), estimated by Lanczos on the smaller Gram side and rounded up by 1%."""
        X = self.X
        if min(X.shape) <= 200:
            s = np.linalg.svd(X.toarray(), compute_uv=False)
            # Round up past the SVD's rounding error so L stays an upper bound.
            return float(s[0] ** 2) * (1 + 1e-9) if s.size else 0.0
        # XᵀX of the data, whatever C: the row blocks' vector products (the binary ones for C = 1).
        blocks = self.blocks
        op = spla.LinearOperator((X.shape[1], X.shape[1]), matvec=lambda v: blocks.rmatvec(blocks.matvec(v)),
                                 dtype=np.float64)
        val = spla.eigsh(op, k=1, which="LA", tol=1e-3, return_eigenvectors=False,
                         v0=np.ones(X.shape[1]))
        return float(val[0]) * 1.01

    @cached_property
    def max_example_smoothness(self) -> float:
        """L_max = max_i (1/γ)‖x_i‖² + λ: the smoothness of the worst f_i, for stochastic steps."""
        return self.loss.smoothness * self.max_row_norm_sq + self.lam

    @cached_property
    def average_example_smoothness(self) -> float:
        """L̄ = (1/γ) mean_i ‖x_i‖² + λ, the smoothness of an average f_i.

        The stepsize defaults of the SVRG family are fractions of 1/L̄ rather than of
        1/L_max: on sparse data the longest example is many times the average one
        (bag-of-words posts vary in length), and SVRG's worst-case 1/L_max stalls on the rest.
        """
        return self.loss.smoothness * float(self.row_norms_sq.mean()) + self.lam

    @cached_property
    def node_smoothness(self) -> np.ndarray:
        """L_k = (1/γ) λ_max(X_kᵀX_k)/n_k + λ for every node k: the smoothness of F_k (eq. (6)).

        A full-batch local step of 1/max_k L_k is the largest that is a descent step on
        every node (SCAFFOLD's default).  λ_max(X_kᵀX_k) from :meth:`node_gram_norms`.
        """
        sizes = np.maximum(self.data.node_sizes, 1)
        return self.loss.smoothness * (self.node_gram_norms() / sizes) + self.lam

    @cached_property
    def max_node_smoothness(self) -> float:
        """max_k L_k (see :attr:`node_smoothness`): the smoothness of the worst local function F_k."""
        sizes = np.maximum(self.data.node_sizes, 1)
        return self.loss.smoothness * float((self.node_gram_norms() / sizes).max(initial=0.0)) + self.lam

    def node_gram_norms(self, *, rtol: float = 1e-7, max_iter: int = 200) -> np.ndarray:
        """λ_max(X_kᵀX_k) for every node k (0 for an empty node), cached per data set.

        One power iteration on the block-diagonal matrix Diag(X_1, …, X_K) (every node's
        block normalised separately; :meth:`NodeSupport.block_matrix
        <fedviz.data.dataset.NodeSupport.block_matrix>`) finds all K at once, at the cost of
        two passes over X per iteration; iterates stop when the largest ratio λ_k/n_k, the
        only one :attr:`max_node_smoothness` uses, moves by less than ``rtol``.  The
        Rayleigh quotients approach λ_max from below; the result is rounded up by 1%, as
        :attr:`spectral_norm_sq` is, so 1/L_k stays a safe step.
        """
        ds = self.data
        out = _NODE_GRAM.get(ds)
        if out is not None:
            return out
        K = ds.n_nodes
        sup = ds.support
        B = sup.block_matrix()
        BT = B.T.tocsr()
        row_node = ds.node_of_row
        sizes = np.maximum(ds.node_sizes, 1).astype(np.float64)
        # A positive start overlaps the top eigenvector of every block of non-negative data
        # (bag of words); the seeded jitter avoids exact orthogonality on signed data.
        u = np.random.default_rng(0).uniform(0.5, 1.5, size=self.n)
        rq = np.zeros(K)
        last = -1.0
        for it in range(max_iter):
            v = BT @ u
            nu = np.bincount(row_node, weights=u * u, minlength=K)
            nv = np.bincount(sup.node, weights=v * v, minlength=K)
            rq = np.divide(nv, nu, out=np.zeros(K), where=nu > 0)   # uᵀX_kX_kᵀu / uᵀu
            top = float((rq / sizes).max(initial=0.0))
            if it >= 3 and abs(top - last) <= rtol * top:
                break
            last = top
            u = B @ v
            norm = np.sqrt(np.bincount(row_node, weights=u * u, minlength=K))
            u /= np.where(norm > 0, norm, 1.0)[row_node]
        out = rq * 1.01
        _NODE_GRAM[ds] = out
        return out

    @property
    def mean_node_size(self) -> int:
        """round(n/K), at least 1: the default number of local steps of naive FSVRG and DANE."""
        return max(1, int(round(self.n / self.data.n_nodes)))

    # -- metrics --------------------------------------------------------------------------------
    @cached_property
    def error_metric(self) -> str:
        """What :meth:`test_error` and :meth:`train_error` measure, keyed by the labels, not the loss:
        "error", the sign error rate (the share of x with sign(wᵀx) ≠ y), when every training and
        test label is ±1, whatever the loss (ridge regression on ±1 labels is a classifier too,
        and its mean squared error, 0.74 at w* on google-plus-small, is no error rate: its sign
        error there is 26.8%); "mse", the mean squared error (wᵀx − y)², on real-valued targets
        (regression data, which only the squared loss takes).  With C > 1 classes, "error" is the
        share of x whose largest margin is not their class's (argmax)."""
        ds = self.data
        if self.n_classes > 1:
            return "error"
        pm1 = bool(np.all(np.isin(ds.y, (-1.0, 1.0))) and np.all(np.isin(ds.y_test, (-1.0, 1.0))))
        return "error" if pm1 else "mse"

    def _error(self, z: np.ndarray, y: np.ndarray) -> float:
        if y.size == 0:
            return float("nan")
        if self.n_classes > 1:
            return self.loss.errors(z, y) / y.size
        if self.error_metric == "mse":
            return float(np.mean((z - y) ** 2))
        return classification_error(z, y)

    def test_error(self, w: np.ndarray) -> float:
        """The test set's :attr:`error_metric`: sign error rate on ±1 labels, else mean squared error."""
        ds = self.data
        if ds.y_test.size == 0:
            return float("nan")
        if self.n_classes > 1:
            return self._error(self.test_blocks.matmat(self.as_model(w)), ds.y_test)
        return self._error(self.test_blocks.matvec(w), ds.y_test)

    def train_error(self, w: np.ndarray, z: np.ndarray | None = None) -> float:
        """The training set's :attr:`error_metric` (see :meth:`test_error`)."""
        z = self.matvec(w) if z is None else z
        return self._error(z, self.y)
