"""The node × class heatmap of the Data page (issue 22, point 5) and its sentence, against plain
per-node computations: np.bincount and np.unique on each node's slice of y, written out here."""

import re

import numpy as np
import pytest

from fedviz.data.labels import node_label_counts
from fedviz.data.libsvm import load_libsvm
from fedviz.errors import ParameterError
from fedviz.learn.chart_notes import label_spread_note
from fedviz.plots.label_figure import (class_names, class_totals_figure, label_distribution_figure, label_order,
                                       shown_nodes)

from conftest import DATA


def _data(K, C, seed, *, alpha=0.3, empty=()):
    """Labels 0..C−1 on K nodes of log-normal sizes, each node's classes drawn from its own
    Dirichlet(α) mix (non-IID for small α); ``empty`` nodes hold no rows."""
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, rng.lognormal(3, 1.2, K).astype(int))
    sizes[list(empty)] = 0
    mixes = rng.dirichlet(np.full(C, alpha), K)
    y = np.concatenate([rng.choice(C, size=n, p=p) for n, p in zip(sizes, mixes)]).astype(float)
    return y, np.r_[0, np.cumsum(sizes)]


def _plain_counts(y, offsets, C):
    return np.array([np.bincount(y[a:b].astype(int), minlength=C) for a, b in zip(offsets[:-1], offsets[1:])])


def _traces(fig):
    bar = next(t for t in fig.data if t.type == "bar")
    heat = next(t for t in fig.data if t.type == "heatmap")
    return bar, heat


def _plain_majority(node_y, global_counts):
    """The node's most frequent class; ties to the class with more rows overall, then the lowest."""
    values, freq = np.unique(node_y.astype(int), return_counts=True)
    top = values[freq == freq.max()]
    return int(max(top, key=lambda c: (global_counts[c], -c)))


@pytest.mark.parametrize("K, C", [(60, 2), (80, 3), (120, 10)])
@pytest.mark.parametrize("colour", ["count", "share"])
def test_the_matrix_is_each_nodes_bincount(K, C, colour):
    y, offsets = _data(K, C, seed=C)
    counts = node_label_counts(y, offsets, np.arange(C, dtype=float))
    fig = label_distribution_figure(counts, np.arange(C, dtype=float), colour=colour)
    bar, heat = _traces(fig)
    nodes = np.asarray(heat.meta)
    assert sorted(nodes) == list(range(K))  # K ≤ MAX_NODES: every node is drawn, once
    z = np.asarray(heat.z, dtype=float)
    assert z.shape == (C, K)
    for j, k in enumerate(nodes):
        plain = np.bincount(y[offsets[k]:offsets[k + 1]].astype(int), minlength=C)
        expected = plain if colour == "count" else plain / plain.sum()
        np.testing.assert_allclose(z[:, j], expected, rtol=1e-12)
        assert bar.y[j] == offsets[k + 1] - offsets[k]
    assert list(heat.y) == [str(c) for c in range(C)]


@pytest.mark.parametrize("C", [2, 3, 10])
def test_nodes_are_sorted_by_majority_class_then_its_share(C):
    y, offsets = _data(150, C, seed=10 + C)
    counts = _plain_counts(y, offsets, C)
    total = counts.sum(axis=0)
    order = label_order(counts)
    slices = [y[offsets[k]:offsets[k + 1]] for k in order]
    major = [_plain_majority(s, total) for s in slices]
    share = [np.mean(s == m) for s, m in zip(slices, major)]
    assert major == sorted(major)
    for a, b in zip(range(len(order) - 1), range(1, len(order))):
        if major[a] == major[b]:
            assert share[a] >= share[b]


def test_many_nodes_are_a_subset_evenly_spaced_in_the_order_and_the_title_says_so():
    K, C = 10_000, 3
    y, offsets = _data(K, C, seed=3)
    counts = _plain_counts(y, offsets, C)
    fig = label_distribution_figure(counts, (1.0, 2.0, 3.0), max_nodes=400)
    bar, heat = _traces(fig)
    nodes = np.asarray(heat.meta)
    order = label_order(counts)
    assert nodes.size == 400 == np.unique(nodes).size
    assert set(nodes) <= set(range(K))
    position = np.argsort(order)[nodes]  # where each drawn node stands in the full order
    assert np.all(np.diff(position) > 0) and position[0] == 0 and position[-1] == K - 1
    assert np.diff(position).max() - np.diff(position).min() <= 1  # evenly spaced: every 25th, give or take one
    np.testing.assert_array_equal(np.asarray(heat.z, dtype=float).T, counts[nodes] / counts[nodes].sum(1)[:, None])
    assert "400 of the 10,000 nodes" in fig.layout.xaxis2.title.text
    assert list(heat.y) == ["1", "2", "3"]


def test_hover_names_node_class_count_and_share():
    counts = np.array([[3, 1], [0, 5]])
    fig = label_distribution_figure(counts, (-1.0, 1.0))
    bar, heat = _traces(fig)
    j = list(heat.meta).index(0)
    assert heat.text[0][j] == "node 0<br>class −1<br>3 of its 4 rows (75.0%)"
    assert heat.text[1][j] == "node 0<br>class +1<br>1 of its 4 rows (25.0%)"
    assert list(heat.y) == ["−1", "+1"] == class_names((-1.0, 1.0))


def test_an_empty_node_is_drawn_last_blank_and_left_out_of_the_sentence():
    y, offsets = _data(20, 3, seed=5, empty=(4,))
    counts = _plain_counts(y, offsets, 3)
    bar, heat = _traces(label_distribution_figure(counts, (0.0, 1.0, 2.0)))
    assert heat.meta[-1] == 4 and all(np.isnan(np.asarray(heat.z, dtype=float)[:, -1]))
    assert "of the 19 nodes that hold training rows" in label_spread_note(counts, ["0", "1", "2"])


@pytest.mark.parametrize("K, C", [(50, 2), (200, 3), (30, 10)])
def test_the_sentence_against_np_unique_per_node(K, C):
    y, offsets = _data(K, C, seed=20 + C)
    counts = _plain_counts(y, offsets, C)
    names = [f"c{c}" for c in range(C)]
    note = label_spread_note(counts, names)
    # Independent: the classes and their counts of every node by np.unique, the whole's by np.unique.
    glob_values, glob_freq = np.unique(y.astype(int), return_counts=True)
    total = np.zeros(C, int)
    total[glob_values] = glob_freq
    top = int(np.argmax(total))
    differ, tvs = 0, []
    for a, b in zip(offsets[:-1], offsets[1:]):
        node_y = y[a:b]
        differ += _plain_majority(node_y, total) != top
        values, freq = np.unique(node_y.astype(int), return_counts=True)
        p_k = np.zeros(C)
        p_k[values] = freq / node_y.size
        tvs.append(0.5 * np.sum(np.abs(p_k - total / total.sum())))
    m = re.match(r"(\d+) of the (\d+) nodes \(([\d.]+)%\) ha(?:s|ve) a majority class other than the whole's "
                 r"\((c\d+)\); a node's label distribution lies on average ([\d.]+) from", note)
    assert m, note
    assert int(m[1]) == differ and int(m[2]) == K and m[4] == names[top]
    assert float(m[3]) == pytest.approx(100 * differ / K, abs=0.5)
    assert float(m[5]) == pytest.approx(np.mean(tvs), abs=0.005)


def test_the_sentence_at_its_two_ends():
    iid = np.tile([30, 10], (8, 1))
    assert label_spread_note(iid, ["−1", "+1"]).startswith(
        "Every one of the 8 nodes has the whole's majority class (−1); a node's label distribution lies on average "
        "0.00 from the whole's")
    # Each node one class of ten, equally many rows of each class: TV = ½(0.9 + 9 × 0.1) = 0.9 on every node.
    disjoint = np.eye(10, dtype=int) * 7
    note = label_spread_note(disjoint, [str(c) for c in range(10)])
    assert note.startswith("9 of the 10 nodes (90%) have a majority class other than the whole's (0)")
    assert "on average 0.90 from" in note


def test_class_totals_are_each_classes_share_of_all_rows():
    y, offsets = _data(40, 10, seed=7)
    counts = _plain_counts(y, offsets, 10)
    bar = class_totals_figure(counts, np.arange(10.0)).data[0]
    values, freq = np.unique(y.astype(int), return_counts=True)
    expected = np.zeros(10)
    expected[values] = freq / y.size
    np.testing.assert_allclose(np.asarray(bar.y, dtype=float), expected, rtol=1e-12)


@pytest.mark.parametrize("call, name", [
    (lambda: label_distribution_figure(np.ones((5, 1), int), (1.0,)), "counts"),
    (lambda: label_distribution_figure(np.ones((5, 2)) * 0.5, (-1.0, 1.0)), "counts"),
    (lambda: label_distribution_figure(np.ones((5, 3), int), (-1.0, 1.0)), "classes"),
    (lambda: label_distribution_figure(np.ones((5, 2), int), (-1.0, 1.0), colour="log"), "colour"),
    (lambda: label_distribution_figure(np.ones((5, 2), int), (-1.0, 1.0), node_sizes=[1, 2]), "node_sizes"),
    (lambda: shown_nodes(np.arange(5), 1), "max_nodes"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ParameterError) as err:
        call()
    assert err.value.name == name


def test_dna_scales_three_raw_classes_as_the_multiclass_data_layer_will_keep_them():
    """dna.scale's raw labels 1, 2, 3 on 40 nodes of 50 rows in file order: three class rows, each
    node's cells its np.bincount, and the sentence's TV the mean of the nodes' own."""
    y = load_libsvm(DATA / "dna.scale").y
    offsets = np.arange(0, 2001, 50)
    counts = node_label_counts(y, offsets, (1.0, 2.0, 3.0))
    bar, heat = _traces(label_distribution_figure(counts, (1.0, 2.0, 3.0), colour="count"))
    assert list(heat.y) == ["1", "2", "3"]
    z = np.asarray(heat.z, dtype=float)
    for j, k in enumerate(heat.meta):
        np.testing.assert_array_equal(z[:, j], np.bincount(y[50 * k:50 * (k + 1)].astype(int), minlength=4)[1:])
    p = np.bincount(y.astype(int), minlength=4)[1:] / y.size
    tv = np.mean([0.5 * np.abs(np.bincount(y[a:a + 50].astype(int), minlength=4)[1:] / 50 - p).sum()
                  for a in range(0, 2000, 50)])
    assert f"on average {tv:.2f} from" in label_spread_note(counts, ["1", "2", "3"])


def test_many_classes_draw_fewer_nodes_so_the_cells_stay_few():
    """53 classes (news20-like): at most MAX_CELLS // 53 = 150 nodes, still a subset, and the title says so."""
    from fedviz.plots.label_figure import MAX_CELLS

    y, offsets = _data(1000, 53, seed=53)
    counts = _plain_counts(y, offsets, 53)
    fig = label_distribution_figure(counts, np.arange(53.0))
    bar, heat = _traces(fig)
    assert len(heat.meta) == MAX_CELLS // 53 == len(set(heat.meta)) and set(heat.meta) <= set(range(1000))
    assert f"{MAX_CELLS // 53} of the 1,000 nodes" in fig.layout.xaxis2.title.text
