"""A Stop during a run's preparation is a stop, not a failure (issue 31, point 6).

Stopping a tuned run while its pilots ran ended the run 'stopped', as it should, but logged "run of … failed"
with the pilots' traceback: the seam's catch-all took the pilots' StopRequested for a fault.  Every phase of
the preparation that polls the stop (tuning's pilots, Ditto's exact targets) is stopped here from the sink,
the moment the phase announces itself, and the log must hold no error.
"""

from __future__ import annotations

import logging

import pytest

from fedviz.algorithms.spec import AlgorithmSpec
from fedviz.data.build import DataSpec
from fedviz.runner.execute import Stop, execute
from fedviz.runner.job import ProblemSpec, RunJob

DATA = DataSpec(source="preset:identical-nodes")


class StopWhen:
    """A sink that requests the stop when a 'preparing' message starts with ``phase``, and keeps the ends."""

    def __init__(self, stop: Stop, phase: str):
        self.stop, self.phase, self.ends, self.said = stop, phase, [], []

    def preparing(self, message):
        self.said.append(message)
        if message.startswith(self.phase):
            self.stop.request()

    def end(self, label, status, message):
        self.ends.append((label, status, message))

    def __getattr__(self, name):
        return lambda *a, **k: None


@pytest.mark.parametrize("phase, job", [
    ("tuning", dict(algorithms=(AlgorithmSpec.of("fedavg", {}, label="fedavg"),), tune=True)),
    ("computing the exact Ditto models", dict(algorithms=(AlgorithmSpec.of("ditto", {}, label="ditto"),))),
])
def test_a_stop_while_preparing_ends_stopped_and_logs_no_error(phase, job, caplog):
    stop = Stop()
    sink = StopWhen(stop, phase)
    run = RunJob(ProblemSpec(DATA, "logistic", None), iterations=12, seed=0, **job).validate()
    with caplog.at_level(logging.WARNING):
        execute(run, sink, stop)
    assert any(m.startswith(phase) for m in sink.said), sink.said  # the phase was reached, and stopped there
    assert [status for _, status, _ in sink.ends] == ["stopped"] * len(job["algorithms"]), sink.ends
    for _, _, message in sink.ends:  # where it stopped, in words, not an exception's name
        assert "StopRequested" not in message and stop.reason in message, message
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
