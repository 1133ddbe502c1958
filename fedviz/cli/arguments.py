"""What the commands share: the data options (made from the data settings' table), the loss and
``--set`` readers, the checks that refuse before anything runs, the data's warnings on stderr, and
how a long command takes Ctrl-C (:func:`interrupts`)."""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
import threading
from typing import Callable, Sequence

from ..errors import FedvizError


@contextlib.contextmanager
def interrupts(on_interrupt: Callable[[], object], signals=(signal.SIGINT,)):
    """While the block runs, each of ``signals`` (Ctrl-C's SIGINT; a ``kill``'s SIGTERM) first calls
    ``on_interrupt()`` — the command's own record of it: a stop requested, a flag set — and then breaks off
    the main thread's work with KeyboardInterrupt.

    A KeyboardInterrupt that lands while Python runs a finalizer (a ``__del__``: llvmlite's, while numba
    compiles) cannot leave it: Python would print it as "Exception ignored in …" with a traceback and go
    on.  Here it is dropped without a word, since ``on_interrupt`` has recorded it already; the command
    acts on that record.  Other unraisable errors reach Python's hook as before.  Only in the main thread,
    and not for a signal a shell ignores (a background job's SIGINT)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        on_interrupt()
        raise KeyboardInterrupt

    def unraisable(info):
        if not isinstance(info.exc_value, KeyboardInterrupt):
            hook(info)

    previous = {s: signal.getsignal(s) for s in signals if signal.getsignal(s) is not signal.SIG_IGN}
    hook = sys.unraisablehook
    for s in previous:
        signal.signal(s, handler)
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        sys.unraisablehook = hook


def setting_flag(name: str) -> str:
    """The command line's flag of a data setting: its name, dashes for underscores (``--deal-test``)."""
    return "--" + name.replace("_", "-")


def _setting_type(p):
    """argparse's ``type`` for a Param: its text parser and range, so that a bad value is a usage error
    (exit 2) naming the setting and its allowed range, as the link and an experiment file name them."""
    def read(text: str):
        try:
            return p.parse(text)
        except FedvizError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return read


#: Where a data setting's default on the command line is not its table default: the run's --seed seeds
#: the data too unless --data-seed is given (as an experiment's seeds do unless data_seed is set).
_CLI_DEFAULTS = {"data_seed": "--seed"}


def add_data_arguments(p: argparse.ArgumentParser) -> None:
    from ..data.settings import DATA_SETTINGS

    p.add_argument("data", help="a LIBSVM path, or preset:NAME[?key=value&...] "
                                "(e.g. preset:google-plus-small?nodes=200)")
    p.add_argument("--test", metavar="TESTFILE", help="a separate LIBSVM test file")
    p.add_argument("--wider-test", action="store_true",
                   help="accept a test file with features beyond the training file's last (refused by "
                        "default: that is what another data set's test file looks like)")
    # The data settings, one flag each, made from their table (fedviz.data.settings): its names, ranges and help.
    for s in DATA_SETTINGS.values():
        default = _CLI_DEFAULTS.get(s.name, None if s.default is None else s.format(s.default))
        words = s.help + (f" Allowed: {s.range_text()}." if s.kind != "bool" else "") + \
            (f" Default: {default}." if default is not None else "")
        if s.kind == "bool":  # --deal-test / --no-deal-test; not given: the table's default
            p.add_argument(setting_flag(s.name), dest=s.name, action=argparse.BooleanOptionalAction, default=None,
                           help=words.replace("%", "%%"))
        else:
            p.add_argument(setting_flag(s.name), dest=s.name, type=_setting_type(s), default=None,
                           metavar="{" + ",".join(s.choices) + "}" if s.kind == "choice" else None,
                           help=words.replace("%", "%%"))
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the algorithms' random choices, and of the data unless --data-seed is given")
    p.add_argument("--loss", default=None, choices=loss_names(), help=_loss_help())
    p.add_argument("--lam", type=float, help="the regulariser λ (default 1/n, as in the paper)")
    p.add_argument("--bias", action=argparse.BooleanOptionalAction, default=None,
                   help="append a constant-1 bias feature (default: no for files, the preset's choice)")
    p.add_argument("--positive", type=float,
                   help="for a file of more than two classes: the class that becomes +1, every other -1 "
                        "(one-vs-rest); without it every class is kept (softmax)")
    p.add_argument("--index-base", choices=["auto", "0", "1"], default="auto",
                   help="the files' feature indices: 0-based, 1-based (index 0 is refused), or auto, "
                        "detected as scikit-learn does (default)")
    p.add_argument("--max-rows", type=int, metavar="N", help="refuse a file with more than N data rows")
    p.add_argument("--max-bytes", type=int, metavar="N",
                   help="refuse a file larger than N bytes, before or after decompression "
                        "(default 1 GiB)")


def data_spec_from_args(args):
    from ..data.build import DataSpec
    from ..data.settings import DATA_SETTINGS, with_settings

    task = "regression" if args.loss == "squared" else "classification"
    zero_based = {"auto": "auto", "0": True, "1": False}[args.index_base]
    limits = {} if args.max_bytes is None else {"max_bytes": args.max_bytes}  # else the loader's default
    settings = {name: getattr(args, name) for name in DATA_SETTINGS if getattr(args, name) is not None}
    settings.setdefault("data_seed", args.seed)
    return with_settings(DataSpec(source=args.data, test=args.test, bias=args.bias, positive=args.positive, task=task,
                                  zero_based=zero_based, max_rows=args.max_rows, wider_test=args.wider_test, **limits),
                         settings)


def loss_names() -> tuple[str, ...]:
    """Every loss ``--loss`` takes, from the losses registry: binary and regression, then multiclass."""
    from ..problems.losses import LOSSES, MULTICLASS_LOSSES

    return (*LOSSES, *MULTICLASS_LOSSES)


def _loss_help() -> str:
    from ..problems.losses import MULTICLASS_LOSSES, loss_choices

    multiclass = ", ".join(MULTICLASS_LOSSES)
    return (f"default: {loss_choices(True)[0]} for a file of more than two classes (without --positive), "
            f"else {loss_choices(False)[0]}; {multiclass} takes such files only")


def loss_from_args(args, ds) -> str:
    """The loss of ``--loss``, or by default the data's (softmax for multiclass data, else logistic)."""
    from ..problems.losses import loss_choices

    return args.loss or loss_choices(ds.multiclass)[0]


def check_algorithms_take(names: Sequence[str], loss: str, settings: dict) -> None:
    """Refuse, before anything runs, an algorithm that does not take ``loss`` (softmax: issue 22)."""
    from ..algorithms import get_algorithm
    from ..errors import ParameterError

    for name in names:
        why = get_algorithm(name).loss_refusal(loss, settings.get(name))
        if why is not None:
            raise ParameterError("--algorithms", name, f"an algorithm that takes the {loss} loss", hint=why)


def _print_warnings(ds) -> None:
    """The data set's warnings (e.g. a test split that leaks), one 'warning: …' line each on stderr."""
    for text in ds.meta.get("warnings", []) or []:
        print(f"warning: {' '.join(str(text).split())}", file=sys.stderr)


def parse_settings(items: Sequence[str], algorithms: Sequence[str]) -> dict:
    """``NAME.param=value`` strings → {algorithm: Hyper}: the text read (:meth:`Param.convert`, the
    words a link and a spec string take), then every value checked once, with its combination
    (:meth:`Algorithm.validate`); what the run is made with, not checked again."""
    from ..algorithms import get_algorithm
    from ..errors import ParameterError
    from ..params import split_item

    out: dict[str, dict] = {name: {} for name in algorithms}
    expected = "NAME.param=value, e.g. fsvrg.stepsize=0.5"
    for item in items:
        key, text = split_item(item, what="--set", expected=expected)
        name, dot, param = key.partition(".")
        if not dot or not param:
            raise ParameterError("--set", item, expected)
        if name not in out:
            raise ParameterError("--set", item, "an algorithm chosen with --algorithms: " + ", ".join(algorithms))
        cls = get_algorithm(name)
        try:
            spec = cls.param(param)
        except KeyError:
            raise ParameterError(f"{name}.{param}", text, "a known hyperparameter: "
                                 + ", ".join(p.name for p in cls.params)) from None
        out[name][param] = spec.convert(text, spec.qualname(name))  # the words a link and a spec string take
    # Refused before anything runs: a value out of range (named, with its range) or a bad combination.
    return {name: get_algorithm(name).validate(hyper) for name, hyper in out.items()}


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        return v.item()
    return v
