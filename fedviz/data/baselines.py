"""The naive baselines of the paper's Section 4.1 ("Naive prediction properties").

Predict-majority and per-node-majority test errors depend only on the labels, counted by
:mod:`fedviz.data.labels` (the K × C table of :func:`~fedviz.data.labels.node_label_counts`); the
optimum's test error is :func:`fedviz.problems.optimum.solve` plus
:func:`classification_error`.
"""

from __future__ import annotations

import numpy as np

from .dataset import FederatedDataset
from .labels import (BINARY_CLASSES, dataset_classes, dataset_label_counts, label_counts, majority_class,
                     node_majority)


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
    return BINARY_CLASSES[majority_class(label_counts(y, BINARY_CLASSES))]


def majority_test_error(ds: FederatedDataset) -> float:
    """Test error of predicting the training set's majority class for everything (Section 4.1's
    'predict majority'); ties go to the lowest class (for binary, -1)."""
    if ds.y_test.size == 0:
        return float("nan")
    classes = dataset_classes(ds)
    return float(np.mean(ds.y_test != classes[majority_class(dataset_label_counts(ds))]))


def node_majority_labels(ds: FederatedDataset) -> np.ndarray:
    """Each node's majority training class; a tied node takes, of its tied classes, the one with
    the most rows overall (for binary, the global majority: :func:`fedviz.data.labels.node_majority`)."""
    classes = np.asarray(dataset_classes(ds))
    return classes[node_majority(dataset_label_counts(ds))]


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
