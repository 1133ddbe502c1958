"""Every algorithm's iterates are the same bits on one numba thread and on two: each thread count
needs its own Python process (numba reads NUMBA_NUM_THREADS once), so this runs two subprocesses,
an integration test (moved here from tests/unit/test_svrg_family.py)."""

import os


def test_every_algorithm_gives_the_same_bits_on_one_thread_and_on_two():
    """The kernels cut a round into a fixed number of chunks, never the thread count, so a cluster
    worker (one thread) and a laptop compute the same iterates to the last bit."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        from fedviz.algorithms import ALGORITHMS
        from fedviz.data.build import DataSpec
        from fedviz.runner.job import ProblemSpec
        from fedviz.runner.loop import iterate
        from fedviz.algorithms.spec import AlgorithmSpec
        for loss in ("logistic", "squared"):
            p = ProblemSpec(DataSpec("preset:google-plus-small?nodes=60"), loss)()
            for name, cls in ALGORITHMS.items():
                if loss not in cls.losses or name == "dane":
                    continue
                for rec in iterate(p, cls, iterations=2, seed=1, f_star=0.0):
                    pass
                print(loss, name, rec.objective.hex())
    """)
    outs = []
    for threads in ("1", "2"):
        env = {**os.environ, "NUMBA_NUM_THREADS": threads}
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(r.stdout.splitlines())
    assert len(outs[0]) >= 12 and outs[0] == outs[1], (outs[0], outs[1])
