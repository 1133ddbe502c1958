"""The kernels' warm-up at server start (app.py → ui.start_warm_up → runner.warmup.warm_up)."""

from fedviz.algorithms import ALGORITHMS
from fedviz.problems._blocks import RowBlocks
from fedviz.runner import warmup


def test_warm_up_runs_every_registered_algorithm_and_the_row_block_products():
    seconds = warmup.warm_up()
    assert set(seconds) == set(ALGORITHMS)  # an algorithm added later is warmed up too
    # The file-like problems are large enough for the compiled row-block products (not SciPy's).
    problems = list(warmup._problems())
    kinds = {(RowBlocks(p.data.X).n_blocks > 1, p.loss.name) for p in problems[1:]}
    assert kinds == {(True, "logistic"), (True, "squared"), (True, "smoothed-hinge")}


def test_warm_up_stops_when_asked():
    assert warmup.warm_up(stop=lambda: True) == {}
