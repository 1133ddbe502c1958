"""A hyperparameter is validated once, at the edge where it enters (issue 22, "Structure on the way").

Every check of a value goes through :meth:`fedviz.params.Param.validate`; these tests count its calls
per (algorithm, parameter) along each path from an edge (a RunConfig, a link, the command line, an
AlgorithmSpec) down to the kernels, and spy on the kernels to see the value arrive.  The oracle is the
rule itself: one call per given value, none for a value handed on already validated.
"""

from collections import Counter

import numpy as np
import pytest

from fedviz.algorithms import AlgorithmSpec, get_algorithm
from fedviz.algorithms._local_sgd_kernels import LocalSGD
from fedviz.algorithms._svrg_kernels import LocalSVRG
from fedviz.algorithms.base import Hyper
from fedviz.cli import parse_settings
from fedviz.data.build import DataSpec
from fedviz.errors import ParameterError
from fedviz.params import Checked, Param
from fedviz.runner import iterate
from fedviz.runner.cache import problem as cached_problem
from fedviz.runner.config import RunConfig, from_query
from fedviz.runner.execute import Stop, execute
from fedviz.runner.job import ProblemSpec, RunJob

TINY = DataSpec(source="preset:identical-nodes")
GIVEN = {("fedavg", "stepsize"): 0.05, ("fedavg", "local_epochs"): 2, ("fedavg", "batch_size"): 5,
         ("fsvrg", "stepsize"): 0.5}


@pytest.fixture
def calls(monkeypatch):
    """Counts Param.validate calls by (owner, name), for the algorithms of GIVEN."""
    counter = Counter()
    real = Param.validate

    def counting(self, value, owner=""):
        counter[(owner, self.name)] += 1
        return real(self, value, owner)

    monkeypatch.setattr(Param, "validate", counting)
    return counter


@pytest.fixture
def kernels(monkeypatch):
    """What the kernels receive: LocalSGD's (epochs, batch size, stepsize), LocalSVRG's h_k·n_k."""
    seen = {"sgd": [], "svrg": []}
    sgd_init, svrg_run = LocalSGD.__init__, LocalSVRG.run

    def sgd(self, problem, *, epochs, batch_size, stepsize, **kw):
        seen["sgd"].append((epochs, batch_size, stepsize))
        sgd_init(self, problem, epochs=epochs, batch_size=batch_size, stepsize=stepsize, **kw)

    def svrg(self, wt, z0, gvec, c_off, samples, sample_ptr, steps, hk, *args, **kw):
        seen["svrg"].append(np.asarray(hk) * np.asarray(steps))  # h_k = h/n_k, n_k local steps
        return svrg_run(self, wt, z0, gvec, c_off, samples, sample_ptr, steps, hk, *args, **kw)

    monkeypatch.setattr(LocalSGD, "__init__", sgd)
    monkeypatch.setattr(LocalSVRG, "run", svrg)
    return seen


def _algorithms():
    by = {}
    for (name, param), value in GIVEN.items():
        by.setdefault(name, {})[param] = value
    return tuple((name, tuple(sorted(h.items()))) for name, h in by.items())


def _ours(counter):
    return {k: v for k, v in counter.items() if k[0] in ("fedavg", "fsvrg")}


def _check_kernels(kernels):
    assert kernels["sgd"] and all(k == (2, 5, 0.05) for k in kernels["sgd"])
    # FSVRG's safeguard may halve h after a rise; the first local round runs at the given h.
    assert kernels["svrg"] and np.allclose(kernels["svrg"][0], 0.5)


def test_from_a_run_config_to_the_kernels_each_value_is_checked_once(calls, kernels):
    """The Run page's path: RunConfig (the edge) → its specs (asked for three times, as the page
    does) → RunJob → Job → execute → iterate → Algorithm → kernel."""
    config = RunConfig(data=TINY, algorithms=_algorithms(), iterations=2)
    for _ in range(3):
        specs = config.specs()
    job = RunJob(ProblemSpec(config.data, config.loss, config.lam), specs, iterations=config.iterations,
                 seed=config.seed, config=config.as_json()).validate()
    ends = []

    class Sink:
        def __getattr__(self, name):
            return (lambda label, status, message: ends.append(status)) if name == "end" else (lambda *a, **k: None)

    execute(job, Sink(), Stop())
    assert ends == ["done", "done"]
    assert _ours(calls) == {key: 1 for key in GIVEN}
    _check_kernels(kernels)


def test_a_link_checks_each_value_once_and_the_config_trusts_it(calls):
    query = {"algorithms": "fedavg,fsvrg", **{f"{n}.{p}": str(v) for (n, p), v in GIVEN.items()}}
    config, problems = from_query(query)
    assert problems == []
    config.specs()
    assert _ours(calls) == {key: 1 for key in GIVEN}
    assert config == RunConfig(algorithms=_algorithms())


def test_the_command_line_checks_each_value_once_down_to_the_kernels(calls, kernels):
    items = [f"{n}.{p}={v}" for (n, p), v in GIVEN.items()]
    settings = parse_settings(items, ["fedavg", "fsvrg"])
    problem = cached_problem(TINY, "logistic", None)
    for name in ("fedavg", "fsvrg"):  # what `fedviz run` does with them
        spec = AlgorithmSpec.of(name, settings[name], label=name)
        spec.make(problem)
        recs = list(iterate(problem, spec.cls, iterations=1, hyper=spec.hp, f_star=0.0))
        assert recs[-1].status != "failed", recs[-1].message
    assert _ours(calls) == {key: 1 for key in GIVEN}
    _check_kernels(kernels)


def test_a_variant_checks_only_what_it_changes(calls):
    spec = AlgorithmSpec.of("fedavg", {"stepsize": 0.05, "local_epochs": 2})
    calls.clear()
    variant = spec.with_hyper({"stepsize": 0.1}, note="×2")
    assert _ours(calls) == {("fedavg", "stepsize"): 1}
    assert variant.hyper == (("local_epochs", 2), ("stepsize", 0.1)) and variant.label == "FedAvg ×2"
    calls.clear()
    spec.with_hyper(label="another")
    assert _ours(calls) == {}


def test_a_python_call_is_an_edge_too(calls):
    """Algorithm(problem, **hyper) checks its values once; given a Hyper validated for its class, none."""
    problem = cached_problem(TINY, "logistic", None)
    cls = get_algorithm("fedavg")
    algo = cls(problem, stepsize=0.05, batch_size=5)
    assert _ours(calls) == {("fedavg", "stepsize"): 1, ("fedavg", "batch_size"): 1}
    calls.clear()
    again = cls(problem, hp=algo.hp)
    assert _ours(calls) == {} and again.hp is algo.hp
    # Another class's Hyper is not trusted: FedProx checks FedAvg's given values itself.
    get_algorithm("fedprox")(problem, hp=algo.hp)
    assert _ours(calls) == {}  # counted under fedprox
    assert calls[("fedprox", "stepsize")] == 1 and calls[("fedprox", "batch_size")] == 1


def test_the_checked_container_is_made_by_validation_only_and_frozen():
    with pytest.raises(TypeError, match="made by validation"):
        Checked({"stepsize": -1.0})
    hp = get_algorithm("gd").validate({"stepsize": 0.5})
    assert isinstance(hp, Hyper) and dict(hp) == {"stepsize": 0.5, "steps": "bb"} and hp.given == ("stepsize",)
    with pytest.raises(TypeError):
        hp["stepsize"] = -1.0  # noqa: B018 - a Mapping has no item assignment
    with pytest.raises(AttributeError):
        hp.owner = get_algorithm("fsvrg")


@pytest.mark.parametrize("edge", ["config", "link", "cli", "python"])
def test_every_edge_refuses_a_bad_value_naming_the_parameter_and_its_range(edge):
    """The one check words its refusal the same at every edge: 'fedavg.stepsize', the value, 'number > 0'."""
    if edge == "config":
        with pytest.raises(ParameterError) as err:
            RunConfig(algorithms=(("fedavg", (("stepsize", -1.0),)),))
        text = str(err.value)
    elif edge == "link":
        config, problems = from_query({"algorithms": "fedavg", "fedavg.stepsize": "-1"})
        assert config == RunConfig(algorithms=(("fedavg", ()),)) and len(problems) == 1
        text = problems[0]
        assert text.startswith("fedavg.stepsize: parameter fedavg.stepsize=")
    elif edge == "cli":
        with pytest.raises(ParameterError) as err:
            parse_settings(["fedavg.stepsize=-1"], ["fedavg"])
        text = str(err.value)
    else:
        with pytest.raises(ParameterError) as err:
            get_algorithm("fedavg")(cached_problem(TINY, "logistic", None), stepsize=-1.0)
        text = str(err.value)
    assert "fedavg.stepsize" in text and "-1" in text and "number > 0" in text


def test_a_default_must_obey_its_own_range():
    """Defaults are handed on unchecked, so a Param refuses a default outside its range when defined."""
    with pytest.raises(TypeError, match="default breaks its own range"):
        Param("stepsize", "float", -1.0, "a step", low=0, low_open=True)
    with pytest.raises(TypeError, match="default breaks its own range"):
        Param("solver", "choice", "cg", "a solver", choices=("exact", "svrg"))


def test_the_run_page_checks_a_typed_value_once_and_the_config_trusts_it(calls):
    """The widget edge, through the real page: a typed stepsize is checked once per script run (the
    widgets' one Algorithm.check), and the RunConfig it lands in holds it as validated."""
    from apptest import open_page

    at = open_page("pages/run.py", RunConfig(data=TINY, algorithms=(("gd", ()),), iterations=3))
    calls.clear()
    at.text_input(key="hp-gd-stepsize").set_value("0.5").run()
    assert not at.exception and not at.error
    assert {k: v for k, v in calls.items() if k[0] == "gd"} == {("gd", "stepsize"): 1}
    assert at.session_state["config"].algorithms == (("gd", (("stepsize", 0.5),)),)


def test_a_spec_keeps_its_given_values_as_given_and_runs_with_the_validated_ones():
    """A stored experiment hashes ``spec.hyper`` into its cells' keys: an experiment file's ``mu = 0`` stays
    the int 0 there (its keys and its grid, resumed, match), while the algorithm is built with 0.0."""
    spec = AlgorithmSpec.of("fedprox", {"mu": 0, "batch_size": "full"})
    assert spec.hyper == (("batch_size", "full"), ("mu", 0)) and type(dict(spec.hyper)["mu"]) is int
    assert type(spec.hp["mu"]) is float and spec.hp["batch_size"] == 0
    variant = spec.with_hyper({"local_epochs": 3})
    assert variant.hyper == (("batch_size", "full"), ("local_epochs", 3), ("mu", 0))
    assert (variant.hp["mu"], variant.hp["batch_size"], variant.hp["local_epochs"]) == (0.0, 0, 3)
