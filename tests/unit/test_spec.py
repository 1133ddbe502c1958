"""AlgorithmSpec (fedviz.algorithms.spec) and the derived defaults (Algorithm.derived_defaults): the one value
configs, jobs, sweeps, tuning and figures pass around, and the pure function a run's defaults come from."""

import gc
import weakref

import numpy as np
import pytest

from fedviz.algorithms import ALGORITHMS, AlgorithmSpec, get_algorithm
from fedviz.algorithms import base as algorithms_base
from fedviz.algorithms.base import Algorithm
from fedviz.data.build import DataSpec, build
from fedviz.errors import ParameterError
from fedviz.plots import suboptimality_figure
from fedviz.problems.objective import Problem
from fedviz.runner.config import from_query, to_query
from fedviz.runner.job import Entry, RunJob
from fedviz.runner.tune import Pilot, TuneResult, resolved_default

#: Where a constructed algorithm keeps the value each derived hyperparameter resolves to.
ATTRIBUTE = {"stepsize": "h", "local_steps": "m", "inner_steps": "m", "sigma_prime": "sigma_prime",
             "sigma": "sigma", "mu": "mu"}
#: Derived hyperparameters a run does not use with the other defaults (DANE's exact solver
#: uses neither its SVRG stepsize nor its local steps).
UNUSED = {("dane", "stepsize"), ("dane", "local_steps")}


@pytest.fixture(scope="module")
def data():
    return build(DataSpec(source="preset:identical-nodes"))


def _problem(data, cls):
    return Problem(data, "logistic" if "logistic" in cls.losses else cls.losses[0])


# -- derived defaults --------------------------------------------------------------------------------
@pytest.mark.parametrize("name, hyper", [(name, {}) for name in ALGORITHMS]
                         + [("dane", {"solver": "svrg"}), ("dane", {"solver": "svrg", "mu": 0.5}),
                            ("fsvrg", {"local_stepsize": False}), ("fedprox", {"mu": 0.3}),
                            ("scaffold", {"batch_size": 10})])
def test_derived_defaults_are_what_a_constructed_algorithm_uses(data, name, hyper):
    """The registry walked: every derived value equals (bitwise) what setup() put in place, and every
    hyperparameter whose default is derived (None) is derived, unless the run does not use it."""
    cls = get_algorithm(name)
    problem = _problem(data, cls)
    derived = cls.derived_defaults(problem, hyper)
    algo = cls(problem, **hyper)
    for param, value in derived.items():
        used = getattr(algo, ATTRIBUTE[param])
        assert type(used)(value) == used and value == used, (name, param)
    assert dict(algo.derived) == derived
    derivable = {p.name for p in cls.params if p.default is None and p.name not in hyper}
    unused = {p for p in derivable if (name, p) in UNUSED and hyper.get("solver", "exact") == "exact"}
    assert set(derived) == derivable - unused, name


def test_a_given_value_is_not_derived(data):
    problem = _problem(data, get_algorithm("gd"))
    assert get_algorithm("gd").derived_defaults(problem, {"stepsize": 0.5}) == {}
    assert get_algorithm("naive-fsvrg").derived_defaults(problem, {"local_steps": 7}).keys() == {"stepsize"}


def test_derived_defaults_validate_their_hyperparameters(data):
    problem = _problem(data, get_algorithm("gd"))
    with pytest.raises(ParameterError, match="gd.step"):
        get_algorithm("gd").derived_defaults(problem, {"step": 1.0})


def test_derived_defaults_are_cached_with_the_problem(data, monkeypatch):
    """Computed once per (problem, class, hyperparameters), kept exactly as long as the problem."""
    cls = get_algorithm("fsvrg")
    problem = Problem(data)
    calls = []
    original = cls._derive.__func__
    monkeypatch.setattr(cls, "_derive", classmethod(lambda c, p, hp: calls.append(1) or original(c, p, hp)))
    first = cls.derived_defaults(problem, {})
    assert cls.derived_defaults(problem, {}) == first and len(calls) == 1
    cls(problem)  # setup reads the cache
    assert len(calls) == 1
    cls.derived_defaults(problem, {"local_stepsize": False})
    assert len(calls) == 2
    cls.derived_defaults(Problem(data), {})  # another problem: its own entry
    assert len(calls) == 3
    ref = weakref.ref(problem)
    del problem
    gc.collect()
    assert ref() is None and all(p is not None for p in algorithms_base._DERIVED.keys())


def test_resolved_default_builds_no_algorithm(data, monkeypatch):
    cls = get_algorithm("gd")
    problem = _problem(data, cls)
    expected = cls(problem).h
    monkeypatch.setattr(cls, "setup", lambda self: pytest.fail("an algorithm was built"))
    assert resolved_default(cls, problem, {}, "stepsize") == expected
    assert resolved_default(cls, problem, {"stepsize": 0.25}, "stepsize") == 0.25
    assert resolved_default(get_algorithm("dane"), problem, {}, "stepsize") is None  # exact solver: unused


# -- AlgorithmSpec -----------------------------------------------------------------------------------
def test_spec_defaults_validation_and_variants():
    spec = AlgorithmSpec.of("fsvrg", {"stepsize": 2.0, "local_stepsize": False})
    assert (spec.name, spec.label, spec.group, spec.title) == ("fsvrg", "FSVRG", "FSVRG", "FSVRG")
    assert spec.hyper == (("local_stepsize", False), ("stepsize", 2.0))  # sorted
    assert spec == AlgorithmSpec("fsvrg", {"stepsize": 2.0, "local_stepsize": False}) and hash(spec)
    assert spec.values == {"stepsize": 2.0, "local_stepsize": False}
    assert spec.resolved["size_weights"] is True and spec.cls is get_algorithm("fsvrg")
    swept = spec.with_hyper({"stepsize": 4.0}, note="×2")
    assert (swept.label, swept.group, swept.values["stepsize"]) == ("FSVRG ×2", "FSVRG", 4.0)
    assert spec.with_hyper(label="mine").label == "mine"
    with pytest.raises(ParameterError, match="gd.stepsize"):
        AlgorithmSpec.of("gd", {"stepsize": -1.0})
    with pytest.raises(ParameterError, match="algorithm"):
        AlgorithmSpec.of("no-such")
    with pytest.raises(ParameterError, match="gd.stepsize"):
        spec_gd = AlgorithmSpec.of("gd")
        spec_gd.with_hyper({"stepsize": 0.0})


def test_spec_of_an_unregistered_class():
    class Mine(Algorithm):
        name = "mine"
        title = "Mine"

    spec = AlgorithmSpec.of(Mine)
    assert spec.cls is Mine and spec.label == "Mine" and spec.name == "mine"
    assert AlgorithmSpec.of(get_algorithm("gd")).impl is None  # registered: by name


def test_tuned_label_is_made_from_the_spec():
    result = TuneResult("fsvrg", "stepsize", 81.4, {"stepsize": 81.4}, "c", (Pilot(81.4, 0.1, "ok", 0.1),), 1.0,
                        False)
    tuned = result.apply(AlgorithmSpec.of("fsvrg"))
    assert (tuned.label, tuned.group, tuned.values) == ("FSVRG (stepsize 81.4, tuned)", "FSVRG",
                                                        {"stepsize": 81.4})
    assert result.label("FSVRG") == tuned.label


def test_a_default_the_pilots_kept_is_not_called_tuned():
    """A curve whose pilots kept the default equals the untuned one; its label says so ("tuned, default kept")."""
    pilots = (Pilot(40.7, 0.2, "ok", 0.2), Pilot(81.4, 0.1, "ok", 0.1), Pilot(162.8, 0.3, "ok", 0.3))
    kept = TuneResult("fsvrg", "stepsize", 81.4, {"stepsize": 81.4}, "c", pilots, 1.0, False, kept_default=True)
    moved = TuneResult("fsvrg", "stepsize", 40.7, {"stepsize": 40.7}, "c", pilots, 1.0, False)
    assert kept.label("FSVRG") == "FSVRG (stepsize 81.4, tuned, default kept)"
    assert kept.apply(AlgorithmSpec.of("fsvrg")).label == kept.label("FSVRG")  # a label the spec's check accepts
    assert moved.label("FSVRG") == "FSVRG (stepsize 40.7, tuned)"


def test_config_specs_and_the_link_round_trip():
    config, problems = from_query({"algorithms": "fsvrg,gd", "fsvrg.stepsize": "20"})
    assert problems == []
    assert config.specs() == (AlgorithmSpec.of("fsvrg", {"stepsize": 20.0}), AlgorithmSpec.of("gd"))
    assert from_query(to_query(config))[0] == config


def test_a_job_takes_specs_and_still_triples():
    make = lambda: None  # noqa: E731 - never called: validation only
    job = RunJob(make, (AlgorithmSpec.of("gd", label="a"), ("b", "gd", {"stepsize": 0.5})), iterations=2).validate()
    assert job.labels == ("a", "b")
    assert [e.spec for e in job.entries] == [AlgorithmSpec.of("gd", label="a"),
                                             AlgorithmSpec.of("gd", {"stepsize": 0.5}, label="b")]
    assert dict(job.entries[1].hyper) == {"stepsize": 0.5} and job.entries[1].resolved == {"stepsize": 0.5, "steps": "bb"}
    assert Entry.make("b", "gd", {"stepsize": 0.5}) == job.entries[1]
    with pytest.raises(ParameterError, match="label"):
        RunJob(make, (AlgorithmSpec.of("gd"), AlgorithmSpec.of("gd")), iterations=2).validate()


def test_figures_style_a_variant_by_the_title_its_spec_gives():
    it = np.arange(3)
    run = {"iteration": it, "suboptimality": 0.5 ** it}
    fig = suboptimality_figure({"FSVRG ×2": run, "x": run}, styles={"FSVRG ×2": "FSVRG"})
    styled, plain = fig.data
    assert styled.marker.symbol == "circle" and styled.marker.color == "#2ca02c"
    assert plain.marker.color != "#2ca02c"
    # Without the mapping a label is not parsed for a title.
    assert suboptimality_figure({"FSVRG ×2": run}).data[0].marker.color != "#2ca02c"
