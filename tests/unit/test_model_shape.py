"""The model's shape (d, C) of issue 22 with C = 1: the problem's views of the flat model and the
loss interface on margins, against dense NumPy transcriptions of the binary definitions (the
bitwise guard of the binary figures is test_golden_binary.py)."""

import numpy as np
import pytest
import scipy.sparse as sp

from problems import random_rows
from fedviz.data.dataset import FederatedDataset
from fedviz.errors import ParameterError
from fedviz.problems.losses import Logistic, SmoothedHinge, Squared
from fedviz.problems.objective import Problem

SCALAR_LOSSES = [Logistic(), Squared(), SmoothedHinge(0.5)]


def _problem(loss, n=50, d=7):
    X, y, nodes = random_rows(n=n, d=d, density=0.6, seed=3, regression=loss.task == "regression",
                              positive_rate=0.4)
    return Problem(FederatedDataset.from_assignment(sp.csr_matrix(X), y, nodes), loss, 0.1)


@pytest.mark.parametrize("loss", SCALAR_LOSSES, ids=repr)
def test_binary_and_regression_models_are_d_by_1(loss):
    p = _problem(loss)
    assert p.n_classes == 1 and p.shape == (p.d, 1) and p.size == p.d and p.margin_shape == (p.n,)
    w = np.arange(p.d, dtype=float)
    W = p.as_model(w)
    assert W.shape == (p.d, 1) and np.shares_memory(W, w) and np.array_equal(W[:, 0], w)
    back = p.flat(W)
    assert back.shape == (p.d,) and np.shares_memory(back, w)
    assert np.array_equal(p.zero_model(), np.zeros(p.d))


def test_a_model_of_the_wrong_shape_is_refused_by_name():
    p = _problem(Logistic())
    with pytest.raises(ParameterError, match=r"w.*length dC = 7"):
        p.as_model(np.zeros(8))
    with pytest.raises(ParameterError, match=r"W.*shape \(d, C\) = \(7, 1\)"):
        p.flat(np.zeros((1, 7)))


@pytest.mark.parametrize("loss", SCALAR_LOSSES, ids=repr)
def test_the_margin_interface_of_a_scalar_loss(loss):
    """Derivatives shaped like the margins, sign errors, curvature blocks φ'' as a diagonal."""
    rng = np.random.default_rng(0)
    p = _problem(loss)
    z, u = rng.normal(size=p.n), rng.normal(size=p.n)
    X, y = p.X.toarray(), p.y
    total, d, errors = loss.value_deriv(z, y)
    assert d.shape == z.shape
    if loss.task == "classification":
        assert errors == sum(1 for zi, yi in zip(z, y) if (1.0 if zi > 0 else -1.0) != yi)
    else:
        assert errors is None and loss.errors(z, y) is None
    D = loss.curvature(z, y)
    assert np.array_equal(loss.curvature_product(D, u), loss.deriv2(z, y) * u)
    assert np.array_equal(loss.curvature_diagonal(D), loss.deriv2(z, y))
    assert np.array_equal(loss.curvature(z, y, divisor=p.n), loss.deriv2(z, y) / p.n)
    # The problem's Hessian product through the blocks: Xᵀ diag(φ'') X v / n + λ v, densely.
    w, v = rng.normal(size=p.d), rng.normal(size=p.d)
    H = X.T @ (loss.deriv2(X @ w, y)[:, None] * X) / p.n + p.lam * np.eye(p.d)
    np.testing.assert_allclose(p.hessp(p.curvature(w), v), H @ v, rtol=1e-12, atol=1e-14)



def test_replace_rederives_c():
    """C belongs to the loss and the labels: a replaced problem derives it again."""
    import dataclasses

    from fedviz.problems.losses import Softmax

    p = _problem(Logistic())
    q = dataclasses.replace(p, lam=0.5)
    assert q.lam == 0.5 and q.n_classes == 1
    codes = FederatedDataset.from_assignment(p.X, (p.y > 0).astype(float) + np.arange(p.n) % 2, p.data.node_of_row)
    assert dataclasses.replace(p, data=codes, loss=Softmax()).n_classes == 3
