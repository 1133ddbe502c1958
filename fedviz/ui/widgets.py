"""The widgets made from parameter metadata: one input per :class:`~fedviz.params.Param` (its label, help,
range and default from the record), the algorithms' hyperparameter inputs checked once at this edge, and
the labels of the pickers."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ..algorithms import ALGORITHMS, get_algorithm
from ..errors import FedvizError
from ..markup import escape
from ..params import Param
from ..runner.config import RunConfig
from .state import seeded


# -- widgets from parameter metadata -------------------------------------------------------------
class InvalidInput(Exception):
    """An input holds an invalid value (the input already showed why, as an error beneath it)."""


def param_help(p: Param) -> str:
    """A Param's tooltip: its help, then (for a number or a spec) the allowed values in the errors' words."""
    return p.help + (f" Allowed: {p.range_text()}." if p.kind in ("int", "float", "spec") else "")


def checked(p: Param, value, owner: str = ""):
    """``value`` through ``p``'s :meth:`~fedviz.params.Param.validate`; refused, an error beneath the input
    naming ``owner.name`` and the range, and :class:`InvalidInput`."""
    try:
        return p.validate(value, owner)
    except FedvizError as e:
        st.error(escape(str(e)))
        raise InvalidInput(str(e)) from e


def param_input(p: Param, *, key: str, owner: str, start=None, label: str | None = None, check: bool = True):
    """The one input for a parameter, drawn from its :class:`~fedviz.params.Param`: returns its value.

    A bool is a checkbox, a choice a selectbox, an integer a number input bounded by the range,
    a float a number input bounded by the range — or, when its default is derived (``None``:
    from the problem, e.g. a stepsize 1/L) or it spans orders of magnitude (``log``), a text box
    where ``1e-3`` is typed as people write it, and an empty box means the default; a spec a text
    box.  Labels and help come from the Param (:func:`param_help`).

    The widget owns its value through ``key``: ``start`` (default: the Param's default) seeds
    it the first time it is drawn (:func:`seeded`), and it is never given ``value=``.  A value
    the Param refuses is shown as an error naming ``owner.name`` and raises :class:`InvalidInput`.
    With ``check=False`` the value is returned as read (text converted, range not checked): the
    caller checks the whole set once (an algorithm's :meth:`~fedviz.algorithms.base.Algorithm.check`).
    """
    label = label or p.shown_label
    value = p.default if start is None else start
    derived = p.default is None
    low, high = p.bounds if p.kind in ("int", "float") else (None, None)
    tip = param_help(p)
    blank = " (blank: derived)" if derived else ""
    placeholder = "derived from the data" if derived else None
    try:
        if p.kind == "bool":
            out = st.checkbox(label, help=tip, key=seeded(key, bool(value)))
        elif p.kind == "choice":
            out = st.selectbox(label, list(p.choices), help=tip, key=seeded(key, value))
        elif p.kind == "int":
            out = st.number_input(label + blank, step=1, min_value=low, max_value=high, help=tip,
                                  placeholder=placeholder, key=seeded(key, None if value is None else int(value)))
        elif p.kind == "spec":
            text = st.text_input(label, help=tip, key=seeded(key, "" if value is None else str(value)))
            out = p.default if text.strip() == "" else p.convert(text, p.qualname(owner))
        elif derived or p.log:
            text = st.text_input(label + blank, help=tip, placeholder=placeholder,
                                 key=seeded(key, "" if value is None else repr(float(value))))
            out = p.default if text.strip() == "" else p.convert(text, p.qualname(owner))
        else:
            out = st.number_input(label, min_value=low, max_value=high, format="%g", help=tip,
                                  key=seeded(key, float(value)))
        return p.validate(out, owner) if check else out
    except FedvizError as e:
        st.error(escape(str(e)))
        raise InvalidInput(str(e)) from e


def param_inputs(params, *, owner: str, key, start=None, defaults=None, slots: dict | None = None) -> dict:
    """Inputs for every Param of ``params`` (:func:`param_input`); returns ``{name: value}`` for the
    values that differ from ``defaults`` (each Param's own default where not given).

    ``key(name)`` is each input's widget key; ``start`` seeds the inputs (else ``defaults``).
    Every input is drawn; then, if one was invalid, :class:`InvalidInput` is raised.  With
    ``slots`` (a dict) the values are returned as read, not range-checked, and each input gets
    a place beneath it, ``slots[name]``, where the caller shows the error its one check finds.
    """
    start, defaults = dict(start or {}), dict(defaults or {})
    out, invalid = {}, None
    for p in params:
        base = defaults.get(p.name, p.default)
        try:
            value = param_input(p, key=key(p.name), owner=owner, start=start.get(p.name, base),
                                check=slots is None)
        except InvalidInput as e:
            invalid = e
            continue
        finally:
            if slots is not None:
                slots[p.name] = st.empty()
        if value is not None and value != base:
            out[p.name] = value
    if invalid is not None:
        raise invalid
    return out


def algorithm_widgets(names: list[str], config: RunConfig) -> tuple | None:
    """Hyperparameter inputs for each chosen algorithm: ``(name, Hyper)`` pairs, every value checked
    once here (the edge) and handed on validated; None if any is invalid (each error is shown
    beneath its input, a combination's beneath them all)."""
    current = dict(config.algorithms)
    out, ok = [], True
    for name in names:
        cls = get_algorithm(name)
        with st.expander(f"{cls.title} — {cls.reference}" + ("" if cls.federated else " · not federated")):
            slots: dict = {}
            try:
                hyper = param_inputs(cls.params, owner=name, key=lambda p, name=name: f"hp-{name}-{p}",
                                     start=dict(current.get(name, ())), slots=slots)
            except InvalidInput:  # a text that is no number: shown beneath its input
                ok = False
                continue
            for param, why in cls.kept_defaults.items():
                (slots[param] if param in slots else st).caption(escape(why))  # beside its input
            hp, errors = cls.check(hyper)
            for param, e in errors.items():
                (slots[param] if param in slots else st).error(escape(str(e)))
            if errors:
                ok = False
                continue
        out.append((name, hp))
    return tuple(out) if ok else None


def algorithm_choices(multiclass: bool) -> tuple[list[str], dict[str, str]]:
    """The algorithms a picker offers, and those left out with the reason (issue 22, point 3):
    every algorithm for binary and regression data; for multiclass data (softmax) those that take
    softmax, the others left out with :meth:`~fedviz.algorithms.base.Algorithm.softmax_refusal`."""
    if not multiclass:
        return list(ALGORITHMS), {}
    refused = {name: cls.softmax_refusal() for name, cls in ALGORITHMS.items()}
    return [n for n, why in refused.items() if why is None], {n: why for n, why in refused.items() if why}


def left_out_text(left_out: dict[str, str], n_classes: int) -> str:
    """The caption under a picker that left algorithms out: which, and why (algorithms of one reason
    together), and the algorithms refused with some hyperparameters only (DANE's inexact solver)."""
    by_reason: dict[str, list[str]] = {}
    for name in left_out:
        cls = ALGORITHMS[name]
        by_reason.setdefault(cls.multiclass_reason, []).append(cls.title or name)
    parts = [f"{' and '.join(titles)}: {reason}" for reason, titles in by_reason.items()]
    # Offered, but refused with some hyperparameters (DANE's inexact solver): said too.
    partly = dict.fromkeys(why for cls in ALGORITHMS.values() if cls.softmax_refusal() is None
                           for p in cls.params if p.kind == "choice" for value in p.choices
                           for why in [cls.softmax_refusal({p.name: value})] if why is not None)
    return (f"Not offered for these {n_classes} classes (softmax): " + "; ".join(parts) + "."
            + "".join(f" {why[0].upper()}{why[1:]}." for why in partly))


def show_left_out(left_out: dict[str, str], n_classes: int) -> None:
    """The algorithms a picker left out, in one line, and why, folded: the reasons run to 150 words, which in a
    230 px column pushed the settings below the fold (issue 31, point 12)."""
    titles = [ALGORITHMS[name].title or name for name in left_out]
    partly = [cls.title for cls in ALGORITHMS.values() if cls.softmax_refusal() is None
              and any(cls.softmax_refusal({p.name: v}) is not None
                      for p in cls.params if p.kind == "choice" for v in p.choices)]
    st.caption(f"Not offered for {n_classes} classes (softmax): {', '.join(titles)}"
               + (f"; {', '.join(partly)} with some settings only" if partly else "") + ".")
    with st.expander("Why not"):
        st.caption(left_out_text(left_out, n_classes))


def algorithm_label(name: str) -> str:
    """An algorithm's title for pickers: "(centralised)" unless its title says so, and the losses it
    is limited to."""
    cls = ALGORITHMS[name]
    only = "" if "logistic" in cls.losses else f" ({', '.join(cls.losses)} loss only)"
    central = "" if cls.federated or "centralised" in cls.title.lower() else " (centralised)"
    return cls.title + central + only


def partitioner_label(name: str) -> str:
    """A partitioner's title for pickers, with its spec name where the title does not already hold it
    (not "Label skew (Dirichlet) (dirichlet)")."""
    from ..data.partition import PARTITIONERS

    title = PARTITIONERS[name].title
    return title if name.lower() in title.lower() else f"{title} ({name})"


def fmt_pct(v) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{100 * v:.2f}%"
