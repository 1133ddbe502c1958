"""The Dask side: which cluster runs fedviz's work, the task a worker runs, and the executor
that hands an ordinary run to the cluster.

The cluster.  :func:`get_client` connects, once per process, to the scheduler at
``FEDVIZ_DASK_SCHEDULER`` (``tls://host:port``, started with Dask's own ``dask scheduler``
and ``dask worker`` commands and their ``--tls-*`` options), or else starts an embedded
:class:`~distributed.LocalCluster`: worker processes with one thread each
(``FEDVIZ_DASK_WORKERS`` of them, default one per core), numba, OpenMP and BLAS pinned to
one thread per worker (:data:`PINNED`), closed when the process exits.

Who may use it.  A Dask client can run any code on the scheduler and the workers, so a
scheduler that accepts anyone would let any local user (or anyone on its network) run code
as fedviz's user.  The embedded cluster speaks TLS with a certificate made for this process
alone (:meth:`distributed.security.Security.temporary`): only this process holds it.  An
external scheduler is reached with the TLS settings the user gives Dask
(``distributed.comm.tls.*``, e.g. ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE``); plain
``tcp://`` only with ``FEDVIZ_DASK_INSECURE=1``.  Connecting is bounded: a probe with a
hard deadline (:data:`CONNECT_TIMEOUT_ENV`) asks the peer who it is before a client is
made, so a port that answers but is not Dask (an HTTP server) is a one-line error in
seconds, not a hang.  fedviz never schedules anything itself: Dask places the tasks,
moves the data, and runs a task again elsewhere when its worker dies.

The task.  :func:`run_job` runs one :class:`~fedviz.runner.job.RunJob` on a worker through
the same :func:`~fedviz.runner.execute.execute` a Run click uses, so a cell computes exactly
what ``fedviz run`` computes with the same data, algorithm and seed.  Its sink, a
:class:`Recorder`, keeps every call it receives (numbered) and streams them as they come, at
most every :data:`STREAM_INTERVAL` seconds, as Dask events on a topic
(``Worker.log_event``), as JSON (:func:`encode_calls`: data, never code); the task returns the whole list.  A caller replays the calls in
number order (:class:`Replay`) and skips numbers it has applied: a task run again after its
worker died replays the same calls (the computation is deterministic in its seeds), so
nothing is applied twice, and the returned list fills whatever the stream missed.

The data.  A worker builds a data set from its spec (deterministic in the seed) and keeps it
in its process-wide cache (:mod:`fedviz.runner.cache`), so a data set is built once per worker,
not once per cell; an upload's bytes are scattered once (:func:`scatter_uploads`) and reach
each worker once, as a Dask dependency.

Stop.  A run's stop is a named :class:`distributed.Event`; the task watches it from a thread
and requests the local :class:`~fedviz.runner.execute.Stop`, which the iteration loop polls
between node batches, so a running task ends within seconds; a task not started yet is
cancelled.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import json
import logging
import os
import queue
import re
import threading
import time
import uuid
from dataclasses import replace
from typing import Any, Callable, Mapping

import numpy as np

from ...algorithms.spec import AlgorithmSpec
from ...errors import FedvizError, ParameterError
from ...validation import env_int
from ...problems import metrics
from . import _probe
from ..codec import decode_float, to_json
from ..execute import Executor, Sink, Stop, Task, describe, execute
from ..job import Entry, Job, ProblemSpec, RunJob
from ..loop import IterationRecord
from ...problems.pernode import NodeScores
from ..history.store import FLOAT_FIELDS

log = logging.getLogger(__name__)

#: The environment variable naming an existing scheduler (``tcp://host:port``).
SCHEDULER_ENV = "FEDVIZ_DASK_SCHEDULER"
#: The number of local workers (default: one per core).
WORKERS_ENV = "FEDVIZ_DASK_WORKERS"
#: Set to 1 to accept a plain-TCP (unauthenticated, unencrypted) external scheduler.
INSECURE_ENV = "FEDVIZ_DASK_INSECURE"
#: The hard deadline, in seconds, for reaching a scheduler and hearing it say it is one (default 5).
CONNECT_TIMEOUT_ENV = "FEDVIZ_DASK_CONNECT_TIMEOUT"
#: One thread per worker for every threaded library a worker's task meets: a cluster's
#: parallelism is its workers, and a second layer of threads would only fight it.
PINNED = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
          "MKL_NUM_THREADS": "1", "FEDVIZ_BLAS_THREADS": "1"}
#: The longest a streamed call waits on the worker before it is sent (seconds).
STREAM_INTERVAL = 0.25
#: How often a task looks at its stop event (seconds): the bound on Stop's latency on a worker.
STOP_POLL = 0.5


# -- the cluster ---------------------------------------------------------------------------------------
_LOCK = threading.Lock()
_CLIENTS: dict[str, Any] = {}
_LOCAL: dict[str, Any] = {}


def scheduler_address(address: str | None = None) -> str | None:
    """``address`` if given, else ``FEDVIZ_DASK_SCHEDULER`` (None: the embedded local cluster)."""
    return address or os.environ.get(SCHEDULER_ENV) or None


def get_client(address: str | None = None):
    """The process's Dask client for ``address`` (see :func:`scheduler_address`), made once.

    Without an address the first call starts the embedded local cluster (a few seconds),
    TLS with this process's own certificate; later calls return the same client.  An
    external scheduler is first probed under a hard deadline (:func:`probe_scheduler`);
    one that cannot be reached, answers as something else, or would be plain TCP without
    ``FEDVIZ_DASK_INSECURE=1`` is a one-line :class:`~fedviz.errors.FedvizError` (a
    :class:`~fedviz.errors.ParameterError` for a malformed address) naming the address.
    No lock is held while connecting to an external scheduler.
    """
    address = scheduler_address(address)
    if address is not None:
        address = check_address(address)
    key = address or "local"
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is not None and client.status == "running":
            return client
        if address is None:  # the embedded cluster: started once, under the lock
            from distributed import Client

            cluster = _local_cluster()
            client = Client(cluster, security=cluster.security, set_as_default=False)
            _CLIENTS[key] = client
            _CHECKED[id(client)] = set()
            return client
    security = client_security(address)
    timeout = connect_timeout()
    probe_scheduler(address, security, timeout)
    from distributed import Client

    try:
        client = Client(address, security=security, set_as_default=False, timeout=f"{timeout}s")
    except (OSError, TimeoutError) as e:
        raise FedvizError(_unreachable(address, e)) from None
    with _LOCK:
        other = _CLIENTS.get(key)
        if other is not None and other.status == "running":  # another thread connected meanwhile
            client.close()
            return other
        _CLIENTS[key] = client
        _CHECKED[id(client)] = set()
        return client


def connect_timeout() -> float:
    """``FEDVIZ_DASK_CONNECT_TIMEOUT`` seconds (default 5; 1 to 120)."""
    raw = os.environ.get(CONNECT_TIMEOUT_ENV)
    if raw is None or raw == "":
        return 5.0
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 1 <= value <= 120:
        raise ParameterError(CONNECT_TIMEOUT_ENV, raw, "a number of seconds from 1 to 120")
    return value


def client_security(address: str):
    """The :class:`~distributed.security.Security` to reach ``address`` with.

    ``tls://``: Dask's own TLS settings (``distributed.comm.tls.ca-file``, ``.client.cert``,
    ``.client.key``; env ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE`` and so on), which must name
    a CA.  ``tcp://`` (or no scheme): refused unless ``FEDVIZ_DASK_INSECURE=1`` says plain TCP
    is meant, because anyone who can reach such a scheduler can run code on it.
    """
    from distributed.security import Security

    if address.startswith("tls://"):
        security = Security()
        if not security.tls_ca_file:
            raise FedvizError(
                f"{address} is a TLS scheduler, but Dask has no TLS settings here: set "
                "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
                "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY (docs/cluster.md)")
        return security
    if os.environ.get(INSECURE_ENV) != "1":
        raise FedvizError(
            f"{address} is plain TCP: anyone who can reach that scheduler can run code as its users; "
            f"start it with TLS and use tls://… (docs/cluster.md), or set {INSECURE_ENV}=1 to accept it")
    return Security()


def probe_scheduler(address: str, security, timeout: float) -> dict:
    """Connect to ``address`` and ask who it is, all within ``timeout`` seconds; its identity.

    Runs on a thread of its own with its own event loop (the caller may be on one), joined with
    the deadline, so a peer that accepts the connection and never answers (an HTTP server: it
    waits for a request line) cannot hold the caller.  Anything but a Dask scheduler's answer
    is a :class:`~fedviz.errors.FedvizError` in one line.
    """
    import asyncio

    from distributed.comm import connect

    async def ask():
        comm = await connect(address, timeout=timeout, **security.get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    outcome: dict = {}

    def run():
        try:
            outcome["answer"] = asyncio.run(asyncio.wait_for(ask(), timeout))
        except BaseException as e:  # noqa: BLE001 - carried to the caller's thread
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True, name="fedviz-scheduler-probe")
    thread.start()
    thread.join(timeout + 1.0)
    if thread.is_alive() or isinstance(outcome.get("error"), (TimeoutError, asyncio.TimeoutError)):
        raise FedvizError(f"nothing at {address} answered as a Dask scheduler within {timeout:g} s "
                          f"(is it a Dask scheduler's port? {CONNECT_TIMEOUT_ENV} sets the wait)")
    if "error" in outcome:
        raise FedvizError(_unreachable(address, outcome["error"]))
    answer = outcome.get("answer")
    if not isinstance(answer, dict) or answer.get("type") != "Scheduler":
        kind = answer.get("type") if isinstance(answer, dict) else type(answer).__name__
        raise FedvizError(f"{address} answered, but as {kind!s:.40}, not as a Dask scheduler "
                          "(a worker's or the dashboard's port?)")
    return answer


def _unreachable(address: str, e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return (f"cannot reach the Dask scheduler at {address} ({type(e).__name__}: {text:.200}); start one with "
            f"`dask scheduler`, or unset {SCHEDULER_ENV} for the embedded local cluster")


_ADDRESS = re.compile(r"^(?:(tcp|tls)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})$")


def check_address(address: str) -> str:
    """Refuse a scheduler address Dask cannot use, naming where it came from and the form it needs."""
    match = _ADDRESS.match(address.strip()) if isinstance(address, str) else None
    if match is None or not 1 <= int(match.group(3)) <= 65535:
        raise ParameterError(f"{SCHEDULER_ENV} / --scheduler", address,
                             "tls://host:port with port 1 to 65535 (or tcp://host:port with "
                             f"{INSECURE_ENV}=1), e.g. tls://10.0.0.5:8786")
    return address.strip() if match.group(1) else "tcp://" + address.strip()


def _local_cluster():
    """Worker processes on loopback, speaking TLS with a certificate made for this process.

    ``Security.temporary()`` keeps the key in memory and hands it to the workers it starts;
    a client without it (another local user's process) cannot complete the handshake, so it
    cannot run code on the scheduler or the workers.
    """
    from distributed import LocalCluster
    from distributed.security import Security

    import dask

    n = env_int(WORKERS_ENV, None, low=1) or max(1, os.cpu_count() or 1)
    # Dask's HTTP servers (dashboard, /health, /json, /info pages) have no credentials: with no
    # routes they serve nothing, on a loopback port of their own.
    with dask.config.set({"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}):
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, env=dict(PINNED),
                               protocol="tls://", security=Security.temporary(), host="127.0.0.1",
                               dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0",
                               silence_logs=logging.ERROR)
    _LOCAL["cluster"] = cluster
    return cluster


def close() -> None:
    """Close every client and the embedded local cluster (at exit; tests call it too)."""
    with _LOCK:
        for client in _CLIENTS.values():
            try:
                client.close(timeout=5)
            except Exception:  # noqa: BLE001 - closing at exit: nothing left to tell
                pass
        _CLIENTS.clear()
        _CHECKED.clear()
        cluster = _LOCAL.pop("cluster", None)
        if cluster is not None:
            try:
                cluster.close(timeout=10)
            except Exception:  # noqa: BLE001
                pass


atexit.register(close)


def describe_cluster(client) -> str:
    """'local cluster, 2 workers' or 'tcp://10.0.0.5:8786, 8 workers': for pages and the CLI."""
    workers = len(client.scheduler_info(n_workers=-1).get("workers", {}))
    where = "local cluster" if _LOCAL.get("cluster") is not None and client.cluster is _LOCAL["cluster"] \
        else client.scheduler.address
    return f"{where}, {workers} worker{'s' if workers != 1 else ''}"


# -- the cluster's environment -----------------------------------------------------------------------
#: The probe each process of a cluster runs (:func:`check_cluster`), pickled by value (see its module).
probe: Callable[[], dict] = _probe.probe
_HERE: dict = {}
_CHECKED: dict[int, set] = {}  # id(client) -> the scheduler ('scheduler') and worker addresses found equal


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
            there = {"error": describe(there)}
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


# -- uploads -------------------------------------------------------------------------------------------
def scatter_uploads(client, problem: ProblemSpec) -> tuple[ProblemSpec, dict[str, Any]]:
    """Replace an upload's bytes in ``problem`` by Dask futures, sent once to the cluster.

    Returns the problem without the bytes and ``{"source": future, "test": future}`` for
    :func:`run_job`'s ``uploads``; a problem without uploads comes back unchanged.
    """
    uploads = {}
    data = problem.data
    for name in ("source", "test"):
        value = getattr(data, name)
        if isinstance(value, bytes):
            uploads[name] = client.scatter(value, hash=True, broadcast=False)
    if not uploads:
        return problem, {}
    data = replace(data, **{name: "" for name in uploads})
    return replace(problem, data=data), uploads


def _with_uploads(problem: ProblemSpec, uploads: Mapping[str, bytes] | None) -> ProblemSpec:
    if not uploads:
        return problem
    return replace(problem, data=replace(problem.data, **dict(uploads)))


# -- the worker's side ---------------------------------------------------------------------------------
#: The most per-node values a run streams per algorithm and per metric (:func:`node_stride`): 100,000
#: float32 values are 400 kB (533 kB as base64).  A tenth of what the page keeps
#: (:data:`~fedviz.problems.pernode.NODE_HISTORY_VALUES`): a stream's events pass through the scheduler,
#: which keeps the recent ones; the node picker's curve needs no more points than a screen has pixels.
NODE_STREAM_VALUES = 100_000


def node_stride(iterations: int, K: int, budget: int | None = None) -> int:
    """Every how many iterations a run streams its per-node vectors: the least power of two s such that
    the kept iterations (0, s, 2s, … up to ``iterations``, and the last) hold at most ``budget`` values
    of K nodes (when not even that fits, the least power of two ≥ ``iterations``: only the first and the
    last vectors are sent)."""
    budget = NODE_STREAM_VALUES if budget is None else budget
    s = 1
    while (iterations // s + 2) * K > budget and s < max(iterations, 1):
        s *= 2
    return s


class Recorder:
    """A sink that numbers and keeps every call and streams them as Dask events on ``topic``.

    A record keeps its per-node vectors (every metric's, :class:`~fedviz.problems.pernode.NodeScores`) at the
    iterations of :func:`node_stride` and at the last record of its algorithm (whose status is not
    'running'): the page's histogram, node picker and node curve, as a run in this process has them.
    ``iterations``: the job's, for the stride (None: every record keeps its vectors).
    """

    def __init__(self, topic: str | None, attempt: str, emit: Callable[[str, Any], None] | None, tag: str = "",
                 iterations: int | None = None):
        self.topic, self.attempt, self.emit, self.tag = topic, attempt, emit, tag
        self.iterations = iterations
        self.calls: list[tuple[str, tuple]] = []
        self._sent = 0
        self._last = time.monotonic()

    def _add(self, method: str, *args) -> None:
        self.calls.append((method, args))
        if method in ("started", "end") or time.monotonic() - self._last >= STREAM_INTERVAL:
            self.flush()

    def flush(self) -> None:
        if self.emit is None or self.topic is None or self._sent == len(self.calls):
            return
        batch = self.calls[self._sent:]
        try:
            self.emit(self.topic, {"tag": self.tag, "attempt": self.attempt, "first": self._sent,
                                   "calls": encode_calls(batch)})
        except Exception as e:  # noqa: BLE001 - the stream is a courtesy: the result carries every call
            log.debug("streaming failed: %s", e)
        self._sent = len(self.calls)
        self._last = time.monotonic()

    def preparing(self, message: str) -> None:
        self._add("preparing", message)

    def warn(self, text: str) -> None:
        self._add("warn", text)

    def tuned(self, label: str, result) -> None:
        pass  # not streamed: the caller's sinks read the choice from retuned's note; the pilots stay here

    def retuned(self, old: str, entry: Entry, note: str) -> None:
        self._add("retuned", old, entry.spec, note)  # the spec: an Entry holds unpicklable views

    def started(self, **info) -> None:
        self._add("started", info)

    def record(self, label: str, rec) -> None:
        if rec.nodes is not None and self.iterations is not None and rec.status == "running":
            K = max((v.size for v in rec.nodes.values.values()), default=0)
            if rec.iteration % node_stride(self.iterations, K):
                rec = replace(rec, nodes=None)
        self._add("record", label, rec)

    def end(self, label: str, status: str, message: str) -> None:
        self._add("end", label, status, message)

    def tick(self) -> None:
        pass  # commits are the caller's business; nothing to send


def encode_calls(calls) -> str:
    """A sink's calls as strict JSON: what the stream carries (data, never code: a record's fields, a
    spec's name, hyperparameters and label), read back by :func:`decode_calls`.  A record's per-node
    vectors, when it has them, ride under ``"nodes"``: each metric's float32 values as base64 of their
    little-endian bytes (exact, and a third of a decimal list's size)."""
    out = []
    for method, args in calls:
        if method == "record":
            label, rec = args
            fields = rec.as_dict()
            if rec.nodes is not None:
                fields["nodes"] = {"iteration": int(rec.nodes.iteration),
                                   "values": {name: base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode()
                                              for name, v in rec.nodes.values.items()}}
            args = (label, fields)
        elif method == "retuned":
            old, spec, note = args
            args = (old, spec.as_json(), note)
        out.append((method, args))
    return to_json(out)


#: The calls a :class:`Recorder` streams, and how many arguments each takes.
_ARITY = {"preparing": 1, "warn": 1, "retuned": 3, "started": 1, "record": 2, "end": 3}


def decode_calls(text: str) -> list[tuple[str, tuple]]:
    """The calls :func:`encode_calls` wrote (a registered algorithm's spec; NaN and ±inf restored)."""
    out = []
    calls = json.loads(text)
    if not isinstance(calls, list):
        raise FedvizError("a run's stream is not a list of calls")
    for call in calls:
        if not (isinstance(call, list) and len(call) == 2 and call[0] in _ARITY and isinstance(call[1], list)
                and len(call[1]) == _ARITY[call[0]]):
            raise FedvizError(f"a run's stream holds something that is not a sink call: {str(call):.80}")
        method, args = call
        if method == "record":
            label, fields = args
            nodes = _decode_nodes(fields.pop("nodes", None))
            fields = {k: (decode_float(v) if k in FLOAT_FIELDS else v) for k, v in fields.items()}
            args = (label, replace(IterationRecord.from_dict(fields), nodes=nodes))
        elif method == "retuned":
            old, spec, note = args
            args = (old, AlgorithmSpec(spec["name"], spec["hyper"], spec["label"], spec["group"]), note)
        elif method == "started":
            info = dict(args[0])
            for key in ("f_star", "optimum_test_error"):
                if info.get(key) is not None:
                    info[key] = decode_float(info[key])
            args = (info,)
        out.append((method, tuple(args)))
    return out


def _decode_nodes(encoded) -> NodeScores | None:
    """The per-node vectors :func:`encode_calls` wrote (registered metrics only), or None."""
    if encoded is None:
        return None
    try:
        values = {}
        for name, text in encoded["values"].items():
            metrics.get(name)
            values[name] = np.frombuffer(base64.b64decode(text, validate=True), dtype="<f4").astype(np.float32)
        return NodeScores(int(encoded["iteration"]), values)
    except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as e:
        raise FedvizError(f"a run's stream holds per-node values that are not a record's: {e}") from e


def run_job(job: RunJob, *, topic: str | None = None, stop_event: str | None = None,
            optimum: tuple[float, float] | None = None, uploads: Mapping[str, bytes] | None = None,
            tag: str = "") -> dict:
    """Run ``job`` on this worker (the Dask task); returns every sink call and where it ran.

    ``optimum`` is (f*, its test error) when the caller computed it once for many cells (a
    Dask dependency); ``uploads`` the bytes :func:`scatter_uploads` took out of the job;
    ``tag`` names the job in its streamed events (an experiment's cell key).
    """
    _pin_threads()
    worker, emit = _worker()
    problem = job.make_problem
    if isinstance(problem, ProblemSpec):
        job = replace(job, make_problem=_with_uploads(problem, uploads))
    if optimum is not None and optimum[0] is not None and job.f_star is None:
        job = replace(job, f_star=float(optimum[0]))
    recorder = Recorder(topic, uuid.uuid4().hex, emit, tag, iterations=job.iterations)
    stop = Stop()
    watcher = _watch(stop_event, stop)
    began = time.perf_counter()
    try:
        try:
            valid = job.validate()
        except FedvizError as e:  # a job the caller validated cannot fail here; say so if it does
            for spec in job.algorithms:
                label = spec.label if hasattr(spec, "label") else str(spec[0])
                recorder.end(label, "failed", describe(e))
        else:
            execute(valid, recorder, stop)
    finally:
        if watcher is not None:
            watcher.set()
            watcher.thread.join(2 * STOP_POLL + 1)
    recorder.flush()
    return {"calls": recorder.calls, "worker": worker, "seconds": time.perf_counter() - began,
            "optimum": optimum, "attempt": recorder.attempt}


def optimum_of(problem: ProblemSpec, uploads: Mapping[str, bytes] | None = None) -> tuple[float | None, float | None]:
    """(f*, its test error) of ``problem`` on this worker (cached there with the problem): the
    Dask task that computes f* once per setting for all its cells."""
    _pin_threads()
    try:
        opt = _with_uploads(problem, uploads).optimum()
    except FedvizError as e:
        log.warning("f* unavailable: %s", e)
        return None, None
    return float(opt.objective), float(opt.test_error)


def _pin_threads() -> None:
    """One thread for numba and BLAS in this task, whatever the worker was started with."""
    import numba
    from numba.core import config

    from ...problems._cores import single_threaded_blas

    # The nanny sets PINNED in the worker's environment after the worker may already have
    # imported numba (its config then says one thread per core).  Every later compile
    # re-reads the environment and refuses a thread count other than the pool's, so
    # bring numba's config in line with the environment before its pool starts, or, if
    # the pool has started, the environment in line with the pool.
    try:
        config.reload_config()
    except RuntimeError:
        os.environ["NUMBA_NUM_THREADS"] = str(config.NUMBA_NUM_THREADS)
    numba.set_num_threads(1)
    single_threaded_blas()


def _worker() -> tuple[str, Callable | None]:
    try:
        from distributed import get_worker

        w = get_worker()
    except ValueError:  # called outside a worker (a test calling the task directly)
        return "in-process", None
    return w.address, w.log_event


def _watch(name: str | None, stop: Stop) -> threading.Event | None:
    """Request ``stop`` when the Dask event ``name`` is set; returns the watcher's own end signal."""
    if not name:
        return None
    from distributed import Event, get_client

    event = Event(name, client=get_client())
    finished = threading.Event()

    def watch():
        # Ask, then sleep on a local event: the task's end wakes the watcher at once (a blocking
        # Event.wait on the scheduler would hold the task's end up to STOP_POLL).
        while not finished.wait(STOP_POLL):
            try:
                if event.is_set():
                    stop.request()
                    return
            except Exception:  # noqa: BLE001 - a scheduler gone: the task is lost anyway
                return

    thread = threading.Thread(target=watch, daemon=True, name="fedviz-stop-watch")
    thread.start()
    finished.thread = thread  # joined by the task, so no question to the scheduler outlives it
    return finished


# -- the caller's side ---------------------------------------------------------------------------------
class Replay:
    """Applies a task's numbered calls to a sink once each, in order, from the stream or the result."""

    def __init__(self, sink: Sink, labels=()):
        self.sink = sink
        self.applied = 0
        self.open = list(labels)  # the labels not ended yet (tuning renames them)

    @property
    def started(self) -> bool:
        return self.applied > 0

    def apply(self, first: int, calls) -> None:
        if first > self.applied:
            return  # a gap: this batch waits for the result, which has every call
        for method, args in calls[self.applied - first:]:
            if method == "retuned":
                old, spec, note = args
                args = (old, Entry.of(spec), note)
                self.open = [spec.label if x == old else x for x in self.open]
            elif method == "end" and args[0] in self.open:
                self.open.remove(args[0])
            _apply_call(self.sink, method, args)
            self.applied += 1


def _apply_call(sink: Sink, method: str, args: tuple) -> None:
    """One decoded call on ``sink``: each of the six calls a :class:`Recorder` makes, spelled out.

    Never a name looked up on the sink: a stream's method names come from the cluster, and a
    name that is not one of these is refused by :func:`decode_calls` before it gets here.
    """
    if method == "record":
        sink.record(*args)
    elif method == "end":
        sink.end(*args)
    elif method == "started":
        sink.started(**args[0])
    elif method == "preparing":
        sink.preparing(*args)
    elif method == "warn":
        sink.warn(*args)
    elif method == "retuned":
        sink.retuned(*args)
    else:  # decode_calls let nothing else through; a caller that builds calls itself gets told
        raise FedvizError(f"not a sink call: {method!r:.40}")


def subscribe(client, topic: str, into: "queue.Queue") -> None:
    """Put every event of ``topic`` into ``into`` (the handler runs on the client's event loop: it
    only enqueues; the run's own thread applies)."""
    client.subscribe_topic(topic, lambda event: into.put(event[1]))


def unsubscribe(client, topic: str) -> None:
    try:
        client.unsubscribe_topic(topic)
    except Exception:  # noqa: BLE001 - the client may be closing
        pass


def to_run_job(job: Job) -> RunJob:
    """A validated job back as the picklable value a worker validates again."""
    return RunJob(make_problem=job.make_problem, algorithms=tuple(e.spec for e in job.entries),
                  iterations=job.iterations, seed=job.seed, config=dict(job.config), f_star=job.f_star,
                  tune=job.tune, scales=dict(job.scales), dissimilarity=job.dissimilarity,
                  personal_targets=job.personal_targets)


class DaskExecutor(Executor):
    """Runs each job as one Dask task on the cluster of :func:`get_client`, streaming the sink's
    calls back to this process, where a thread ``fedviz-run-<id>`` applies them to ``sink``."""

    in_process = False

    def __init__(self, address: str | None = None):
        self.address = address
        #: Runs the cluster takes at once (the manager's default cap; set from the cluster's threads).
        self.slots = 1

    def start(self, run_id: str, job: Job, sink: Sink, stop: Stop, done: Callable[[], None]) -> Task:
        thread = threading.Thread(target=self._drive, args=(run_id, job, sink, stop, done), daemon=True,
                                  name=f"fedviz-run-{run_id[:8]}")
        thread.start()
        return thread

    def _drive(self, run_id: str, job: Job, sink: Sink, stop: Stop, done: Callable[[], None]) -> None:
        replay = Replay(sink, job.labels)
        try:
            client = get_client(self.address)
            check_cluster(client)  # the run's record says why a cluster cannot run it, not 'deserialization'
            topic, event_name = f"fedviz-run-{run_id}", f"fedviz-stop-{run_id}"
            events: queue.Queue = queue.Queue()
            subscribe(client, topic, events)
            problem, uploads = (scatter_uploads(client, job.make_problem) if isinstance(job.make_problem, ProblemSpec)
                                else (job.make_problem, {}))
            remote = replace(to_run_job(job), make_problem=problem)
            future = client.submit(run_job, remote, topic=topic, stop_event=event_name, uploads=uploads or None,
                                   pure=False, key=f"fedviz-run-{run_id}")
            stop_sent = False
            try:
                while not future.done():
                    _drain(events, replay)
                    if stop() and not stop_sent:
                        stop_sent = True
                        if not replay.started:
                            future.cancel()
                            break
                        from distributed import Event

                        Event(event_name, client=client).set()
                    time.sleep(0.05)
                _drain(events, replay)
                if future.status == "finished":
                    result = future.result()
                    replay.apply(0, result["calls"])
                elif future.status == "error":
                    raise future.exception()
            finally:
                unsubscribe(client, topic)
        except BaseException as e:  # noqa: BLE001 - nothing may escape a run: its record says why
            log.exception("cluster run %s failed", run_id)
            _end_open(sink, replay, stop, describe(e))
        else:
            _end_open(sink, replay, stop, "the cluster cancelled the run")
        finally:
            done()


def _drain(events: "queue.Queue", replay: Replay) -> None:
    while True:
        try:
            msg = events.get_nowait()
        except queue.Empty:
            return
        try:
            first, calls = int(msg["first"]), decode_calls(msg["calls"])
        except (FedvizError, KeyError, TypeError, ValueError) as e:  # not our Recorder's: the result still has all
            log.warning("ignored a malformed event on a run's topic: %s", e)
            continue
        replay.apply(first, calls)


def _end_open(sink: Sink, replay: Replay, stop: Stop, message: str) -> None:
    """End the labels the replayed calls left open: 'stopped' when a stop was asked, else 'failed'."""
    for label in tuple(replay.open):
        replay.open.remove(label)
        if stop():
            sink.end(label, "stopped", stop.reason + ("" if replay.started else " (before the first iteration)"))
        else:
            sink.end(label, "failed", message)


__all__ = ["ClusterMismatch", "DaskExecutor", "NODE_STREAM_VALUES", "PINNED", "Recorder", "Replay", "SCHEDULER_ENV",
           "STOP_POLL", "STREAM_INTERVAL", "WORKERS_ENV", "check_cluster", "close", "describe_cluster", "environment",
           "get_client", "node_stride", "optimum_of", "probe", "run_job", "scatter_uploads", "scheduler_address",
           "subscribe", "to_run_job"]
