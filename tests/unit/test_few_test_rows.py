"""The warning of per-node views on too few test rows (issue 31, point 7): when it is said, and that its numbers
are the counts' own (NumPy's median, min and max of the nodes that have test rows; the step 1/t of an error
rate on t rows), with remedies the Data page offers for the source in force."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fedviz.problems.pernode import MIN_NODE_TEST_ROWS, few_test_rows_sentence


def test_said_exactly_when_the_median_scored_node_holds_fewer_than_the_minimum():
    below = np.full(40, MIN_NODE_TEST_ROWS - 1)
    at = np.full(40, MIN_NODE_TEST_ROWS)
    assert few_test_rows_sentence(below, test_file=False)
    assert few_test_rows_sentence(at, test_file=False) == ""
    # Nodes without test rows are another sentence's (untested_sentence): they do not pull the median down.
    assert few_test_rows_sentence(np.r_[at, np.zeros(100, int)], test_file=False) == ""
    assert few_test_rows_sentence(np.zeros(7, int), test_file=False) == ""


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_numbers_are_the_counts_own(seed):
    rng = np.random.default_rng(seed)
    counts = np.r_[rng.integers(1, 15, size=30), np.zeros(5, int)]
    text = few_test_rows_sentence(counts, test_file=False)
    scored = counts[counts > 0]
    median = np.median(scored)
    assert f"{scored.min():,} to {scored.max():,}, median {median:g}" in text, text
    assert f"{scored.size:,} nodes scored" in text, text
    step = int(re.search(r"steps of (\d+) points", text).group(1))
    assert step == round(100 / median), (step, median)


def test_the_remedies_are_those_of_the_source_in_force():
    counts = np.full(50, 5)
    without = few_test_rows_sentence(counts, test_file=False)
    with_file = few_test_rows_sentence(counts, test_file=True)
    assert "(5 each; 50 nodes scored)" in without
    assert "'Test fraction'" in without and "'Nodes for the partition'" in without
    # A separate test file disables the test fraction on Data: it must not be offered.
    assert "Test fraction" not in with_file and "'Nodes for the partition'" in with_file
    regression = few_test_rows_sentence(counts, test_file=False, regression=True)
    assert "squared error is a mean of 5 values" in regression and "points" not in regression
