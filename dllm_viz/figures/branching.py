"""The figure of a counterfactual fork: where two branches of one decode part, on one step axis.

Takes plain arrays (dllm_viz.branching.Branches computes them), so figures stay free of torch.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from dllm_viz.figures._layout import OKABE_ITO, axis, finish_layout, plotly_text, step_ticks


def branch_divergence_line(divergence: np.ndarray, *, fork_step: int, nfe: tuple[int, int],
                           labels: tuple[str, str] = ("recorded", "fork"), title: str | None = None) -> go.Figure:
    """Positions whose canvas differs between the branches after each step of the shared axis.

    Args:
        divergence: [T+1] count of differing positions after each shared-axis step (row 0 = start).
        fork_step: the step at which the fork left the recorded decode (a dashed line).
        nfe: forward passes of (recorded, fork) in all; each branch's end is marked.
        labels: names of the two branches for the legend and the end marks.
        title: figure title; the default says what is plotted.

    Raises:
        ValueError: `divergence` is empty or not 1-D (an end mark had no point to sit on), or an
            NFE is negative.
    """
    divergence = np.asarray(divergence)
    if divergence.ndim != 1 or divergence.size == 0:
        raise ValueError(f"`divergence` must be a 1-D count per shared-axis step with row 0 the start, got shape "
                         f"{divergence.shape}; pass Branches.divergence()")
    if min(nfe) < 0:
        raise ValueError(f"`nfe` must be two pass counts >= 0, got {nfe}")
    steps = np.arange(divergence.size)
    fig = go.Figure(go.Scatter(x=steps, y=divergence, mode="lines", line={"color": OKABE_ITO[0], "width": 2},
                               name="positions that differ",
                               hovertemplate="after step %{x}: %{y} positions differ<extra></extra>"))
    for i, (label, end) in enumerate(zip(labels, nfe, strict=True)):
        fig.add_trace(go.Scatter(x=[end], y=[int(divergence[min(end, divergence.size - 1)])], mode="markers",
                                 marker={"size": 11, "color": OKABE_ITO[i + 1], "symbol": "diamond"},
                                 name=f"{plotly_text(label)} ends (NFE {end})",
                                 hovertemplate=f"{plotly_text(label)}: NFE {end}<extra></extra>"))
    fig.add_vline(x=fork_step, line_dash="dash", line_color="#555555",
                  annotation_text=f"fork at step {fork_step}", annotation_position="top left")
    fig.update_layout(xaxis=axis("step (shared by both branches)", **step_ticks(int(steps.size))),
                      yaxis=axis("positions that differ", rangemode="tozero"))
    return finish_layout(fig, title=title or "Where the branches part")  # legend under the axis title
