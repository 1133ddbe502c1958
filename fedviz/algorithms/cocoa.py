"""CoCoA, the averaging variant of the framework (Jaggi et al. 2014; Ma et al. 2015 with γ = 1/K).

Identical to :class:`~.cocoa_plus.CoCoAPlus` except for the aggregation: the nodes'
updates are averaged, α_[k] ← α_[k] + Δα_[k]/K and w ← w + (1/K) Σ_k Δw_k, and the
local subproblem carries σ' = γK = 1.  Averaging is always safe but discards most of
each node's progress, so it needs about K times more rounds than adding when the nodes'
data do not overlap (Ma et al., Section 5).
"""

from __future__ import annotations

from types import MappingProxyType

from ..problems.budget import StateSize
from .cocoa_plus import CoCoAPlus, _params


class CoCoA(CoCoAPlus):
    """CoCoA with local SDCA: averaging (γ = 1/K), σ' = 1 by default."""

    name = "cocoa"
    title = "CoCoA (averaging)"
    reference = "CoCoA (Jaggi et al. 2014; Ma et al. 2015 with γ = 1/K), Section 2.3"
    state = StateSize(entries=1, rows=4, model=8)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = _params("γK = 1")
    kept_defaults = MappingProxyType({
        "sigma_prime": "σ′ = γK = 1 is kept on purpose, though a smaller σ′ ends lower on some files: γK is the "
                       "value CoCoA's analysis proves safe on every data set (Ma et al. 2015: σ′ ≥ σ′_min, and "
                       "σ′_min ≤ γK); a smaller one is covered only where the data make σ′_min smaller.",
    })
    averaging = True
