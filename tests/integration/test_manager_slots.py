"""A page's own heavy work (building a data set a link asked for, solving its optimum) takes one of
the run cap's slots, in FIFO order with the runs (issue 21, point 3: "data sets from links built
under the run cap")."""

from __future__ import annotations

import threading

import pytest

from fedviz.data.build import DataSpec
from fedviz.runner.serve.manager import ProblemSpec, RunJob, RunManager

WAIT = 60.0
TINY = ProblemSpec(DataSpec(source="preset:identical-nodes"), "logistic", None)


@pytest.fixture
def manager():
    m = RunManager(1, reaper=False)
    yield m
    m.close()


def test_a_slot_is_granted_at_once_when_one_is_free_and_counts_as_running(manager):
    with manager.slot("a") as slot:
        assert slot.wait(0) and slot.position == 0
        assert manager.counts() == (1, 0)
        assert manager.active() == []  # a slot is not a run: nothing to stop or show
    assert manager.counts() == (0, 0)


def test_a_run_submitted_while_a_page_builds_waits_for_the_slot(manager):
    slot = manager.slot("page")
    handle = manager.submit(RunJob(TINY, (("gd", "gd", {}),), iterations=2), "visitor")
    assert handle.status == "queued" and manager.queue_position(handle) == 1
    slot.release()
    assert handle.wait(WAIT) and handle.status == "done"


def test_slots_queue_behind_runs_in_order_and_a_queued_slot_can_be_given_up(manager):
    gate = threading.Event()
    first = manager.slot("holder")
    waiting = manager.slot("second")
    third = manager.slot("third")
    assert not waiting.wait(0) and (waiting.position, third.position) == (1, 2)
    waiting.release()  # the visitor left the page: its place is given up
    assert third.position == 1
    threading.Timer(0.2, lambda: (first.release(), gate.set())).start()
    assert third.wait(WAIT) and gate.is_set() and third.position == 0
    third.release()
    assert manager.counts() == (0, 0)
    third.release()  # twice: no effect
    assert manager.counts() == (0, 0)
