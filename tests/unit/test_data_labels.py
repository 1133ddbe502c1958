"""The labels module (issue 22, point 5): the label policy and the label counts every view reads.

Oracles: scikit-learn's ``LabelEncoder`` and ``label_binarize`` for the codes and the one-vs-rest
mapping, per-node ``np.unique`` / ``np.bincount`` loops written out here, and the label rules as
they stood before the module (``y > 0`` per node, 2·pos > m_k, Σ_k (n_k/n)|p_k − p|) written out
plainly, so that the baselines, the split, the properties and the Data page's figures are the
same numbers as before.  (The UI pickers' labels are tests/unit/test_labels.py.)
"""

import numpy as np
import pytest
from sklearn.preprocessing import LabelEncoder, label_binarize

from conftest import DATA
from fedviz.data import labels as L
from fedviz.data.baselines import majority_label, majority_test_error, node_majority_labels, node_majority_test_error
from fedviz.data.build import DataSpec, build
from fedviz.data.dataset import FederatedDataset
from fedviz.data.libsvm import LabelMapping, load_libsvm
from fedviz.data.partition import make_partitioner
from fedviz.data.split import random_split
from fedviz.errors import DataFormatError, ParameterError
from fedviz.properties import non_iid

DNA = load_libsvm(DATA / "dna.scale").y  # 2,000 rows of classes 1, 2, 3


def _plain_counts(y, offsets, classes):
    """K × C by a loop over nodes and np.unique: the oracle of node_label_counts."""
    out = np.zeros((len(offsets) - 1, len(classes)), dtype=np.int64)
    for k in range(len(offsets) - 1):
        values, counts = np.unique(y[offsets[k]:offsets[k + 1]], return_counts=True)
        for v, c in zip(values, counts):
            out[k, list(classes).index(v)] = c
    return out


def _random_offsets(rng, n, K):
    cuts = np.sort(rng.choice(np.arange(1, n), size=K - 1, replace=False))
    return np.concatenate([[0], cuts, [n]])


# --------------------------------------------------------------------------- the policy

def test_multiclass_codes_are_label_encoders():
    rng = np.random.default_rng(0)
    for y in (DNA, rng.choice([-7.0, 0.0, 2.5, 4.0, 11.0], size=300), np.array([3.0, 1.0, 3.0, 2.0])):
        codes, m = L.map_labels(y, task="classification", multiclass=True)
        enc = LabelEncoder().fit(y)
        np.testing.assert_array_equal(codes, enc.transform(y))
        assert m.classes == tuple(enc.classes_) and m.policy == "multiclass" and m.task == "classification"
        assert m.n_outputs == len(enc.classes_) and m.positive is None and m.negative == ()
        assert m.model_classes == tuple(float(c) for c in range(len(enc.classes_)))
        np.testing.assert_array_equal(m.apply(y[::-1]), enc.transform(y[::-1]))  # a test file alike


def test_one_vs_rest_is_label_binarize():
    for positive in (1, 2, 3):
        y, m = L.map_labels(DNA, positive=positive)
        column = label_binarize(DNA, classes=[1, 2, 3])[:, positive - 1]
        np.testing.assert_array_equal(y, 2.0 * column - 1.0)
        assert m.policy == "one-vs-rest" and m.classes == (1.0, 2.0, 3.0) and m.n_outputs == 1
        assert m.negative == tuple(float(c) for c in (1, 2, 3) if c != positive)
        assert m.model_classes == (-1.0, 1.0)
    # Two classes are binary, whichever is positive; the larger by default.
    y, m = L.map_labels([0, 5, 5, 0])
    np.testing.assert_array_equal(y, 2.0 * label_binarize([0, 5, 5, 0], classes=[0, 5]).ravel() - 1.0)
    assert (m.policy, m.positive, m.classes) == ("binary", 5.0, (0.0, 5.0))
    assert L.map_labels([0, 5, 5, 0], positive=0)[1].policy == "binary"


def test_the_sentences_say_the_mapping():
    assert L.map_labels([1, -1, -1])[1].description == "labels -1 and +1 kept as they are"
    assert L.map_labels([1, -1, -1], positive=-1)[1].description == "label -1 became +1, label 1 became -1"
    assert L.map_labels(DNA, positive=3)[1].description == "label 3 became +1, labels 1, 2 became -1"
    assert L.map_labels([0.5, 2.0])[1].description == "real-valued targets kept as they are"
    assert L.map_labels(DNA, multiclass=True)[1].description == "3 classes: labels 1, 2, 3 became classes 0, 1, 2"
    many = L.map_labels(np.arange(10, 17), multiclass=True)[1].description
    assert many == "7 classes: labels 10, 11, 12, 13, 14, ... (7 in all) became classes 0, 1, 2, 3, 4, ... (7 in all)"


def test_libsvm_still_offers_the_mapping_it_used_to_own():
    y, m = L.map_labels(DNA, positive=2)
    assert isinstance(m, LabelMapping) and m.task == "classification"
    assert (m.positive, m.negative) == (2.0, (1.0, 3.0))
    # Without a positive class and without multiclass, many classes are refused, as before.
    with pytest.raises(DataFormatError, match="3 classes"):
        L.map_labels(DNA)


def test_unknown_labels_are_found_and_multiclass_refuses_them():
    _, m = L.map_labels(DNA, positive=1)
    np.testing.assert_array_equal(m.unknown([1, 4, 3, -1]), [False, True, False, True])
    assert not np.any(L.map_labels([0.5, 1.5])[1].unknown([7.0]))  # regression: no classes
    _, mc = L.map_labels(DNA, multiclass=True)
    with pytest.raises(ParameterError, match="one of the classes 1, 2, 3"):
        mc.apply([1.0, 4.0])


@pytest.mark.parametrize("kwargs, name", [
    (dict(policy="softmax"), "policy"),
    (dict(policy="binary", classes=(1.0,), positive=1.0), "classes"),
    (dict(policy="binary", classes=(2.0, 1.0), positive=1.0), "classes"),
    (dict(policy="binary", classes=(1.0, 2.0), positive=3.0), "positive"),
    (dict(policy="binary", classes=(1.0, 2.0, 3.0), positive=3.0), "policy"),
    (dict(policy="one-vs-rest", classes=(1.0, 2.0), positive=2.0), "policy"),
    (dict(policy="multiclass", classes=(1.0, 2.0), positive=2.0), "positive"),
    (dict(policy="regression", classes=(1.0, 2.0)), "classes"),
])
def test_a_label_map_refuses_what_is_no_policy_naming_the_field(kwargs, name):
    with pytest.raises(ParameterError) as info:
        L.LabelMap(**kwargs)
    assert info.value.name == name


def test_map_labels_refuses_a_non_boolean_multiclass():
    with pytest.raises(ParameterError, match="multiclass"):
        L.map_labels(DNA, multiclass="yes")


# --------------------------------------------------------------------------- counting

def test_node_label_counts_are_per_node_uniques():
    rng = np.random.default_rng(1)
    for classes, n, K in (((1.0, 2.0, 3.0), 500, 7), ((-1.0, 1.0), 333, 12), ((0.0, 4.0, 9.0, 10.0), 90, 1),
                          (tuple(np.arange(12.0)), 700, 15)):  # more than 8 classes: the one-key path
        y = rng.choice(classes, size=n)
        offsets = _random_offsets(rng, n, K) if K > 1 else np.array([0, n])
        got = L.node_label_counts(y, offsets, classes)
        np.testing.assert_array_equal(got, _plain_counts(y, offsets, classes))
        assert got.dtype == np.int64 and got.shape == (K, len(classes))
        np.testing.assert_array_equal(got.sum(1), np.diff(offsets))
        np.testing.assert_array_equal(L.node_label_counts(y, offsets), got)  # default: np.unique(y)
        np.testing.assert_array_equal(L.label_counts(y, classes), np.bincount(np.searchsorted(classes, y)))


def test_a_class_absent_from_the_labels_is_a_zero_column_and_an_empty_node_a_zero_row():
    y = np.array([1.0, 1.0, 3.0, 1.0])
    np.testing.assert_array_equal(L.node_label_counts(y, [0, 2, 2, 4], (1.0, 2.0, 3.0)),
                                  [[2, 0, 0], [0, 0, 0], [1, 0, 1]])
    many = tuple(np.arange(1.0, 11.0))
    np.testing.assert_array_equal(L.node_label_counts(y, [0, 2, 2, 4], many)[:, [0, 1, 2]],
                                  [[2, 0, 0], [0, 0, 0], [1, 0, 1]])


def test_binary_counts_follow_the_sign_rule_and_other_classes_refuse_strangers():
    y = np.array([-1.0, 1.0, 1.0, 0.0, 2.0])  # 0 and 2 are no ±1, but the sign rule reads them
    np.testing.assert_array_equal(L.class_codes(y), (y > 0).astype(int))
    with pytest.raises(ParameterError, match="one of the classes 1, 2, 3"):
        L.node_label_counts(np.array([1.0, 5.0]), [0, 2], (1.0, 2.0, 3.0))
    with pytest.raises(ParameterError, match="classes"):
        L.class_codes([1.0], (2.0, 1.0))
    with pytest.raises(ParameterError, match="offsets"):
        L.node_label_counts(np.ones(4), [0, 2, 3], (-1.0, 1.0))


def _plain_node_majority(counts):
    """Each node's most frequent class; of tied ones, the most frequent overall; then the lowest."""
    total = counts.sum(0)
    out = []
    for row in counts:
        tied = [c for c in range(len(row)) if row[c] == row.max()]
        best = max(total[c] for c in tied)
        out.append(min(c for c in tied if total[c] == best))
    return np.array(out)


def test_node_majority_breaks_ties_by_the_global_count_then_the_lowest_class():
    counts = np.array([[3, 3, 0], [0, 2, 2], [1, 0, 1], [0, 0, 5], [4, 4, 4]])  # totals 8, 9, 12
    np.testing.assert_array_equal(L.node_majority(counts), [1, 2, 2, 2, 2])
    rng = np.random.default_rng(2)
    for _ in range(50):
        counts = rng.integers(0, 4, size=(rng.integers(1, 9), rng.integers(2, 6)))
        np.testing.assert_array_equal(L.node_majority(counts), _plain_node_majority(counts))
        assert L.majority_class(counts) == min(np.flatnonzero(counts.sum(0) == counts.sum(0).max()))


def test_binary_majorities_are_the_old_rules():
    """The rules baselines.py had: +1 when 2·pos > m, and a tied node takes the global majority."""
    rng = np.random.default_rng(3)
    for _ in range(60):
        n, K = 2 * int(rng.integers(4, 30)), int(rng.integers(1, 6))  # even n: global ties happen
        share = rng.random()
        y = rng.choice([-1.0, 1.0], size=n, p=[1 - share, share])
        offsets = _random_offsets(rng, n, K) if K > 1 else np.array([0, n])
        pos = np.array([np.sum(y[a:b] > 0) for a, b in zip(offsets[:-1], offsets[1:])])
        sizes = np.diff(offsets)
        glob = 1.0 if 2 * np.sum(y > 0) > n else -1.0
        old = np.where(2 * pos > sizes, 1.0, np.where(2 * pos < sizes, -1.0, glob))
        counts = L.node_label_counts(y, offsets, L.BINARY_CLASSES)
        np.testing.assert_array_equal(np.array(L.BINARY_CLASSES)[L.node_majority(counts)], old)
        assert L.BINARY_CLASSES[L.majority_class(counts)] == glob == majority_label(y)


def test_label_skew_is_the_total_variation_and_for_two_classes_the_old_figure_bitwise():
    rng = np.random.default_rng(4)
    y = rng.choice([1.0, 2.0, 3.0, 4.0], size=400)
    offsets = _random_offsets(rng, 400, 9)
    counts = L.node_label_counts(y, offsets, (1.0, 2.0, 3.0, 4.0))
    p = np.array([np.mean(y == c) for c in (1, 2, 3, 4)])
    tv = [0.5 * sum(abs(np.mean(y[a:b] == c) - p[i]) for i, c in enumerate((1, 2, 3, 4)))
          for a, b in zip(offsets[:-1], offsets[1:])]
    assert L.label_skew(counts) == pytest.approx(np.dot(np.diff(offsets) / 400, tv), rel=1e-12)
    yb = np.where(y > 2, 1.0, -1.0)
    pos = (yb > 0).astype(np.float64)  # properties.py's formula before the module
    p_k = np.add.reduceat(pos, offsets[:-1]) / np.diff(offsets)
    old = float(np.sum(np.diff(offsets) / 400 * np.abs(p_k - pos.mean())))
    assert L.label_skew(L.node_label_counts(yb, offsets, L.BINARY_CLASSES)) == old


def test_positive_share_is_a_binary_figure():
    counts = np.array([[3, 1], [0, 2]])
    np.testing.assert_array_equal(L.positive_share(counts), [0.25, 1.0])
    assert L.positive_share(counts.sum(0)) == 0.5
    with pytest.raises(ParameterError, match="counts"):
        L.positive_share(np.ones((2, 3)))


# --------------------------------------------------------------------------- the same numbers as before

SPECS = [
    DataSpec(source=str(DATA / "a9a"), nodes=40, seed=3),
    DataSpec(source=str(DATA / "dna.scale"), positive=2, nodes=9, seed=1),
    DataSpec(source=str(DATA / "dna.scale"), positive=3, partition="dirichlet:alpha=0.3", nodes=20, seed=2),
    DataSpec(source=str(DATA / "heart_scale"), nodes=5, seed=7, test_fraction=0.3),
]


def _old_build(spec):
    """The file path of build() as it stood, written out: ±1 by the positive class, the
    partitioner, and the split stratified by the boolean y > 0."""
    raw = load_libsvm(spec.source)
    classes = np.unique(raw.y)
    positive = classes[1] if spec.positive is None else spec.positive
    y = np.where(raw.y == positive, 1.0, -1.0)
    node = make_partitioner(spec.partition or "iid", n_nodes=spec.nodes, seed=spec.seed).assign(raw.X, y)
    test = random_split(node, 0.25 if spec.test_fraction is None else spec.test_fraction, seed=spec.seed,
                        labels=y > 0)
    return FederatedDataset.from_assignment(raw.X[~test], y[~test], node[~test], X_test=raw.X[test],
                                            y_test=y[test], test_nodes=node[test])


@pytest.fixture(scope="module", params=range(len(SPECS)), ids=["a9a", "dna-2", "dna-3-dirichlet", "heart"])
def pair(request):
    spec = SPECS[request.param]
    return build(spec), _old_build(spec)


def test_the_split_and_the_mapped_labels_are_as_before(pair):
    ds, old = pair
    assert ds.fingerprint == old.fingerprint


def test_the_baselines_are_as_before(pair):
    ds, _ = pair
    # Written out: the training majority for every test row, each node's majority (ties: global).
    glob = 1.0 if 2 * np.sum(ds.y > 0) > ds.n else -1.0
    assert majority_test_error(ds) == np.mean(ds.y_test != glob)
    node_label = []
    for k in range(ds.n_nodes):
        yk = ds.y[ds.node_slice(k)]
        node_label.append(glob if 2 * np.sum(yk > 0) == yk.size else 1.0 if 2 * np.sum(yk > 0) > yk.size else -1.0)
    np.testing.assert_array_equal(node_majority_labels(ds), node_label)
    known = ds.test_nodes >= 0
    assert node_majority_test_error(ds) == np.mean(np.array(node_label)[ds.test_nodes[known]] != ds.y_test[known])


def test_the_label_figures_are_as_before(pair):
    """The Data page's and the drift view's share of +1 per node, the CLI's share overall, and the
    properties' label skew: the reduceat formulas they used, bitwise."""
    ds, _ = pair
    pos = (ds.y > 0).astype(float)
    share = np.add.reduceat(pos, ds.offsets[:-1]) / ds.node_sizes
    counts = L.dataset_label_counts(ds)
    np.testing.assert_array_equal(L.positive_share(counts), share)
    assert L.positive_share(counts.sum(0)) == float(pos.mean())
    p_k, sizes = share, np.diff(ds.offsets)
    assert non_iid(ds).label_skew == float(np.sum(sizes / ds.n * np.abs(p_k - pos.mean())))


def test_strata_by_codes_are_the_boolean_and_the_unique_strata():
    rng = np.random.default_rng(5)
    node = rng.integers(0, 6, size=300)
    y = rng.choice([-1.0, 1.0], size=300)
    by_codes = random_split(node, 0.3, seed=9, labels=L.class_codes(y), n_classes=2)
    np.testing.assert_array_equal(by_codes, random_split(node, 0.3, seed=9, labels=y > 0))
    z = rng.choice([4.0, 5.0, 8.0], size=300)
    codes = L.class_codes(z, (4.0, 5.0, 8.0))
    np.testing.assert_array_equal(random_split(node, 0.3, seed=9, labels=codes, n_classes=3),
                                  random_split(node, 0.3, seed=9, labels=z))
    with pytest.raises(ParameterError, match="class codes 0..1"):
        random_split(node, 0.3, seed=9, labels=codes, n_classes=2)


def test_regression_has_no_classes():
    ds = build(DataSpec(source=str(DATA / "heart_scale"), task="regression", nodes=3))
    assert L.dataset_classes(ds) is None
    with pytest.raises(ParameterError, match="regression targets have no classes"):
        L.dataset_label_counts(ds)
    assert non_iid(ds).label_skew is None


def test_the_cli_reports_the_share_of_plus_one_and_the_baselines_as_before(capsys):
    import json

    from fedviz.cli import main

    assert main(["inspect", str(DATA / "dna.scale"), "--positive", "2", "--nodes", "9", "--seed", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ds = build(SPECS[1])
    assert out["positive_fraction"] == float(np.mean(ds.y == 1))
    glob = 1.0 if 2 * np.sum(ds.y == 1) > ds.n else -1.0
    assert out["majority_test_error"] == float(np.mean(ds.y_test != glob))
