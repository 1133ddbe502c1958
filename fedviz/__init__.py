"""fedviz: compare federated optimization algorithms on non-IID, unbalanced, sparse data.

Built on Konečný, McMahan, Ramage and Richtárik (2016), "Federated Optimization:
Distributed Machine Learning for On-Device Intelligence".  The package owns all
logic; the Streamlit pages only collect widgets, build a frozen config and call in.
"""

import os as _os

__version__ = "0.1.0"

# Idle OpenMP threads sleep at once instead of spinning (see fedviz.problems._cores, which measured why): set here,
# before numba starts its OpenMP threads at the first parallel kernel, and only where the user set neither knob.
if not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & _os.environ.keys():
    _os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
