"""Statuses for every model a run carries (issue 30, point 3), and the warning of a run that never leaves its
start.

A Ditto run whose personal models blew up ended 'done' (its status read the global objective only), and FSVRG
at h = 1e7, whose safeguard rejects every trial, stayed exactly at f(w0) with no word although the docs promise
a warning for a run that never gets below its start.  The rules are :func:`fedviz.runner.health.personal_verdict`
and the end rule of :func:`~fedviz.runner.health.assess`; here they are checked on the issue's own commands,
through the registry (every algorithm with personal models), on hand-made curves, and for false alarms at the
defaults on two data sets.
"""

from __future__ import annotations

import math
import re
import statistics

import numpy as np
import pytest

from conftest import DATA
from fedviz.algorithms import ALGORITHMS, get_algorithm
from fedviz.data.build import DataSpec
from fedviz.problems import metrics
from fedviz.runner import cache
from fedviz.runner.health import CLIMB, PERSONAL_RISE, TAIL, assess
from fedviz.runner.loop import iterate

PERSONAL = [name for name, cls in ALGORITHMS.items() if cls.personalised]
GPLUS = DataSpec(source="preset:google-plus-small")
ERROR = metrics.get("personal_error").key("pooled")


def test_the_registry_has_personal_methods():
    assert PERSONAL, "no algorithm keeps personal models: the tests below would test nothing"


@pytest.mark.parametrize("name", PERSONAL)
def test_personal_models_that_turn_non_finite_end_the_run_diverged(name, monkeypatch):
    """Whatever the method, personal models that stop being finite end the run 'diverged' at that iteration,
    with the direction its registry entry gives (they are made non-finite here from the third iteration on,
    the global model untouched)."""
    cls = get_algorithm(name)
    problem = cache.problem(DataSpec(source="preset:google-plus-small?nodes=40"))
    real = cls.personal_models

    def broken(self):
        models = real(self)
        return models if self.iteration < 3 else np.full_like(models, np.inf)

    monkeypatch.setattr(cls, "personal_models", broken)
    recs = list(iterate(problem, name, iterations=8, seed=0))
    last = recs[-1]
    assert last.status == "diverged" and last.iteration == 3, (last.status, last.iteration, last.message)
    param, direction = cls.divergence_hint
    assert f"personal models blew up at iteration 3" in last.message and f"{direction} {param}" in last.message


def test_the_issues_ditto_command_ends_diverged_with_a_reason(capsys):
    """Ditto at λ_D = 1000 and step 0.2667: the distance to the exact v_k(λ_D) is 5e89 after one round."""
    from fedviz.cli import main

    code = main(["run", "preset:google-plus-small", "--algorithms", "ditto", "--set", "ditto.ditto_lambda=1000",
                 "--set", "ditto.stepsize=0.2667", "--iterations", "12", "--json"])
    assert code == 0
    import json

    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    last = rows[-1]
    assert last["status"] == "diverged", last
    d0, d = rows[0]["personal_distance"], last["personal_distance"]
    assert d > CLIMB * d0  # the rule's own threshold, read off the printed records
    assert "moved away from the exact models" in last["message"] and "lower stepsize" in last["message"]


def test_a_personal_error_that_climbs_is_warned_with_its_numbers():
    """Ditto at 16× its default step for 12 iterations: the personal models' pooled test error climbs (33.5% to
    about 58%) before they blow up; the warning's numbers are the records' own (median of the last quarter)."""
    problem = cache.problem(GPLUS)
    cls = get_algorithm("ditto")
    from fedviz.runner.tune import resolved_default

    h = resolved_default(cls, problem, cls.validate({}), "stepsize", 0)
    recs = list(iterate(problem, "ditto", iterations=12, hyper={"stepsize": 16 * h}, seed=0))
    last = recs[-1]
    errors = [r.summaries[ERROR] for r in recs]
    k = min(len(errors) - 1, max(1, math.ceil(TAIL * (len(errors) - 1))))
    typical = statistics.median(errors[-k:])
    assert typical > errors[0] + PERSONAL_RISE, errors  # the data behind the claim
    assert last.status == "done" and last.message.startswith("warning: the personal models' pooled test error"), \
        last.message
    assert f"from {100 * errors[0]:.1f}% to {100 * typical:.1f}%" in last.message and "lower stepsize" in last.message


@pytest.mark.slow
@pytest.mark.parametrize("data", [GPLUS, DataSpec(source=str(DATA / "a9a"), test=str(DATA / "a9a.t"), nodes=100,
                                                  partition="iid")], ids=["google-plus-small", "a9a"])
def test_no_false_alarm_at_the_defaults(data):
    """Every algorithm with personal models, at its defaults for 30 iterations, ends 'done' without a word."""
    problem = cache.problem(data)
    for name in PERSONAL:
        last = list(iterate(problem, name, iterations=30, seed=0))[-1]
        assert (last.status, last.message) == ("done", ""), (name, last.status, last.message)


def test_a_run_that_never_leaves_its_start_is_warned_unless_it_starts_at_the_optimum():
    f0 = math.log(2)
    stuck = [f0] * 13
    verdict = assess(stuck, f_star=f0 - 0.2248)
    assert verdict.status == "ok" and "never left its start" in verdict.warning, verdict
    assert assess(stuck, f_star=f0).warning == ""  # started at the optimum: property (A), nothing to say
    assert assess(stuck, f_star=None).warning == ""  # without f* it cannot be told apart
    moving = [f0 - 1e-3 * t for t in range(13)]
    assert assess(moving, f_star=f0 - 0.2248).warning == ""


def test_fsvrg_at_a_step_whose_every_trial_is_rejected_says_so(capsys):
    from fedviz.cli import main

    code = main(["run", "preset:google-plus-small", "--algorithms", "fsvrg", "--set", "fsvrg.stepsize=1e7",
                 "--iterations", "12"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    objectives = re.findall(r"f-f\*\s+(\S+)", "\n".join(out))
    assert len(set(objectives)) == 1, objectives  # it never moved: the premise, from the printed lines
    assert "done  warning: f never left its start" in out[-1] and "lower stepsize (now" in out[-1], out[-1]
