"""The pickers' labels, walked over the registries: no label says the same thing twice (issue 20:
"SGD (centralised) (centralised)", "Label skew (Dirichlet) (dirichlet)")."""

import re

import pytest

from fedviz import ui
from fedviz.algorithms import ALGORITHMS
from fedviz.data.partition import PARTITIONERS


def _parentheticals(label: str) -> list[str]:
    return [p.lower() for p in re.findall(r"\(([^()]*)\)", label)]


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_an_algorithm_label_repeats_no_parenthetical(name):
    label = ui.algorithm_label(name)
    parts = _parentheticals(label)
    assert len(parts) == len(set(parts)), label
    assert label.startswith(ALGORITHMS[name].title)
    # Centralised methods say so exactly once; federated ones never.
    assert label.lower().count("centralised") == (0 if ALGORITHMS[name].federated else 1), label


@pytest.mark.parametrize("name", list(PARTITIONERS))
def test_a_partitioner_label_names_its_spec_once(name):
    label = ui.partitioner_label(name)
    assert label.startswith(PARTITIONERS[name].title)
    assert label.lower().count(name.lower()) == 1, label  # findable by its spec name, and once


def test_dane_cites_its_subproblem_as_the_learn_pages_do():
    """The paper's DANE subproblem is eq. (10) (fedviz.properties' numbering); the help said (16)."""
    helps = " ".join(p.help for p in ALGORITHMS["dane"].params)
    assert "subproblem (10)" in helps and "(16)" not in helps
