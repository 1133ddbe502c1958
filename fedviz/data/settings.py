"""The data settings: one table of :class:`~fedviz.params.Param` s, from which every front end makes its own.

A data setting is a choice about a data set besides its source: how its rows are split over nodes
and into how many, the data seed, the test split, the unseen nodes and the dealing of test rows.
Each is one Param of :data:`DATA_SETTINGS` (name, kind, default, the one allowed range, label and
help), and from this table are made, under the same name, with the same range and the same words:

- the link's keys (``runner.config.to_query`` / ``from_query``: ``?unseen=0.2``),
- the command line's flags (``cli.add_data_arguments``: ``--unseen 0.2``, dashes for underscores),
- an experiment file's keys and axis keys (``experiments.spec.from_mapping``: ``unseen = 0.2``),
- the Data page's inputs (``pages/data.py``: their labels, help and bounds).

Each setting is the :class:`~fedviz.data.build.DataSpec` field of its name (the data seed's is
``DataSpec.seed``: :func:`spec_field`), which :func:`~fedviz.data.build.build` checks through this
table (:func:`check_settings`) and uses.  A new setting is its Param here, its DataSpec field and its
use in ``build``; the front ends, the stored identities (:func:`in_identity`) and the tests that walk
the table take it from there.

The ranges, and why each is the one:

- ``nodes`` in [1, :data:`~fedviz.data.synthetic.MAX_NODES`]: at least one node; the generators'
  bound, so that no front end can ask a partitioner for more nodes than a generator may make (the
  dashboard's entry budget then refuses what its memory cannot hold, in a sentence).
- ``data_seed`` in [0, 2³² − 1]: one 32-bit word, the range of every seed of fedviz (the run's seed,
  a generator's ``seed``), so that any seed one front end takes, the others take.
- ``test_fraction`` in [0, 1): ⌊f·m_k⌋ < m_k for f < 1, so every node keeps a training row; 0 keeps
  every row for training.
- ``unseen`` in [0, 1): 1 would hold out every node at any K.  Below 1 the bound that leaves a node
  to train depends on K (⌊u·K + ½⌋ < K iff u < 1 − 1/(2K)), so it is checked where K is known
  (:func:`~fedviz.data.unseen.unseen_count`, which names the range for that K).  The link and the
  Data page once capped it at 0.95, which is neither: at K ≤ 9 that holds out every node, and at
  K = 1,000 it refused 0.97, which leaves 30 to train.
- ``split``: one of :data:`~fedviz.data.split.SPLITS`; ``partition``: a registered partitioner's spec;
  ``deal_test``: true or false.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping

from ..params import Param, param_table
from .partition import PARTITIONERS, make_partitioner
from .split import DEAL_LABEL, SPLITS
from .synthetic import MAX_NODES, MAX_SEED
from .unseen import PFL_BENCH_SHARE

if TYPE_CHECKING:  # build imports this module
    from .build import DataSpec

__all__ = ["DATA_SETTINGS", "FIRST_SETTINGS", "spec_field", "settings_of", "with_settings", "check_settings",
           "in_identity"]


def _partition(text: str) -> str:
    """A partitioner spec, checked (its name, and each option against its range), as given."""
    make_partitioner(text, n_nodes=1, seed=0)  # K is the nodes setting's, checked on its own
    return text


#: Every data setting, in the order the link, ``--help`` and the Data page show them.
DATA_SETTINGS: Mapping[str, Param] = param_table(
    Param("partition", "spec", None,
          "How the training rows are split over nodes: a partitioner spec such as iid, dirichlet:alpha=0.5 or "
          "shards:classes_per_node=2 (reshuffle keeps each node's size but fills it with random rows: the "
          "paper's FSVRGR). Unset: the data's own nodes, a generator's users or a file's qid groups, else iid.",
          choices=tuple(PARTITIONERS), reader=_partition, label="How the rows are split over nodes"),
    Param("nodes", "int", None,
          "K, the number of nodes the partitioner makes (natural and reshuffle take theirs from the data's "
          "groups). Unset: a preset's own K; for a file a node per 20 rows (more where the test fraction needs them), at "
          "most 100.",
          low=1, high=MAX_NODES, label="Nodes for the partition"),
    Param("data_seed", "int", 0,
          "Seeds the partitioner, the random test split, the draw of the unseen nodes and the dealing of test "
          "rows, and the generator unless its preset sets its own seed: the same seed, the same data set.",
          low=0, high=MAX_SEED, label="Data seed"),
    Param("test_fraction", "float", None,
          "Without a test file, the share f of each node's rows held out as the test set (⌊f·m_k⌋ of its m_k); "
          "0 keeps every row for training. Unset: a preset's own, 0.25 for a file.",
          low=0.0, high=1.0, high_open=True, label="Test fraction"),
    Param("split", "choice", "auto",
          "Without a test file, which of each node's rows are held out: random, a seeded draw stratified by "
          "label (fair for a file in any order); chronological, the last rows in file order (for a file in "
          "time order); auto, chronological for presets and a file's qid groups, else random. Presets take "
          "auto or chronological.",
          choices=SPLITS, label="Test rows"),
    Param("unseen", "float", 0.0,
          "The share of whole nodes held out of training, drawn with the data seed: ⌊share·K + ½⌋ nodes train "
          "nothing, and every run scores the model in force on their test rows, as new clients would be "
          f"(their training rows serve only fine-tuning). pFL-Bench holds out {PFL_BENCH_SHARE:g}; 0 none.",
          low=0.0, high=1.0, high_open=True, label="Unseen nodes (share)"),
    Param("deal_test", "bool", False,
          "Give each test row of no node (a separate test file's, or a preset's split into other nodes) a node: "
          "a row of class c goes to node k with k's share of the class-c training rows (of all rows for real "
          "targets), drawn with the data seed. Every node is then scored on its own; the pooled test error is "
          "unchanged.",
          label=DEAL_LABEL),
)

#: The DataSpec field of each setting whose field is not its name.
_FIELDS = {"data_seed": "seed"}

#: The settings that every stored identity has held since before the others existed (a run's stored
#: config, an experiment's hash, a cell's key): written even at their defaults.  Every other setting
#: (``unseen``, ``deal_test``, and each one added from now on) is written only when set, so that adding
#: a setting leaves every stored identity as it was: an experiment resumes, a lesson finds its runs.
FIRST_SETTINGS = ("partition", "nodes", "data_seed", "test_fraction", "split")


def spec_field(name: str) -> str:
    """The :class:`~fedviz.data.build.DataSpec` field of setting ``name`` (``data_seed`` → ``seed``)."""
    return _FIELDS.get(name, name)


def settings_of(spec: "DataSpec") -> dict[str, Any]:
    """``spec``'s value of every setting, by setting name, in the table's order."""
    return {name: getattr(spec, spec_field(name)) for name in DATA_SETTINGS}


def with_settings(spec: "DataSpec", values: Mapping[str, Any]) -> "DataSpec":
    """``spec`` with the settings ``values`` names (by setting name) changed; the values as given."""
    unknown = [name for name in values if name not in DATA_SETTINGS]
    if unknown:
        raise KeyError(f"not data settings: {', '.join(unknown)} (they are: {', '.join(DATA_SETTINGS)})")
    return replace(spec, **{spec_field(name): value for name, value in values.items()}) if values else spec


def check_settings(spec: "DataSpec") -> None:
    """Every setting of ``spec`` through its Param (:class:`~fedviz.errors.ParameterError` names the first
    out of its range, with the range)."""
    for name, value in settings_of(spec).items():
        DATA_SETTINGS[name].validate(value)


def in_identity(field: str, value) -> bool:
    """Whether a DataSpec ``field`` of ``value`` belongs in a stored identity: every field but a setting
    outside :data:`FIRST_SETTINGS` at its default."""
    name = next((n for n in DATA_SETTINGS if spec_field(n) == field), None)
    return name is None or name in FIRST_SETTINGS or value != DATA_SETTINGS[name].default
