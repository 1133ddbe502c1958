"""fedviz dashboard: `streamlit run app.py`.  Navigation only; every page lives in pages/."""

import streamlit as st

st.set_page_config(page_title="fedviz — federated optimization", page_icon=":material/hub:", layout="wide")

pages = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/data.py", title="Data", icon=":material/dataset:"),
    st.Page("pages/run.py", title="Run", icon=":material/play_arrow:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
]
st.navigation(pages).run()
