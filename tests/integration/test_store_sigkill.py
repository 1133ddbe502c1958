"""The SQLite run history survives its writer's death: a run manager in another process is
SIGKILL'd mid-run, and every iteration it committed is read back intact (a subprocess and a
signal: an integration test, moved here from tests/unit/test_store.py)."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT
from fedviz.runner.history.describe import INTERRUPTED_MESSAGE
from fedviz.runner.history.store import RunStore

_KILLED_WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    from fedviz.algorithms.base import Algorithm
    from fedviz.data.dataset import FederatedDataset
    from fedviz.problems.objective import Problem
    from fedviz.runner.serve.manager import RunJob, RunManager
    from fedviz.runner.history.store import RunStore

    class Slow(Algorithm):
        name = "slow"
        title = "Slow"

        def _step(self):
            time.sleep(0.005)
            self.check_stop()
            self.w = self.w + 0.01

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    y = np.where(rng.random(30) < 0.5, 1.0, -1.0)
    data = FederatedDataset.from_assignment(X, y, np.arange(30) % 3)
    make = lambda: Problem(data, "logistic", 0.1)
    manager = RunManager(1, store=RunStore(sys.argv[1]), flush_interval=0.02, reaper=False)
    quick = manager.submit(RunJob(make, (("quick", "gd", {}),), iterations=25), "s")
    quick.wait(60)
    print(quick.store_ids["quick"], flush=True)
    slow = manager.submit(RunJob(make, (("slow", Slow, {}),), iterations=10**7), "s")
    print(slow.store_ids["slow"], flush=True)
    time.sleep(600)
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_loses_no_committed_iteration(tmp_path):
    db = tmp_path / "runs.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(db)], stdout=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path)
    try:
        quick_id = int(proc.stdout.readline())
        slow_id = int(proc.stdout.readline())
        seen = 0
        with RunStore(db) as watcher:
            deadline = time.monotonic() + 30
            while seen < 5 and time.monotonic() < deadline:
                time.sleep(0.05)
                seen = len(watcher.records(slow_id))
        assert seen >= 5, "the writer committed nothing within 30 s"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    with RunStore(db) as s:
        assert s.mark_interrupted() == 1
        slow = s.get_run(slow_id)
        assert (slow.status, slow.message) == ("interrupted", INTERRUPTED_MESSAGE)
        iters = [r.iteration for r in s.records(slow_id)]
        assert len(iters) >= seen and iters == list(range(len(iters)))
        quick = s.get_run(quick_id)
        assert quick.status == "done" and quick.finished is not None
        recs = s.records(quick_id)
        assert [r.iteration for r in recs] == list(range(26)) and recs[-1].status == "done"
        assert all(math.isfinite(r.objective) for r in recs)
