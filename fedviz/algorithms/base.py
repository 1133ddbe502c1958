"""The one interface every algorithm implements, and its hyperparameter descriptions.

An algorithm is hyperparameters plus state.  It is created on a
:class:`~fedviz.problems.objective.Problem` (which carries the data and its partition)
and a seed, and advanced one outer iteration at a time by :meth:`Algorithm.step`.  It
keeps its own counters of communication and local work; the runner
(:mod:`fedviz.runner`) turns them into iteration records.

Counting conventions (what the dashboard's x axes mean):

- ``rounds``: synchronous communication rounds.  A round is one exchange server → nodes
  → server.  GD: 1 per iteration; FSVRG and DANE: 2 (the full gradient, then the
  local solutions); CoCoA+: 1.
- ``vectors_up`` / ``vectors_down``: models (vectors of size dC, d for C = 1) sent by nodes to the server /
  by the server to nodes, summed over nodes.  Per node, divide by K.
- ``grad_evals``: example-gradient evaluations ∇f_i (a full gradient costs n); an
  SDCA coordinate step counts as one.
"""

from __future__ import annotations

import math
import threading
import weakref
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

import numpy as np

from ..errors import ParameterError
from ..problems.budget import StateSize, check_state, state_bytes, state_model_bytes
from ..problems.losses import LOSSES
from ..problems.objective import Problem
from ..params import Checked, Param, check_values
from ..validation import check_int


#: The directions a :attr:`Algorithm.divergence_hint` may name.
HINT_DIRECTIONS = ("raise", "lower")

#: Derived defaults, cached with the problem: problem → {(class, sorted hyperparameters): values}.
#: Weak keys: an entry lives exactly as long as its problem (the runner's cache keeps shared ones).
_DERIVED: "weakref.WeakKeyDictionary[Problem, dict]" = weakref.WeakKeyDictionary()
_DERIVED_LOCK = threading.Lock()


#: An algorithm's hyperparameters as :meth:`Algorithm.validate` returns them: a frozen mapping,
#: defaults filled in, owned by its class (``hp.owner``) and trusted below the edge that made it.
Hyper = Checked


def _trusted(cls, hyper) -> bool:
    """Whether ``hyper`` was validated for exactly ``cls`` (a subclass's parameters may differ)."""
    return isinstance(hyper, Hyper) and hyper.owner is cls


class StopRequested(Exception):
    """Raised inside :meth:`Algorithm.step` when the user stopped the run; the iteration is discarded."""


class Algorithm:
    """Base class: hyperparameters validated in ``__init__``, one outer iteration per :meth:`step`.

    Subclasses set the class attributes and implement :meth:`_step`.  They update
    ``self.w`` (the server's model; assign a new array, it is made read-only after each
    step) and the counters.  ``X @ w`` and ∇f(w) at the current
    w are cached (:meth:`margins`, :meth:`gradient`): the runner evaluates them for its
    metrics after each step, and an algorithm that needs them at the start of the next
    step (GD, FSVRG, DANE) gets them for free, so one GD iteration costs one gradient pass
    with metrics included.  A subclass that computes ``X @ w`` for its new w anyway calls
    :meth:`set_margins`.

    Parameters
    ----------
    problem : Problem
    seed : int
        Seeds every random choice; the same seed gives the same iterates.
    w0 : ndarray or None
        The starting point (default 0).
    hp : Hyper or mapping, optional
        The hyperparameters as :meth:`validate` returned them: trusted, not checked again
        (a plain mapping is validated like ``**hyper``).
    **hyper
        Hyperparameters by name; missing ones take their defaults.
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    federated: ClassVar[bool] = True
    #: The scalar losses the algorithm takes: by default every one of the registry (their kernels
    #: evaluate φ' through the compiled trio of :mod:`fedviz.problems._compiled`, which knows each).
    losses: ClassVar[tuple[str, ...]] = tuple(LOSSES)
    #: Whether the algorithm takes a model with C > 1 outputs (softmax, issue 22): set on a class once
    #: its whole update is written for the flat d × C model (``losses`` lists its scalar losses).
    multiclass: ClassVar[bool] = False
    #: Why the algorithm does not take softmax, a clause after "<title> does not take softmax: "
    #: (shown where it is refused: the CLI, the run validation, the Run page's picker).
    multiclass_reason: ClassVar[str] = "its kernels work on one weight vector (binary and regression models only)"
    #: Whether the algorithm keeps a model per node besides the server's w (issue 23: Ditto's v_k,
    #: APFL's mixture): then :meth:`personal_models` returns them, K × dC, the runner scores each
    #: node with its own, and the run holds K·dC values more (refused above a budget:
    #: :data:`fedviz.algorithms.ditto.PERSONAL_VALUES`).
    personalised: ClassVar[bool] = False
    params: ClassVar[tuple[Param, ...]] = ()
    #: (parameter, direction): what the 'diverged' message tells the user to change, e.g.
    #: ``("stepsize", "lower")`` or DANE's ``("mu", "raise")``.  The parameter is one of
    #: ``params``; the direction is "raise" or "lower" (:data:`HINT_DIRECTIONS`).  ``None`` only
    #: for a method that cannot diverge, set explicitly on its class.
    divergence_hint: ClassVar[tuple[str, str] | None] = None
    #: parameter → why its default is kept on purpose where a ×2 grid of it finds a better value on some
    #: files (docs/defaults.md; issue 30): the Run page shows the sentence beside the parameter.
    kept_defaults: ClassVar[Mapping[str, str]] = MappingProxyType({})
    #: The floats it holds while it runs, per unit of the problem's sizes (issue 32): its model's part is
    #: checked against ``FEDVIZ_MAX_MODEL_MB`` when it is made; tests/unit/test_budget.py holds the whole
    #: above what tracemalloc counts for every algorithm of the registry, on problems it was not fitted on.
    state: ClassVar[StateSize] = StateSize()

    @classmethod
    def state_bytes(cls, problem: Problem) -> int:
        """The bytes it would hold on ``problem`` (:attr:`state`; a method whose memory is not linear in
        the sizes, e.g. the primal method's node blocks, adds its own)."""
        return state_bytes(cls.state, problem)

    @classmethod
    def model_bytes(cls, problem: Problem) -> int:
        """The part of :meth:`state_bytes` that the model's size makes, checked against
        ``FEDVIZ_MAX_MODEL_MB`` (the rest grows with the data and is bounded by its budget)."""
        return state_model_bytes(cls.state, problem)

    @classmethod
    def softmax_refusal(cls, hyper: Mapping[str, Any] | None = None) -> str | None:
        """None when the algorithm, with ``hyper``, takes softmax (a d × C model, issue 22, point 3);
        else the sentence that says why not, naming the algorithm."""
        if cls.multiclass:
            return None
        return f"{cls.title or cls.name} does not take softmax: {cls.multiclass_reason}"

    @classmethod
    def loss_refusal(cls, loss: str, hyper: Mapping[str, Any] | None = None) -> str | None:
        """None when the algorithm takes the loss named ``loss``; else why not, in one sentence."""
        if loss == "softmax":
            return cls.softmax_refusal(hyper)
        if loss not in cls.losses:
            return f"{cls.title or cls.name} takes the {', '.join(cls.losses)} loss only"
        return None

    def __init__(self, problem: Problem, *, seed: int = 0, w0: np.ndarray | None = None,
                 hp: Mapping[str, Any] | None = None, **hyper):
        self.problem = problem
        self.seed = check_int("seed", seed, low=0, high=2**63 - 1)
        if problem.n_classes != 1 and not self.multiclass:
            # The flat-w adapter: this algorithm's kernels still work on a weight vector of length d
            # (the d × 1 model of C = 1, issue 22); it takes C > 1 once it is converted.
            raise ParameterError(f"{self.name}.loss", problem.loss.name,
                                 f"a loss with one output per example (C = 1; this problem has C = "
                                 f"{problem.n_classes})", hint=self.softmax_refusal())
        if problem.n_classes == 1 and problem.loss.name not in self.losses:
            raise ParameterError(f"{self.name}.loss", problem.loss.name,
                                 "one of " + ", ".join(self.losses) + f" (what {self.title} supports)")
        if hp is not None and hyper:
            raise TypeError("give the hyperparameters as hp= (validated) or by name, not both")
        # Its working memory, estimated from the problem's sizes before any of it exists (issue 32).
        check_state(self.title, self.model_bytes(problem), problem)
        # One door: checked here unless they come validated for this class (a Hyper, from its edge).
        self.hp: Hyper = self.validate(hyper if hp is None else hp)
        # The model flat (length dC, row-major d × C; for C = 1 the vector w ∈ R^d).
        self.w = problem.zero_model() if w0 is None else np.array(w0, dtype=np.float64, copy=True)
        if self.w.shape != (problem.size,):
            raise ParameterError("w0", f"shape {self.w.shape}",
                                 f"a vector of length d = {problem.d}" if problem.n_classes == 1 else
                                 f"a flat model of length dC = {problem.size} "
                                 f"(d = {problem.d}, C = {problem.n_classes})")
        self.w.setflags(write=False)
        self._z: np.ndarray | None = None
        self._g: np.ndarray | None = None
        self._node_sums: np.ndarray | None = None
        #: Set by the runner when it scores every node (issue 23): the pass that computes f(w) then
        #: also sums each node's losses (:meth:`node_loss_sums`), at one addition per row.
        self.node_sums = False
        self._cache_w: np.ndarray | None = None
        self.iteration = 0
        self.rounds = 0
        self.vectors_up = 0
        self.vectors_down = 0
        self.grad_evals = 0
        #: Set by the runner: a callable returning True when the user pressed Stop.  Long
        #: iterations call :meth:`check_stop` between batches of nodes.
        self.stop_requested = None
        self.setup()

    # -- hyperparameters ---------------------------------------------------------------------
    @classmethod
    def validate(cls, hyper: Mapping[str, Any] | None, *, base: Hyper | None = None) -> Hyper:
        """The hyperparameters checked, defaults filled in, as a frozen :class:`Hyper`: the one
        check of a value on its way from an edge to the kernels; unknown names are refused.

        A :class:`Hyper` of this class is returned as it is (it was validated where it entered).
        With ``base`` (a Hyper of this class), only ``hyper`` is checked and laid over it, as
        a variant of a validated spec needs.  Raises the first :class:`ParameterError`
        (:meth:`check` gives them all).
        """
        if base is None and _trusted(cls, hyper):
            return hyper
        hp, errors = cls.check(hyper, base=base)
        if errors:
            raise next(iter(errors.values()))
        return hp

    @classmethod
    def check(cls, hyper: Mapping[str, Any] | None, *, base: Hyper | None = None
              ) -> tuple[Hyper | None, dict[str | None, ParameterError]]:
        """:meth:`validate` without raising: (the Hyper, {}) or (None, errors by parameter name).

        Every given value goes through its :class:`~fedviz.params.Param` once; the combination
        check (:meth:`check_combination`, error keyed ``None``) runs when every value passed.  An
        edge that shows each error beside its input (a widget, a link's keys) calls this.
        """
        if isinstance(hyper, Hyper):  # another class's (or a base's overlay): its given values
            hyper = dict(hyper.given_items())
        hyper = dict(hyper or {})
        if base is not None:
            assert _trusted(cls, base), "base must be a Hyper this class validated"
        values, errors = check_values(cls.params, hyper, cls.name)
        if errors:
            return None, errors
        given = tuple(hyper)
        if base is not None:
            values = {**base, **{k: values[k] for k in hyper}}
            given = tuple(dict.fromkeys(base.given + given))
        try:
            cls.check_combination(values)
        except ParameterError as e:
            return None, {None: e}
        return Hyper._make(cls, values, given), {}

    @classmethod
    def check_combination(cls, hp: dict) -> None:
        """Cross-parameter checks; raise ParameterError."""

    @classmethod
    def derived_defaults(cls, problem: Problem, hyper: Mapping[str, Any] | None = None) -> dict:
        """The values a run on ``problem`` uses for the hyperparameters left ``None`` (derived).

        A pure function of the problem and the hyperparameters (validated here, defaults filled
        in), computed by :meth:`_derive` once per (problem, class, hyperparameters) and cached
        with the problem; :meth:`setup` reads the same cached values, so what this says and what
        a constructed algorithm uses cannot disagree.  Only hyperparameters whose value is
        ``None`` *and* that the run uses appear (DANE's stepsize with the exact solver does not).
        """
        return dict(cls._derived(problem, cls.validate(hyper)))

    @classmethod
    def _derived(cls, problem: Problem, hp: Mapping[str, Any]) -> Mapping[str, Any]:
        """:meth:`derived_defaults` for hyperparameters already validated (``self.hp``): cached, read-only."""
        key = (cls, tuple(sorted(hp.items())))
        try:
            hash(key)
        except TypeError:  # an unhashable value (not one a Param validates): computed, not cached
            return MappingProxyType(dict(cls._derive(problem, hp)))
        with _DERIVED_LOCK:
            per = _DERIVED.get(problem)
            if per is not None and key in per:
                return per[key]
        values = MappingProxyType(dict(cls._derive(problem, hp)))  # pure: computing it twice is harmless
        with _DERIVED_LOCK:
            return _DERIVED.setdefault(problem, {}).setdefault(key, values)

    @classmethod
    def _derive(cls, problem: Problem, hp: Mapping[str, Any]) -> dict:
        """Override: the derived value of each hyperparameter that is ``None`` in ``hp`` (complete,
        validated) and used with the other values; a pure function of the problem and ``hp``."""
        return {}

    @classmethod
    def param(cls, name: str) -> Param:
        for p in cls.params:
            if p.name == name:
                return p
        raise KeyError(name)

    # -- iteration -----------------------------------------------------------------------------
    def setup(self) -> None:
        """Per-run precomputation (after hyperparameters and w0 are set)."""

    @property
    def derived(self) -> Mapping[str, Any]:
        """This run's derived defaults (:meth:`derived_defaults` of its problem and hyperparameters)."""
        return type(self)._derived(self.problem, self.hp)

    def step(self) -> None:
        """Advance one outer iteration."""
        self._step()
        # w is replaced, never modified in place: the caches belong to one w object.
        self.w.setflags(write=False)
        self.iteration += 1

    def _step(self) -> None:
        raise NotImplementedError

    def margins(self) -> np.ndarray:
        """X @ w for the current w, computed at most once per iteration."""
        self._validate_cache()
        if self._z is None:
            self._z = self.problem.matvec(self.w)
        return self._z

    def set_margins(self, z: np.ndarray) -> None:
        """Tell the cache that ``z == X @ self.w`` (for algorithms that computed it anyway)."""
        self._validate_cache()
        self._z = z

    def _validate_cache(self) -> None:
        if self._cache_w is not self.w:
            self._cache_w, self._z, self._g, self._node_sums = self.w, None, None, None

    def gradient(self) -> np.ndarray:
        """∇f(w) for the current w, computed at most once per iteration (not counted as work:
        the runner uses it for metrics; algorithms count theirs through :meth:`full_gradient`)."""
        return self.objective_and_gradient()[1]

    def objective_and_gradient(self) -> tuple[float, np.ndarray]:
        """(f(w), ∇f(w)) for the current w, from one fused pass, cached like :meth:`gradient`."""
        z = self.margins()
        if self._g is None:
            if self.node_sums:
                self._f, self._g, self._train_error, self._node_sums = self.problem.value_grad_error(
                    self.w, z, node_sums=True)
            else:
                self._f, self._g, self._train_error = self.problem.value_grad_error(self.w, z)
        return self._f, self._g

    def node_loss_sums(self) -> np.ndarray | None:
        """Each node's Σ_{i ∈ P_k} φ_i at the current w when the pass of :meth:`objective_and_gradient`
        computed them (:attr:`node_sums`), else None."""
        self._validate_cache()
        return self._node_sums

    def train_error(self) -> float:
        """The training error at the current w, a by-product of :meth:`objective_and_gradient`."""
        self.objective_and_gradient()
        return self._train_error

    def judge_trial(self, trial: np.ndarray | None, accepted: tuple | None) -> tuple[bool, tuple]:
        """The monotone safeguard's test (FSVRG, SVRG, DANE; not in the paper), from the gradient
        round's own pass: f and ∇f at ``trial``, the point the last local round produced, and whether
        f(trial) ≤ f at the last accepted point (``accepted[2]``).  A NaN compares False, so a
        non-finite f is a rise.  With no trial (the first iteration) the current w is accepted unseen.

        Returns (adopted, state), state = (w, X w, f, ∇f, training error, node loss sums) of the point
        the next local round starts from: ``trial``'s when adopted, else ``accepted`` (the nodes hold
        that point already, so going back sends no vector).  Changes nothing of the algorithm: the
        caller commits the state (after its local round, so that a Stop inside it leaves the run as
        it was, or at once)."""
        if trial is None:
            z = self.margins()
            f, g = self.objective_and_gradient()
            return True, (self.w, z, f, g, self.train_error(), self.node_loss_sums())
        pb = self.problem
        z = pb.matvec(trial)
        with np.errstate(over="ignore", invalid="ignore"):
            f, g, err, *sums = pb.value_grad_error(trial, z, node_sums=self.node_sums)
        if f <= accepted[2]:
            return True, (trial, z, f, g, err, sums[0] if sums else None)
        return False, accepted

    def hold_trial(self, trial: np.ndarray, accepted: tuple) -> None:
        """The safeguard's end of an iteration: ``trial`` (read-only from here) waits for the next
        gradient round's :meth:`judge_trial`, and the server's model stays ``accepted``'s point
        (:meth:`adopt`), one local round behind the newest trial."""
        trial.setflags(write=False)
        self._trial, self._accepted = trial, accepted
        self.adopt(accepted)

    def adopt(self, state: tuple) -> None:
        """Make ``state`` (:meth:`judge_trial`'s) the server's model, its pass's figures cached: the
        runner does not recompute them."""
        self.w = state[0]
        self.set_margins(state[1])
        self._f, self._g, self._train_error, self._node_sums = state[2:]

    def personal_models(self) -> np.ndarray | None:
        """Each node's own model, K × dC (row k is the model node k is scored with), or None when
        the algorithm has only the server's ``w`` (issue 23, point 3: Ditto's v_k, APFL's mixture).
        The runner scores node k's rows with row k (:mod:`fedviz.problems.pernode`)."""
        return None

    def rng(self, *stream: int) -> np.random.Generator:
        """A generator for (seed, iteration, *stream): reproducible and independent per use,
        so two algorithms fed the same seed draw the same samples (Proposition 1's remark)."""
        return np.random.default_rng([self.seed, self.iteration, *stream])

    # -- helpers for subclasses ----------------------------------------------------------------
    def check_stop(self) -> None:
        """Raise :class:`StopRequested` if the runner asked to stop (call between node batches)."""
        if self.stop_requested is not None and self.stop_requested():
            raise StopRequested()

    def full_gradient(self) -> np.ndarray:
        """∇f(w) at the current w, counting n example gradients and one round."""
        self.grad_evals += self.problem.n
        return self.gradient()

    def count_round(self, up_per_node: int = 1, down_per_node: int = 1, nodes: int | None = None) -> None:
        K = self.problem.data.n_nodes if nodes is None else nodes
        self.rounds += 1
        self.vectors_up += up_per_node * K
        self.vectors_down += down_per_node * K


def default_stepsize(value: float | None, fallback: float) -> float:
    """``value`` if set (validated at the edge: positive and finite), else the ``fallback``
    derived from the problem, checked here, where it is computed."""
    if value is not None:
        return value
    if not (math.isfinite(fallback) and fallback > 0):
        raise ParameterError("stepsize", fallback, "number > 0",
                             hint="the default derived from this problem is not; set the stepsize")
    return fallback
