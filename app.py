"""fedviz dashboard: `streamlit run app.py`.  Navigation, the kernels' warm-up and the page guard;
every page lives in pages/."""

from pathlib import Path

import streamlit as st

from fedviz import ui
from fedviz.ui import sessions as ui_sessions

ui_sessions.install()  # Streamlit 1.67 leaves 3 descriptors per closed tab open (see the module)
ui_sessions.on_session_end(ui.session_ended)  # and never frees an evicted session's uploads
# The favicon is a file of the repository, served by the app (/media/…): a ":material/…" icon
# is fetched from a font CDN, an error on every page offline.
FAVICON = Path(__file__).resolve().parent / "assets" / "favicon.png"
st.set_page_config(page_title="fedviz — federated optimization", page_icon=str(FAVICON), layout="wide")
ui.warm_up_banner(ui.start_warm_up())  # while the kernels compile: how long is left
ui.announce_operator()  # the operator's link, printed once in the server's terminal (docs/sharing.md)
if ui.claim_operator() is False:  # a link's ?operator= token, taken out of the address whatever it is
    st.warning("This link's operator token is not this server's, so this tab is a visitor's: it lists its own "
               "runs only. On the server, `python -m fedviz operator` prints the operator's link.")

TOOLS = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/data.py", title="Data", icon=":material/dataset:"),
    st.Page("pages/run.py", title="Run", icon=":material/play_arrow:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page("pages/personalise.py", title="Personalise", icon=":material/person_search:"),
    st.Page("pages/experiments.py", title="Experiments", icon=":material/grid_view:"),
]
# The Learn section: the paper's ideas, each page a live, computed view (one entry per page).
LEARN = [
    st.Page("pages/learn_tour.py", title="Start here", icon=":material/school:"),
    st.Page("pages/learn_rare_features.py", title="Rare features", icon=":material/bar_chart:"),
    st.Page("pages/learn_efficiency.py", title="Efficiency paradigm", icon=":material/speed:"),
    st.Page("pages/learn_drift.py", title="Client drift", icon=":material/scatter_plot:"),
    st.Page("pages/learn_properties.py", title="Properties (A)–(D)", icon=":material/checklist:"),
    st.Page("pages/learn_equivalences.py", title="Equivalences", icon=":material/compare:"),
]
page = st.navigation({"": TOOLS, "Learn": LEARN} if LEARN else TOOLS)
with ui.guard("This page"):  # whatever a page missed becomes a message; the log keeps the traceback
    page.run()
