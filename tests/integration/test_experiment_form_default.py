"""The Experiments form's first experiment shows an effect (issue 31, point 8).

Its defaults were GD and FedAvg on identical nodes with the number of nodes varied: two flat lines and identical
heatmap columns.  Here the form is opened as a user opens it, its default experiment is made from the widgets'
values exactly as Launch makes it, and its cells are run in this process (the computation a worker runs); along
the varied setting every algorithm's final f − f* must move beyond the spread of its seeds: the two ends' seed
ranges do not overlap and the medians differ by 1.5× at least.
"""

from __future__ import annotations

import numpy as np

from apptest import open_page
from fedviz.experiments.spec import from_mapping, parse_values
from fedviz.runner.execute import Stop, execute


class _Last:
    def __init__(self):
        self.rec = None

    def record(self, label, rec):
        self.rec = rec

    def __getattr__(self, name):
        return lambda *a, **k: None


def test_the_default_experiment_varies_something_that_moves_every_algorithm():
    at = open_page("pages/experiments.py", timeout=180)
    state = at.session_state
    preset, options = state["exp-preset"], state["exp-preset-options"]
    names = state["exp-algorithms"]
    assert state["exp-axes"] == 1, "the form's default varies one setting"
    key, values = state["exp-axis0-key"], parse_values(state["exp-axis0-values"], "axis values")
    doc = {"name": "default", "data": "preset:" + preset + (f"?{options}" if options else ""), "loss": state["exp-loss"],
           "iterations": int(state["exp-iterations"]), "seeds": int(state["exp-seeds"]),
           "algorithm": [{"name": n, "step": state[f"exp-step-{n}"]} for n in names],
           "axis": [{"key": key, "values": values}]}
    exp = from_mapping(doc, where="form")
    finals: dict[tuple[str, float], list[float]] = {}
    for cell in exp.cells():
        sink = _Last()
        execute(cell.job.validate(), sink, Stop())
        value = values[cell.setting[0]]  # the cell's index on the one axis
        finals.setdefault((cell.arm, value), []).append(sink.rec.suboptimality)
    assert len(finals) == len(names) * len(values), sorted(finals)
    ends = (values[0], values[-1])
    for label in {label for label, _ in finals}:
        low, high = (np.asarray(finals[(label, v)]) for v in ends)
        assert np.all(np.isfinite(low)) and np.all(np.isfinite(high)), finals
        apart = low.max() < high.min() or high.max() < low.min()
        ratio = max(np.median(low), np.median(high)) / min(np.median(low), np.median(high))
        assert apart and ratio >= 1.5, (label, key, ends, low, high)
