"""Which cluster runs fedviz's work, and who may use it.

:func:`get_client` connects, once per process, to the scheduler at ``FEDVIZ_DASK_SCHEDULER``
(``tls://host:port``, started with Dask's own ``dask scheduler`` and ``dask worker`` commands and
their ``--tls-*`` options), or else starts an embedded :class:`~distributed.LocalCluster`: worker
processes with one thread each (``FEDVIZ_DASK_WORKERS`` of them, default one per core), numba,
OpenMP and BLAS pinned to one thread per worker (:data:`PINNED`), closed when the process exits.

A Dask client can run any code on the scheduler and the workers, so a scheduler that accepts
anyone would let any local user (or anyone on its network) run code as fedviz's user.  The
embedded cluster speaks TLS with a certificate made for this process alone
(:meth:`distributed.security.Security.temporary`): only this process holds it.  An external
scheduler is reached with the TLS settings the user gives Dask (``distributed.comm.tls.*``, e.g.
``DASK_DISTRIBUTED__COMM__TLS__CA_FILE``); plain ``tcp://`` only with ``FEDVIZ_DASK_INSECURE=1``.
Connecting is bounded: a probe with a hard deadline (:data:`CONNECT_TIMEOUT_ENV`) asks the peer
who it is before a client is made, so a port that answers but is not Dask (an HTTP server) is a
one-line error in seconds, not a hang.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
from typing import Any

from ...errors import FedvizError, ParameterError
from ...validation import env_int

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

_LOCK = threading.Lock()
_CLIENTS: dict[str, Any] = {}
_LOCAL: dict[str, Any] = {}
#: id(client) -> the scheduler ('scheduler') and the worker addresses :func:`~.check.check_cluster`
#: found equal to this process; forgotten with the client.
_CHECKED: dict[int, set] = {}


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
