"""``python -m fedviz experiment FILE.toml|NAME [--scheduler ADDR] [--out DIR]``: run (or resume) an
experiment from the command line, with progress on stderr and results in the run history.

NAME is a built-in (a name of :data:`fedviz.experiments.builtin.BUILTINS`, at a ``--scale`` of its
``SCALES``) or an experiment already in the history (it resumes: only its missing cells run).
Ctrl-C stops it as the page's Stop does: the cells not started are cancelled, the running ones end
within seconds, and the next launch resumes.

Exit codes (also in ``--help``): 0 every cell has a result (done or diverged); 1 the experiment
could not run (a cluster without this fedviz, a lost scheduler) or some cells failed, whose distinct
reasons are printed with their counts; 2 bad input; 130 stopped (Ctrl-C, SIGTERM).

It lives beside :mod:`fedviz.cli`, not in :mod:`fedviz.experiments`, because ``--out`` draws the
report's figures with :mod:`fedviz.plots`, a layer above the experiments (docs/architecture.md).
"""

from __future__ import annotations

import math
import signal
import sys
import threading
import time
from pathlib import Path

from ..errors import FedvizError, ParameterError
from ..experiments.builtin import BUILTINS, builtin_for
from ..experiments.results import REASON_WIDTH, failure_reasons  # noqa: F401 - REASON_WIDTH: the width reasons are cut at
from ..experiments.spec import Experiment, from_json, from_toml
from ..runner.history.store import RunStore
from .arguments import interrupts

#: Seconds between two progress lines on stderr.
PROGRESS_EVERY = 5.0
#: The most distinct failure reasons printed (each at most REASON_WIDTH characters).
MAX_REASONS = 5


def resolve(target: str, store: RunStore, scale: str = "small") -> Experiment:
    """The experiment ``target`` names: a TOML file, a built-in, or a stored experiment."""
    path = Path(target)
    if target.endswith(".toml"):
        if not path.is_file():
            raise ParameterError("experiment", target, "an existing .toml file, a built-in name or a stored experiment")
        return from_toml(path.read_text(encoding="utf-8"), where=path.name)
    if target in BUILTINS:
        return BUILTINS[target].experiment(scale)
    info = store.get_experiment(target)
    if info is not None:
        if info.spec.get("uploaded"):
            raise ParameterError("experiment", target, "an experiment whose data can be read again",
                                 hint="it ran on an uploaded file, which the history does not keep; "
                                      "write a TOML file that names the file's path")
        return from_json(info.spec)
    raise ParameterError("experiment", target, "a .toml file, one of the built-ins (" + ", ".join(BUILTINS)
                         + ") or the name of a stored experiment")


def main(args) -> int:
    """Run the command; every error is one sentence on stderr and a non-zero exit, never a traceback
    (an error fedviz raises on purpose propagates to the CLI's handler: exit 2; anything else: exit 1).

    SIGTERM (a `kill`, a CI timeout) stops the command as Ctrl-C does, from its first line: while
    it connects, and while the experiment runs (then its cells are stored)."""
    interrupted = threading.Event()
    try:
        with interrupts(interrupted.set, (signal.SIGINT, signal.SIGTERM)):
            return _main(args, interrupted)
    except (FedvizError, OSError, MemoryError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - a bug: one sentence, not a traceback
        print(f"fedviz: error: the experiment command failed unexpectedly ({type(e).__name__}: "
              f"{' '.join(str(e).split())}); please report it with the command line", file=sys.stderr)
        return 1


def _main(args, interrupted: threading.Event) -> int:
    from ..experiments.driver import launch
    from ..experiments.results import load
    from ..runner import cluster

    address = cluster.scheduler_address(args.scheduler)
    if address is not None:
        # Before anything starts: a typo, a plain-TCP address, a port that is not a scheduler or
        # one that does not answer is one line and exit 2 (bounded by the probe's deadline).
        cluster.check_address(address)
        cluster.get_client(address)
    store = RunStore()
    experiment = resolve(args.target, store, args.scale)
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    print(f"experiment {experiment.name}: {experiment.size:,} cells "
          f"({len(experiment.settings)} settings × {len(experiment.seeds)} seeds); history {store.path}",
          file=sys.stderr, flush=True)
    handle = launch(experiment, store, address=args.scheduler, replace=bool(getattr(args, "replace", False)))
    _watch(handle, interrupted)
    snap = handle.snapshot()
    cluster.close()
    if snap.status == "failed":
        print(f"fedviz: error: the experiment failed: {snap.message}", file=sys.stderr)
        return 1
    _progress(snap)
    failed = _failures(store, snap.experiment_id)
    results = load(store, experiment.name)
    _table(results)
    builtin = builtin_for(results.experiment)  # by content: a grid that only shares a built-in's name gets none
    verdict = builtin.verdict(results) if builtin is not None else None
    if verdict is not None:
        print(verdict.text)
        for line in verdict.lines():
            print("  " + line)
    if out is not None:
        _write(results, verdict, out)
    if snap.status == "stopped":
        return 130
    return 1 if failed else 0


def _watch(handle, interrupted: threading.Event) -> None:
    """Wait for the experiment's end, a progress line every :data:`PROGRESS_EVERY` s.  Ctrl-C or SIGTERM
    stops it as the page's Stop does: by its KeyboardInterrupt, or, where that was lost in a finalizer
    (:func:`~.arguments.interrupts`), by ``interrupted`` at the next half second."""
    last = 0.0
    try:
        while not handle.wait(0.5):
            if interrupted.is_set():
                raise KeyboardInterrupt
            now = time.monotonic()
            if now - last >= PROGRESS_EVERY:
                last = now
                _progress(handle.snapshot())
    except KeyboardInterrupt:
        print("stopping: cancelling the cells not started, stopping the running ones", file=sys.stderr, flush=True)
        handle.stop()
        handle.wait()


def _progress(s) -> None:
    running = ", ".join(f"{c.label} it {c.iteration}" for c in s.running[:4])
    print(f"[{s.seconds:6.0f} s] {s.status}: {s.complete:,}/{s.total:,} cells"
          + (f" ({s.reused:,} from before)" if s.reused else "")
          + (f", {s.failed} failed or diverged" if s.failed else "")
          + (f", {s.stopped} stopped" if s.stopped else "")
          + (f"; running {running}" if running else "") + (f"; {s.cluster}" if s.cluster else "")
          + (f" — {s.message}" if s.message else ""), file=sys.stderr, flush=True)


#: The distinct reasons among failed cells, counted (shared with the page, the driver and the report).
reasons = failure_reasons


def _failures(store: RunStore, exp_id: int | None) -> int:
    """Print, on stderr, how many stored cells failed and why; returns how many."""
    if exp_id is None:
        return 0
    cells = store.experiment_cells(exp_id)
    failed = [c.message for c in cells if c.status == "failed"]
    if not failed:
        return 0
    found = reasons(failed)
    print(f"fedviz: {len(failed)} of {len(cells)} cells failed"
          + (" (one reason):" if len(found) == 1 else f" ({len(found)} distinct reasons):"), file=sys.stderr)
    for n, text in found[:MAX_REASONS]:
        print(f"  {n} × {text}", file=sys.stderr)
    rest = found[MAX_REASONS:]
    if rest:
        print(f"  … and {len(rest)} other reasons over {sum(n for n, _ in rest)} cells "
              "(each cell's message is in the history and in --out's results.json)", file=sys.stderr)
    return len(failed)


def _table(results) -> None:
    """Median final f − f* [min, max] over seeds, one row per setting and line (stdout)."""
    width = max([len(a) for a in results.arms] + [4])
    for setting in results.settings:
        print(results.setting_label(setting))
        for arm in results.arms:
            s = results.summary(arm, setting)
            step = results.best_step(arm, setting)
            if s is None:
                print(f"  {arm:<{width}}  no complete cell")
                continue
            rounds = results.summary(arm, setting, "rounds")
            reach = "" if rounds is None or math.isinf(rounds.median) else f"  rounds to ε {rounds.median:g}"
            print(f"  {arm:<{width}}  f-f* {s.median:.3e} [{s.low:.2e}, {s.high:.2e}] over {s.n} seeds"
                  + (f"  (best grid value {step:g})" if step is not None else "") + reach)


def _write(results, verdict, out: Path) -> None:
    (out / "results.csv").write_text(results.to_csv(), encoding="utf-8")
    (out / "results.json").write_text(results.to_json(), encoding="utf-8")
    from ..plots.experiments import axis_figure, band_figure, report_html
    from ..plots.export import write_png

    shown = verdict.for_report() if verdict is not None else None  # below the paper's scale: not red
    (out / "report.html").write_text(report_html(results, shown), encoding="utf-8")
    written = ["results.csv", "results.json", "report.html"]
    # The two figures a paper shows, as pictures for a README: the curves with their seed bands,
    # and the final f − f* against the varied axis.
    engines = set()
    for name, fig in (("curves.png", band_figure(results)), ("final.png", axis_figure(results))):
        engines.add(write_png(fig, out / name))
        written.append(name)
    print(f"wrote {', '.join(str(out / w) for w in written)} (PNGs drawn with {', '.join(sorted(engines))})",
          file=sys.stderr)


__all__ = ["main", "reasons", "resolve"]
