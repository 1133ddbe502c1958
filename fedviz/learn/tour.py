"""The guided tour: lessons as data, each a page and the settings it opens with.

A lesson names a page of the dashboard and a :class:`~fedviz.runner.config.RunConfig`; its link
(:attr:`Lesson.query`, :meth:`Lesson.url`) is the config's query string (:func:`to_query`), so it
is read by the same parser as any shared link (:func:`from_query`) and a lesson can never carry a
setting the pages would refuse.  The sentence says what to do and what to look for, with the
paper's section (Konečný, McMahan, Ramage, Richtárik 2016, numbered as :mod:`fedviz.properties`
explains).  The Learn pages other than the tour are written by their own modules; a lesson only
names their file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlencode

from ..data.build import PRESET_PREFIX, DataSpec
from ..runner.config import DEFAULT_DATA, RunConfig, to_query

#: The repository's root: lessons name their page relative to it (the way app.py does).
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Lesson:
    """One stop of the tour: ``page`` (a path relative to the repository, as in app.py) opened with
    ``config``; ``sentence`` says what to do there and what to look for."""

    key: str
    title: str
    page: str
    sentence: str
    config: RunConfig = field(default_factory=RunConfig)

    @property
    def query(self) -> dict[str, str]:
        """The link's query parameters (only what differs from the defaults)."""
        return to_query(self.config)

    @property
    def url_path(self) -> str:
        """The page's address in the app: its file name without ``.py`` (Streamlit's default)."""
        return Path(self.page).stem

    def url(self) -> str:
        """The lesson's link, relative to the app's address (``run?partition=reshuffle``)."""
        query = self.query
        return self.url_path + ("?" + urlencode(query) if query else "")

    def exists(self) -> bool:
        """Whether the page's file is there (the Learn pages are written one by one)."""
        return (ROOT / self.page).is_file()


#: The numbers of the personalisation lesson (percent of test rows), measured on its own setup, the
#: Personalise page's defaults on google-plus-small (logistic, λ = 1/n, w* by Newton-CG): ``python -m
#: fedviz personalise preset:google-plus-small`` prints them; tests/unit/test_personal_page.py computes
#: them again and fails if the lesson's numbers drift from the computation's.
PERSONAL_FINDINGS = {"global": 26.4, "global_worst10": 71.6, "majority": 17.3, "local": 15.5, "finetune": 11.3,
                     "finetune_worst10": 34.0, "ditto": 11.6}
_F = PERSONAL_FINDINGS

#: The tour, in the order a class would take it.
LESSONS: tuple[Lesson, ...] = (
    Lesson("why-fsvrg-wins", "Why FSVRG wins", "pages/run.py",
           "FSVRG, GD and CoCoA+ on google-plus-small, the paper's Figure 2 (Section 4.1). Press **Run** and switch "
           "the x axis to communication rounds: FSVRG spends two rounds an iteration, GD and CoCoA+ one, and "
           "FSVRG still ends lowest in f − f*. Between two rounds FSVRG makes a whole pass over every node's own "
           "data, GD a single gradient step, and CoCoA+ a step shrunk by σ' = K for sparse data. Rounds are what "
           "federated optimization pays for (Section 1.2)."),
    Lesson("personalisation", "Personalisation: why one model is not enough", "pages/personalise.py",
           f"Press **Compute**. On google-plus-small the one global model w* errs on {_F['global']}% of the test "
           f"posts, and on {_F['global_worst10']}% for the 10% of authors it serves worst; each author's own "
           f"majority label errs {_F['majority']}% (Section 4.1 stops there: 17.14% against 26.27%). A model per "
           f"author does better still: alone (Local) {_F['local']}%, w* fine-tuned for five steps on the author's "
           f"posts {_F['finetune']}% ({_F['finetune_worst10']}% on the worst 10%), Ditto {_F['ditto']}%. The "
           "boxes show every author; the λ_D path below them runs from Local to w*, and the sentence on the page "
           "says which model serves the worst 10% best."),
    Lesson("non-iid", "Non-IID: the same posts, reshuffled", "pages/run.py",
           "The same posts dealt at random to nodes of the same sizes: IID nodes, the paper's FSVRGR (Section "
           "4.1, Figure 2). Press **Run**: FSVRG ends at the optimum's test error (the OPT line) here, as it does "
           "on the authors' own non-IID nodes in *Why FSVRG wins* — the paper's evidence that its modifications "
           "make it robust to non-IID data — and it gets lower in f − f* here than there. For both side by side, "
           "**Compare › What if: two partitionings** runs the authors' own nodes (A) against reshuffle (B).",
           RunConfig(data=replace(DEFAULT_DATA, partition="reshuffle"))),
    Lesson("rare-features", "Rare features and the FSVRG ablation", "pages/learn_rare_features.py",
           "Press **Run the ablation**: FSVRG, FSVRG with each of its four modifications off (Section 3.6.2), and "
           "naive FSVRG, live. The top chart is the paper's Figure 1 binned; below it, each curve's remaining "
           "error by how many nodes a feature appears on, the rare bins on the left — the case for A = Diag(K/ω^j). "
           "Under the curves the page says, from the run, how far above or below FSVRG each curve ends and which "
           "lag on the rarest features; on google-plus-small, FSVRG without A ends furthest above FSVRG of the "
           "four single changes."),
    Lesson("property-a", "Property (A): started at the optimum, stay there", "pages/learn_properties.py",
           "Section 3.1 lists four properties a federated algorithm should have; (A) says that an algorithm "
           "started at the optimum w* stays there. The page starts every algorithm at w* and colours its cell in "
           "column (A): green where it stayed, red where it left, grey where it cannot run the loss — see which "
           "algorithms keep it."),
    Lesson("efficiency", "Efficiency: rounds against computation", "pages/learn_efficiency.py",
           "Section 2.3.1, eq. (3): TIME = I × (c + T_A), I rounds of communication each costing c to "
           "communicate and T_A to compute. Press **Run** (DANE, CoCoA+, FSVRG and GD on identical-nodes, where "
           "every node holds a copy of the same data): DANE, as the paper sets it (μ = 0, no safeguard), solves each "
           "node's subproblem exactly, a few rounds of much computation; CoCoA+ makes one pass a round, many cheap rounds. When c is large (phones on a "
           "slow network) TIME ≈ I × c, and the run with the fewest rounds wins; when c is small (a data centre) "
           "the least computation wins. T_A counts the work of a round, so the sentence under the figure says "
           "who is fastest where, read from these runs, whatever the machine's load.",
           RunConfig(data=DataSpec(source=PRESET_PREFIX + "identical-nodes"),
                     # The paper's DANE (Section 3.4's "default setting when μ = 0 and η = 1"): one iteration
                     # on identical nodes, the few dear rounds this lesson sets against many cheap ones.
                     algorithms=(("dane", (("mu", 0.0), ("safeguard", False))),
                                 *((name, ()) for name in ("cocoa-plus", "fsvrg", "gd"))))),
    Lesson("client-drift", "Client drift", "pages/learn_drift.py",
           "Local steps on non-IID nodes pull each node toward its own optimum, away from the global one. Press "
           "▶ under the figure to watch the rounds: on the non-IID split FedAvg's server model settles far from "
           "w*, while SCAFFOLD's and FSVRG's corrections bring it back — the table says how far each ends."),
    Lesson("equivalences", "Equivalences", "pages/learn_equivalences.py",
           "Two algorithms that look different can make the same iterates: naive FSVRG is DANE with one pass of "
           "SVRG (Proposition 1, Section 3.5), and the Appendix's primal and dual methods match on ridge "
           "regression (Theorem 5). Each pair runs from the same start, and the page prints the largest distance "
           "between their iterates: zero up to rounding."),
)


def lesson(key: str) -> Lesson:
    """The lesson of ``key``."""
    for item in LESSONS:
        if item.key == key:
            return item
    raise KeyError(key)


__all__ = ["LESSONS", "Lesson", "PERSONAL_FINDINGS", "lesson"]
