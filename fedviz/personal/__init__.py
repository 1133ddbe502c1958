"""Personalisation with exact convex optima (issue 23, point 3): every node's own model, scored on
its own test rows.

- :mod:`fedviz.personal.models`: the models — Local (v_k = argmin F_k), exact Ditto
  (Li et al., ICML 2021: argmin F_k(v) + (λ_D/2)‖v − w*‖², and its λ_D path), pFL-Bench's
  fine-tuning (Chen et al. 2022), APFL's mixture (Deng et al. 2020) — in the compact
  :class:`PersonalModels`, solved per node by Newton-CG (:mod:`._newton`, C = 1) or, for softmax,
  Newton with each node's dense Hessian (:mod:`._softmax`; DANE's lockstep Newton-CG when too large);
- :mod:`fedviz.personal.evaluate`: each node's test error under its own model, vectorised;
- :mod:`fedviz.personal.report`: :class:`PersonaliseConfig` → :func:`personalise` →
  :class:`PersonalReport`, and the command line's table.

The iterative Ditto and APFL algorithms, which run on the Run page, are in :mod:`fedviz.algorithms`.
"""

from .evaluate import PersonalEvaluator
from .models import (PersonalModels, Personaliser, apfl_models, ditto_models, ditto_path, finetune_models,
                     local_models)
from .report import (DEFAULT_LAMBDAS, METHODS, PARAMS, TITLES, PersonaliseConfig, PersonalReport, format_table,
                     personalise, personalise_unseen)

__all__ = ["PersonalModels", "Personaliser", "PersonalEvaluator", "PersonaliseConfig", "PersonalReport",
           "personalise", "personalise_unseen",
           "format_table", "local_models", "ditto_models", "ditto_path", "finetune_models",
           "apfl_models", "METHODS", "TITLES", "PARAMS", "DEFAULT_LAMBDAS"]
