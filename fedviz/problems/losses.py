"""Losses φ_i of the L2-regularised linear predictors of the paper's Appendix, eq. (11).

Each loss is a small stateless object acting on margins and labels.  The model has the
shape (d, C) (issue 22; scikit-learn's ``coef`` has the same layout), so example i has C
margins z_i = Wᵀx_i and the margins of n examples are an n × C array; C is the loss's
:meth:`Loss.n_outputs` for the labels: 1 for the scalar losses here (binary classification
and regression), whose margins are kept as a vector of length n (an n × 1 array's data).

The interface every loss implements, on margins of any C (what the objective, the optimum
and the metrics use):

- :meth:`Loss.value_deriv`: Σ_i φ_i, the derivatives ∂φ_i/∂z_i shaped like the margins and
  the training error count, in one call;
- :meth:`Loss.value_deriv_nodes`: the same and each node's Σ_{i ∈ P_k} φ_i from the same loss
  values (the per-node own losses of issue 23 at one addition per row);
- :meth:`Loss.errors`: the misclassified count (the sign of the margin for C = 1);
- :meth:`Loss.curvature` / :meth:`Loss.curvature_product` / :meth:`Loss.curvature_diagonal`:
  the per-example Hessian blocks ∇²φ_i (C × C; for C = 1 the scalar φ'') as an operator, for
  the Hessian-vector products of the optimum and its diagonal preconditioner.

The scalar losses (C = 1) also give φ, φ', φ'' and the convex conjugate φ* elementwise
(:meth:`Loss.value`, :meth:`Loss.deriv`, :meth:`Loss.deriv2`, :meth:`Loss.conjugate`), which
the per-example kernels and the dual methods (CoCoA+, Algorithm 6) use; the interface above
is defined from them with the same operations in the same order, so that a binary result is
the same to the last bit whichever path computes it.  Smoothness is that of φ (1/γ in the
Appendix's notation).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from scipy.special import expit

from ..errors import ParameterError
from ._compiled import LOGISTIC, dphi, phi


class Loss:
    """Interface: elementwise φ(z; y) and friends.  Subclasses are immutable."""

    name: str = ""
    title: str = ""
    task: str = "classification"
    #: Lipschitz constant of φ', i.e. φ is (1/γ)-smooth with 1/γ = smoothness.
    smoothness: float = 1.0
    #: Whether φ'' equals ``smoothness`` at every margin (the squared loss), so that a step from the
    #: smoothness bound is the curvature itself; else the bound is met only near some margins (the
    #: logistic's at 0) and a safeguarded step may start above it.
    exact_curvature: bool = False

    def value(self, z, y):
        raise NotImplementedError

    def deriv(self, z, y):
        raise NotImplementedError

    def deriv2(self, z, y):
        """φ''(z); for the smoothed hinge, the generalised second derivative."""
        raise NotImplementedError

    def conjugate(self, u, y):
        """φ*(u) = sup_z (u z − φ(z)); +inf outside the domain."""
        raise NotImplementedError

    def n_outputs(self, y, y_test=None) -> int:
        """C, the margins per example the loss takes for training labels ``y`` (and test labels
        ``y_test``): 1 for a scalar loss."""
        return 1

    def errors(self, z, y) -> int | None:
        """The misclassified count at margins ``z``: sign(z_i) ≠ y_i for C = 1 (a margin of
        exactly 0 predicts −1); None for a regression loss, which counts no errors."""
        if self.task != "classification":
            return None
        return int(np.count_nonzero((z > 0) != (y > 0)))

    def value_deriv(self, z, y) -> tuple[float, np.ndarray, int | None]:
        """(Σ_i φ_i(z_i), the derivatives shaped like the margins ``z``, :meth:`errors`): what an
        objective-and-gradient evaluation and the training error need, in one call."""
        errors = self.errors(z, y)
        return float(np.sum(self.value(z, y))), self.deriv(z, y), errors

    def value_deriv_nodes(self, z, y, offsets) -> tuple[float, np.ndarray, int | None, np.ndarray]:
        """:meth:`value_deriv` and the per-node sums Σ_{i ∈ P_k} φ_i of the contiguous row ranges
        ``offsets[k]:offsets[k+1]`` (the nodes' rows, eq. (6)) from the same loss values: the
        per-node own losses of issue 23 at the cost of one addition per row.  The total, the
        derivatives and the error count are :meth:`value_deriv`'s, bit for bit."""
        errors = self.errors(z, y)
        v = self.value(z, y)
        total = float(np.sum(v))
        return total, self.deriv(z, y), errors, segment_sums(v, offsets)

    def curvature(self, z, y, divisor: float | None = None):
        """The Hessian blocks ∇²φ_i(z_i) (divided by ``divisor`` if given) as an operator for
        :meth:`curvature_product`: for C = 1 the vector φ''(z) (/ divisor)."""
        d2 = self.deriv2(z, y)
        return d2 if divisor is None else d2 / divisor

    def curvature_product(self, D, u):
        """∇²φ_i u_i for every example, shaped like the margins ``u``: D u elementwise for C = 1."""
        return D * u

    def curvature_diagonal(self, D):
        """The diagonals of the Hessian blocks, shaped like the margins: D itself for C = 1."""
        return D

    @property
    def key(self) -> tuple:
        return (self.name,)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Logistic(Loss):
    """φ(z) = log(1 + exp(−y z)), y ∈ {−1, +1}: the loss of the paper's experiment (Section 4.1)."""

    name = "logistic"
    title = "Logistic regression"
    smoothness = 0.25

    def value(self, z, y):
        return np.logaddexp(0.0, -y * z)

    def deriv(self, z, y):
        return -y * expit(-y * z)

    def value_deriv(self, z, y):
        if np.ndim(z) == 1 and np.ndim(y) == 1 and len(z) >= 50_000:
            z = np.ascontiguousarray(z, dtype=np.float64)
            y = np.ascontiguousarray(y, dtype=np.float64)
            d = np.empty_like(z)
            chunks = -(-z.size // _CHUNK)
            parts, carries, errs = np.empty(chunks), np.empty(chunks), np.empty(chunks, dtype=np.int64)
            _logistic_value_deriv(z, y, d, parts, carries, errs)
            return math.fsum(np.concatenate([parts, carries])), d, int(errs.sum())
        return super().value_deriv(z, y)

    def value_deriv_nodes(self, z, y, offsets):
        if np.ndim(z) == 1 and np.ndim(y) == 1 and len(z) >= 50_000:
            z = np.ascontiguousarray(z, dtype=np.float64)
            y = np.ascontiguousarray(y, dtype=np.float64)
            offsets = np.ascontiguousarray(offsets, dtype=np.int64)
            d = np.empty_like(z)
            chunks = -(-z.size // _CHUNK)
            parts, carries, errs = np.empty(chunks), np.empty(chunks), np.empty(chunks, dtype=np.int64)
            sums = np.zeros(offsets.size - 1)
            _logistic_value_deriv_nodes(z, y, d, parts, carries, errs, offsets, sums,
                                        np.empty((chunks, 2)), np.empty((chunks, 2), dtype=np.int64))
            return math.fsum(np.concatenate([parts, carries])), d, int(errs.sum()), sums
        return super().value_deriv_nodes(z, y, offsets)

    def deriv2(self, z, y):
        s = expit(y * z)
        return s * (1.0 - s)

    def conjugate(self, u, y):
        # With b = −u y ∈ [0, 1]: φ*(u) = b log b + (1 − b) log(1 − b), using 0 log 0 = 0.
        b = -np.asarray(u, dtype=float) * y
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(b > 0, b * np.log(np.where(b > 0, b, 1.0)), 0.0) + \
                np.where(b < 1, (1 - b) * np.log(np.where(b < 1, 1 - b, 1.0)), 0.0)
        return np.where((b < 0) | (b > 1), np.inf, out)


class Squared(Loss):
    """φ(z) = ½ (z − y)², y real: ridge regression (the Appendix's Theorem 1)."""

    name = "squared"
    title = "Ridge regression (squared loss)"
    task = "regression"
    smoothness = 1.0
    exact_curvature = True

    def value(self, z, y):
        return 0.5 * (z - y) ** 2

    def deriv(self, z, y):
        return z - y

    def deriv2(self, z, y):
        return np.ones_like(np.asarray(z, dtype=float))

    def conjugate(self, u, y):
        u = np.asarray(u, dtype=float)
        return 0.5 * u * u + u * y


class SmoothedHinge(Loss):
    """The γ-smoothed hinge loss (Shalev-Shwartz & Zhang, 2013) for SVMs, with a = y z:

    φ = 0 for a ≥ 1;  1 − a − γ/2 for a ≤ 1 − γ;  (1 − a)² / (2γ) in between.
    """

    name = "smoothed-hinge"
    title = "SVM (smoothed hinge)"

    def __init__(self, gamma: float = 1.0):
        if not (np.isfinite(gamma) and gamma > 0):
            raise ParameterError("gamma", gamma, "number > 0")
        self.gamma = float(gamma)
        self.smoothness = 1.0 / self.gamma

    @property
    def key(self) -> tuple:
        return (self.name, self.gamma)

    def __repr__(self) -> str:
        return f"SmoothedHinge(gamma={self.gamma!r})"

    def value(self, z, y):
        a = y * z
        g = self.gamma
        return np.where(a >= 1, 0.0, np.where(a <= 1 - g, 1 - a - g / 2, (1 - a) ** 2 / (2 * g)))

    def deriv(self, z, y):
        a = y * z
        return -y * np.clip((1 - a) / self.gamma, 0.0, 1.0)

    def deriv2(self, z, y):
        a = y * z
        return np.where((a > 1 - self.gamma) & (a < 1), 1.0 / self.gamma, 0.0)

    def conjugate(self, u, y):
        b = -np.asarray(u, dtype=float) * y
        out = -b + 0.5 * self.gamma * b * b
        return np.where((b < 0) | (b > 1), np.inf, out)


class Softmax(Loss):
    """Softmax (multinomial logistic) regression over C ≥ 2 classes: with margins z ∈ R^C and a
    class code y ∈ {0, …, C−1}, φ(z) = log Σ_c exp(z_c) − z_y (issue 22, point 2).

    The labels are class codes 0..C−1 (mapping a file's labels to codes is the data layer's);
    C is the largest code + 1, over the training and test labels.  ∇φ = p − e_y with
    p = softmax(z) and ∇²φ = diag(p) − p pᵀ ⪯ ½ I (Böhning, 1992): smoothness ½ per example.
    Not in :data:`LOSSES` (the binary and regression losses) but in :data:`MULTICLASS_LOSSES`:
    :func:`loss_choices` offers it for multiclass data only.
    """

    name = "softmax"
    title = "Softmax regression (multinomial logistic)"
    smoothness = 0.5

    def n_outputs(self, y, y_test=None) -> int:
        codes = np.asarray(y, dtype=np.float64)
        if y_test is not None and np.size(y_test):
            codes = np.concatenate([codes, np.asarray(y_test, dtype=np.float64)])
        bad = (codes < 0) | (codes != np.floor(codes))
        if codes.size == 0 or np.any(bad):
            raise ParameterError("loss", self.name, "a binary or regression loss: softmax needs labels "
                                 "that are class codes 0, 1, …, C − 1")
        C = int(codes.max()) + 1
        if C < 2:
            raise ParameterError("loss", self.name, "a binary loss: the labels hold one class only")
        return C

    @staticmethod
    def _logsumexp(z):
        m = np.max(z, axis=1)
        return m + np.log(np.sum(np.exp(z - m[:, None]), axis=1))

    def _probabilities(self, z):
        return np.exp(z - self._logsumexp(z)[:, None])

    @staticmethod
    def _codes(y):
        return np.asarray(y).astype(np.intp)

    def value(self, z, y):
        """φ_i for every example (a vector of length n)."""
        return self._logsumexp(z) - z[np.arange(len(z)), self._codes(y)]

    def deriv(self, z, y):
        """p − e_y for every example: n × C, like the margins."""
        d = self._probabilities(z)
        d[np.arange(len(z)), self._codes(y)] -= 1.0
        return d

    def errors(self, z, y) -> int:
        """The examples whose largest margin is not their class's (a tie predicts the lowest code)."""
        return int(np.count_nonzero(np.argmax(z, axis=1) != self._codes(y)))

    def value_deriv(self, z, y):
        total, d, errors, _ = self._fused(z, y, None)
        return total, d, errors

    def value_deriv_nodes(self, z, y, offsets):
        total, d, errors, v = self._fused(z, y, True)
        return total, d, errors, segment_sums(v, offsets)

    @staticmethod
    def _fused(z, y, keep_values):
        """One compiled pass over the n × C margins: Σ φ_i, p_i − e_{y_i}, the argmax errors and
        (``keep_values``) the vector of φ_i; on every core from :data:`PARALLEL_ELEMENTS` margins."""
        z = np.ascontiguousarray(z, dtype=np.float64)
        y = np.ascontiguousarray(y, dtype=np.float64)
        n = z.shape[0]
        d = np.empty_like(z)
        v = np.empty(n if keep_values else 0)
        chunks = max(1, -(-n // _SOFTMAX_CHUNK))
        parts, errs = np.empty(chunks), np.empty(chunks, dtype=np.int64)
        _SOFTMAX_KERNELS[z.size >= PARALLEL_ELEMENTS](z, y, d, v, parts, errs)
        return math.fsum(parts), d, int(errs.sum()), v

    def curvature(self, z, y, divisor: float | None = None):
        """(p, divisor): the blocks diag(p_i) − p_i p_iᵀ, kept as the probabilities."""
        return (self._probabilities(z), divisor)

    def curvature_product(self, D, u):
        p, divisor = D
        out = p * (u - np.sum(p * u, axis=1, keepdims=True))
        return out if divisor is None else out / divisor

    def curvature_diagonal(self, D):
        p, divisor = D
        out = p * (1.0 - p)
        return out if divisor is None else out / divisor

    def deriv2(self, z, y):
        raise NotImplementedError("softmax has C × C curvature blocks: use curvature()")

    def conjugate(self, u, y):
        raise NotImplementedError("the dual methods do not take softmax yet (issue 22, point 3)")


#: Elements per chunk of the fused logistic kernel: fixed, so the partial sums (added in
#: chunk order) and hence f(w) are the same bit for bit whatever the thread count.
_CHUNK = 1 << 15


@numba.njit(cache=True, nogil=True, inline="always")
def _logistic_term(zi, yi):
    """(φ, φ', [sign error]) of one example of the logistic loss: the compiled trio's
    :func:`~._compiled.phi` and :func:`~._compiled.dphi`, which share e = exp(−|y z|) (the compiler
    computes it once)."""
    return phi(LOGISTIC, zi, yi, 1.0), dphi(LOGISTIC, zi, yi, 1.0), (zi > 0) != (yi > 0)


@numba.njit(cache=True, nogil=True, parallel=True)
def _logistic_value_deriv(z, y, d, parts, carries, errs):
    """Σ log(1 + exp(−y z)), d = −y σ(−y z) and the count of sign errors, fused: one read
    of z on all threads (a margin of exactly 0 predicts −1, as everywhere in fedviz).

    Each term is the compiled trio's (:func:`~._compiled.phi`: stable for both signs of y z,
    with one ``exp`` and one ``log``).  Chunk k's sum goes to ``parts[k] + carries[k]``, its error count to ``errs[k]``.
    """
    n = z.size
    for k in numba.prange(parts.size):
        total = 0.0
        carry = 0.0  # Neumaier's compensation: the sum is exact to a few ulps at any length
        errors = 0
        for i in range(k * _CHUNK, min(n, (k + 1) * _CHUNK)):
            term, di, wrong = _logistic_term(z[i], y[i])
            errors += wrong
            s = total + term
            carry += (total - s) + term if abs(total) >= abs(term) else (term - s) + total
            total = s
            d[i] = di
        parts[k] = total
        carries[k] = carry
        errs[k] = errors


@numba.njit(cache=True, nogil=True, parallel=True)
def _logistic_value_deriv_nodes(z, y, d, parts, carries, errs, offsets, sums, edge, edge_node):
    """:func:`_logistic_value_deriv` (the same chunks, terms and sums: the same total, bit for bit)
    that also adds each term into its node's sum ``sums[k]`` (rows ``offsets[k]:offsets[k+1]``;
    ``sums`` zero on entry).  A node inside one chunk is summed there; a node cut by a chunk
    boundary leaves its pieces in ``edge`` (at most one at each end of a chunk, ``edge_node`` its
    node, −1 for none), added in chunk order after the parallel loop: deterministic whatever the
    thread count."""
    n = z.size
    K = offsets.size - 1
    for k in numba.prange(parts.size):
        a = k * _CHUNK
        b = min(n, a + _CHUNK)
        node = np.searchsorted(offsets, a, side="right") - 1  # offsets[node] <= a < offsets[node + 1]
        end = offsets[node + 1]
        edge_node[k, 0] = node
        edge_node[k, 1] = -1
        edge[k, 0] = 0.0
        edge[k, 1] = 0.0
        first = True
        acc = 0.0
        total = 0.0
        carry = 0.0
        errors = 0
        for i in range(a, b):
            term, di, wrong = _logistic_term(z[i], y[i])
            errors += wrong
            s = total + term
            carry += (total - s) + term if abs(total) >= abs(term) else (term - s) + total
            total = s
            d[i] = di
            acc += term
            if i + 1 == end:  # the node's last row
                if first:
                    edge[k, 0] = acc  # it may have begun in an earlier chunk
                    first = False
                else:
                    sums[node] = acc
                acc = 0.0
                node += 1
                while node < K and offsets[node + 1] == offsets[node]:
                    node += 1  # a node without rows sums to 0
                if node < K:
                    end = offsets[node + 1]
        if node < K and offsets[node] < b < end:  # the node goes on in the next chunk
            if first:
                edge[k, 0] = acc
            else:
                edge[k, 1] = acc
                edge_node[k, 1] = node
        parts[k] = total
        carries[k] = carry
        errs[k] = errors
    for k in range(parts.size):
        sums[edge_node[k, 0]] += edge[k, 0]
        if edge_node[k, 1] >= 0:
            sums[edge_node[k, 1]] += edge[k, 1]


@numba.njit(cache=True, nogil=True)
def _segment_sums(v, offsets, out):
    for k in range(offsets.size - 1):
        s = 0.0
        for i in range(offsets[k], offsets[k + 1]):
            s += v[i]
        out[k] = s


def segment_sums(v, offsets) -> np.ndarray:
    """out[k] = Σ v[offsets[k]:offsets[k+1]] (0 for an empty range), in row order."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    out = np.empty(offsets.size - 1)
    _segment_sums(np.ascontiguousarray(v, dtype=np.float64), offsets, out)
    return out



#: Margins (n × C) from which the softmax pass runs on every core: below it the thread pool's start
#: costs more than it saves (and a small run never starts numba's threads).
PARALLEL_ELEMENTS = 50_000
#: Rows per chunk of the softmax pass: fixed, so the partial sums and f(w) do not depend on the threads.
_SOFTMAX_CHUNK = 1 << 12


def _softmax_value_deriv_py(z, y, d, v, parts, errs):
    """Per example i (class code y_i, margins z_i ∈ R^C): φ_i = log Σ_c exp(z_ic) − z_{i,y_i} with the
    largest margin m subtracted first, d_i = softmax(z_i) − e_{y_i}, and [argmax z_i ≠ y_i] (a tie
    predicts the lowest code, as numpy's argmax); chunk k's sum of φ_i to ``parts[k]``, its error
    count to ``errs[k]``, φ_i to ``v[i]`` when ``v`` has n entries."""
    n, C = z.shape
    keep = v.size == n
    for k in numba.prange(parts.size):
        total = 0.0
        errors = 0
        for i in range(k * _SOFTMAX_CHUNK, min(n, (k + 1) * _SOFTMAX_CHUNK)):
            m = z[i, 0]
            arg = 0
            for c in range(1, C):
                if z[i, c] > m:
                    m = z[i, c]
                    arg = c
            s = 0.0
            for c in range(C):
                e = math.exp(z[i, c] - m)
                d[i, c] = e
                s += e
            yi = int(y[i])
            term = m + math.log(s) - z[i, yi]
            inv = 1.0 / s
            for c in range(C):
                d[i, c] *= inv
            d[i, yi] -= 1.0
            if keep:
                v[i] = term
            total += term
            errors += arg != yi
        parts[k] = total
        errs[k] = errors


_SOFTMAX_KERNELS = (numba.njit(cache=True, nogil=True, error_model="numpy")(_softmax_value_deriv_py),
                    numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")(_softmax_value_deriv_py))


#: The losses of binary and regression data (one output per example, C = 1).
LOSSES: dict[str, type[Loss]] = {cls.name: cls for cls in (Logistic, Squared, SmoothedHinge)}
#: The losses of multiclass data (C > 2 classes, coded 0..C−1): offered only for such data.
MULTICLASS_LOSSES: dict[str, type[Loss]] = {Softmax.name: Softmax}


def loss_choices(multiclass: bool) -> tuple[str, ...]:
    """The losses a data set takes: softmax for multiclass data (``FederatedDataset.multiclass``),
    logistic, squared and smoothed hinge for binary and regression data; the first is the default."""
    return tuple(MULTICLASS_LOSSES) if multiclass else tuple(LOSSES)


def loss_for(preferred: str, multiclass: bool) -> str:
    """``preferred`` when the data take it (:func:`loss_choices`), else their default loss."""
    choices = loss_choices(multiclass)
    return preferred if preferred in choices else choices[0]


def make_loss(name: str | Loss) -> Loss:
    """A loss by registry name ('logistic', 'squared', 'smoothed-hinge', 'softmax') or pass one through."""
    if isinstance(name, Loss):
        return name
    cls = LOSSES.get(name) if isinstance(name, str) else None
    if cls is None and isinstance(name, str):
        cls = MULTICLASS_LOSSES.get(name)
    if cls is None:
        raise ParameterError("loss", name, "one of " + ", ".join((*LOSSES, *MULTICLASS_LOSSES)))
    return cls()
