"""The explicit registry of algorithms: name → class, in display order.

Every entry implements :class:`~fedviz.algorithms.base.Algorithm`; its class attributes
give the display name, the paper reference and the hyperparameters with defaults and
help text.
"""

from __future__ import annotations

from ..errors import ParameterError
from .apfl import APFL
from .base import Algorithm, Param
from .cocoa import CoCoA
from .cocoa_plus import CoCoAPlus
from .dane import DANE
from .ditto import Ditto
from .dual_method import DualMethod
from .fedavg import FedAvg
from .fedprox import FedProx
from .fsvrg import FSVRG
from .gd import GD
from .naive_fsvrg import NaiveFSVRG
from .one_shot import OneShotAveraging
from .primal_method import PrimalMethod
from .scaffold import Scaffold
from .sgd import SGD
from .svrg import SVRG

ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (
    # The paper's Figure 2 line-up first, then the rest of its Section 3.
    FSVRG, GD, CoCoAPlus, CoCoA, NaiveFSVRG, DANE, OneShotAveraging,
    # The Appendix's methods (ridge regression).
    PrimalMethod, DualMethod,
    # Today's federated baselines.
    FedAvg, FedProx, Scaffold,
    # Personalised federated learning (issue 23): a model per node besides the global one.
    Ditto, APFL,
    # Centralised references on the pooled data (not federated).
    SVRG, SGD,
)}


def get_algorithm(name: str) -> type[Algorithm]:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ParameterError("algorithm", name, "one of " + ", ".join(ALGORITHMS)) from None


from .spec import AlgorithmSpec  # noqa: E402 - needs the registry above

__all__ = ["ALGORITHMS", "Algorithm", "AlgorithmSpec", "Param", "get_algorithm"]
