"""The command line: ``python -m fedviz inspect|run|export|figure2|bench|personalise|experiment|tuning-report|operator|algorithms``.

The choices and lists it offers (losses, built-in experiments, scales, Figure 2's protocols and lines) are
read from the registries that define them, so a new entry reaches the command line and its help by itself.

Every error the user can cause ends with exit code 2 and a one-line message on stderr,
never a traceback.

This module holds the parser, the dispatch, ``algorithms`` (the registry's listing) and ``operator`` (the
dashboard's operator link, :mod:`fedviz.runner.serve.operator`); the commands are in rooms beside it:
:mod:`.arguments` (the options and readers they share), :mod:`.data` (inspect, export), :mod:`.run` (run,
figure2), :mod:`.personalise` and :mod:`.experiment`; ``bench``, ``tuning-report`` and Figure 2's experiment
are in :mod:`fedviz.bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Sequence

from ..errors import FedvizError
from .arguments import (add_data_arguments, check_algorithms_take, data_spec_from_args, loss_from_args, loss_names,
                        parse_settings, setting_flag)
from .data import _cmd_export, _cmd_inspect
from .run import _cmd_figure2, _cmd_run


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message):  # noqa: D401 - argparse's hook
        raise _UsageError(f"{self.prog}: {message}")


class _UsageError(Exception):
    pass


def _cmd_operator(args) -> int:
    from ..runner.serve.operator import operator_link, token_path

    print(operator_link(args.url))
    print(f"(the token is kept in {token_path()}, readable by you only; delete it to change the link, "
          "or set FEDVIZ_OPERATOR_TOKEN)", file=sys.stderr)
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
    p.add_argument("--concurrent", action="store_true",
                   help="two small benches at once on the same cores against one alone, with OpenMP's idle "
                        "threads spinning (libgomp's default) and asleep (fedviz's OMP_WAIT_POLICY=PASSIVE)")
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

    __import__("fedviz.cli.personalise", fromlist=["add_parser"]).add_parser(sub)

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

    p = sub.add_parser("operator", help="print the dashboard's operator link (the tab that opens it lists every "
                       "run of the server; docs/sharing.md)")
    p.add_argument("--url", default="http://localhost:8501",
                   help="the dashboard's address as browsers reach it (default http://localhost:8501)")
    p.set_defaults(func=_cmd_operator)

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


__all__ = ["add_data_arguments", "build_parser", "check_algorithms_take", "data_spec_from_args", "loss_from_args",
           "loss_names", "main", "parse_settings", "setting_flag"]
