"""Training curves of a controller (the Train page): loss and validation scores per epoch.

A line with no marker drew nothing for a 1-epoch run (one point), so runs of a few epochs get
markers; the epoch axis keeps to whole epochs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from dllm_viz.figures._layout import OKABE_ITO, axis, figure, plotly_text, step_ticks

MARKERS_UP_TO = 30  # points a series; longer ones are drawn as plain lines


def training_curves(history: Sequence[Mapping[str, float]], *, x: str = "epoch",
                    title: str | None = None) -> go.Figure:
    """One line per column of `history` but `x` (one row a point), over whole-number `x` ticks.

    Args:
        history: rows like {"epoch": 1, "train loss": 0.7, "val precision": 0.5}; a column
            missing from a row leaves a gap.
        x: the column on the horizontal axis (whole numbers: epochs, fits).
        title: figure title; default "Training".

    Returns:
        A figure with one scatter trace per series, markers when a series has at most
        MARKERS_UP_TO points.
    """
    xs = [row.get(x) for row in history]
    names = list(dict.fromkeys(key for row in history for key in row if key != x))
    mode = "lines+markers" if len(xs) <= MARKERS_UP_TO else "lines"
    lines = [go.Scatter(x=xs, y=[row.get(name) for row in history], mode=mode, name=plotly_text(name),
                        line={"color": OKABE_ITO[i % len(OKABE_ITO)], "width": 2}, marker={"size": 8},
                        hovertemplate=f"{plotly_text(x)} %{{x}}<br>{plotly_text(name)} %{{y:.4f}}<extra></extra>")
             for i, name in enumerate(names)]
    span = len(set(v for v in xs if v is not None))
    return figure(lines, title=title or "Training", hovermode="x unified",
                  xaxis=axis(x, tickformat="d", **step_ticks(span)), yaxis=axis("value"))
