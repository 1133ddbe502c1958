"""The command line: ``python -m fedviz inspect|run|export|figure2|bench|personalise|experiment|tuning-report|algorithms``.

The choices and lists it offers (losses, built-in experiments, scales, Figure 2's protocols and lines) are
read from the registries that define them, so a new entry reaches the command line and its help by itself.

Every error the user can cause ends with exit code 2 and a one-line message on stderr,
never a traceback.

This module holds the parser, the dispatch and the commands on one data set (inspect, run, export,
figure2, algorithms); ``experiment`` and ``personalise`` are :mod:`.experiment` and :mod:`.personalise`
beside it; ``bench``, ``tuning-report`` and Figure 2's experiment are in :mod:`fedviz.bench`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
from typing import Sequence

from ..errors import FedvizError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message):  # noqa: D401 - argparse's hook
        raise _UsageError(f"{self.prog}: {message}")


class _UsageError(Exception):
    pass


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


def _cmd_inspect(args) -> int:
    from ..data.baselines import majority_test_error, node_majority_test_error
    from ..data.build import build
    from ..data.labels import dataset_label_counts, positive_share
    from ..problems.objective import Problem
    from ..problems.optimum import solve

    ds = build(data_spec_from_args(args))
    _print_warnings(ds)
    out = dict(ds.stats.summary())
    out["n_test"] = int(ds.y_test.size)
    if ds.unseen is not None:  # the figures above are the seen nodes'; the held-out ones counted here
        out.update(unseen_nodes=ds.unseen.n_nodes, unseen_n=ds.unseen.n, unseen_n_test=int(ds.unseen.y_test.size))
    out["source"] = ds.meta.get("source")
    out["task"] = ds.task
    if ds.task == "classification":
        out["classes"] = ds.n_classes
        if ds.multiclass:  # each class's share of the training rows, by the file's label
            shares = dataset_label_counts(ds).sum(axis=0) / ds.n
            out.update({f"class_{name}_fraction": float(v) for name, v in zip(ds.class_names, shares)})
        else:
            out["positive_fraction"] = positive_share(dataset_label_counts(ds).sum(axis=0))
        out["majority_test_error"] = majority_test_error(ds)
        out["node_majority_test_error"] = node_majority_test_error(ds)
    if args.opt:
        problem = Problem(ds, loss_from_args(args, ds), args.lam)
        opt = solve(problem)
        out.update(lam=problem.lam, opt_objective=opt.objective, opt_test_error=opt.test_error,
                   opt_train_error=opt.train_error, opt_grad_norm=opt.grad_norm,
                   opt_seconds=opt.seconds)
    if args.json:
        print(json.dumps({k: _jsonable(v) for k, v in out.items()}))
    else:
        _print_table(out)
    return 0


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        return v.item()
    return v


def _print_table(out: dict) -> None:
    width = max(len(k) for k in out)
    for k, v in out.items():
        if isinstance(v, float):
            if k.endswith("error") or k.endswith("fraction") or k.startswith("features_on"):
                text = "n/a" if not math.isfinite(v) else f"{100 * v:.2f}%"
            else:
                text = f"{v:.10g}"
        else:
            text = str(v)
        print(f"{k.replace('_', ' '):<{width}}  {text}")


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


def _cmd_run(args) -> int:
    """``fedviz run``: the flags made into the :class:`~fedviz.runner.job.RunJob` a Run click submits, handed
    to the same seam, :func:`~fedviz.runner.execute.execute`, in this process.  f*, the tuning pilots and
    Ditto's exact target v_k(λ_D) are computed there, as for the dashboard and an experiment's cells;
    :class:`_RunPrinter` prints what it reports."""
    import csv

    from ..algorithms import get_algorithm
    from ..algorithms.spec import AlgorithmSpec
    from ..errors import ParameterError
    from ..runner import FIELDS, ProblemSpec, RunJob, cache
    from ..runner.execute import Stop, execute

    names = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if not names:
        raise ParameterError("--algorithms", args.algorithms, "a comma-separated list of algorithm names")
    for name in names:
        get_algorithm(name)
    if args.iterations < 0 or args.iterations > 100_000:
        raise ParameterError("--iterations", args.iterations, "integer in [0, 100000]")
    if args.out and not args.out.endswith((".csv", ".json")):
        raise ParameterError("--out", args.out, "a file name ending in .csv or .json")
    settings = parse_settings(args.set or [], names)
    data = data_spec_from_args(args)
    ds = cache.dataset(data)  # built once: the job below takes it from the cache
    _print_warnings(ds)
    loss = loss_from_args(args, ds)
    check_algorithms_take(names, loss, settings)
    # The curves are labelled by the registry names on the command line ('fsvrg').
    specs = tuple(AlgorithmSpec.of(name, settings[name], label=name) for name in names)
    job = RunJob(ProblemSpec(data, loss, args.lam), specs, iterations=args.iterations, seed=args.seed,
                 tune=args.tune).validate()
    problem = job.make_problem()
    for spec in specs:
        spec.make(problem, seed=args.seed)  # the checks that need the problem, before running
    stop = Stop()
    printer = _RunPrinter(job.labels, stop, iterations=args.iterations, as_json=args.json, with_tune=args.tune)
    with _interrupt_stops(stop):
        execute(job, printer, stop)
    if printer.error is not None:  # the output closed under us (a reader that left): as before the seam
        raise printer.error
    if stop() and stop.reason == INTERRUPTED:
        raise KeyboardInterrupt
    if printer.failure is not None:  # an algorithm ended before its first record (e.g. tuning refused it)
        raise FedvizError(printer.failure)
    if args.out:
        rows = [_row(r, printer.choices, args.tune) for r in printer.records]
        with open(args.out, "w", newline="") as fh:
            if args.out.endswith(".json"):
                json.dump(rows, fh, indent=1)
            else:
                writer = csv.DictWriter(fh, fieldnames=FIELDS + (TUNE_FIELDS if args.tune else ()))
                writer.writeheader()
                writer.writerows(rows)
    return 0


#: Why a run of ``fedviz run`` stopped when the user pressed Ctrl-C.
INTERRUPTED = "interrupted"


@contextlib.contextmanager
def _interrupt_stops(stop):
    """Ctrl-C while the job runs requests ``stop`` (reason :data:`INTERRUPTED`) and then breaks off what
    runs with KeyboardInterrupt, which :func:`~fedviz.runner.execute.execute` catches: it ends the open
    algorithms 'stopped', and the command exits 130 as it did before the seam.  Only in the main thread,
    and not where SIGINT is ignored (a shell's background job)."""
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return

    def interrupted(signum, frame):
        stop.request(INTERRUPTED)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _RunPrinter:
    """``fedviz run``'s sink: every record on stdout (``--json``: every one as a JSON object; else a line
    for every tenth and the last), the tuning verdicts and the warnings on stderr.

    :func:`~fedviz.runner.execute.execute` advances the algorithms round-robin, one iteration each in
    turn; the command line prints one algorithm's records after the other's, in the order of
    ``--algorithms``: the first algorithm still open prints as it goes, the records of those after it
    wait until the ones before have ended.  Never raises into the run: an output error (a reader that
    left) is kept in :attr:`error` and stops the run; :attr:`failure` is why an algorithm ended before
    its first record.
    """

    def __init__(self, labels, stop, *, iterations: int, as_json: bool, with_tune: bool):
        self.stop, self.iterations, self.as_json, self.with_tune = stop, iterations, as_json, with_tune
        self.order = list(labels)                       # not printed to the end yet, in --algorithms order
        self.held: dict[str, list] = {label: [] for label in labels}
        self.seen: set[str] = set()                     # the labels that have a record
        self.ended: set[str] = set()
        self.records: list = []                         # as printed: what --out writes
        self.verdicts: dict = {}                        # label → its TuneResult, until retuned renames it
        self.choices: dict[str, tuple] = {}             # label → (param, value): --tune's columns
        self.regression = False
        self.failure: str | None = None
        self.error: OSError | None = None

    def _print(self, text: str, stream=None) -> None:
        if self.error is not None:
            return
        try:
            print(text, file=stream or sys.stdout, flush=True)
        except OSError as e:
            self.error = e
            self.stop.request("the output was closed")

    def preparing(self, message: str) -> None:
        pass

    def warn(self, text: str) -> None:
        self._print(f"warning: {' '.join(str(text).split())}", sys.stderr)

    def tuned(self, label: str, result) -> None:
        self.verdicts[label] = result
        self._print(f"tune {result.name}: "
                    + (f"{result.param} = {result.value:.6g}" if result.param else "nothing to tune")
                    + ("" if result.param is None or result.tuned else " (the default: no pilot passed)")
                    + (" (at the grid's edge)" if result.edge else "")
                    + f"; {result.cost()}; criterion: {result.criterion}", sys.stderr)

    def retuned(self, old: str, entry, note: str) -> None:
        new = entry.label
        self.order = [new if x == old else x for x in self.order]
        self.held[new] = self.held.pop(old)
        result = self.verdicts.pop(old, None)
        if result is not None:
            self.choices[new] = (result.param, result.value)

    def started(self, *, summary, **info) -> None:
        self.regression = summary.get("error_metric") == "mse"

    def record(self, label: str, rec) -> None:
        self.seen.add(label)
        self.held[label].append(rec)
        self._flush()

    def end(self, label: str, status: str, message: str) -> None:
        self.ended.add(label)
        if label not in self.seen and status == "failed" and self.failure is None:
            self.failure = message
        self._flush()

    def tick(self) -> None:
        pass

    def _flush(self) -> None:
        while self.order:
            head = self.order[0]
            for rec in self.held[head]:
                self._line(rec)
            self.held[head].clear()
            if head not in self.ended:
                return
            self.order.pop(0)

    def _line(self, rec) -> None:
        from ..problems import metrics

        self.records.append(rec)
        if self.as_json:
            self._print(json.dumps(_row(rec, self.choices, self.with_tune)))
        elif rec.status != "running" or rec.iteration % max(1, self.iterations // 10) == 0:
            # The sign error rate on ±1 labels (any loss), the argmax error rate on C > 2 classes, the
            # MSE on real targets: Problem.error_metric.
            err = (f"test MSE {rec.test_error:9.4g}" if self.regression
                   else f"test err {100 * rec.test_error:6.2f}%")
            # Each per-node metric's headline that the record has (the unseen nodes' pooled error,
            # the personal models' of Ditto and APFL, the distance to the exact v_k(λ_D)).
            for m in metrics.METRICS:
                value = getattr(rec, m.key(m.headline)) if m.headline else math.nan
                if not math.isnan(value):
                    err += f"  {m.cli} {metrics.format_value(m, value, regression=self.regression)}"
            self._print(f"{rec.algorithm:>14} it {rec.iteration:>4}  f-f* {rec.suboptimality:10.3e}  "
                        f"{err}  rounds {rec.rounds:>4}  "
                        f"{rec.seconds:7.2f}s  {rec.status}{'  ' + rec.message if rec.message else ''}")


#: The record fields ``--tune`` adds: the tuned hyperparameter and its chosen value.
TUNE_FIELDS = ("tuned_param", "tuned_value")


def _row(rec, tuned: dict, with_tune: bool) -> dict:
    row = {k: _jsonable(v) for k, v in rec.as_dict().items()}
    if with_tune:
        row["tuned_param"], row["tuned_value"] = tuned.get(rec.algorithm, (None, None))
    return row


def _cmd_export(args) -> int:
    from ..data.build import build
    from ..data.export import export_dataset, missing_classes
    from ..errors import ParameterError

    if args.test_out is not None and os.path.abspath(args.test_out) == os.path.abspath(args.out):
        raise ParameterError("--test-out", args.test_out, "a file other than --out")
    ds = build(data_spec_from_args(args))
    _print_warnings(ds)
    n, n_test = export_dataset(ds, args.out, args.test_out, qid=args.qid)
    missing = missing_classes(ds)
    if missing:  # the file read back would code its classes differently
        print(f"warning: class {', '.join(missing)} has no training row; {args.out} read back holds "
              f"{ds.n_classes - len(missing)} classes, coded 0..{ds.n_classes - len(missing) - 1}", file=sys.stderr)
    print(f"wrote {args.out} ({n} rows, d = {ds.d})"
          + (f" and {args.test_out} ({n_test} rows)" if args.test_out else ""), file=sys.stderr)
    return 0


def _cmd_algorithms(args) -> int:
    from ..algorithms import ALGORITHMS
    from ..problems.losses import MULTICLASS_LOSSES

    if args.json:
        print(json.dumps([{
            "name": cls.name, "title": cls.title, "reference": cls.reference, "federated": cls.federated,
            "losses": list(cls.losses) + (list(MULTICLASS_LOSSES) if cls.softmax_refusal() is None else []),
            "params": [{"name": p.name, "kind": p.kind, "default": p.default, "range": p.range_text(),
                        "help": p.help} for p in cls.params]} for cls in ALGORITHMS.values()]))
        return 0
    for cls in ALGORITHMS.values():
        tag = "" if cls.federated else "  [centralised reference, not federated]"
        print(f"{cls.name}: {cls.title} — {cls.reference}{tag}")
        why = cls.softmax_refusal()
        if why is not None:  # refused on multiclass data (softmax), with the reason
            print(f"    {why}")
        for p in cls.params:
            default = "derived" if p.default is None else p.default
            print(f"    {p.name} = {default}  ({p.range_text()})  {p.help}")
    return 0


def _cmd_figure2(args) -> int:
    from ..bench.figure2 import figure2
    from ..plots import paper_figure2

    def progress(label, rec):
        print(f"{label:>7}: {rec.iteration} iterations, f-f* {rec.suboptimality:.3e}, "
              f"test error {100 * rec.test_error:.2f}%, {rec.seconds:.1f}s, {rec.status}", file=sys.stderr)

    result = figure2(args.preset, iterations=args.iterations, seed=args.seed, protocol=args.protocol,
                     progress=progress)
    title = (f"Figure 2 on {args.preset}: n = {result.data.n:,}, d = {result.data.d:,}, "
             f"K = {result.data.n_nodes:,}, λ = 1/n"
             + (", FSVRG's h the best of a ×2 grid (the paper's protocol)" if args.protocol == "paper" else ""))
    fig = paper_figure2(result.runs, baselines=result.baselines, title=title)
    fig.update_layout(width=1100, height=450)
    if args.out:
        if args.out.endswith(".html"):
            fig.write_html(args.out, include_plotlyjs=True)
        elif args.out.endswith(".png"):
            from ..plots.export import write_png
            write_png(fig, args.out)
        else:
            from ..errors import ParameterError
            raise ParameterError("--out", args.out, "a file name ending in .html or .png")
        print(f"wrote {args.out}", file=sys.stderr)
    summary = {label: {"suboptimality": recs[-1].suboptimality, "test_error": recs[-1].test_error,
                       "status": recs[-1].status} for label, recs in result.runs.items()}
    for label, h in result.stepsizes.items():
        summary[label]["stepsize"] = h
    summary["OPT"] = {"objective": result.optimum.objective, "test_error": result.optimum.test_error}
    print(json.dumps({k: {kk: _jsonable(vv) for kk, vv in v.items()} for k, v in summary.items()}))
    return 0


def _cmd_personalise(args) -> int:
    from .personalise import config_from_args, main
    from ..data.build import build
    from ..problems.objective import Problem

    config = config_from_args(args)  # bad options refused before the data are built
    ds = build(data_spec_from_args(args))
    _print_warnings(ds)
    return main(args, Problem(ds, loss_from_args(args, ds), args.lam), config)


def build_parser() -> argparse.ArgumentParser:
    from .. import bench
    from ..bench import figure2
    from ..experiments import builtin

    parser = _Parser(prog="fedviz", description="The command line of fedviz, one command per task (below); "
                     "'fedviz COMMAND --help' gives a command's options.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("inspect", help="statistics, baselines and (with --opt) the optimum of a data set")
    add_data_arguments(p)
    p.add_argument("--opt", action="store_true", help="also compute the optimum w* (Newton-CG)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_inspect)

    p = sub.add_parser("run", help="run algorithms and print one record per iteration")
    add_data_arguments(p)
    p.add_argument("--algorithms", required=True, metavar="NAME[,NAME...]",
                   help="algorithms to run (see 'fedviz algorithms')")
    p.add_argument("--iterations", type=int, default=30, metavar="T", help="outer iterations (default 30)")
    p.add_argument("--set", action="append", metavar="NAME.param=value",
                   help="a hyperparameter, e.g. fsvrg.stepsize=0.5 (repeatable)")
    p.add_argument("--out", metavar="FILE.csv|FILE.json", help="also write every record to a file")
    p.add_argument("--json", action="store_true", help="print one JSON object per iteration, every iteration")
    p.add_argument("--tune", action="store_true",
                   help="before each run, choose the algorithm's step (stepsize, or CoCoA's sigma_prime) by "
                        "short pilot runs on seeds other than --seed; the choice, criterion and the pilots' "
                        "rounds and seconds (next to the run's rounds) go to stderr, the value "
                        "into the label and the --out records")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("export", help="write a data set (e.g. a preset) as LIBSVM text files")
    add_data_arguments(p)
    p.add_argument("--out", required=True, metavar="FILE", help="the training rows, in node order ('.gz': gzip)")
    p.add_argument("--test-out", metavar="FILE", help="also write the test rows to this file")
    p.add_argument("--qid", action="store_true",
                   help="write each training row's node as qid:K, so --partition natural restores the nodes")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("figure2", help="reproduce the paper's Figure 2 ("
                       + ", ".join(label for label, _, _ in figure2.LINES) + " vs OPT)")
    p.add_argument("--preset", default="google-plus-small", help="google-plus-small (default) or google-plus")
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", metavar="FILE.html|FILE.png", help="write the figure")
    p.add_argument("--protocol", choices=figure2.PROTOCOLS, default=figure2.PROTOCOLS[0],
                   help="'default': every line at its default hyperparameters; 'paper': FSVRG's h chosen "
                        f"after the fact as the best of h = 2^k/L, k = {figure2.PAPER_GRID[0]}..{figure2.PAPER_GRID[-1]}, "
                        "without the safeguard (Section 4.1)")
    p.set_defaults(func=_cmd_figure2)

    p = sub.add_parser("bench", help="speed and memory against a SciPy gradient pass and scikit-learn's SAGA")
    p.add_argument("--scale", choices=tuple(bench.SCALES), default="small",
                   help="google-plus with K nodes, about 217 training rows each: "
                        + ", ".join(f"{name} K = {k:,}" for name, k in bench.SCALES.items()))
    p.add_argument("--iterations", type=int, default=5, help="iterations per algorithm for the median")
    p.add_argument("--sklearn-solvers", default="newton-cg,lbfgs,liblinear",
                   help="scikit-learn solvers timed on the optimum ('' to skip)")
    p.add_argument("--no-experiment", action="store_true", help="skip the end-to-end experiment timing")
    p.add_argument("--scaling", action="store_true",
                   help="time per iteration at all three scales, and 1 thread against 2 at paper scale")
    p.add_argument("--pernode", action="store_true",
                   help="the cost of the per-node evaluation (issue 23): one iteration with and without it, "
                        "on google-plus-small and on google-plus at --scale")
    p.add_argument("--personal", action="store_true",
                   help="the exact Local models of every node (issue 23) on google-plus at --scale, against "
                        "one gradient pass")
    p.add_argument("--softmax", action="store_true",
                   help="one iteration of FSVRG, GD and FedAvg with 10 classes (softmax) against binary labels on "
                        "google-plus-small's rows (issue 22's bar: at most 1.5 × C × the binary iteration)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=lambda args: __import__("fedviz.bench", fromlist=["main"]).main(args))

    __import__("fedviz.cli.personalise", fromlist=["add_parser"]).add_parser(sub, add_data_arguments, _cmd_personalise)

    p = sub.add_parser("experiment", help="run or resume an experiment (a grid of runs) on a Dask cluster",
                       epilog="Before the first cell the scheduler and every worker must import the same fedviz "
                              "(and numpy, numba) as this process, else the command refuses in one sentence. "
                              "Exit code 0: every cell has a result (done or diverged); 1: the experiment could "
                              "not run, or some cells failed (their distinct reasons are printed with counts); "
                              "2: bad input; 130: stopped.")
    p.add_argument("target", metavar="FILE.toml|NAME",
                   help="an experiment file, a built-in (" + ", ".join(builtin.BUILTINS) + ") or the "
                        "name of an experiment in the history (it resumes: only missing cells run)")
    p.add_argument("--scheduler", metavar="ADDR",
                   help="a Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: $FEDVIZ_DASK_SCHEDULER, else an "
                        "embedded local cluster)")
    p.add_argument("--out", metavar="DIR", help="also write results.csv, results.json, report.html and the figures "
                                                 "curves.png and final.png to DIR")
    p.add_argument("--scale", choices=builtin.SCALES, default=builtin.SCALES[0],
                   help="for a built-in: small (minutes) or full (the published protocol's length)")
    p.add_argument("--replace", action="store_true",
                   help="if an experiment of this name with a different grid is in the history, delete it and "
                        "its cells first (without it, the command refuses: one name holds one grid)")
    p.set_defaults(func=lambda args: __import__("fedviz.cli.experiment", fromlist=["main"]).main(args))

    p = sub.add_parser("tuning-report", help="write docs/tuning.md: every algorithm at its default and tuned "
                       "on a9a and agaricus (Markdown on stdout, progress on stderr)")
    p.add_argument("--data", default=None, metavar="DIR",
                   help="the folder with a9a, a9a.t, agaricus_zero_based.train/.test (default: $FEDVIZ_DATA, "
                        "else the checkout's tests/data)")
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--algorithms", default=None, metavar="NAME[,NAME...]", help="only these (default: all)")
    p.set_defaults(func=lambda args: __import__("fedviz.bench.tuning_report", fromlist=["main"]).main(args))

    p = sub.add_parser("algorithms", help="list the algorithms and their hyperparameters")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_algorithms)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        code = args.func(args)
        sys.stdout.flush()  # here, where a reader that left is caught, not in Python's exit
        return code
    except _UsageError as e:
        print(str(e), file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader left (`python -m fedviz algorithms | head`): end quietly, as a tool that
        # SIGPIPE ended; stdout goes to devnull so that Python's flush at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except (FedvizError, OSError, MemoryError) as e:
        print(f"fedviz: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fedviz: interrupted", file=sys.stderr)
        return 130


def _one_line(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    if isinstance(e, OSError) and e.filename:
        text = f"{e.strerror or text}: {e.filename}"
    return " ".join(text.split())
