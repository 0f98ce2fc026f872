"""Pure figure builders: Trace(s) in, plotly Figure out (no torch, no streamlit, no file I/O).

Each view lives in its own module; this package re-exports the public builders and the pure
helpers they rest on, named `<quantity>_<chart>`. `export` returns HTML strings only.
"""

from __future__ import annotations

from dllm_viz.figures._layout import position_labels
from dllm_viz.figures._pooling import PooledGrid, pool_grid
from dllm_viz.figures.animation import decode_gif
from dllm_viz.figures.branching import branch_divergence_line
from dllm_viz.figures.compare import nfe_accuracy_scatter, nfe_bar, pareto_front, step_series_lines
from dllm_viz.figures.export import (
    comparison_replay_figure,
    comparison_replay_html,
    figure_html,
    replay_figure,
    replay_html,
)
from dllm_viz.figures.forecast import kalman_forecast_bands
from dllm_viz.figures.heatmaps import (
    confidence_heatmap,
    entropy_heatmap,
    margin_heatmap,
    share_step_axis,
    tspd_gate_heatmap,
)
from dllm_viz.figures.overlays import CellFlags
from dllm_viz.figures.refinement import (
    candidate_history,
    most_revised_position,
    refinement_dumbbell,
    settled_step,
    wasted_refinement_fraction,
)
from dllm_viz.figures.runs import CandidateRuns, candidate_runs, persistence_runs_bar
from dllm_viz.figures.summary import step_series, step_summary_strip
from dllm_viz.figures.tokens import commit_order_heatmap, output_text, token_states, token_strip, token_strip_html
from dllm_viz.figures.training import training_curves
from dllm_viz.figures.views import VIEWS, View, views_for
from dllm_viz.figures.volatility import (
    VOLATILITY_NEEDS,
    volatility_band_heatmap,
    volatility_profile,
    volatility_regions,
)

__all__ = [
    "VIEWS",
    "VOLATILITY_NEEDS",
    "CandidateRuns",
    "CellFlags",
    "PooledGrid",
    "View",
    "branch_divergence_line",
    "candidate_history",
    "candidate_runs",
    "commit_order_heatmap",
    "comparison_replay_figure",
    "comparison_replay_html",
    "confidence_heatmap",
    "decode_gif",
    "entropy_heatmap",
    "figure_html",
    "kalman_forecast_bands",
    "margin_heatmap",
    "most_revised_position",
    "nfe_accuracy_scatter",
    "nfe_bar",
    "output_text",
    "pareto_front",
    "persistence_runs_bar",
    "pool_grid",
    "position_labels",
    "refinement_dumbbell",
    "replay_figure",
    "replay_html",
    "settled_step",
    "share_step_axis",
    "step_series",
    "step_series_lines",
    "step_summary_strip",
    "token_states",
    "token_strip",
    "token_strip_html",
    "training_curves",
    "tspd_gate_heatmap",
    "views_for",
    "volatility_band_heatmap",
    "volatility_profile",
    "volatility_regions",
    "wasted_refinement_fraction",
]
