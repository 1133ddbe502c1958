"""``python -m fedviz personalise DATA``: every node's own model, exact, and the per-node table (issue 23, point 5).

Builds the data set as ``run`` and ``inspect`` do (a preset or a file, any partition), runs
:func:`fedviz.personal.personalise` and prints the table method × pooled / unweighted mean / std /
p10 / worst-10% / min of the nodes' test errors, then the Ditto λ path, the λ_D that serves the
worst 10% best and the two identities of exact Ditto measured on the data (``--json``: one JSON
object with every per-node vector).  Bad input: exit 2 and one sentence naming the option and its
range.
"""

from __future__ import annotations

import json
import math
import sys

from .arguments import _print_warnings, add_data_arguments, data_spec_from_args, loss_from_args

#: Command-line flag → PersonaliseConfig field.
FLAGS = {"--finetune-steps": "finetune_steps", "--finetune-step": "finetune_step",
         "--finetune-batch": "finetune_batch", "--apfl-alpha": "apfl_alpha",
         "--ditto-lambda": "ditto_lambda", "--finetune-seed": "seed"}


def add_parser(sub) -> None:
    """The ``personalise`` subcommand on the CLI's subparsers, with the data options every data command takes."""
    from ..personal.report import DEFAULT_LAMBDAS, PARAMS

    p = sub.add_parser("personalise", help="per-node test errors of the global model, Local, fine-tuned, "
                       "exact Ditto and APFL models, and the per-node majority baseline")
    add_data_arguments(p)
    p.add_argument("--lambdas", metavar="L[,L...]",
                   help="Ditto's λ_D path: numbers ≥ 0, comma-separated, 'inf' for the global model "
                        f"(default: {_grid_text(DEFAULT_LAMBDAS)})")
    for flag, name in FLAGS.items():
        param = PARAMS[name]
        text = f"{param.help} Allowed: {param.range_text()}."
        p.add_argument(flag, metavar="X", help=text.replace("%", "%%"))  # argparse formats help with %
    p.add_argument("--json", action="store_true", help="print one JSON object (every node's errors included)")
    p.set_defaults(func=command)


def _grid_text(lambdas) -> str:
    """The default λ_D grid in words, from the grid itself: '0, 15 values from 1e-05 to 100 evenly spaced
    on a log scale, and inf'."""
    inner = [x for x in lambdas if 0.0 < x < math.inf]
    parts = (["0"] if 0.0 in lambdas else []) + \
        [f"{len(inner)} values from {min(inner):g} to {max(inner):g} evenly spaced on a log scale"]
    return ", ".join(parts) + (", and inf" if math.inf in lambdas else "")


def config_from_args(args):
    """The :class:`~fedviz.personal.report.PersonaliseConfig` of the options; errors name the flag."""
    from ..errors import ParameterError
    from ..personal.report import PARAMS, PersonaliseConfig

    values = {}
    for flag, name in FLAGS.items():
        text = getattr(args, flag[2:].replace("-", "_"))
        if text is None:
            continue
        param = PARAMS[name]
        if name == "ditto_lambda" and text.strip().lower() in ("inf", "infinity", "∞"):
            values[name] = math.inf  # Ditto's limit, the global model (a Param takes finite numbers)
            continue
        try:
            values[name] = param.validate(param.convert(text, flag))
        except ParameterError as e:
            raise ParameterError(flag, text, param.range_text()) from e
    if args.lambdas is not None:
        values["lambdas"] = parse_lambdas(args.lambdas)
    return PersonaliseConfig(**values)


def parse_lambdas(text: str) -> tuple:
    """'0,1e-3,inf' → (0.0, 0.001, inf); anything else is refused naming --lambdas."""
    from ..errors import ParameterError

    allowed = "comma-separated numbers ≥ 0 (inf: the global model), e.g. 0,1e-3,0.1,inf"
    out = []
    for item in str(text).split(","):
        try:
            x = float(item.strip())
        except ValueError:
            raise ParameterError("--lambdas", text, allowed) from None
        if not (x >= 0.0):
            raise ParameterError("--lambdas", text, allowed)
        out.append(x)
    return tuple(out)


def format_path(report) -> str:
    """The λ path: one line per λ_D, its pooled, unweighted mean and worst-10% test error."""
    from ..personal.report import _lam_text

    lines = ["λ_D        pooled    mean  worst 10%"]
    for lam, s in zip(report.lambdas, report.path_summaries):
        mark = "  ← best for the worst 10%" if lam == report.best_lambda else ""
        cells = ["n/a" if not math.isfinite(s[k]) else f"{100 * s[k]:.2f}%" for k in ("pooled", "mean", "worst10")]
        lines.append(f"{_lam_text(float(lam)):<9}  {cells[0]:>7}  {cells[1]:>6}  {cells[2]:>9}{mark}")
    return "\n".join(lines)


def main(args, problem, config) -> int:
    """Personalise ``problem`` with ``config`` (:func:`config_from_args`) and print the report."""
    from ..personal.report import format_table, personalise, personalise_unseen

    from ..errors import ParameterError

    ds = problem.data
    try:
        report = personalise(problem, config)
    except ParameterError as e:  # name the option the user typed, not the field
        flag = {name: flag for flag, name in FLAGS.items()}.get(e.name)
        if flag is None:
            raise
        raise ParameterError(flag, e.value, e.allowed) from e
    unseen = personalise_unseen(problem, config, w_star=report.w)
    if args.json:
        print(json.dumps({**report.to_dict(), "unseen": None if unseen is None else unseen.to_dict()}))
        return 0
    print(f"{ds.meta.get('source') or args.data}: K = {report.nodes:,} nodes, λ = {report.lam:.4g}, "
          f"{problem.loss.name} loss; the nodes' test errors, each node's test rows scored by that node's model")
    print(format_table(report))
    if report.sentence():
        print(report.sentence())
    print()
    print(format_path(report))
    c = report.checks
    if "ditto0_minus_local" in c:
        print(f"\nExact Ditto at λ_D = 0 (solved from w*) and Local (solved from 0): objectives F_k differ by at most "
              f"{c['ditto0_minus_local']:.1e}; at λ_D = {c['ditto_limit_lambda']:.0e}, Ditto and the global model "
              f"by at most {c['ditto_limit_minus_global']:.1e}.")
    worse = int(c.get("finetune_nodes_worse", 0))
    if worse:
        print(f"Fine-tuning raised the own loss F_k of {worse:,} of {report.nodes:,} nodes above the global model's: "
              f"a step too large for them (gradient descent descends at steps below 2/L_k) or minibatch noise.")
    if report.untested == report.nodes:
        print("No node has test rows (the test set belongs to no node): every per-node test error is n/a. "
              "Add --deal-test to deal the test rows to the nodes by their shares of each class.")
    elif report.untested:
        print(f"{report.untested:,} of {report.nodes:,} nodes have no test rows and are left out of the "
              f"per-node statistics (counted, not scored).")
    if unseen is not None:
        print(f"\nUnseen nodes: {unseen.nodes:,} nodes held out of training, scored as new clients — the "
              f"global model as received, and each personalised from it on the node's own training rows")
        if unseen.untested == unseen.nodes:
            print("No unseen node has test rows: none can be scored.")
        else:
            print(format_table(unseen))
            if unseen.untested:
                print(f"{unseen.untested:,} of {unseen.nodes:,} unseen nodes have no test rows (counted, not scored).")
    if report.unassigned_rows:
        print(f"{report.unassigned_rows:,} test rows belong to no node and are scored by no personal model.",
              file=sys.stderr)
    return 0


def command(args) -> int:
    """``fedviz personalise``: the data built from the options, then :func:`main` on its problem."""
    from ..data.build import build
    from ..problems.objective import Problem

    config = config_from_args(args)  # bad options refused before the data are built
    ds = build(data_spec_from_args(args))
    _print_warnings(ds)
    return main(args, Problem(ds, loss_from_args(args, ds), args.lam), config)
