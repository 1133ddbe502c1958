"""The cluster's acceptance tests (issue 14): experiments and ordinary runs on a real Dask
cluster give, cell by cell, exactly what ``fedviz run`` gives with the same seeds.

The cluster is the one an operator starts: ``dask scheduler`` and two ``dask worker``
processes on loopback (:class:`DaskProcesses`), or fedviz's embedded local cluster.  The
oracle is ``python -m fedviz run ... --seed S --json`` in its own process with every numba
thread it has (a worker runs one; the kernels cut their work into a fixed number of chunks, so
the thread count never changes a bit), which computes f* with ``solve`` and iterates the loop
directly: nothing of the experiment driver, the Dask task or the store is on its path.
Records are compared field by field, exactly, except ``seconds`` (a clock) and the label
(``fedviz run`` labels by the registry name, a cell by its arm's title).

Time enters only as generous latency bounds of the feature (Stop ends an experiment
within 10 s), never as a speed benchmark.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from conftest import DATA, ROOT
from fedviz.algorithms.spec import AlgorithmSpec
from fedviz.data.build import DataSpec
from fedviz.errors import ParameterError
from fedviz.experiments import Arm, Axis, Experiment
from fedviz.experiments.driver import launch
from fedviz.runner import cluster
from fedviz.runner.cluster import PINNED, DaskExecutor
from fedviz.runner.execute import ThreadExecutor
from fedviz.runner.job import ProblemSpec, RunJob
from fedviz.runner.serve.manager import RunManager
from fedviz.runner.history.experiment_store import COMPLETE_CELL_STATUSES
from fedviz.runner.history.store import RunStore

pytestmark = pytest.mark.integration

#: Every record field compared exactly (all but the clock and the label).
COMPARED = ("iteration", "objective", "suboptimality", "test_error", "train_error", "grad_norm", "rounds",
            "vectors_up", "vectors_down", "grad_evals", "passes", "status", "message")

#: A small grid: 2 settings of FedProx's α × 2 arms × 2 seeds, 10 iterations (cells of ~0.1 s).
SMALL = Experiment("small", DataSpec(source="preset:fedprox-synthetic-binary?nodes=8"), (Arm.of("fsvrg"), Arm.of("gd")),
                   (Axis.of("data.alpha", [0.5, 1.0]),), seeds=(0, 1), iterations=10)
#: Cells that run for a while (FSVRG: under a second at one thread on a quiet machine): the tests that kill a
#: worker or press Stop in the middle of one first stop the workers (:func:`hold_a_running_cell`), so a cell
#: cannot end while they act, however short it is and however loaded the machine.
LONG = Experiment("long", DataSpec(source="preset:fedprox-synthetic-binary"), (Arm.of("fsvrg"), Arm.of("gd")),
                  seeds=(0, 1), iterations=150)
#: An upload: the bytes of a LIBSVM file, scattered to the cluster once.
HEART = DATA / "heart_scale"


# -- the cluster an operator starts --------------------------------------------------------------------
_TLS_FILES: dict[str, str] = {}


def tls_env() -> dict[str, str]:
    """Dask's TLS settings, as environment variables, for the test clusters' one certificate.

    Made once per test process with Dask's own ``Security.temporary()`` and written to files,
    since ``dask scheduler --tls-*`` reads files: what an operator does with their own CA.
    """
    if not _TLS_FILES:
        from distributed.security import Security

        sec = Security.temporary()
        folder = Path(tempfile.mkdtemp(prefix="fedviz-tls-"))
        (folder / "cert.pem").write_text(sec.tls_ca_file)
        (folder / "key.pem").write_text(sec.tls_client_key)
        (folder / "key.pem").chmod(0o600)
        _TLS_FILES.update(cert=str(folder / "cert.pem"), key=str(folder / "key.pem"))
    cert, key = _TLS_FILES["cert"], _TLS_FILES["key"]
    return {"DASK_DISTRIBUTED__COMM__TLS__CA_FILE": cert,
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": cert, "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": key}


@contextlib.contextmanager
def tls_settings():
    """This process (and the processes it starts) reaching the test clusters with their certificate."""
    import dask

    env = tls_env()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with dask.config.set({"distributed.comm.tls.ca-file": env["DASK_DISTRIBUTED__COMM__TLS__CA_FILE"],
                              "distributed.comm.tls.client.cert": env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"],
                              "distributed.comm.tls.client.key": env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"]}):
            yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class DaskProcesses:
    """``dask scheduler`` and ``dask worker`` processes on loopback, speaking TLS with the test
    certificate (:func:`tls_env`) as docs/cluster.md tells operators to, each in its own process
    group, so that killing one worker (its nanny and the worker process under it) or the whole
    cluster leaves nothing behind.  While it runs, this process holds the TLS settings too."""

    def __init__(self, workdir: Path, pythonpath: Path | str = ROOT):
        self.workdir = Path(workdir)
        self.env = {**os.environ, **PINNED, **tls_env(), "PYTHONPATH": str(pythonpath)}
        self.tls_args = ["--tls-ca-file", _TLS_FILES["cert"], "--tls-cert", _TLS_FILES["cert"],
                         "--tls-key", _TLS_FILES["key"]]
        self._tls = tls_settings()
        self.cwd = Path(pythonpath)  # `python -m` imports from its working directory first
        self.scheduler: subprocess.Popen | None = None
        self.workers: dict[str, subprocess.Popen] = {}
        self.address = ""
        self.pids: set[int] = set()  # every process seen, to check none outlives close()

    def _spawn(self, args, log: str, pythonpath: Path | str | None = None) -> subprocess.Popen:
        env = self.env if pythonpath is None else {**self.env, "PYTHONPATH": str(pythonpath)}
        with open(self.workdir / log, "ab") as out:
            return subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=pythonpath or self.cwd, env=env,
                                    stdout=out, stderr=subprocess.STDOUT, process_group=0)

    def start(self, n_workers: int = 2, timeout: float = 90.0) -> "DaskProcesses":
        file = self.workdir / "scheduler.json"
        self._tls.__enter__()
        self.scheduler = self._spawn(["scheduler", "--host", "127.0.0.1", "--port", "0", "--protocol", "tls",
                                      *self.tls_args, "--scheduler-file", str(file), "--no-dashboard"],
                                     "scheduler.log")
        deadline = time.monotonic() + timeout
        while not self.address:
            assert self.scheduler.poll() is None, self.log("scheduler.log")
            assert time.monotonic() < deadline, "the scheduler wrote no scheduler file"
            try:
                self.address = json.loads(file.read_text())["address"]
            except (OSError, ValueError, KeyError):  # not there yet, or being written
                time.sleep(0.1)
        for k in range(n_workers):
            self.add_worker(f"w{k}")
        if n_workers:
            self.wait_for_workers(n_workers, deadline - time.monotonic())
        return self

    def add_worker(self, name: str, pythonpath: Path | str | None = None) -> None:
        """Start worker ``name`` (with its own PYTHONPATH, if given: another fedviz, or none)."""
        self.workers[name] = self._spawn(["worker", self.address, "--name", name, "--host", "127.0.0.1",
                                          *self.tls_args, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                                          "--death-timeout", "30"], f"{name}.log", pythonpath)

    def wait_for_workers(self, n: int, timeout: float) -> None:
        from distributed import Client

        from distributed.security import Security

        with Client(self.address, security=Security(), set_as_default=False, timeout="20s") as client:
            client.wait_for_workers(n, timeout=max(timeout, 5))
        self._remember()

    def _remember(self) -> None:
        for proc in [self.scheduler, *self.workers.values()]:
            try:
                p = psutil.Process(proc.pid)
                self.pids |= {p.pid, *(c.pid for c in p.children(recursive=True))}
            except psutil.NoSuchProcess:
                pass

    def worker_address(self, name: str, client) -> str:
        for addr, info in client.scheduler_info(n_workers=-1)["workers"].items():
            if info.get("name") == name:
                return addr
        raise KeyError(name)

    def kill_worker(self, name: str) -> None:
        """SIGKILL a worker: the nanny (which would restart it) and the worker process under it."""
        proc = self.workers.pop(name)
        tree = psutil.Process(proc.pid)
        members = [tree, *tree.children(recursive=True)]
        os.killpg(proc.pid, signal.SIGKILL)
        for p in members:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(members, timeout=10)
        proc.wait(10)

    def pause(self, names, sig: int = signal.SIGSTOP) -> None:
        """SIGSTOP the workers ``names`` (nanny and worker process): nothing runs there until :meth:`resume`."""
        for name in names:
            if name in self.workers:
                os.killpg(self.workers[name].pid, sig)

    def resume(self, names) -> None:
        self.pause(names, signal.SIGCONT)

    def log(self, name: str) -> str:
        path = self.workdir / name
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def close(self) -> None:
        self._remember()
        for proc in [*self.workers.values(), self.scheduler]:
            if proc is not None and proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in [*self.workers.values(), self.scheduler]:
            if proc is None:
                continue
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self._tls.__exit__(None, None, None)
        gone, alive = psutil.wait_procs([_proc(p) for p in self.pids if _proc(p) is not None], timeout=10)
        for p in alive:
            p.kill()
        assert not alive, f"processes outlived the cluster: {alive}"


def _proc(pid: int):
    try:
        p = psutil.Process(pid)
        return p if p.status() != psutil.STATUS_ZOMBIE else None
    except psutil.NoSuchProcess:
        return None


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """A scheduler and two workers started with Dask's own commands; yields them (``.address``)."""
    procs = DaskProcesses(tmp_path_factory.mktemp("dask")).start(2)
    try:
        yield procs
    finally:
        cluster.close()  # this process's clients (and a local cluster, if a test left one)
        procs.close()
    assert not any(psutil.pid_exists(p) and _proc(p) is not None for p in procs.pids)


@pytest.fixture
def store(tmp_path):
    s = RunStore(tmp_path / "runs.sqlite")
    yield s
    s.close()


# -- the oracle: ``fedviz run`` in its own process, one numba thread ----------------------------------------
_ORACLE: dict = {}
_ORACLE_LOCK = threading.Lock()


def _fedviz_run(data: str, seed: int, algorithms: tuple[str, ...], iterations: int) -> dict[str, list[dict]]:
    key = (data, seed, algorithms, iterations)
    with _ORACLE_LOCK:
        if key in _ORACLE:
            return _ORACLE[key]
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"}  # the machine's threads
    r = subprocess.run([sys.executable, "-m", "fedviz", "run", data, "--seed", str(seed), "--algorithms",
                        ",".join(algorithms), "--iterations", str(iterations), "--json"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out: dict[str, list[dict]] = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            out.setdefault(row["algorithm"], []).append(row)
    with _ORACLE_LOCK:
        _ORACLE[key] = out
    return out


def _oracle_for(exp: Experiment, data_arg=None) -> dict[str, list[dict]]:
    """cell key → the records ``fedviz run`` prints for that cell's data, algorithm and seed."""
    runs = {}
    for cell in exp.cells():
        source = cell.job.make_problem.data.source
        data = data_arg if data_arg is not None else source
        runs.setdefault((str(data), cell.seed), set()).add(cell.job.algorithms[0].name)
    keys = [(data, seed, tuple(sorted(algos)), exp.iterations) for (data, seed), algos in runs.items()]
    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(keys, pool.map(lambda k: _fedviz_run(*k), keys)))
    out = {}
    for cell in exp.cells():
        data = str(data_arg) if data_arg is not None else cell.job.make_problem.data.source
        name = cell.job.algorithms[0].name
        key = next(k for k in keys if k[0] == data and k[1] == cell.seed)
        out[cell.key] = results[key][name]
    return out


def _plain(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None  # as ``fedviz run --json`` writes it
    return x


def _assert_equal_to_oracle(store: RunStore, exp_id: int, oracle: dict[str, list[dict]]) -> None:
    cells = store.experiment_cells(exp_id)
    assert sorted(c.key for c in cells) == sorted(oracle)
    for c in cells:
        got = [{f: _plain(getattr(r, f)) for f in COMPARED} for r in store.records(c.run_id)]
        want = [{f: row[f] for f in COMPARED} for row in oracle[c.key]]
        assert len(got) == len(want), (c.arm, c.seed, c.setting)
        for g, w in zip(got, want):
            assert g == w, (c.arm, c.seed, c.setting, g, w)


def _row_counts(store: RunStore, exp_id: int) -> tuple[int, int, int]:
    """(cell rows, distinct cell keys, run rows of the experiment's group), read with plain SQL."""
    group = store.get_experiment(exp_id).group_id
    with sqlite3.connect(str(store.path)) as db:
        cells, keys = db.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM cells WHERE experiment_id = ?",
                                 (exp_id,)).fetchone()
        runs = db.execute("SELECT COUNT(*) FROM runs WHERE group_id = ?", (group,)).fetchone()[0]
    return cells, keys, runs


def _wait(handle, timeout: float = 120.0):
    assert handle.wait(timeout), f"the experiment did not end in {timeout} s: {handle.snapshot()}"
    return handle.snapshot()


def _wait_running(handle, n: int = 1, *, min_iteration: int = 1, arm: str | None = None, timeout: float = 60.0):
    """The snapshot once ``n`` cells (of ``arm``, if given) are past ``min_iteration`` (streamed
    from the workers)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snap = handle.snapshot()
        assert not snap.finished, f"the experiment ended before {n} cells ran: {snap}"
        busy = [c for c in snap.running if c.iteration >= min_iteration and arm in (None, c.arm)]
        if len(busy) >= n:
            return snap, busy
        time.sleep(0.05)
    raise AssertionError(f"{n} cells never ran: {handle.snapshot()}")


def hold_a_running_cell(procs: DaskProcesses, handle, arm: str, timeout: float = 60.0) -> tuple[str, str]:
    """(cell key, worker name) of a cell of ``arm`` running on a worker, with every worker paused
    (:meth:`DaskProcesses.pause`): the cell can neither end nor go on until the caller resumes them.

    Once a cell of ``arm`` has streamed its first record, the workers are paused, and after a moment for
    what they sent before to reach the scheduler, the scheduler must still have the cell's task processing
    on one of them; if the cell ended just before (a short cell on a loaded machine), they go on and the
    search starts again.  Whatever the test then does (Stop, SIGKILL) reaches a cell that is still running.
    """
    client = cluster.get_client(procs.address)
    names = list(procs.workers)
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, f"no cell of {arm} was caught running: {handle.snapshot()}"
        _, busy = _wait_running(handle, 1, min_iteration=1, arm=arm, timeout=timeout)
        procs.pause(names)
        time.sleep(0.5)  # the scheduler reads what the workers sent before they stopped
        processing = client.processing()
        for cell in busy:
            task = f"fedviz-cell-{handle.uid}-{cell.key}"
            for name in names:
                if task in processing.get(procs.worker_address(name, client), ()):
                    return cell.key, name
        procs.resume(names)


# -- experiments on the operator's cluster ---------------------------------------------------------------
def test_small_experiment_on_dask_scheduler_equals_fedviz_run(dask_cluster, store):
    exp = Experiment("small on dask", SMALL.data, SMALL.arms, SMALL.axes, SMALL.seeds, SMALL.iterations)
    handle = launch(exp, store, address=dask_cluster.address)
    snap = _wait(handle)
    assert snap.status == "done", snap.message
    assert (snap.total, snap.stored, snap.reused, snap.failed) == (8, 8, 0, 0)
    assert "2 workers" in snap.cluster
    info = store.get_experiment(exp.name)
    assert (info.status, info.n_cells, info.n_complete) == ("done", 8, 8)
    assert _row_counts(store, info.id) == (8, 8, 8)
    cells = store.experiment_cells(info.id)
    assert {c.worker for c in cells} <= set(cluster.get_client(dask_cluster.address).scheduler_info(
        n_workers=-1)["workers"]), "every cell ran on one of the two workers"
    _assert_equal_to_oracle(store, info.id, _oracle_for(exp))


def _cmdline(process) -> str:
    """``process``'s command line, "" for one that has ended (a zombie not yet reaped by its parent, another
    test's finished subprocess, or gone): psutil refuses to read either."""
    try:
        return " ".join(process.cmdline())
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return ""


def test_small_experiment_on_default_local_cluster(monkeypatch, store):
    monkeypatch.delenv(cluster.SCHEDULER_ENV, raising=False)
    monkeypatch.setenv(cluster.WORKERS_ENV, "2")
    exp = Experiment("small on the local cluster", SMALL.data, SMALL.arms, SMALL.axes, SMALL.seeds,
                     SMALL.iterations)
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    try:
        handle = launch(exp, store)
        snap = _wait(handle)
        # The worker processes (multiprocessing's resource tracker lives as long as this process).
        started = {p.pid for p in me.children(recursive=True)
                   if "resource_tracker" not in _cmdline(p)} - before
    finally:
        cluster.close()
    assert snap.status == "done", snap.message
    assert snap.cluster == "local cluster, 2 workers"
    assert (snap.stored, snap.failed) == (8, 0)
    info = store.get_experiment(exp.name)
    assert _row_counts(store, info.id) == (8, 8, 8)
    assert len({c.worker for c in store.experiment_cells(info.id)} - {""}) >= 1
    _assert_equal_to_oracle(store, info.id, _oracle_for(exp))
    assert len(started) >= 2, "the local cluster runs its workers as processes"
    gone, alive = psutil.wait_procs([psutil.Process(p) for p in started if psutil.pid_exists(p)], timeout=15)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], "close() ends the local workers"


def test_worker_killed_mid_experiment_loses_no_cell(dask_cluster, store):
    """SIGKILL the worker running a cell (nanny included, so nothing restarts it): Dask runs the
    cell again on another worker; every cell is stored once, equal to ``fedviz run``.  A third
    worker joins first, so that two remain for the tests after this one."""
    procs = dask_cluster
    procs.add_worker("w2")
    procs.wait_for_workers(3, 60)
    exp = Experiment("killed worker", LONG.data, LONG.arms, LONG.axes, LONG.seeds, LONG.iterations)
    handle = launch(exp, store, address=procs.address)
    client = cluster.get_client(procs.address)
    others = list(procs.workers)
    try:
        victim_key, victim = hold_a_running_cell(procs, handle, "FSVRG")  # GD's cells are too short to catch
        victim_address = procs.worker_address(victim, client)
        procs.kill_worker(victim)
    finally:
        procs.resume(others)
    snap = _wait(handle, 180)
    assert snap.status == "done", snap.message
    assert (snap.total, snap.stored, snap.failed) == (4, 4, 0)
    info = store.get_experiment(exp.name)
    assert _row_counts(store, info.id) == (4, 4, 4), "one cell row and one run per cell, none twice"
    cells = {c.key: c for c in store.experiment_cells(info.id)}
    assert cells[victim_key].attempts >= 2, "the killed cell ran again"
    assert cells[victim_key].worker != victim_address and all(c.status == "done" for c in cells.values())
    assert len(client.scheduler_info(n_workers=-1)["workers"]) == 2
    _assert_equal_to_oracle(store, info.id, _oracle_for(exp))


def test_a_worker_killed_while_it_is_probed_is_not_called_a_broken_install(dask_cluster, store, monkeypatch):
    """Issue 32, point 3: a worker SIGKILLed while the experiment asks the cluster which fedviz it runs (the
    start-up check, made deterministic by killing it from inside the probe's call) answered with a closed
    stream, which was read as "cannot import fedviz".  Now it is left unchecked, the experiment runs on the
    workers that remain, and every cell equals ``fedviz run``'s."""
    procs = dask_cluster
    procs.add_worker("w3")
    procs.wait_for_workers(3, 60)
    client = cluster.get_client(procs.address)
    victim = procs.worker_address("w3", client)
    real_run = client.run

    def run_while_w3_dies(function, *args, workers=None, **kwargs):
        if workers and victim in workers:
            procs.kill_worker("w3")  # nanny and worker: nothing brings it back
        return real_run(function, *args, workers=workers, **kwargs)

    monkeypatch.setattr(client, "run", run_while_w3_dies)
    exp = Experiment("probe kill", SMALL.data, SMALL.arms, SMALL.axes, SMALL.seeds, SMALL.iterations)
    snap = _wait(launch(exp, store, address=procs.address), 180)
    assert snap.status == "done", snap.message
    assert "cannot import fedviz" not in (snap.message or "")
    assert (snap.total, snap.stored, snap.failed) == (8, 8, 0)
    info = store.get_experiment(exp.name)
    assert victim not in {c.worker for c in store.experiment_cells(info.id)}
    _assert_equal_to_oracle(store, info.id, _oracle_for(exp))


def test_stop_within_seconds_then_resume_runs_only_missing_cells(dask_cluster, store):
    # The cells are short (LONG: an FSVRG cell is under a second on a quiet machine): one caught running
    # is held there, with its worker paused, until Stop has been pressed (hold_a_running_cell), so it is
    # still running when Stop reaches it instead of racing it to its last iteration.
    exp = Experiment("stop and resume", LONG.data, LONG.arms, LONG.axes, LONG.seeds, LONG.iterations)
    handle = launch(exp, store, address=dask_cluster.address)
    workers = list(dask_cluster.workers)
    try:
        held, _ = hold_a_running_cell(dask_cluster, handle, "FSVRG")
        from distributed import Event

        pressed = Event(f"fedviz-exp-stop-{handle.uid}", client=cluster.get_client(dask_cluster.address))
        t = time.monotonic()
        handle.stop()
        while not pressed.is_set():  # the driver passed Stop on to the cluster: now the held cell may go on
            assert time.monotonic() - t < 10, f"Stop was not passed on within 10 s: {handle.snapshot()}"
            time.sleep(0.01)
    finally:
        dask_cluster.resume(workers)
    while not handle.snapshot().finished:
        assert time.monotonic() - t < 10, f"Stop took more than 10 s: {handle.snapshot()}"
        time.sleep(0.02)
    latency = time.monotonic() - t
    # The snapshot says 'stopped' a moment before the driver thread has let go of the name (it still
    # unsubscribes from the cell events): launching it again in between is refused as running.
    assert handle.wait(10), "the driver thread ends once the experiment says it stopped"
    snap = handle.snapshot()
    assert snap.status == "stopped" and latency < 10
    assert snap.cancelled >= 1, "cells not started are cancelled"
    assert snap.stopped >= 1, "the cells running at Stop end as stopped"
    assert snap.stored + snap.failed + snap.stopped + snap.cancelled == snap.total == 4
    info = store.get_experiment(exp.name)
    assert info.status == "stopped"
    cells = store.experiment_cells(info.id)
    stopped = [c for c in cells if c.status == "stopped"]
    assert held in {c.key for c in stopped}, "the cell running at Stop is stored as stopped"
    complete = store.complete_cells(info.id)
    assert complete == {c.key for c in cells if c.status in COMPLETE_CELL_STATUSES}
    assert not complete & {c.key for c in stopped}
    assert len(complete) == snap.stored < 4 and len(stopped) == snap.stopped

    again = launch(exp, store, address=dask_cluster.address)
    snap2 = _wait(again)
    assert snap2.status == "done", snap2.message
    assert snap2.reused == len(complete), "complete cells are not run again"
    assert snap2.stored == 4 - len(complete), "exactly the missing cells ran"
    assert _row_counts(store, info.id) == (4, 4, 4), "a stopped cell's old run is replaced, not kept"
    assert all(c.status == "done" for c in store.experiment_cells(info.id))
    _assert_equal_to_oracle(store, info.id, _oracle_for(exp))  # fedviz run's records: the killed-worker test's

    third = _wait(launch(exp, store, address=dask_cluster.address))
    assert (third.status, third.reused, third.stored) == ("done", 4, 0)


def test_upload_is_scattered_once_and_equals_fedviz_run_on_the_file(dask_cluster, store, monkeypatch):
    data = HEART.read_bytes()
    exp = Experiment("upload", DataSpec(source=data), (Arm.of("fsvrg"), Arm.of("gd")), seeds=(0, 1), iterations=10)
    client = cluster.get_client(dask_cluster.address)
    scattered = []
    real = client.scatter

    def scatter(value, *args, **kwargs):
        fut = real(value, *args, **kwargs)
        scattered.append((len(value), fut))
        return fut

    monkeypatch.setattr(client, "scatter", scatter)
    handle = launch(exp, store, address=dask_cluster.address)
    snap = _wait(handle)
    assert snap.status == "done" and snap.stored == 4, snap.message
    # One scatter per problem (a seed also seeds the split) but one key per content: the bytes
    # reach the cluster once, and each worker at most once.
    assert scattered and all(size == len(data) for size, _ in scattered)
    keys = {fut.key for _, fut in scattered}
    assert len(keys) == 1
    key = next(iter(keys))
    holders = client.who_has([scattered[0][1]])[key]
    assert 1 <= len(holders) <= 2
    info = store.get_experiment(exp.name)
    assert info.spec["uploaded"] is True
    _assert_equal_to_oracle(store, info.id, _oracle_for(exp, data_arg=HEART))


# -- ordinary runs through the executor seam -----------------------------------------------------------------
def _records(handle, labels):
    snap = handle.snapshot()
    return {label: [{f: _plain(getattr(r, f)) for f in COMPARED} for r in snap.records(label)] for label in labels}


def test_dask_executor_gives_the_thread_executors_records_and_stops(dask_cluster):
    problem = ProblemSpec(DataSpec(source="preset:fedprox-synthetic-binary?nodes=8", seed=3))
    specs = (AlgorithmSpec.of("fsvrg", label="fsvrg"), AlgorithmSpec.of("gd", label="gd"))
    job = RunJob(problem, specs, iterations=10, seed=3, config={"source": "test"})
    results = {}
    for name, executor in (("dask", DaskExecutor(dask_cluster.address)), ("thread", ThreadExecutor())):
        manager = RunManager(1, store=None, reaper=False, executor=executor)
        try:
            handle = manager.submit(job, "s")
            assert handle.wait(120)
            snap = handle.snapshot()
            assert snap.status == "done", (name, snap.message)
            results[name] = _records(handle, ("fsvrg", "gd"))
        finally:
            manager.close(10)
    oracle = _fedviz_run(problem.data.source, 3, ("fsvrg", "gd"), 10)
    want = {label: [{f: row[f] for f in COMPARED} for row in oracle[label]] for label in ("fsvrg", "gd")}
    assert results["dask"] == want, "a run on the cluster (one thread) is fedviz run's (every thread), bit for bit"
    assert results["thread"] == results["dask"], "and a run in this process is the same, bit for bit"

    # Stop: a long run on the cluster ends within seconds, as 'stopped'.
    long = RunJob(problem, specs[:1], iterations=100_000, seed=3, config={"source": "test"})
    manager = RunManager(1, store=None, reaper=False, executor=DaskExecutor(dask_cluster.address))
    try:
        handle = manager.submit(long, "s")
        deadline = time.monotonic() + 60
        while len(handle.snapshot().records("fsvrg")) < 3:
            assert time.monotonic() < deadline and not handle.snapshot().finished, handle.snapshot().message
            time.sleep(0.05)
        t = time.monotonic()
        handle.stop()
        assert handle.wait(10), "Stop ends a run on the cluster within seconds"
        assert time.monotonic() - t < 10
        snap = handle.snapshot()
        assert snap.status == "stopped" and snap.statuses["fsvrg"] == "stopped"
        assert 3 <= len(snap.records("fsvrg")) < 100_000
    finally:
        manager.close(10)


# -- bugs found while writing these tests, fixed -----------------------------------------------------------
@pytest.mark.parametrize("address", ["http://10.0.0.5:8786", "10.0.0.5 8786", "tcp://"])
def test_a_malformed_scheduler_address_is_a_parameter_error(monkeypatch, address):
    import distributed

    def refuse(addr, *args, **kwargs):
        # Dask's own answer to such an address, without leaving behind the half-made Client
        # whose __del__ blocks 20 s at exit (seen with `fedviz experiment --scheduler http://x`).
        raise ValueError(f"unknown address scheme or missing port number in address {addr!r}")

    monkeypatch.setattr(distributed, "Client", refuse)
    with pytest.raises(ParameterError) as e:
        cluster.get_client(address)
    assert "tcp://" in e.value.allowed


def test_the_local_cluster_listens_on_loopback_only(monkeypatch):
    monkeypatch.delenv(cluster.SCHEDULER_ENV, raising=False)
    monkeypatch.setenv(cluster.WORKERS_ENV, "1")
    me = psutil.Process()

    def listening():
        return {(p.pid, c.laddr) for p in [me, *me.children(recursive=True)]
                for c in p.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}

    before = listening()
    try:
        cluster.get_client()
        opened = listening() - before
    finally:
        cluster.close()
    assert opened, "the local cluster listens somewhere"
    assert {addr.ip for _, addr in opened} == {"127.0.0.1"}, opened


def test_an_experiment_whose_scheduler_dies_does_not_end_done(tmp_path, store):
    procs = DaskProcesses(tmp_path).start(1)
    try:
        exp = Experiment("scheduler lost", LONG.data, LONG.arms[:1], LONG.axes, LONG.seeds, 300)
        handle = launch(exp, store, address=procs.address)
        _wait_running(handle, 1, min_iteration=3)
        os.killpg(procs.scheduler.pid, signal.SIGKILL)
        procs.scheduler.wait(10)
        snap = _wait(handle, 120)
        info = store.get_experiment(exp.name)
        assert snap.stored < snap.total, "the cells never finished"
        assert snap.status != "done" and info.status != "done", (snap.status, snap.message)
        assert snap.message, "the experiment says what happened"
    finally:
        cluster.close()
        procs.close()


# -- a cluster that cannot run this fedviz says so (issue 19) ------------------------------------------
#: A sitecustomize that makes ``import fedviz`` fail in every Python process started with its folder on
#: PYTHONPATH (Dask's nanny starts the worker in a new interpreter, which reads it again): an environment
#: without fedviz, although fedviz is installed on this machine.
NO_FEDVIZ = """
import sys
import tempfile


class _NoFedviz:
    def find_spec(self, name, path=None, target=None):
        if name == "fedviz" or name.startswith("fedviz."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoFedviz())
"""


def _without_fedviz(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(NO_FEDVIZ)
    return folder


def _fedviz_copy(folder: Path, *, edit: bool) -> Path:
    """A copy of this checkout's fedviz package in ``folder`` (a stale checkout if ``edit``: one line
    of one module differs), for a PYTHONPATH."""
    import shutil

    shutil.copytree(ROOT / "fedviz", folder / "fedviz", ignore=shutil.ignore_patterns("__pycache__"))
    if edit:
        path = folder / "fedviz" / "errors.py"
        path.write_text(path.read_text() + "\n# an older checkout\n")
    return folder


def _wait_for_worker(procs: DaskProcesses, name: str, client, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return procs.worker_address(name, client)
        except KeyError:
            assert time.monotonic() < deadline, procs.log(f"{name}.log")
            time.sleep(0.1)


def test_an_experiment_on_a_scheduler_without_fedviz_exits_non_zero_saying_why_first(tmp_path):
    """The issue's case: ``dask scheduler`` in an environment without fedviz (the workers have it).
    Before, 60 cells were stored as failed in seconds and the command exited 0."""
    blocker = _without_fedviz(tmp_path / "no-fedviz")
    procs = DaskProcesses(tmp_path, pythonpath=blocker)
    try:
        procs.start(0)  # the scheduler without fedviz
        procs.add_worker("w0", pythonpath=ROOT)
        procs.wait_for_workers(1, 60)
        # The oracle: what importing fedviz says in that environment, asked of a plain interpreter.
        r = subprocess.run([sys.executable, "-c", "import fedviz"], env={**procs.env}, capture_output=True,
                           text=True, cwd=tmp_path)
        assert r.returncode != 0 and "No module named 'fedviz'" in r.stderr
        db = tmp_path / "runs.sqlite"
        r = subprocess.run([sys.executable, "-m", "fedviz", "experiment", "fedprox-figure2", "--scheduler",
                            procs.address], cwd=ROOT, env={**os.environ, "FEDVIZ_DB": str(db), "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, timeout=300)
    finally:
        cluster.close()
        procs.close()
    assert r.returncode == 1, (r.returncode, r.stderr)
    first = r.stderr.splitlines()[:3]
    why = [line for line in first if line.startswith("fedviz: error:")]
    assert why, r.stderr
    assert f"the scheduler at {procs.address} cannot import fedviz" in why[0], why[0]
    assert "No module named 'fedviz" in why[0] and "docs/cluster.md" in why[0]
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stdout == "", "no table of empty results"
    s = RunStore(db)
    try:
        info = s.get_experiment("fedprox-figure2-small")
        assert info.status == "failed" and "cannot import fedviz" in info.message
        assert s.experiment_cells(info.id) == [], "refused before the first cell"
    finally:
        s.close()


def test_workers_without_fedviz_or_on_a_stale_checkout_are_refused_by_name(tmp_path):
    """check_cluster names the workers that differ: one that cannot import fedviz, then one whose fedviz
    has the same version but other source (a stale checkout: editable installs all say 0.1.0); a
    worker on an identical copy of the source at another path is accepted."""
    same = _fedviz_copy(tmp_path / "same", edit=False)
    stale = _fedviz_copy(tmp_path / "stale", edit=True)
    blocker = _without_fedviz(tmp_path / "no-fedviz")
    procs = DaskProcesses(tmp_path)
    try:
        procs.start(0)
        procs.add_worker("copy", pythonpath=same)
        procs.wait_for_workers(1, 60)
        client = cluster.get_client(procs.address)
        cluster.check_cluster(client)  # the scheduler and an identical copy: accepted
        procs.add_worker("bare", pythonpath=blocker)
        procs.wait_for_workers(2, 60)
        with pytest.raises(cluster.ClusterMismatch) as e:
            cluster.check_cluster(client)
        bare = procs.worker_address("bare", client)
        assert str(e.value).startswith(f"the worker at {bare} cannot import fedviz (ModuleNotFoundError: "
                                       "No module named 'fedviz"), str(e.value)
        procs.kill_worker("bare")
        procs.add_worker("stale", pythonpath=stale)
        _wait_for_worker(procs, "stale", client)
        with pytest.raises(cluster.ClusterMismatch) as e:
            cluster.check_cluster(client)
        text = str(e.value)
        assert text.startswith(f"the worker at {procs.worker_address('stale', client)} runs fedviz "), text
        assert "other source files" in text and str(stale / "fedviz") in text and str(ROOT / "fedviz") in text
        assert "numpy" not in text.split(":")[0], "numpy is the same: not named as a difference"
    finally:
        cluster.close()
        procs.close()


def test_a_stale_worker_joining_mid_experiment_stops_it_failed(tmp_path, store):
    """A worker checked on arrival: the experiment stops (its stored cells kept, the rest run on
    resume) and ends 'failed', saying which worker and why."""
    stale = _fedviz_copy(tmp_path / "stale", edit=True)
    procs = DaskProcesses(tmp_path)
    try:
        procs.start(1)
        exp = Experiment("joined stale", LONG.data, LONG.arms[:1], LONG.axes, (0, 1, 2, 3), 300)
        handle = launch(exp, store, address=procs.address)
        _wait_running(handle, 1, min_iteration=1)
        procs.add_worker("stale", pythonpath=stale)
        snap = _wait(handle, 180)
        assert snap.status == "failed", (snap.status, snap.message)
        assert "runs fedviz 0.1.0 from other source files" in snap.message and "resume" in snap.message
        assert snap.stored < snap.total
        info = store.get_experiment(exp.name)
        assert info.status == "failed"
    finally:
        cluster.close()
        procs.close()


def test_failed_cells_print_their_reasons_with_counts_and_exit_1(dask_cluster, tmp_path):
    """Every cell of an experiment fails on its worker (σ = 5 for K = 2 nodes, a check that needs the
    built data set, so only a cell can make it): the command says how many and why (the check's own
    message, the oracle), once per distinct reason, and exits 1."""
    from fedviz.algorithms.dual_method import check_sigma
    from fedviz.errors import ParameterError

    with pytest.raises(ParameterError) as e:
        check_sigma("dual-method", 5.0, 2)
    (tmp_path / "bad.toml").write_text(f'name = "bad sigma"\ndata = "{DATA / "heart_scale"}"\nnodes = 2\n'
                                       'loss = "squared"\niterations = 3\nseeds = [0, 1, 2, 3]\n\n'
                                       '[[algorithm]]\nname = "dual-method"\nhyper = {sigma = 5}\n')
    r = subprocess.run([sys.executable, "-m", "fedviz", "experiment", str(tmp_path / "bad.toml"), "--scheduler",
                        dask_cluster.address, "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True,
                       text=True, timeout=300,
                       env={**os.environ, "FEDVIZ_DB": str(tmp_path / "runs.sqlite"), "PYTHONPATH": str(ROOT)})
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    head = lines.index("fedviz: 4 of 4 cells failed (one reason):")
    assert lines[head + 1] == f"  4 × {e.value}"
    # Issue 20: the reasons are the experiment's message too, so the page's status and the report carry them.
    said = f"4 cells failed: '{e.value}' ×4"
    assert RunStore(tmp_path / "runs.sqlite").get_experiment("bad sigma").message == said
    import html

    assert html.escape(said) in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


def test_a_malformed_file_is_refused_before_any_cell_with_its_line_and_exit_2(tmp_path):
    """The experiment reads its data before launch (the classes decide the loss): a malformed LIBSVM
    file is the parser's one sentence, naming the line (the parser's own message, the oracle), and exit 2."""
    from fedviz.data.libsvm import load_libsvm
    from fedviz.errors import DataFormatError

    bad = tmp_path / "bad.svm"
    bad.write_text("+1 1:0.5 2:1\n-1 1:0.2 3:x\n+1 2:0.1\n")
    with pytest.raises(DataFormatError) as e:
        load_libsvm(str(bad))
    (tmp_path / "bad.toml").write_text(f'name = "bad file"\ndata = "{bad}"\nnodes = 2\niterations = 3\n'
                                       'seeds = [0, 1]\n\n[[algorithm]]\nname = "gd"\n')
    r = subprocess.run([sys.executable, "-m", "fedviz", "experiment", str(tmp_path / "bad.toml")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "FEDVIZ_DB": str(tmp_path / "runs.sqlite"), "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "line 2" in str(e.value)
    assert r.stderr.strip().splitlines()[-1] == f"fedviz: error: {e.value}"


def test_experiment_out_writes_its_pngs_without_playwright_and_exits_0(dask_cluster, tmp_path):
    """``--out`` on a machine with only requirements.txt (playwright cannot be imported): the two
    figures are drawn with matplotlib, of the figures' layout size; every cell done, exit code 0."""
    from matplotlib.image import imread

    blocker = tmp_path / "no-playwright"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(NO_FEDVIZ.replace('"fedviz"', '"playwright"').replace('"fedviz."',
                                                                                                    '"playwright."'))
    (tmp_path / "small.toml").write_text('name = "small out"\ndata = "preset:fedprox-synthetic-binary?nodes=8"\n'
                                         'iterations = 5\nseeds = [0, 1]\n\n[[algorithm]]\nname = "gd"\n\n'
                                         '[[axis]]\nkey = "data.alpha"\nvalues = [0.5, 1.0]\n')
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "fedviz", "experiment", str(tmp_path / "small.toml"), "--scheduler",
                        dask_cluster.address, "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "FEDVIZ_DB": str(tmp_path / "runs.sqlite"),
                                         "PYTHONPATH": f"{ROOT}{os.pathsep}{blocker}"})
    assert r.returncode == 0, r.stderr
    assert "(PNGs drawn with matplotlib)" in r.stderr and "failed" not in r.stderr
    for name in ("curves.png", "final.png"):
        img = imread(str(out / name))
        assert img.shape[1] == 1100 and img.shape[0] >= 340, (name, img.shape)
    assert {p.name for p in out.iterdir()} == {"results.csv", "results.json", "report.html", "curves.png",
                                               "final.png"}
