"""The paper's Figure 2 (Section 4.1), reproduced on google-plus-small with default hyperparameters.

The paper's claims after 30 iterations: FSVRG reaches the optimum's test error; CoCoA+
(σ' = K) is worse than plain GD in objective; FSVRG on reshuffled data (FSVRGR) converges
comparably, so FSVRG is robust to the non-IID split.  The last holds in test error only:
with FSVRG's stepsize no longer capped at 4/L (the safeguarded default, or the paper's
after-the-fact choice) the IID reshuffle ends many times lower in f − f*, as docs/figure2.md says.
"""

import pytest

from fedviz.bench.figure2 import figure2


@pytest.fixture(scope="module")
def fig():
    return figure2("google-plus-small", iterations=30)


def test_all_lines_ran_thirty_iterations(fig):
    assert set(fig.runs) == {"FSVRG", "GD", "CoCoA+", "FSVRGR"}
    for records in fig.runs.values():
        assert records[-1].iteration == 30 and records[-1].status == "done"


def test_fsvrg_reaches_the_optimums_test_error(fig):
    assert abs(fig.runs["FSVRG"][-1].test_error - fig.optimum.test_error) <= 0.005


def test_cocoa_plus_is_behind_gd_in_suboptimality(fig):
    assert fig.runs["CoCoA+"][-1].suboptimality > fig.runs["GD"][-1].suboptimality


def test_fsvrg_beats_both_baselines_by_an_order_of_magnitude(fig):
    fsvrg = fig.runs["FSVRG"][-1].suboptimality
    assert 10 * fsvrg < fig.runs["GD"][-1].suboptimality
    assert 10 * fsvrg < fig.runs["CoCoA+"][-1].suboptimality


def test_reshuffled_fsvrg_matches_in_test_error_but_not_in_objective(fig):
    """'Since the difference in convergence is subtle...' holds for the test error; in f − f* the
    docs/figure2.md reports the IID reshuffle more than 3× lower (the non-IID nodes make the safeguard
    halve h, IID nodes take the long step)."""
    a, b = fig.runs["FSVRG"][-1].suboptimality, fig.runs["FSVRGR"][-1].suboptimality
    assert b < a / 3
    assert abs(fig.runs["FSVRG"][-1].test_error - fig.runs["FSVRGR"][-1].test_error) <= 0.01


def test_the_safeguard_rejects_more_on_the_authors_nodes_than_on_the_reshuffle(fig):
    """The tour's sentence: FSVRG's safeguard halved h three times on the natural nodes, once on the
    reshuffled ones.  A rejection shows as a record equal to the one before (the model stays put);
    iteration 1 is always so (the first trial is checked in iteration 2), the others count."""
    def flats(label):
        f = [r.objective for r in fig.runs[label]]
        assert f[1] == f[0]
        return sum(b == a for a, b in zip(f[1:], f[2:]))

    assert (flats("FSVRG"), flats("FSVRGR")) == (3, 1)


def test_the_paper_protocol_keeps_the_best_stepsize_of_its_grid():
    """Section 4.1's 'retrospectively choose one that works best', checked against the neighbours."""
    import math

    from fedviz.bench.figure2 import PAPER_GRID
    from fedviz.runner.loop import iterate

    T = 8
    fig = figure2("google-plus-small", iterations=T, protocol="paper")
    p_nat = fig.runs["FSVRG"]
    h = fig.stepsizes["FSVRG"]
    from fedviz.problems.objective import Problem
    pb = Problem(fig.data, "logistic")
    k = math.log2(h * pb.smoothness)
    assert abs(k - round(k)) < 1e-9 and round(k) in PAPER_GRID
    for other in (h / 2, 2 * h):
        last = list(iterate(pb, "fsvrg", iterations=T, f_star=fig.optimum.objective,
                            hyper={"stepsize": other, "safeguard": False}))[-1]
        assert last.status != "done" or last.suboptimality >= p_nat[-1].suboptimality
    assert fig.runs["GD"][-1].suboptimality == pytest.approx(
        list(iterate(pb, "gd", iterations=T, f_star=fig.optimum.objective))[-1].suboptimality)


def test_reshuffle_keeps_every_node_size(fig):
    from fedviz.bench.figure2 import reshuffled
    shuffled = reshuffled(fig.data)
    assert sorted(shuffled.node_sizes) == sorted(fig.data.node_sizes)
    assert shuffled.n == fig.data.n
