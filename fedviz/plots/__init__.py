"""Plotly figure builders: pure functions from records and statistics to figures (no Streamlit)."""

from .figures import (X_AXES, convergence_figure, feature_appearance_figure,
                      node_size_figure, paper_figure2, suboptimality_figure, test_error_figure)

__all__ = ["X_AXES", "convergence_figure", "feature_appearance_figure",
           "node_size_figure", "paper_figure2", "suboptimality_figure", "test_error_figure"]
