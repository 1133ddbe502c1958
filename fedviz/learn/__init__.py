"""The Learn section's computations: pure functions behind the Learn pages (no Streamlit).

Each module backs one Learn page and cites the paper (Konečný, McMahan, Ramage, Richtárik 2016,
*Federated Optimization*) by the numbers :mod:`fedviz.properties` explains.
"""
