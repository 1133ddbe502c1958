"""The model's memory budget (issue 32, point 1) against what the optimum really allocates.

The oracle is tracemalloc, which counts every array numpy allocates: for each of the optimum's three
paths (binary with the diagonal preconditioner, softmax with the dense Hessian, softmax with the block
preconditioner) the estimate :func:`fedviz.problems.budget.optimum_memory` must be at least the peak the
solve reached and at most a few times it, or the refusal would either let a server run out or refuse
what fits.  The refusal itself is one sentence, before anything of the model's size exists.
"""

from __future__ import annotations

import functools
import time
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from fedviz.data.dataset import FederatedDataset
from fedviz.errors import FedvizError
from fedviz.problems import optimum as optimum_module
from fedviz.problems.budget import MAX_MODEL_MB, optimum_memory
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve


def _data(n, d, C, per_row=6, seed=0) -> FederatedDataset:
    rng = np.random.default_rng(seed)
    cols = np.sort(rng.random((n, d)).argsort(axis=1)[:, :per_row], axis=1)
    X = sp.csr_matrix((rng.random(n * per_row) + 0.1, cols.ravel(), np.arange(0, n * per_row + 1, per_row)),
                      shape=(n, d))
    if C == 1:
        y = np.where(X @ rng.normal(size=d) > np.median(X @ rng.normal(size=d)), 1.0, -1.0)
        y[:2] = [1.0, -1.0]
    else:
        y = np.argmax(X @ rng.normal(size=(d, C)) + rng.gumbel(size=(n, C)), axis=1).astype(float)
        y[:C] = np.arange(C)
    nodes = rng.integers(0, 10, n)
    return FederatedDataset.from_assignment(X, y, nodes)


def _peak(call) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("n,d,C,force_block", [
    (20_000, 3_000, 1, False),   # binary: the squared entries of X and the margins
    (2_000, 300, 8, False),      # softmax, dC = 2,400: the dense Hessian
    (4_000, 2_000, 12, True),    # softmax past the dense bound: the C × C blocks
], ids=["binary", "dense-hessian", "block"])
def test_the_estimate_bounds_what_the_optimum_allocates(monkeypatch, n, d, C, force_block):
    if force_block:
        monkeypatch.setattr(optimum_module, "DENSE_MAX_SIZE", 0)
    pb = Problem(_data(n, d, C), "softmax" if C > 1 else "logistic")
    need = optimum_memory(n=pb.n, n_test=pb.data.X_test.shape[0], d=pb.d, classes=pb.n_classes, nnz=pb.X.nnz)
    expected = {False: ("diagonal" if C == 1 else "dense Hessian"), True: "block"}[force_block]
    assert expected in need.method
    solve(pb, use_cache=False)  # numba loads its kernels and the problem its lazy caches: not the solve's
    peak = _peak(lambda: solve(pb, use_cache=False))
    assert peak <= need.bytes <= 4 * peak, (peak / 1e6, need.mb)


def test_a_model_over_the_limit_is_refused_in_one_sentence_before_it_is_allocated(monkeypatch):
    monkeypatch.delenv("FEDVIZ_MAX_MODEL_MB", raising=False)
    data = _data(4_000, 5_000, 200, per_row=3)  # the 143 KB upload: 200 classes over 5,000 features
    start = time.perf_counter()
    with pytest.raises(FedvizError) as info:
        Problem(data, "softmax")
    assert time.perf_counter() - start < 1.0
    text = str(info.value)
    assert "5,000 features × 200 classes = 1,000,000 weights" in text and f"{MAX_MODEL_MB:,} MB" in text, text
    assert "FEDVIZ_MAX_MODEL_MB" in text and "\n" not in text
    # 2 d C² floats for the blocks and their inverses, counted here from the sizes alone.
    assert f"{round((2 * 5_000 * 200 ** 2 * 8) / 1e6, -2):,.0f}"[:2] in text
    # The operator's limit is the one applied: raised past the need, the same problem is made.
    monkeypatch.setenv("FEDVIZ_MAX_MODEL_MB", "5000")
    assert Problem(data, "softmax").n_classes == 200


# -- every algorithm's working memory ---------------------------------------------------------------
def _softmax_data(n, d, K, C, density, seed=0) -> FederatedDataset:
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=seed, format="csr")
    X.data = rng.normal(size=X.nnz)
    y = np.argmax(X @ rng.normal(size=(d, C)) + rng.gumbel(size=(n, C)), axis=1).astype(float)
    y[:C] = np.arange(C)
    return FederatedDataset.from_assignment(X, y, rng.integers(0, K, n))


def _binary_data(n, d, K, density, regression, seed=0) -> FederatedDataset:
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=seed, format="csr")
    X.data = rng.normal(size=X.nnz)
    y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
    if not regression:
        y = np.where(y > 0, 1.0, -1.0)
    return FederatedDataset.from_assignment(X, y, rng.integers(0, K, n))


#: Shapes the coefficients were not fitted on (the fit: 6,000 × 4,000 and its doublings, K = 50–600,
#: C = 4, 12, 20), each loss an algorithm may take.
HELD_OUT = {"logistic": functools.cache(lambda: Problem(_binary_data(5_000, 7_000, 120, 0.003, False), "logistic")),
            "squared": functools.cache(lambda: Problem(_binary_data(5_000, 7_000, 120, 0.003, True), "squared")),
            "softmax": functools.cache(lambda: Problem(_softmax_data(5_000, 1_500, 80, 7, 0.003), "softmax"))}


def _cases():
    from fedviz.algorithms import ALGORITHMS

    for name, cls in ALGORITHMS.items():
        for loss in HELD_OUT:
            if cls.loss_refusal(loss) is None:
                yield pytest.param(name, loss, id=f"{name}-{loss}")


@pytest.mark.parametrize("name,loss", list(_cases()))
def test_every_algorithms_estimate_bounds_what_it_allocates(name, loss):
    from fedviz.algorithms import ALGORITHMS

    cls, pb = ALGORITHMS[name], HELD_OUT[loss]()
    cls(pb, seed=0).step()  # numba's kernels and the problem's lazy caches: not the algorithm's state

    def two_steps():
        algorithm = cls(pb, seed=0)
        algorithm.step()
        algorithm.step()

    peak, need = _peak(two_steps), cls.state_bytes(pb)
    assert peak <= need, f"{name}: {peak / 1e6:.2f} MB allocated, {need / 1e6:.2f} MB estimated"
    assert need <= 20 * peak + 2e6, f"{name}: the estimate {need / 1e6:.1f} MB is far above {peak / 1e6:.2f} MB"
    assert cls.model_bytes(pb) <= need


def test_an_algorithm_whose_model_is_over_the_limit_is_refused_before_it_allocates(monkeypatch):
    from fedviz.algorithms import ALGORITHMS

    pb = HELD_OUT["softmax"]()
    cls = ALGORITHMS["scaffold"]
    need_mb = cls.model_bytes(pb) / 1e6
    monkeypatch.setenv("FEDVIZ_MAX_MODEL_MB", str(int(need_mb) - 1))
    with pytest.raises(FedvizError) as info:
        cls(pb, seed=0)
    text = str(info.value)
    assert text.startswith(f"{cls.title} would hold about") and f"limit of {int(need_mb) - 1:,} MB per run" in text
    assert "1,500 features × 7 classes, 80 nodes" in text and "\n" not in text
    monkeypatch.setenv("FEDVIZ_MAX_MODEL_MB", str(int(need_mb) + 1))
    cls(pb, seed=0)
