"""Positions x steps heatmaps of a Trace.

The colour of a cell is the model's confidence in its candidate at that step while the
position is still masked; once committed the cell is left blank, and the commit itself is a
marker, so "still deciding" and "already decided" never share a colour.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from dllm_viz.trace import Trace

CONFIDENCE_SCALE = "Viridis"  # colour-blind safe; set explicitly so Streamlit's theme can't swap it


def position_labels(trace: Trace) -> list[str]:
    """One axis label per generated position: `index:final token` (newlines shown as ⏎)."""
    texts = (trace.token_text(t).replace("\n", "⏎") for t in trace.final_tokens)
    return [f"{i}:{t}" for i, t in enumerate(texts)]


def confidence_heatmap(trace: Trace, *, title: str | None = None, show_commits: bool = True) -> go.Figure:
    """Confidence of each masked position's candidate at each step.

    Args:
        trace: the decode to draw.
        title: figure title; default names the pipeline and NFE.
        show_commits: overlay one marker trace at (position, step) of every commit.

    Returns:
        A figure with one heatmap (z shape = steps x positions) and optionally one scatter.
    """
    masked_before = trace.tokens[:-1] == trace.tokens[0]
    z = np.where(masked_before | trace.committed, trace.confidence, np.nan).astype(np.float32)
    labels = position_labels(trace)
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=np.arange(trace.num_steps), zmin=0.0, zmax=1.0, colorscale=CONFIDENCE_SCALE,
        colorbar={"title": {"text": "confidence"}},
        hovertemplate="position %{x}<br>step %{y}<br>confidence %{z:.3f}<extra></extra>",
        name="confidence",
    ))
    if show_commits and trace.num_steps:
        steps, positions = np.nonzero(trace.committed)
        fig.add_trace(go.Scatter(
            x=[labels[p] for p in positions], y=steps, mode="markers", name="commit",
            marker={"symbol": "square-open", "color": "#d62728", "size": 7},
            hovertemplate="commit %{x} at step %{y}<extra></extra>",
        ))
    fig.update_layout(
        title=title or f"Confidence per position over steps — {trace.meta.get('label', '')}, NFE {trace.nfe}",
        xaxis={"title": {"text": "position"}, "type": "category"},
        yaxis={"title": {"text": "step"}, "autorange": "reversed"},
        margin={"l": 50, "r": 20, "t": 50, "b": 60},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig
