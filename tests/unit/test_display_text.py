"""Names a page shows are restricted as identifiers are (issue 21, point 5): labels, axis names and axis
value labels hold letters, digits, spaces and a few harmless marks, never Markdown's or Plotly's markup.
The registry is walked, so an algorithm added later must have a showable title too."""

from __future__ import annotations

import pytest

from fedviz.algorithms import ALGORITHMS
from fedviz.algorithms.spec import AlgorithmSpec
from fedviz.errors import ParameterError
from fedviz.experiments import Axis
from fedviz.experiments.builtin import BUILTINS
from fedviz.validation import check_display_text

HOSTILE = ["[x](https://evil.example)", "![t](http://evil.example/p.png)", "<b>x</b>", "`x`", "$x$",
           ":material/warning:", "a|b", "#h", "x\ny", "a" * 81, "", "   "]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_names_are_refused_naming_what_is_wrong(text):
    with pytest.raises(ParameterError) as e:
        check_display_text("axis.name", text)
    assert "axis.name" in str(e.value)
    if text:  # an empty label or axis name means the default (the title, the key)
        with pytest.raises(ParameterError):
            AlgorithmSpec.of("gd", label=text)
        with pytest.raises(ParameterError):
            Axis.of("partition.alpha", [0.1, 1.0], name=text)
    with pytest.raises(ParameterError):
        Axis.of("partition.alpha", [0.1, 1.0], labels=[text, "one"])


@pytest.mark.parametrize("text", ["FedProx μ=0.1", "FSVRG ×2", "CoCoA+ sigma_prime ×0.25", "(0.5, 0.5)",
                                  "α = 1e-3", "Label skew 10%", "d/n", "Konečný's FSVRG"])
def test_ordinary_names_pass(text):
    assert check_display_text("label", text) == text
    assert AlgorithmSpec.of("gd", label=text).label == text


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_registered_algorithm_has_a_showable_title(name):
    assert AlgorithmSpec.of(name).label == check_display_text("title", ALGORITHMS[name].title)


@pytest.mark.parametrize("name", list(BUILTINS))
def test_every_builtin_experiment_passes(name):
    for scale in ("small", "full"):
        exp = BUILTINS[name].experiment(scale)
        for axis in exp.axes:
            check_display_text("axis", axis.name)
            for label in axis.labels:
                check_display_text("axis label", label)
