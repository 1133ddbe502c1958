"""Issue 21, point 4: an experiment belongs to the browser session that launched it.  From a session,
:func:`driver.launch` refuses to resume or replace another visitor's experiment and one another
process is running; an experiment no visitor holds (the command line's, a gone server's) may be
resumed by any visitor and is theirs from then on; the command line (no session) may do everything.

Nothing runs here: the driver thread is not started, the refusals come first.
"""

from __future__ import annotations

import pytest

from fedviz.data.build import DataSpec
from fedviz.errors import ParameterError
from fedviz.experiments import Arm, Experiment, driver
from fedviz.runner.history.store import RunStore

A, B = "session-a", "session-b"


def _grid(name="grid", seeds=(0, 1)) -> Experiment:
    return Experiment(name, DataSpec("preset:identical-nodes"), (Arm.of("gd"),), seeds=seeds, iterations=2)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(driver.ExperimentHandle, "start", lambda self: self)
    monkeypatch.setattr(driver, "_RUNNING", {})
    monkeypatch.setattr(driver, "_LAUNCHERS", {})
    with RunStore(tmp_path / "runs.sqlite") as s:
        yield s


def _stored(store, exp: Experiment, session=None, status="stopped"):
    info = store.open_experiment(exp.name, exp.as_json(), session=session)
    store.finish_experiment(info.id, status, "")
    return store.get_experiment(exp.name)


def test_another_visitors_experiment_is_refused_and_left_untouched(store):
    exp = _grid()
    before = _stored(store, exp, session=A)
    for kwargs in ({}, {"replace": True}):
        with pytest.raises(driver.NotYours, match="launched by another visitor of this server"):
            driver.launch(exp, store, session=B, **kwargs)
    with pytest.raises(driver.NotYours):  # another grid under the name: not theirs to replace either
        driver.launch(_grid(seeds=(0,)), store, session=B, replace=True)
    after = store.get_experiment(exp.name)
    assert (after.updated, after.status, after.launched_in(A)) == (before.updated, "stopped", True)
    assert driver.running() == {}
    # Its launcher resumes it; the command line may too, and then it is nobody's.
    assert driver.launch(exp, store, session=A).launched_in(A)
    driver._RUNNING.clear()
    assert not driver.launch(exp, store).launched_in(A)


def test_a_name_running_here_for_another_visitor_says_whose_it_is(store):
    exp = _grid()
    running = driver.launch(exp, store, session=A)  # never started: "running" for the driver's table
    with pytest.raises(ParameterError, match="another visitor") as e:
        driver.launch(exp, store, session=B)
    assert "stop it first" not in str(e.value)
    with pytest.raises(ParameterError, match="stop it first"):
        driver.launch(exp, store, session=A)
    assert driver.running(exp.name) is running


def test_an_experiment_no_visitor_holds_may_be_resumed_by_any_but_replaced_by_none(store, tmp_path):
    exp = _grid()
    _stored(store, exp)  # the command line's
    with pytest.raises(driver.NotYours, match="not launched from this browser tab"):
        driver.launch(_grid(seeds=(0,)), store, session=B, replace=True)
    with pytest.raises(driver.NameTaken):
        driver.launch(_grid(seeds=(0,)), store, session=B)
    info = store.get_experiment(exp.name)
    for c in exp.cells():  # every cell complete: the driver's run stores nothing and needs no cluster
        store.save_cell(info.id, key=c.key, setting=c.setting, arm=c.arm, step=c.step, seed=c.seed, label=c.label,
                        algorithm="gd", hyper={}, config={}, status="done")
    handle = driver.launch(exp, store, session=B)
    handle._run()  # what the driver thread does first: reopen the experiment, as B's
    assert handle.launched_in(B) and not handle.launched_in(A)
    assert store.get_experiment(exp.name).launched_in(B)
    assert handle.snapshot().status == "done"


def test_a_gone_servers_experiment_has_no_owner_but_a_live_ones_is_refused_while_it_runs(store, tmp_path):
    other = RunStore(tmp_path / "runs.sqlite")  # a second server on the same history
    exp, left = _grid("theirs"), _grid("left")
    other.open_experiment(exp.name, exp.as_json())  # the command line there, running it now
    info = other.open_experiment(left.name, left.as_json(), session=A)
    other.finish_experiment(info.id, "interrupted", "")
    with pytest.raises(driver.NotYours, match="running in another process"):
        driver.launch(exp, store, session=B)
    with pytest.raises(driver.NotYours, match="another visitor"):
        driver.launch(left, store, session=B)
    other.close()  # that server is gone: A's session went with it
    assert store.get_experiment(left.name).ownerless
    assert driver.launch(left, store, session=B).launched_in(B)


def test_an_experiment_whose_tab_has_closed_has_no_owner(store):
    """The probe (Streamlit's "is this session connected") says A's tab is gone: B may resume A's grid."""
    exp = _grid()
    driver.launch(exp, store, session=A)  # A launches it here (never started)
    driver._RUNNING.clear()
    info = _stored(store, exp, session=A)
    assert driver.held(info) and driver.held(info, lambda sid: None)  # cannot tell: held
    assert driver.held(info, lambda sid: sid == A)
    assert not driver.held(info, lambda sid: sid != A)
    with pytest.raises(driver.NotYours):
        driver.launch(exp, store, session=B, alive=lambda sid: True)
    assert driver.launch(exp, store, session=B, alive=lambda sid: sid != A).launched_in(B)
    # A session the probe never saw launch here (another live server's) stays held whatever it says.
    other = store.open_experiment("elsewhere", {}, session="a session of another server")
    assert driver.held(other, lambda sid: False)


def test_a_tabs_running_experiments_share_its_cell_bound(store):
    """FEDVIZ_MAX_CELLS bounds a tab, not a click: with 4 cells running, a tab bounded to 6 may not start
    4 more (4 + 4 > 6); another tab may, and the command line is unbounded."""
    first = driver.launch(_grid("first", seeds=(0, 1, 2, 3)), store, max_cells=6, session=A)
    assert first.experiment.size == 4
    with pytest.raises(ParameterError, match=r"at most 2 more cells from this browser tab.*hold 4 of its 6"):
        driver.launch(_grid("second", seeds=(0, 1, 2, 3)), store, max_cells=6, session=A)
    driver.launch(_grid("second", seeds=(0, 1)), store, max_cells=6, session=A)  # 4 + 2 = 6: allowed
    driver.launch(_grid("third", seeds=(0, 1, 2, 3)), store, max_cells=6, session=B)
    driver.launch(_grid("fourth", seeds=tuple(range(10))), store)
