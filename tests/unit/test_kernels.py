"""Every compiled kernel of fedviz releases the GIL while it runs.

The dashboard's server is one Python process: its event loop, every session's script
runs and the run workers share one GIL.  A numba kernel compiled without ``nogil=True``
holds it for its whole call, and every page of every user freezes meanwhile.  Measured
with a probe thread that times ``time.sleep(0.001)`` in a loop while the main thread runs
``load_libsvm(open("tests/data/a9a", "rb").read() * 40)`` (93 MB): the probe's longest
pause was 0.78 s without ``nogil`` and 2 ms with it.  The kernels touch no Python
objects, so releasing the GIL is always safe.
"""

import importlib
import pkgutil

from numba.core.registry import CPUDispatcher

import fedviz


def _kernels():
    for info in pkgutil.walk_packages(fedviz.__path__, "fedviz."):
        if info.name.endswith("__main__"):  # importing it would run the command line
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == module.__name__:
                yield f"{module.__name__}.{name}", obj


def test_every_kernel_releases_the_gil():
    kernels = dict(_kernels())
    # The list is not empty by accident: the parser's, the products' and the algorithms' kernels are in it.
    assert {"fedviz.data.libsvm._scan", "fedviz.problems._blocks._matvec",
            "fedviz.algorithms._svrg_kernels._batch"} <= set(kernels)
    holding = sorted(name for name, kernel in kernels.items() if not kernel.targetoptions.get("nogil"))
    assert not holding, f"compiled without nogil=True (they would freeze the server while they run): {holding}"
