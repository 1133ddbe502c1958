"""Whether a cluster's processes run this fedviz: the probe each one runs, and the refusal
(:class:`ClusterMismatch`) that names who differs and what to install."""

from __future__ import annotations

import logging
from typing import Callable

from ...errors import FedvizError
from ..execute import describe
from . import _probe
from .client import _CHECKED

#: The probe each process of a cluster runs (:func:`check_cluster`), pickled by value (see its module).
probe: Callable[[], dict] = _probe.probe
_HERE: dict = {}
log = logging.getLogger(__name__)




class ClusterMismatch(FedvizError):
    """A scheduler or worker that cannot run this process's tasks as they are (see :func:`check_cluster`)."""


def environment() -> dict:
    """This process's probe (computed once: the source it hashes is the source it imported)."""
    if not _HERE:
        _HERE.update(probe())
    return dict(_HERE)


def _differences(there: dict, here: dict) -> str | None:
    """What makes ``there`` unfit to run this process's tasks, in words (None: nothing)."""
    if there.get("error"):
        return f"cannot import fedviz ({there['error']})"
    parts = []
    if there.get("fedviz") != here.get("fedviz"):
        parts.append(f"fedviz {there.get('fedviz')} (here {here.get('fedviz')})")
    elif there.get("source") != here.get("source"):
        parts.append(f"fedviz {there.get('fedviz')} from other source files ({there.get('path')}: "
                     f"{there.get('source')}; here {here.get('path')}: {here.get('source')})")
    for dist in ("numpy", "numba"):
        if there.get(dist) != here.get(dist):
            parts.append(f"{dist} {there.get(dist)} (here {here.get(dist)})")
    return "runs " + ", ".join(parts) if parts else None


def _refusal(who: str, problem: str, here: dict, plural: bool = False) -> str:
    if plural:
        problem = problem.replace("runs ", "run ", 1)
    return (f"{who} {problem}: install fedviz {here.get('fedviz')} from the same source as here "
            f"(numpy {here.get('numpy')}, numba {here.get('numba')}) there — the scheduler unpickles "
            "every task and the workers run it, so both need it (docs/cluster.md)")


def check_cluster(client) -> None:
    """Refuse a cluster whose scheduler or a worker could not run this process's tasks as they are.

    The scheduler and every worker run :data:`probe`; each must import fedviz with the same version
    and the same source (a hash of its ``.py`` files: editable installs all say one version, and a
    worker on a stale checkout would compute something else while looking the same) and the same
    numpy and numba as this process.  Otherwise a :class:`ClusterMismatch` says, in one sentence,
    who differs, how, and what to install (a plain :class:`~fedviz.errors.FedvizError` when the
    scheduler or the workers could not be asked).  Processes found equal are remembered per client,
    so a later call asks only the workers that joined since (the driver calls it again while an
    experiment runs).
    """
    here = environment()
    seen = _CHECKED.setdefault(id(client), set())
    address = getattr(client.scheduler, "address", "?")
    if "scheduler" not in seen:
        try:
            there = client.run_on_scheduler(probe)  # the probe reports its own import errors
        except Exception as e:  # noqa: BLE001 - the connection, not the scheduler's fedviz
            raise FedvizError(f"cannot ask the scheduler at {address} which fedviz it runs ({describe(e)})") from None
        problem = _differences(there, here)
        if problem:
            raise ClusterMismatch(_refusal(f"the scheduler at {address}", problem, here))
        seen.add("scheduler")
    workers = sorted(set(client.scheduler_info(n_workers=-1).get("workers", {})) - seen)
    if not workers:
        return
    try:
        answers = client.run(probe, workers=workers, on_error="return")
    except Exception as e:  # noqa: BLE001 - a worker that left between the two questions, a lost scheduler
        raise FedvizError(f"cannot ask the workers of {address} which fedviz they run ({describe(e)})") from None
    bad: dict[str, list[str]] = {}
    for worker in workers:
        there = answers.get(worker)
        if there is None:
            continue  # it left: it runs nothing
        if isinstance(there, BaseException):
            # The probe never raises (it returns its own import errors), so an exception is the connection's:
            # a worker killed or restarted while it was asked (CommClosedError "Stream is closed").  Not a
            # verdict on its fedviz: it is left unchecked and asked again at the next check (the driver checks
            # while an experiment runs), or its nanny's new worker is, under its new address.
            log.info("the worker at %s did not answer the probe (%s): asked again at the next check",
                     worker, describe(there))
            continue
        problem = _differences(there, here)
        if problem:
            bad.setdefault(problem, []).append(worker)
        else:
            seen.add(worker)
    if bad:
        problem, who = max(bad.items(), key=lambda kv: len(kv[1]))
        total = len(client.scheduler_info(n_workers=-1).get("workers", {}))
        names = ", ".join(who[:3]) + (f" and {len(who) - 3} more" if len(who) > 3 else "")
        subject = f"the worker at {who[0]}" if len(who) == 1 else f"{len(who)} of {total} workers ({names})"
        raise ClusterMismatch(_refusal(subject, problem, here, plural=len(who) > 1))
