"""The cluster check tells a worker that vanished from one that runs another fedviz (issue 32, point 3).

Killed 12 s into ``fedviz experiment`` while the cluster started, a worker's probe came back as
``CommClosedError: Stream is closed`` and the experiment failed with "the worker … cannot import fedviz
… install fedviz there".  The probe never raises (it returns its own import errors), so an exception in
its place is the connection's: that worker is left unchecked and asked again at the next check, when it
(or the worker its nanny starts under a new address) answers.  A stand-in client plays the scheduler.
"""

from __future__ import annotations

import pytest
from distributed.comm.core import CommClosedError

from fedviz.runner.cluster import ClusterMismatch, check_cluster, environment
from fedviz.runner.cluster.client import _CHECKED


class _Client:
    """Answers the probe as told: ``answers[worker]`` is a probe's dict or an exception in its place."""

    def __init__(self, answers: dict):
        self.answers = answers
        self.asked: list[list[str]] = []
        self.scheduler = type("S", (), {"address": "tls://127.0.0.1:8786"})()

    def run_on_scheduler(self, probe):
        return environment()

    def scheduler_info(self, n_workers=-1):
        return {"workers": {w: {} for w in self.answers}}

    def run(self, probe, workers, on_error):
        assert on_error == "return"
        self.asked.append(list(workers))
        return {w: self.answers[w] for w in workers}


@pytest.fixture
def client():
    c = _Client({})
    yield c
    _CHECKED.pop(id(c), None)


def test_a_worker_whose_stream_closed_is_asked_again_not_called_a_broken_install(client):
    here = environment()
    client.answers = {"tls://w1": CommClosedError("in <TLS (closed)>: Stream is closed"), "tls://w2": here}
    check_cluster(client)  # no refusal: w1's connection failed, not its fedviz
    assert _CHECKED[id(client)] == {"scheduler", "tls://w2"}
    # Its nanny brings it back under a new address; the old one is gone: only the new one is asked.
    client.answers = {"tls://w1-again": here, "tls://w2": here}
    check_cluster(client)
    assert client.asked[-1] == ["tls://w1-again"]
    assert _CHECKED[id(client)] == {"scheduler", "tls://w2", "tls://w1-again"}


def test_a_worker_that_answers_without_fedviz_is_still_refused_by_name(client):
    here = environment()
    broken = {"numpy": here["numpy"], "numba": here["numba"], "error": "ModuleNotFoundError: No module named 'fedviz'"}
    client.answers = {"tls://w1": broken, "tls://w2": here}
    with pytest.raises(ClusterMismatch, match=r"the worker at tls://w1 cannot import fedviz \(ModuleNotFoundError"):
        check_cluster(client)
