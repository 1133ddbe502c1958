"""Every count a visitor can type is bounded above (issue 32, point 2).

A count's cost grows with it (a batch of 10⁸ rows on a 270-row file took 22 GB; 5,000 λ values ran
past 90 s), so every integer parameter of every table — algorithms, partitioners, generators, data
settings, a link's settings, Personalise — has a finite upper bound, refused above it in a sentence
that names the parameter and its range.  The first test imports every module of fedviz and collects
each :class:`~fedviz.params.Param` it holds (at its top level, in a table, in a class's table): a table
added next month that no registry below lists fails it, so the walk cannot silently miss it.

The batches are clamped to the rows they draw from: at their bound they cost what the data cost.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import tracemalloc
from types import MappingProxyType

import numpy as np
import pytest
from problems import sparse_problem

import fedviz
from fedviz.algorithms import ALGORITHMS
from fedviz.data.partition import PARTITIONERS
from fedviz.data.settings import DATA_SETTINGS
from fedviz.data.synthetic import FEDPROX_PARAMS, SYNTHETIC_PARAMS
from fedviz.errors import ParameterError
from fedviz.params import Param
from fedviz.personal import PersonaliseConfig, finetune_models
from fedviz.personal.report import MAX_LAMBDAS
from fedviz.personal.report import PARAMS as PERSONAL_PARAMS
from fedviz.runner.config import LINK_PARAMS


def _tables() -> dict[str, object]:
    tables = {"data setting": DATA_SETTINGS, "link": LINK_PARAMS, "Personalise": PERSONAL_PARAMS,
              "synthetic generator": SYNTHETIC_PARAMS, "FedProx generator": FEDPROX_PARAMS}
    tables.update({f"algorithm {name}": cls.params for name, cls in ALGORITHMS.items()})
    tables.update({f"partitioner {name}": cls.params for name, cls in PARTITIONERS.items()})
    return tables


def _walked() -> list[tuple[str, Param]]:
    return [(owner, p) for owner, table in _tables().items()
            for p in (table.values() if hasattr(table, "values") else table)]


def _defined() -> dict[int, str]:
    """Every Param that a module of fedviz holds at its top level, in a table, or in a class's table."""
    found = {}

    def take(where, value):
        if isinstance(value, Param):
            found[id(value)] = f"{where} {value.name}"
        elif isinstance(value, (tuple, list, dict, MappingProxyType)):
            for item in (value.values() if hasattr(value, "values") else value):
                if isinstance(item, Param):
                    found[id(item)] = f"{where} {item.name}"

    for info in pkgutil.walk_packages(fedviz.__path__, "fedviz."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for attr, value in vars(module).items():
            take(f"{info.name}.{attr}", value)
            if isinstance(value, type) and value.__module__ == info.name:
                for cattr, cvalue in vars(value).items():
                    take(f"{info.name}.{attr}.{cattr}", cvalue)
    return found


def test_every_parameter_fedviz_defines_is_in_a_walked_table():
    walked = {id(p) for _, p in _walked()}
    stray = sorted(where for key, where in _defined().items() if key not in walked)
    assert not stray, f"parameters in no table this walk knows (add their registry to _tables): {stray}"


@pytest.mark.parametrize("owner,param", [(o, p) for o, p in _walked() if p.kind == "int"],
                         ids=lambda x: x if isinstance(x, str) else x.name)
def test_every_count_is_bounded_above_and_refused_past_its_bound_by_name(owner, param):
    assert param.high is not None and math.isfinite(param.high), f"{owner}: {param.name} has no upper bound"
    assert param.validate(int(param.high)) == int(param.high)
    with pytest.raises(ParameterError) as info:
        param.validate(int(param.high) + 1)
    text = str(info.value)
    assert param.name in text and f"{int(param.high):,}".replace(",", "") in text.replace(",", ""), text


def _peak_mb(call) -> float:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_finetuning_at_its_batch_bound_costs_what_the_rows_cost():
    pb = sparse_problem(n=270, d=13, K=13, lam=None, density=0.7)  # heart_scale's shape
    w = np.zeros(pb.size)
    high = int(PERSONAL_PARAMS["finetune_batch"].high)
    full = _peak_mb(lambda: finetune_models(pb, w, steps=3, step=0.1, batch=pb.n))
    at_bound = _peak_mb(lambda: finetune_models(pb, w, steps=3, step=0.1, batch=high))
    assert at_bound <= 1.05 * full + 0.1, (at_bound, full)  # the same draws: min(b, n_k) rows per node


@pytest.mark.parametrize("name", sorted(n for n, cls in ALGORITHMS.items() if "batch_size" in {p.name for p in cls.params}))
def test_an_algorithms_batch_at_its_bound_costs_what_a_full_batch_costs(name):
    pb = sparse_problem(n=270, d=13, K=13, lam=None, density=0.7)
    cls = ALGORITHMS[name]
    high = int(next(p.high for p in cls.params if p.name == "batch_size"))

    def one_step(batch):
        cls(pb, seed=0, hp={"batch_size": batch}).step()

    full = _peak_mb(lambda: one_step(0))
    assert _peak_mb(lambda: one_step(high)) <= 1.05 * full + 0.1


def test_a_lambda_grid_past_its_bound_is_refused_naming_it():
    PersonaliseConfig(lambdas=tuple(np.linspace(0, 1, MAX_LAMBDAS)))
    with pytest.raises(ParameterError, match=rf"lambdas.*at most {MAX_LAMBDAS} values"):
        PersonaliseConfig(lambdas=tuple(np.linspace(0, 1, MAX_LAMBDAS + 1)))
