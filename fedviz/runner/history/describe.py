"""The history's words for people: a run's settings in one line (:func:`describe_run`) and the
sentences the history stores for a reader (:data:`INTERRUPTED_MESSAGE`).

:func:`describe_run` labels the runs on the Compare page and in the efficiency view, and fills the
``settings`` column of the CSV export and the ``settings`` field of the JSON export
(:meth:`RunStore.export_csv <fedviz.runner.history.store.RunStore.export_csv>`); the data source reads as
its name (``preset:NAME?k=v`` → "NAME (k = v)", ``upload:NAME`` → "NAME").
"""

from __future__ import annotations

from typing import Mapping

from ...errors import FedvizError

#: The message of a run or experiment the history marks 'interrupted' (its owner is gone:
#: :meth:`RunStore.mark_interrupted <fedviz.runner.history.store.RunStore.mark_interrupted>`).
INTERRUPTED_MESSAGE = "the server stopped during this run"

#: How each setting of a stored config (``RunConfig.as_json``) reads in a run's description.
_DATA_WORDS = {"nodes": "K = {}", "seed": "data seed {}", "test_fraction": "test fraction {}",
               "test": "test file {}", "split": "{} split", "positive": "positive class {}",
               "unseen": "unseen nodes {}", "deal_test": "test rows dealt to the nodes"}
_RUN_WORDS = {"loss": "{} loss", "lam": "λ = {}", "iterations": "{} iterations", "seed": "seed {}",
              "tune": "tuned", "sweep": "stepsize sweep"}


def describe_run(config: Mapping | None, *, algorithm: str | None = None,
                 hyper: Mapping | None = None, partition: bool = True) -> str:
    """A run's settings in words, for the history's labels and the exports: the data source,
    the partition with its knobs, then every setting that differs from a default run's.

    ``config`` is a stored config (:meth:`RunConfig.as_json`); a setting counts as changed
    when it differs from ``RunConfig().as_json()``, so a setting added to the config later
    is described without a change here.  ``hyper`` (with ``algorithm``) is the run's own
    hyperparameters, of which those differing from the algorithm's defaults are named;
    without it, the non-default hyperparameters of every algorithm in the config are.
    ``partition=False`` leaves out the partition and K (for a view that sets them itself).

    >>> describe_run({"data": {"source": "preset:google-plus-small", "partition": "dirichlet:alpha=0.1",
    ...               "nodes": 200}, "iterations": 50})
    'google-plus-small · dirichlet (α = 0.1) · K = 200 · 50 iterations'
    """
    from ...algorithms import ALGORITHMS
    from ...data.partition import human_label, parse_spec
    from ..config import RunConfig

    config = config if isinstance(config, Mapping) else {}
    defaults = RunConfig().as_json()
    data = config.get("data") if isinstance(config.get("data"), Mapping) else {}
    parts = [_source_text(data.get("source") or defaults["data"]["source"])]
    spec = data.get("partition")
    if not partition:
        data = {k: v for k, v in data.items() if k not in ("partition", "nodes")}
    elif spec:
        try:
            name, options = parse_spec(spec)
            knobs = ", ".join(f"{human_label(k)} = {v}" for k, v in options.items())
            parts.append(f"{name} ({knobs})" if knobs else name)
        except FedvizError:
            parts.append(str(spec))
    else:
        parts.append("the data's own nodes")

    def changed(section: Mapping, default: Mapping, words: Mapping, skip=()):
        for key, value in section.items():
            if key in skip or value == default.get(key) or (value is None and key not in default):
                continue
            if isinstance(value, str) and value.startswith("upload:"):
                value = value[len("upload:"):]
            template = words.get(key, human_label(key) + " {}")
            parts.append(template.format(_value_text(value)) if "{}" in template else template)

    changed(data, defaults["data"], _DATA_WORDS, skip=("source", "partition"))
    changed(config, defaults, _RUN_WORDS, skip=("data", "algorithms", "tuning"))  # the label names a tuned value

    def hyper_text(name: str, values: Mapping) -> list[str]:
        cls = ALGORITHMS.get(name)
        params = {p.name: p.default for p in cls.params} if cls is not None else {}
        return [f"{human_label(k)} = {_value_text(v)}" for k, v in values.items()
                if not (k in params and v == params[k])]

    if algorithm is not None and hyper is not None:
        parts += hyper_text(algorithm, hyper)
    else:
        algorithms = config.get("algorithms") if isinstance(config.get("algorithms"), Mapping) else {}
        for name, values in algorithms.items():
            texts = hyper_text(name, values or {})
            if texts:
                title = ALGORITHMS[name].title if name in ALGORITHMS else name
                parts.append(f"{title}: {', '.join(texts)}")
    return " · ".join(parts)


def _source_text(source: str) -> str:
    """``preset:NAME?k=v&k2=v2`` → "NAME (k = v, k2 = v2)"; an upload or a path → its name."""
    source = str(source)
    if source.startswith("preset:"):
        name, _, query = source[len("preset:"):].partition("?")
        knobs = ", ".join(" = ".join(item.split("=", 1)) for item in query.split("&") if item)
        return f"{name} ({knobs})" if knobs else name
    if source.startswith("upload:"):
        return source[len("upload:"):]
    return source


def _value_text(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
