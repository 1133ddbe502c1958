"""Experiments: grids of runs over algorithms, stepsizes, settings and seeds, executed on a Dask
cluster (an embedded local one by default) and stored in the run history.

:mod:`.spec` defines a grid and its cells, :mod:`.builtin` the one-click experiments that
check published claims, :mod:`.driver` launches, streams, stops and resumes an experiment on
the cluster of :mod:`fedviz.runner.cluster` (the Dask side: the cluster, the worker's task, the
executor of ordinary runs), :mod:`.results` reads one back for the figures.  The command
``python -m fedviz experiment`` is :mod:`fedviz.cli.experiment`.
"""

from .spec import Arm, Axis, Cell, Experiment, from_json, from_mapping, from_toml

__all__ = ["Arm", "Axis", "Cell", "Experiment", "from_json", "from_mapping", "from_toml"]
