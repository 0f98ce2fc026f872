"""Pure figure builders: Trace in, plotly Figure out (no torch, no streamlit, no I/O)."""

from __future__ import annotations

from dllm_viz.figures.heatmaps import confidence_heatmap, position_labels

__all__ = ["confidence_heatmap", "position_labels"]
