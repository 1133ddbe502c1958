"""The federated data set, its statistics (paper Section 3.6.1) and the Section 4.1 baselines,
checked on tiny data sets worked out by hand."""

import numpy as np
import pytest
import scipy.sparse as sp

from fedviz.data.baselines import (classification_error, majority_test_error, node_majority_labels,
                                   node_majority_test_error)
from fedviz.data.dataset import chronological_split
from fedviz.data.dataset import FederatedDataset
from fedviz.errors import FedvizError

# Five rows, four features, nodes given out of order on purpose.
#            f0  f1  f2  f3   node
ROWS = [[1., 0., 2., 0.],   # 1
        [0., 3., 0., 0.],   # 0
        [1., 0., 0., 0.],   # 1
        [1., 1., 0., 0.],   # 0
        [0., 0., 0., 0.]]   # 2   (a row without features)
NODES = [1, 0, 1, 0, 2]
Y = [1., -1., 1., 1., -1.]


@pytest.fixture
def tiny():
    X = sp.csr_matrix(np.array(ROWS))
    X_test = sp.csr_matrix(np.eye(4)[:3])
    return FederatedDataset.from_assignment(X, Y, NODES, X_test=X_test, y_test=[1., -1., -1.],
                                            test_nodes=[0, 1, 7])


def test_rows_are_grouped_by_node_in_a_stable_order(tiny):
    np.testing.assert_array_equal(tiny.offsets, [0, 2, 4, 5])
    # Node 0 holds input rows 1 and 3 (in that order), node 1 rows 0 and 2, node 2 row 4.
    np.testing.assert_array_equal(tiny.X.toarray(), np.array(ROWS)[[1, 3, 0, 2, 4]])
    np.testing.assert_array_equal(tiny.y, np.array(Y)[[1, 3, 0, 2, 4]])
    np.testing.assert_array_equal(tiny.node_of_row, [0, 0, 1, 1, 2])
    # Test node 7 has no training rows, so it is unknown (-1); test rows sorted by node.
    np.testing.assert_array_equal(tiny.test_nodes, [-1, 0, 1])


def test_statistics_by_hand(tiny):
    st = tiny.stats
    assert (st.n, st.d, st.nnz, st.n_nodes) == (5, 4, 6, 3)
    np.testing.assert_array_equal(st.node_sizes, [2, 2, 1])
    np.testing.assert_array_equal(st.feature_counts, [3, 2, 1, 0])          # n^j
    np.testing.assert_array_equal(st.node_feature_counts.toarray(),         # n_k^j
                                  [[1, 2, 0, 0], [2, 0, 1, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(st.omega, [2, 1, 1, 0])                    # ω^j
    np.testing.assert_allclose(st.phi, [3 / 5, 2 / 5, 1 / 5, 0])             # φ^j
    np.testing.assert_allclose(st.phi_local.toarray(), [[1 / 2, 1, 0, 0], [1, 0, 1 / 2, 0], [0, 0, 0, 0]])
    # s_k^j = φ^j / φ_k^j on the pattern of n_k^j.
    S = st.S.toarray()
    np.testing.assert_allclose(S, [[(3 / 5) / (1 / 2), (2 / 5) / 1, 0, 0],
                                   [(3 / 5) / 1, 0, (1 / 5) / (1 / 2), 0], [0, 0, 0, 0]])
    assert st.S.nnz == 4
    np.testing.assert_allclose(st.A, [3 / 2, 3, 3, 1])                       # a^j = K / ω^j
    assert sp.issparse(st.S) and sp.issparse(st.node_feature_counts)


def test_explicit_zeros_are_not_appearances():
    X = sp.csr_matrix((np.array([0.0, 1.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 2))
    ds = FederatedDataset.from_assignment(X, [1.0], [0])
    np.testing.assert_array_equal(ds.stats.feature_counts, [0, 1])
    np.testing.assert_array_equal(ds.stats.omega, [0, 1])


def test_statistics_match_a_dense_reference_on_random_data():
    rng = np.random.default_rng(0)
    n, d, K = 400, 30, 12
    Xd = rng.random((n, d)) * (rng.random((n, d)) < 0.15)
    nodes = rng.integers(0, K, n)
    ds = FederatedDataset.from_assignment(sp.csr_matrix(Xd), np.where(rng.random(n) < .5, 1., -1.), nodes)
    B = (ds.X.toarray() != 0)
    Kp = ds.n_nodes
    nkj = np.array([B[ds.node_slice(k)].sum(0) for k in range(Kp)])
    np.testing.assert_array_equal(ds.stats.node_feature_counts.toarray(), nkj)
    np.testing.assert_array_equal(ds.stats.omega, (nkj > 0).sum(0))
    from fedviz.properties import disjoint_features, sparse  # built on ω^j

    omega = (nkj > 0).sum(0)
    assert sparse(ds).omega_max == disjoint_features(ds).omega_max == omega.max()
    assert sparse(ds).share_on_few_nodes == np.mean(omega[omega > 0] <= Kp / 10)
    assert disjoint_features(ds).shared_features == np.sum(omega > 1)
    nk = ds.node_sizes[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        S_ref = np.where(nkj > 0, (B.sum(0) / n) / (nkj / nk), 0.0)
    np.testing.assert_allclose(ds.stats.S.toarray(), S_ref, rtol=1e-14)


def test_summary_keys(tiny):
    s = tiny.stats.summary()
    assert s["node_size_min"] == 1 and s["node_size_max"] == 2 and s["node_size_median"] == 2
    # K = 3 < 1,000: every feature is trivially on fewer than 1,000 nodes, so the paper's statistic is n/a.
    assert np.isnan(s["features_on_fewer_than_1000_nodes"])


def test_features_on_fewer_than_1000_nodes_from_k_1000():
    """Feature 0 in every one of 1,200 nodes' single row, feature 1 in 999 of them, feature 2 in 1,000: 1 of 3 below."""
    K = 1200
    rows = np.zeros((K, 3))
    rows[:, 0] = 1
    rows[:999, 1] = 1
    rows[:1000, 2] = 1
    ds = FederatedDataset.from_assignment(sp.csr_matrix(rows), np.where(np.arange(K) % 2, 1.0, -1.0), np.arange(K))
    assert ds.stats.summary()["features_on_fewer_than_1000_nodes"] == pytest.approx(1 / 3)


def test_baselines_by_hand(tiny):
    # Training labels: 3 of 5 are +1, so the global majority predicts +1.
    # Test labels (sorted by node): [-1 (node -1), 1 (node 0), -1 (node 1)] → 2 of 3 wrong.
    assert majority_test_error(tiny) == pytest.approx(2 / 3)
    # Node 0 has labels {-1, +1}: a tie → global majority (+1). Node 1: {+1, +1} → +1. Node 2: -1.
    np.testing.assert_array_equal(node_majority_labels(tiny), [1, 1, -1])
    # Only test rows with a known node count: node 0 (+1 right), node 1 (-1 wrong).
    assert node_majority_test_error(tiny) == pytest.approx(1 / 2)


def test_classification_error_ties_predict_negative():
    assert classification_error(np.array([0.0, 0.0, 1.0]), np.array([-1.0, 1.0, 1.0])) == pytest.approx(1 / 3)
    assert np.isnan(classification_error(np.zeros(0), np.zeros(0)))


def test_chronological_split_takes_the_last_rows_of_each_node():
    nodes = np.array([0, 1, 0, 0, 1, 0, 2])
    mask = chronological_split(nodes, 0.25)
    # Node 0 has rows 0, 2, 3, 5 → floor(0.25·4) = 1 test row, the last one (5).
    # Node 1 has rows 1, 4 → floor(0.5) = 0 test rows.  Node 2: one row, never all test.
    np.testing.assert_array_equal(mask, [0, 0, 0, 0, 0, 1, 0])
    mask = chronological_split(nodes, 0.5)
    np.testing.assert_array_equal(mask, [0, 0, 0, 1, 1, 1, 0])
    assert not chronological_split(nodes, 0.0).any()


def test_invalid_offsets_are_refused():
    with pytest.raises(FedvizError, match="empty"):
        FederatedDataset.from_assignment(sp.csr_matrix((0, 3)), [], [])


def test_fingerprint_depends_on_the_data(tiny):
    same = FederatedDataset.from_assignment(sp.csr_matrix(np.array(ROWS)), Y, NODES,
                                            X_test=sp.csr_matrix(np.eye(4)[:3]), y_test=[1., -1., -1.],
                                            test_nodes=[0, 1, 7])
    assert same.fingerprint == tiny.fingerprint
    other = tiny.with_nodes(np.zeros(tiny.n, dtype=int))
    assert other.fingerprint != tiny.fingerprint
