"""``fedviz inspect`` and ``fedviz export``: the commands on one data set, before any run."""

from __future__ import annotations

import json
import math
import os
import sys

from .arguments import _jsonable, _print_warnings, data_spec_from_args, loss_from_args


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
