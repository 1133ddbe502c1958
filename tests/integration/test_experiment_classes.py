"""Experiments on many classes (issue 22, point 7): a spec on a multiclass data set runs softmax regression;
a loss the data cannot take, or an algorithm that does not take the loss, is refused before anything
starts, naming it and the registry's reason — in the spec's check, on the command line (exit 2) and on
the Experiments page (an error, nothing launched)."""

import math
import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

from fedviz.algorithms import ALGORITHMS
from fedviz.data.build import DataSpec, build
from fedviz.errors import ParameterError
from fedviz.experiments.spec import data_classes, from_toml

from conftest import DATA, ROOT, plain

DNA = str(DATA / "dna.scale")


def _toml(data, loss=None, algorithms=("gd",), extra=""):
    head = f'name = "classes"\ndata = "{data}"\niterations = 2\n' + (f'loss = "{loss}"\n' if loss else "") + extra
    return head + "".join(f'\n[[algorithm]]\nname = "{a}"\n' for a in algorithms)


def test_the_data_s_classes_are_counted_without_drawing_a_preset():
    assert data_classes(DataSpec(source=DNA)) == len(set(build(DataSpec(source=DNA)).meta["classes"])) == 3
    assert data_classes(DataSpec(source=DNA, positive=2)) == 1  # one-vs-rest: one output
    assert data_classes(DataSpec(source=str(DATA / "heart_scale"))) == 1
    assert data_classes(DataSpec(source="preset:fedprox-synthetic")) == 10
    assert data_classes(DataSpec(source="preset:fedprox-synthetic?labels=classes&n_classes=4")) == 4
    assert data_classes(DataSpec(source="preset:fedprox-synthetic-binary")) == 1
    assert data_classes(DataSpec(source="preset:google-plus-small")) == 1


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_on_softmax_is_checked_or_refused_with_the_registry_s_sentence(name):
    """The registry walked: an algorithm that refuses softmax is refused by the check with its own sentence;
    one that takes it passes (an algorithm added later is walked too)."""
    exp = from_toml(_toml("preset:fedprox-synthetic?nodes=5", "softmax", (name,)))
    why = ALGORITHMS[name].softmax_refusal()
    if why is None:
        exp.check()
    else:
        with pytest.raises(ParameterError) as e:
            exp.check()
        assert why in str(e.value) and repr(ALGORITHMS[name].title) in str(e.value)


def test_a_loss_the_data_cannot_take_is_refused_with_the_way_out():
    with pytest.raises(ParameterError, match=r"loss='logistic'.*'softmax': dna.scale holds 3 classes.*"
                                             r'loss = "softmax".*positive = <a class>'):
        from_toml(_toml(DNA)).check()
    with pytest.raises(ParameterError, match="loss='softmax'.*heart_scale holds two classes"):
        from_toml(_toml(str(DATA / "heart_scale"), "softmax")).check()
    from_toml(_toml(DNA, extra="positive = 2\n")).check()  # one-vs-rest: the logistic loss is right
    # An axis that varies the loss: the setting that cannot run is refused too.
    with pytest.raises(ParameterError, match="loss='logistic'"):
        from_toml(_toml(DNA, "softmax", extra='\n[[axis]]\nkey = "loss"\nvalues = ["softmax", "logistic"]\n')).check()


def _cli(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "fedviz", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_the_command_refuses_cocoa_plus_on_dna_scale_before_launch_and_runs_softmax(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(_toml(DNA, "softmax", ("gd", "cocoa-plus")))
    r = _cli("experiment", bad)
    assert r.returncode == 2, r.stderr
    assert ALGORITHMS["cocoa-plus"].softmax_refusal() in " ".join(r.stderr.split())
    assert "algorithm 'CoCoA+'" in r.stderr and "Traceback" not in r.stderr
    good = tmp_path / "good.toml"
    good.write_text(_toml(DNA, "softmax", ("gd", "fsvrg")).replace('name = "classes"', 'name = "classes-ok"'))
    r = _cli("experiment", good, "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "failed" not in r.stderr
    from fedviz.experiments.results import load
    from fedviz.runner.history.store import RunStore

    results = load(RunStore(), "classes-ok")
    assert {c.status for c in results.cells} == {"done"} and len(results.cells) == 2
    # f(0) = log 3 for softmax over 3 classes (λ‖0‖² = 0): both end below it, with an error rate.
    assert all(0 < c.objective < math.log(3) and 0 <= c.test_error <= 1 for c in results.cells)


# -- the page -----------------------------------------------------------------------------------------------
def _page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/experiments.py")
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_form_offers_softmax_and_its_algorithms_on_the_ten_class_preset():
    at = _page()
    at.selectbox(key="exp-preset").set_value("fedprox-synthetic").run()
    assert at.selectbox(key="exp-loss-softmax").options == ["softmax"]
    takes = [n for n, cls in ALGORITHMS.items() if cls.softmax_refusal() is None]
    assert len(at.multiselect(key="exp-algorithms-softmax").options) == len(takes)
    caption = next(c.value for c in at.caption if c.value.startswith("Not offered for these 10 classes"))
    for name, cls in ALGORITHMS.items():
        if cls.softmax_refusal() is not None:
            assert cls.multiclass_reason in caption and cls.title in caption
    at.selectbox(key="exp-preset").set_value("fedprox-synthetic-binary").run()  # binary again: every algorithm, logistic
    assert at.selectbox(key="exp-loss").value == "logistic"
    assert len(at.multiselect(key="exp-algorithms").options) == len(ALGORITHMS)


def test_a_toml_naming_a_refusing_algorithm_is_an_error_on_the_page_and_launches_nothing():
    at = _page()
    at.text_area(key="exp-toml").set_value(_toml("preset:fedprox-synthetic?nodes=5", "softmax",
                                                 ("gd", "cocoa-plus"))).run()
    at.button(key="exp-launch-toml").click().run()
    assert not at.exception
    errors = [" ".join(plain(e.value).split()) for e in at.error]
    assert any(ALGORITHMS["cocoa-plus"].softmax_refusal() in e and "CoCoA+" in e for e in errors), errors
    assert at.session_state["exp-handle"] is None if "exp-handle" in at.session_state else True
