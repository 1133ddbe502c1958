"""``python -m fedviz bench`` and the other measured reports: one module per benchmark.

- :mod:`.speed`: speed and memory of fedviz against a SciPy gradient pass and scikit-learn's SAGA, the
  stop latency, the first record (``fedviz bench``);
- :mod:`.cluster`: the experiment figure, cells in-process against cells on local Dask clusters (the end
  of ``fedviz bench`` unless ``--no-experiment``);
- :mod:`.scaling`: every scale with 2 threads, paper scale with 1 (``--scaling``);
- :mod:`.concurrency`: two benches at once on the same cores, with OpenMP's idle threads spinning or asleep
  (``--concurrent``);
- :mod:`.pernode`: the per-node evaluation's cost in test passes (``--pernode``);
- :mod:`.softmax`: softmax against logistic regression per iteration (``--softmax``);
- :mod:`.personal`: the exact Local models of every node (``--personal``);
- :mod:`.figure2`: the paper's Figure 2 experiment (``fedviz figure2``);
- :mod:`.stepsize_check`: FSVRG's default step against the best of a ×2 grid
  (``python -m fedviz.bench.stepsize_check``);
- :mod:`.tuning_report`: the stepsizes tuning chooses, written to docs/tuning.md (``fedviz tuning-report``).
- :mod:`.default_grid`: every default against the best of a ×2 grid of its step, written to docs/defaults.md
  (``python -m fedviz.bench.default_grid``).

Nothing here asserts a time; the tests check that each command runs and prints sane figures.
"""

from __future__ import annotations

import json
import sys

from ._common import SCALES
from .concurrency import concurrency, format_concurrency
from .cluster import PROJECTION_BANDWIDTH, cluster_figure, format_cluster
from .pernode import format_pernode, pernode_cost
from .personal import format_personal, personal_cost
from .scaling import format_scaling, scaling
from .softmax import SOFTMAX_ALGORITHMS, SOFTMAX_BAR, SOFTMAX_CLASSES, format_softmax, softmax_cost
from .speed import ALGORITHMS, format_table, run, stop_latency

__all__ = ["SCALES", "ALGORITHMS", "run", "format_table", "stop_latency", "cluster_figure", "format_cluster",
           "PROJECTION_BANDWIDTH", "scaling", "format_scaling", "concurrency", "format_concurrency", "pernode_cost", "format_pernode", "softmax_cost",
           "format_softmax", "SOFTMAX_ALGORITHMS", "SOFTMAX_BAR", "SOFTMAX_CLASSES", "personal_cost",
           "format_personal", "main"]


def main(args) -> int:
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if not args.json else (lambda s: None)
    if getattr(args, "personal", False):
        result = personal_cost(args.scale, log=log)
        print(json.dumps(result, default=float) if args.json else format_personal(result))
        return 0
    if getattr(args, "softmax", False):
        result = softmax_cost(iterations=args.iterations, log=log)
        print(json.dumps(result, default=float) if args.json else format_softmax(result))
        return 0
    if getattr(args, "pernode", False):
        result = pernode_cost(args.scale, iterations=args.iterations, log=log)
        print(json.dumps(result, default=float) if args.json else format_pernode(result))
        return 0
    if getattr(args, "concurrent", False):
        result = concurrency(iterations=args.iterations, log=log)
        print(json.dumps(result, default=float) if args.json else format_concurrency(result))
        return 0
    if args.scaling:
        runs = scaling(log)
        print(json.dumps(runs, default=float) if args.json else format_scaling(runs))
        return 0
    solvers = tuple(s for s in (args.sklearn_solvers or "").split(",") if s)
    result = run(args.scale, iterations=args.iterations, sklearn_solvers=solvers,
                 experiment=not args.no_experiment, log=log)
    if args.json:
        print(json.dumps(result, default=float))
    else:
        print(format_table(result))
    return 0
