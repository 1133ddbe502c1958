"""A link's data set is built in one of the run cap's slots (issue 21, point 3): while every slot
is taken the Data page waits its turn (it says so) and builds nothing; once a slot frees it builds.
Before, the page built it at once in its own thread, beside however many runs and other visitors'
links, outside FEDVIZ_MAX_RUNS."""

from __future__ import annotations

import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from conftest import ROOT
from fedviz.data.build import DataSpec
from fedviz.runner import cache
from fedviz.runner.serve import manager as manager_mod
from fedviz.runner.config import RunConfig
from fedviz.runner.serve.manager import RunManager

#: A data set nobody else builds in this process (its own seed).
LINKED = DataSpec(source="preset:identical-nodes", seed=424242)


@pytest.fixture
def one_slot(monkeypatch):
    m = RunManager(1, reaper=False)
    monkeypatch.setattr(manager_mod, "_MANAGER", m)
    yield m
    m.close()


def test_a_links_data_set_waits_for_a_free_slot_before_it_is_built(one_slot):
    cache.clear()
    busy = one_slot.slot("another visitor")  # the server's one slot, taken (a run, another build)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["config"] = RunConfig(data=LINKED, algorithms=(("gd", ()),), iterations=2)
    at.run()
    at.switch_page("pages/data.py")
    done = threading.Event()
    worker = threading.Thread(target=lambda: (at.run(), done.set()))
    worker.start()
    time.sleep(2.0)
    assert not done.is_set() and not cache.built(LINKED), "the page built the data set while every slot was taken"
    assert one_slot.counts() == (1, 1)  # the page waits in the queue, behind the slot in use
    busy.release()
    worker.join(120)
    assert done.is_set() and cache.built(LINKED)
    assert not at.exception and not at.error
    assert {m.label: m.value for m in at.metric}["nodes K"] == "10"
    assert one_slot.counts() == (0, 0)  # the page's slot given back


def test_the_waiting_sentence_counts_the_slots():
    from fedviz.ui import slot_wait_text

    assert slot_wait_text("build the data set", 1, 1) == (
        "Waiting for a free slot to build the data set: position 1 in the queue. Runs and data-set builds share "
        "this server's slots, and its one slot is busy.")
    assert slot_wait_text("compute the optimum (Newton-CG)", 3, 4).endswith("and all 4 of them are busy.")
