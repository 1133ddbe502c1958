"""The naive baselines of the paper's Section 4.1 ("Naive prediction properties").

Predict-majority and per-node-majority test errors depend only on the labels; the
optimum's test error is :func:`fedviz.problems.optimum.solve` plus
:func:`classification_error`.
"""

from __future__ import annotations

import numpy as np

from .dataset import FederatedDataset


def classification_error(margins: np.ndarray, y: np.ndarray) -> float:
    """Fraction of examples with ``sign(margin) != y``; a margin of exactly 0 predicts -1.

    The tie rule matches scikit-learn's ``LinearClassifierMixin.predict`` (``score > 0``
    means the positive class).  Returns NaN on an empty set.
    """
    if len(y) == 0:
        return float("nan")
    pred = np.where(margins > 0, 1.0, -1.0)
    return float(np.mean(pred != y))


def majority_label(y: np.ndarray) -> float:
    """+1 if strictly more than half of ``y`` is +1, else -1 (ties go to -1, 'no comment')."""
    return 1.0 if np.sum(y > 0) * 2 > len(y) else -1.0


def majority_test_error(ds: FederatedDataset) -> float:
    """Test error of predicting the training set's majority label for everything."""
    if ds.y_test.size == 0:
        return float("nan")
    return float(np.mean(ds.y_test != majority_label(ds.y)))


def node_majority_labels(ds: FederatedDataset) -> np.ndarray:
    """Each node's majority training label; a tied node falls back to the global majority."""
    pos = np.add.reduceat((ds.y > 0).astype(np.int64), ds.offsets[:-1])
    twice = 2 * pos
    sizes = ds.node_sizes
    labels = np.where(twice > sizes, 1.0, -1.0)
    labels[twice == sizes] = majority_label(ds.y)
    return labels


def node_majority_test_error(ds: FederatedDataset) -> float:
    """Test error of predicting, for each test example, its node's majority training label.

    The paper's 'per-author majority' (17.14% on Google+).  Only test examples whose
    node is known count; NaN when there are none (e.g. a separate test file).
    """
    known = ds.test_nodes >= 0
    if not np.any(known):
        return float("nan")
    pred = node_majority_labels(ds)[ds.test_nodes[known]]
    return float(np.mean(pred != ds.y_test[known]))
