"""``fedviz run`` and ``fedviz figure2``: algorithms run in this process, one printed line per record."""

from __future__ import annotations

import json
import math
import sys

from ..errors import FedvizError
from .arguments import (_jsonable, _print_warnings, check_algorithms_take, data_spec_from_args, interrupts,
                        loss_from_args, parse_settings)


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
    # Ctrl-C requests the stop, then breaks off what runs with KeyboardInterrupt, which execute catches:
    # it ends the open algorithms 'stopped', and the command exits 130 in one line.
    with interrupts(lambda: stop.request(INTERRUPTED)):
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
            # No test row: n/a in the column's width (the warning above said why once; nan% was noise).
            if math.isnan(rec.test_error):
                err = f"test MSE {'n/a':>9}" if self.regression else f"test err {'n/a':>7}"
            else:
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
