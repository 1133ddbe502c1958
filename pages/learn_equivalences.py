"""Learn · Equivalences: Proposition 1 (inexact DANE with one SVRG pass is naive FSVRG) and the
Appendix's Theorem 5 (the primal method is the image of the dual method), as overlaid runs whose
distance is printed."""

import streamlit as st

from fedviz import ui
from fedviz.learn.equivalences import (EQUIVALENCE_DATA, equivalence_problem, proposition_1_overlay,
                                       theorem_5_overlay)
from fedviz.plots.learn_matrix import overlay_figure
from fedviz.problems.losses import LOSSES

ui.through_navigation()


@st.cache_data(max_entries=16, show_spinner="Running both methods…")
def _proposition_1(spec: str, loss: str, iterations: int, seed: int, local_steps, stepsize):
    problem, f_star = equivalence_problem(spec, loss)
    return proposition_1_overlay(problem, f_star, iterations=iterations, seed=seed, local_steps=local_steps,
                                 stepsize=stepsize)


@st.cache_data(max_entries=16, show_spinner="Running both methods…")
def _theorem_5(spec: str, iterations: int, sigma, start: str, seed: int):
    problem, f_star = equivalence_problem(spec, "squared")
    return theorem_5_overlay(problem, f_star, iterations=iterations, sigma=sigma, start=start, seed=seed)


def _show(overlay) -> None:
    c1, c2 = st.columns([1, 3])
    c1.metric("Largest distance", f"{overlay.distance:.2g}",
              help="Proposition 1: maxₜ ‖w_DANEᵗ − w_naiveᵗ‖_∞. "
                   "Theorem 5: maxₜ ‖w_primalᵗ − (1/(λn))Xαᵗ‖_∞ ÷ max(1, ‖(1/(λn))Xαᵗ‖_∞).")
    (c2.success if overlay.holds else c2.error)(overlay.describe())
    st.caption(overlay.settings)
    st.plotly_chart(overlay_figure(overlay), config={"displayModeBar": False})


st.title("Equivalences")
st.markdown(
    "Two of the paper's statements say that two different-looking methods produce *the same iterates*. "
    "Each is run here, both methods side by side from the same start; the curves are overlaid (the second "
    "dashed over the first) and the distance between the two iterates is printed at every iteration.")

st.header("Proposition 1: inexact DANE is naive FSVRG")
st.markdown(
    "Section 3.5: DANE (Algorithm 2) with η = 1, μ = 0, solving its subproblem (eq. (10)) by **one pass of SVRG** "
    "started at wᵗ, generates the same iterates as **naive FSVRG** (Algorithm 3) — given the same samples (the "
    "Remark after it). The local SVRG step of DANE's subproblem is ∇fᵢ(w) − ∇fᵢ(wᵗ) + ∇f(wᵗ), "
    "naive FSVRG's own step.")
c1, c2, c3, c4, c5, c6 = st.columns([2, 1.3, 1, 1, 1, 1])
p_data = c1.selectbox("Data", EQUIVALENCE_DATA, key="learn-eq-p1-data")
p_loss = c2.selectbox("Loss", list(LOSSES), key="learn-eq-p1-loss")
p_its = c3.number_input("Iterations", 1, 200, 10, key="learn-eq-p1-iterations")
p_seed = c4.number_input("Seed", 0, 2**32 - 1, 0, key="learn-eq-p1-seed",
                         help="Both methods' seed: the same seed draws the same samples.")
p_m = c5.number_input("Local steps m", 1, 1_000_000, None, key="learn-eq-p1-m",
                      placeholder="n/K", help="SVRG steps per node; blank: the mean node size n/K.")
p_h = c6.number_input("Stepsize h", 1e-8, 1e6, None, format="%g", key="learn-eq-p1-h",
                      placeholder="1/(2L̄)", help="Blank: 1/(2L̄), L̄ the average example smoothness.")
with ui.guard("Proposition 1"):
    _show(_proposition_1(p_data, p_loss, int(p_its), int(p_seed), None if p_m is None else int(p_m),
                         None if p_h is None else float(p_h)))

st.header("Theorem 5: the primal method is the image of the dual method")
st.markdown(
    "Appendix A: for **ridge regression** and the same α⁰, the **Primal Method** (Algorithm 5, a quadratic "
    "perturbation of each node's Fₖ) produces wᵗ = (1/(λn)) X αᵗ (eq. (14)), the image of the "
    "**Dual Method**'s αᵗ (Algorithm 6, dual block proximal gradient ascent), for every t and every σ ∈ [1, K]. "
    "The squared loss is used whatever the data's labels.")
c1, c2, c3, c4, c5 = st.columns([2, 1, 1, 1.2, 1])
t_data = c1.selectbox("Data", EQUIVALENCE_DATA, key="learn-eq-t5-data")
t_its = c2.number_input("Iterations", 1, 200, 10, key="learn-eq-t5-iterations")
t_sigma = c3.number_input("σ", 1.0, 1e6, None, format="%g", key="learn-eq-t5-sigma", placeholder="K",
                          help="σ ∈ [1, K] of both methods; blank: K, safe for every partition.")
t_start = c4.radio("α⁰", ["zero", "random"], key="learn-eq-t5-start", horizontal=True,
                   help="The common start: α⁰ = 0 (so w⁰ = 0), or N(0, 1) draws from the seed.")
t_seed = c5.number_input("Seed", 0, 2**32 - 1, 0, key="learn-eq-t5-seed", disabled=t_start == "zero")
with ui.guard("Theorem 5"):  # a σ outside [1, K] is named with its range
    _show(_theorem_5(t_data, int(t_its), None if t_sigma is None else float(t_sigma), t_start, int(t_seed)))

ui.sync_link()
