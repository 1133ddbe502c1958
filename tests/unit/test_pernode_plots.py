"""The Run page's per-node figures and sentence (issue 23, point 1): what they draw is the data given."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from fedviz.problems import metrics
from fedviz.problems.metrics import METRICS
from fedviz.plots.pernode import band_figure, caption, histogram_figure, node_figure
from fedviz.problems.pernode import NodeHistory, NodeScores
from fedviz.ui.pernode import node_counts, node_order, node_series


def _cols(n=5, nan=False):
    it = np.arange(n)
    v = (lambda a: np.full(n, np.nan)) if nan else (lambda a: a)
    return {"algorithm": np.array(["gd"] * n), "iteration": it, "rounds": 2 * it, "vectors_up": it,
            "vectors_down": it, "seconds": 0.1 * it, "test_error": 0.3 - 0.01 * it,
            "node_error_p10": v(0.1 - 0.01 * it), "node_error_p50": v(0.25 - 0.01 * it),
            "node_error_p90": v(0.6 - 0.01 * it)}


def test_band_figure_draws_the_percentiles_and_the_pooled_curve():
    cols = _cols()
    fig = band_figure({"GD": cols}, axis="rounds", styles={"GD": "GD"})
    by = {t.name: t for t in fig.data}
    np.testing.assert_array_equal(by["GD p90"].y, cols["node_error_p90"])
    np.testing.assert_array_equal(by["GD p10"].y, cols["node_error_p10"])
    assert by["GD p10"].fill == "tonexty"          # the band: from p10 up to the p90 trace before it
    np.testing.assert_array_equal(by["GD: median node (band 10th–90th)"].y, cols["node_error_p50"])
    np.testing.assert_array_equal(by["GD: pooled"].y, cols["test_error"])
    np.testing.assert_array_equal(by["GD: pooled"].x, cols["rounds"])


def test_a_run_without_tested_nodes_draws_only_its_pooled_curve():
    fig = band_figure({"GD": _cols(nan=True)})
    assert [t.name for t in fig.data] == ["GD: pooled"]


def test_histogram_counts_the_tested_nodes_in_five_point_bins():
    e = np.array([0.0, 0.02, 0.07, 0.5, np.nan, 1.0], dtype=np.float32)
    fig = histogram_figure(e, pooled=0.3)
    (h,) = fig.data
    assert len(h.x) == 5 and h.xbins.size == 0.05
    texts = [a.text for a in fig.layout.annotations]
    assert texts == ["pooled 30.0%", f"node mean {100 * np.mean([0.0, 0.02, 0.07, 0.5, 1.0]):.1f}%"]


def test_node_order_puts_the_worst_first_and_the_untested_last():
    assert node_order(np.array([0.2, np.nan, 0.9, 0.0, 0.9])) == [2, 4, 0, 3, 1]


def test_node_counts():
    ds = SimpleNamespace(test_nodes=np.array([-1, 0, 0, 2, -1]), n_nodes=4, node_sizes=np.array([3, 1, 2, 5]))
    sizes, tested, unassigned = node_counts(ds)
    assert tested.tolist() == [2, 0, 1, 0] and unassigned == 2 and sizes.tolist() == [3, 1, 2, 5]


def test_node_series_follows_the_kept_iterations_on_the_chosen_axis():
    h = NodeHistory(budget=30)
    for t in range(12):
        h.add(NodeScores(t, {"node_error": np.arange(3, dtype=np.float32) + t, "node_loss": np.zeros(3, dtype=np.float32)}))
    tr = h.track()
    cols = _cols(12)
    x, mine, pooled = node_series(tr, cols, "rounds", nodes=3, round_cost=0.0, node=2)
    np.testing.assert_array_equal(x, 2 * tr.iterations)
    np.testing.assert_array_equal(mine, tr.iterations + 2)
    np.testing.assert_allclose(pooled, 0.3 - 0.01 * tr.iterations)
    fig = node_figure(2, {"GD": (x, mine, pooled)}, axis="rounds")
    assert [t.name for t in fig.data] == ["GD: node 2", "GD: pooled"]


def _rec(**kw):
    base = dict(iteration=30, test_error=0.264, node_error_worst10=0.612, node_error_p50=0.2,
                node_error_min=0.0)
    base.update(kw)
    return SimpleNamespace(**base)


def test_caption_states_the_worst_tenth_against_the_pooled_error():
    text = caption({"FSVRG": _rec()}, K=500, untested=0)
    assert text == ("FSVRG at iteration 30: the worst 10% of nodes (50 of 500) average 61.2%, 34.8 points above "
                    "the pooled 26.4%; the median node 20.0%, the best 0.0%.")
    text = caption({"GD": _rec(node_error_worst10=0.2)}, K=23, untested=3)
    assert text.startswith("GD at iteration 30: the worst 10% of nodes (2 of 20) average 20.0%, 6.4 points below")
    assert text.endswith("3 of 23 nodes have no test rows and are left out of the per-node test error "
                         "(counted, not scored).")


def test_caption_without_tested_nodes_says_why():
    text = caption({"GD": _rec(node_error_worst10=math.nan, node_error_p50=math.nan)}, K=8, untested=8,
                   unassigned_rows=100)
    assert text == ("No node has test rows (the test set's 100 rows belong to no node (a separate test file, or a "
                    "preset split into other nodes)): the per-node test error is undefined; the band shows the own "
                    "losses F_k. To score every node, tick 'Deal the test rows to the nodes' on Data (fedviz "
                    "--deal-test): each test row goes to a node drawn by the nodes' shares of its class, and the "
                    "pooled test error stays as it is.")


def test_band_figure_of_the_own_losses_draws_the_objective_as_pooled():
    cols = {**_cols(), "objective": np.linspace(0.7, 0.5, 5),
            **{f"node_loss_{q}": np.linspace(a, a - 0.1, 5) for q, a in (("p10", 0.4), ("p50", 0.6), ("p90", 0.9))}}
    fig = band_figure({"GD": cols}, metric="node_loss")
    by = {t.name: t for t in fig.data}
    np.testing.assert_array_equal(by["GD: f(w)"].y, cols["objective"])  # the caption's name for it
    np.testing.assert_array_equal(by["GD p90"].y, cols["node_loss_p90"])
    assert fig.layout.title.text == "Own loss F_k(w) per node"


@pytest.mark.parametrize("metric", [m.name for m in METRICS if m.band and m.pooled_key])
def test_the_dotted_line_has_in_the_legend_the_name_its_caption_gives_it(metric):
    """Issue 31, point 10: the own losses' caption called the dotted line f(w) and the legend "pooled"."""
    m = metrics.get(metric)
    cols = {**_cols(), m.pooled_key: np.linspace(0.7, 0.5, 5),
            **{m.key(q): np.linspace(a, a - 0.1, 5) for q, a in (("p10", 0.4), ("p50", 0.6), ("p90", 0.9))}}
    dotted = [t for t in band_figure({"GD": cols}, metric=metric).data if t.line.dash == "dot"]
    assert [t.name for t in dotted] == [f"GD: {m.pooled_label}"]
    # What the caption says the dotted line is (a caption that names no line: its pooled value at all).
    said = m.caption.split("the dotted one", 1)[1].split(",")[0] if "the dotted one" in m.caption else m.caption
    assert m.pooled_label in said, (m.pooled_label, m.caption)


def test_band_of_error_rates_starts_at_zero_and_holds_the_upper_edge():
    cols = _cols()
    cols["node_error_p90"] = np.full(5, 1.0)
    fig = band_figure({"GD": cols})
    lo, hi = fig.layout.yaxis.range
    assert lo == 0.0 and 1.0 < hi < 1.06
