"""fedviz: compare federated optimization algorithms on non-IID, unbalanced, sparse data.

Built on Konečný, McMahan, Ramage and Richtárik (2016), "Federated Optimization:
Distributed Machine Learning for On-Device Intelligence".  The package owns all
logic; the Streamlit pages only collect widgets, build a frozen config and call in.
"""

__version__ = "0.1.0"
