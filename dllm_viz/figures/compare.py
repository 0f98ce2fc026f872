"""Figures over several decodes: shared-axis step series, NFE bars, NFE-vs-accuracy Pareto.

Runs with different step counts are put on one axis by resampling each per-step series onto
decode progress in [0, 1] (step s of S sits at (s + 1) / S), as diffusers PR #14164 does for
its side-by-side animations. Knows nothing about how the traces or sweep results were made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import plotly.graph_objects as go

from dllm_viz.figures._layout import (
    OKABE_ITO,
    axis,
    display_text,
    figure,
    finish_layout,
    plotly_text,
    titled,
    trace_label,
)
from dllm_viz.figures.summary import SERIES_NAMES, step_series
from dllm_viz.trace import Trace

SweepRecord = tuple[str, float, float]  # (label, nfe, accuracy)


def unique_labels(traces: Sequence[Trace]) -> list[str]:
    """meta.label of each trace, repeated labels numbered ('#2', '#3', ...), every one distinct.

    Distinct even when a label already looks numbered ('a', 'a', 'a #2'): two equal names put two
    bars on one category of `nfe_bar` and gave two legend entries one name.
    """
    taken: set[str] = set()
    out = []
    for trace in traces:
        base = label = trace_label(trace)
        number = 1
        while label in taken:
            number += 1
            label = f"{base} #{number}"
        taken.add(label)
        out.append(label)
    return out


def resample_progress(values: np.ndarray, num_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Resample a per-step series onto `num_points` evenly spaced progress values in [0, 1].

    Step s of S is at progress (s + 1) / S; before the first step the first value holds.

    Returns:
        (progress grid, resampled values); both empty for an empty series.
    """
    if num_points < 2:
        raise ValueError(f"`num_points` must be >= 2, got {num_points}")
    if values.size == 0:
        return np.zeros(0), np.zeros(0)
    grid = np.linspace(0.0, 1.0, num_points)
    return grid, np.interp(grid, np.arange(1, values.size + 1) / values.size, values)


def _check_traces(traces: Sequence[Trace]) -> None:
    if not traces:
        raise ValueError("pass at least one trace to compare")
    lengths = sorted({t.gen_length for t in traces})
    if len(lengths) > 1:
        raise ValueError(f"traces to compare must share gen_length, got {lengths}; decode them with the "
                         "same gen_length")


def step_series_lines(traces: Sequence[Trace], *, series: str = "committed_fraction",
                      x: Literal["progress", "step"] = "progress", num_points: int = 101,
                      title: str | None = None) -> go.Figure:
    """One line per trace of a per-step series, on one shared axis.

    Args:
        traces: the decodes to compare (same gen_length).
        series: a key of `summary.step_series` (SERIES_NAMES).
        x: 'progress' resamples every trace onto `num_points` values of progress in [0, 1];
            'step' plots raw step indices (runs end at their own NFE).
        num_points: resampling resolution for x='progress'.
        title: figure title; the default names the series.

    Returns:
        One scatter line per trace, legend labels from meta.label.

    Raises:
        ValueError: no traces, different gen_lengths, or an unknown `series` / `x`.
    """
    _check_traces(traces)
    if series not in SERIES_NAMES or x not in ("progress", "step"):
        raise ValueError(f"`series` must be one of {SERIES_NAMES} and `x` 'progress' or 'step', "
                         f"got {series!r}, {x!r}")
    lines = []
    for i, (trace, label) in enumerate(zip(traces, unique_labels(traces), strict=True)):
        values = step_series(trace)[series]
        if x == "progress":
            xs, ys = resample_progress(values, num_points)
        else:
            xs, ys = np.arange(values.size), values
        lines.append(go.Scatter(x=xs, y=ys, mode="lines", name=f"{label} (NFE {trace.nfe})",
                                line={"color": OKABE_ITO[i % len(OKABE_ITO)], "width": 2},
                                hovertemplate=f"{label}<br>{x} %{{x:.2f}}<br>{series} %{{y:.3f}}<extra></extra>"))
    x_title = "decode progress (step / NFE)" if x == "progress" else "step"
    return figure(lines, title=title or f"{series.replace('_', ' ').capitalize()} over decoding",
                  hovermode="x unified", xaxis=axis(x_title), yaxis=axis(series.replace("_", " ")))


def nfe_bar(traces: Sequence[Trace], *, title: str | None = None) -> go.Figure:
    """NFE of each trace as one bar chart; hover adds wall time and tokens per step.

    Args:
        traces: the decodes to compare (any gen_lengths).
        title: figure title.

    Returns:
        One go.Bar with a bar per trace, labelled from meta.label.

    Raises:
        ValueError: no traces.
    """
    if not traces:
        raise ValueError("pass at least one trace to compare")
    summaries = [t.summary() for t in traces]
    bars = go.Bar(
        x=unique_labels(traces), y=[t.nfe for t in traces], text=[t.nfe for t in traces], name="NFE",
        marker={"color": [OKABE_ITO[i % len(OKABE_ITO)] for i in range(len(traces))]},
        customdata=[[s["seconds"], s["tokens_per_step"]] for s in summaries],
        hovertemplate="%{x}<br>NFE %{y}<br>%{customdata[0]:.2f} s, %{customdata[1]:.2f} tokens/step"
                      "<extra></extra>",
    )
    return figure([bars], title=title or "Forward passes per policy", xaxis=axis("policy"),
                  yaxis=axis("NFE (forward passes)"))


def pareto_front(points: Any) -> np.ndarray:
    """Indices of the NFE-vs-accuracy Pareto front (fewer NFE and higher accuracy are better).

    A point is on the front when no other point has NFE <= and accuracy >= with at least one
    strict; identical points are all kept. Points with a NaN are never on it.

    Args:
        points: [N, 2] array-like of (nfe, accuracy).

    Returns:
        Indices into `points`, sorted by NFE ascending (then accuracy descending).

    Raises:
        ValueError: `points` is not N x 2.
    """
    arr = np.asarray(points, dtype=np.float64)
    if arr.size == 0:
        arr = arr.reshape(0, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"`points` must be N x 2 (nfe, accuracy), got shape {arr.shape}")
    ok = np.asarray(np.isfinite(arr).all(axis=1), dtype=bool)
    nfe, acc = arr[:, 0], arr[:, 1]
    no_worse = (nfe[None, :] <= nfe[:, None]) & (acc[None, :] >= acc[:, None]) & ok[None, :]
    better = (nfe[None, :] < nfe[:, None]) | (acc[None, :] > acc[:, None])
    front = np.flatnonzero(ok & ~(no_worse & better).any(axis=1))
    return front[np.lexsort((-acc[front], nfe[front]))]


def sweep_records(records: Any) -> tuple[list[str], np.ndarray]:
    """(labels, [N, 2] nfe/accuracy) from (label, nfe, accuracy) tuples or a DataFrame."""
    if hasattr(records, "columns"):
        missing = [c for c in ("label", "nfe", "accuracy") if c not in records.columns]
        if missing:
            raise ValueError(f"the sweep DataFrame lacks columns {missing}; it needs label, nfe, accuracy")
        rows = list(zip(records["label"], records["nfe"], records["accuracy"], strict=True))
    else:
        rows = [tuple(r) for r in records]
    if any(len(r) != 3 for r in rows):
        raise ValueError("each sweep record must be (label, nfe, accuracy)")
    try:
        arr = np.array([[r[1], r[2]] for r in rows], dtype=np.float64).reshape(-1, 2)
    except (TypeError, ValueError):
        raise ValueError(f"each sweep record's nfe and accuracy must be numbers, got "
                         f"{[(r[1], r[2]) for r in rows][:5]}") from None
    acc = arr[:, 1]
    outside = acc[np.isfinite(acc) & ((acc < 0) | (acc > 1))]
    if outside.size:
        # The accuracy axis is fixed to [0, 1]: a percentage put every point off the chart.
        raise ValueError(f"sweep accuracy must be a fraction in [0, 1], got {outside[:5].tolist()}; "
                         "divide percentages by 100")
    return [str(r[0]) for r in rows], arr


# Label placement works in plot-normalised coordinates ([0, 1] on each axis) of a nominal plot
# area. The figure's height is fixed, so only the width can differ in the app; a wider chart
# spreads the points further apart while the label boxes keep their pixel size, so labels that
# clear each other at the nominal width clear each other at any larger width.
SCATTER_HEIGHT = 420
PLOT_PX = (560.0, 280.0)  # nominal plot area (width, height) inside SCATTER_HEIGHT's margins
LABEL_FONT = 11
CHAR_WIDTH = 0.62  # average glyph width / font size (Arial-like fonts average ~0.55)
LINE_HEIGHT = 1.3  # box height / font size
MARKER_PX = 9
_GAP_PX = 3.0
# Candidate label spots, as (dx, dy) in units of (box width / 2 + gap, box height / 2 + gap) from
# the point: above, below, right, left, then the four diagonals.
_SPOTS = ((0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (-1, 1), (1, -1), (-1, -1))


def label_box_size(text: str, font_size: float = LABEL_FONT) -> tuple[float, float]:
    """Estimated (width, height) of a one-line label in plot-normalised units, from its length."""
    return (len(text) * CHAR_WIDTH * font_size / PLOT_PX[0], LINE_HEIGHT * font_size / PLOT_PX[1])


def _overlaps(box: tuple[float, float, float, float], others: list[tuple[float, float, float, float]]) -> bool:
    x0, y0, x1, y1 = box
    return any(x0 < b[2] and b[0] < x1 and y0 < b[3] and b[1] < y1 for b in others)


def place_labels(points: np.ndarray, sizes: Sequence[tuple[float, float]],
                 priority: Sequence[int]) -> list[tuple[float, float] | None]:
    """Greedy label placement: each label's centre offset from its point, or None when it cannot fit.

    Points are taken in `priority` order; each label goes to the first candidate spot (above,
    below, right, left, diagonals) whose box stays inside the plot and clears every marker and
    every label placed so far. A label with no free spot is dropped (the caller keeps it in the
    hover), so crowded sweeps show fewer labels instead of a pile of overprinted ones.

    Args:
        points: [N, 2] point positions in plot-normalised coordinates.
        sizes: (width, height) of each label in the same units (label_box_size).
        priority: point indices, most important first; points not listed get no label.

    Returns:
        Per point, the (dx, dy) of its label's centre from the point, or None.
    """
    mx, my = MARKER_PX / PLOT_PX[0] / 2, MARKER_PX / PLOT_PX[1] / 2
    gx, gy = _GAP_PX / PLOT_PX[0], _GAP_PX / PLOT_PX[1]
    taken = [(x - mx, y - my, x + mx, y + my) for x, y in points]
    out: list[tuple[float, float] | None] = [None] * len(points)
    for i in priority:
        (x, y), (w, h) = points[i], sizes[i]
        for sx, sy in _SPOTS:
            dx, dy = sx * (w / 2 + mx + gx), sy * (h / 2 + my + gy)
            box = (x + dx - w / 2, y + dy - h / 2, x + dx + w / 2, y + dy + h / 2)
            if box[0] >= 0 and box[1] >= 0 and box[2] <= 1 and box[3] <= 1 and not _overlaps(box, taken):
                taken.append(box)
                out[i] = (dx, dy)
                break
    return out


def _x_range(nfe: np.ndarray) -> list[float]:
    """NFE axis range with room either side for the labels of the extreme points."""
    finite = nfe[np.isfinite(nfe)]
    if finite.size == 0:
        return [0.0, 1.0]
    lo, hi = float(finite.min()), float(finite.max())
    pad = max((hi - lo) * 0.15, 1.0)
    return [lo - pad, hi + pad]


def nfe_accuracy_scatter(records: Sequence[SweepRecord] | Any, *, title: str | None = None,
                         show_labels: bool = True) -> go.Figure:
    """Sweep results as NFE against accuracy, with the Pareto front drawn as a staircase.

    Labels are annotations placed by `place_labels` so they never overprint: Pareto-front
    points first (the runs a reader compares), then the rest by NFE; a label that finds no free
    spot is left to the hover, which always names every point in full.

    Args:
        records: (label, nfe, accuracy) tuples, or a pandas DataFrame with those columns.
        title: figure title.
        show_labels: write the labels that fit next to their points.

    Returns:
        Two traces: all points (markers) and the Pareto front (one line through its points).

    Labels are shown as display text (newlines as ⏎), escaped: plotly renders markup in hover
    texts and annotations.

    Raises:
        ValueError: a record is not (label, nfe, accuracy), the DataFrame lacks a column, a value
            is not a number, or an accuracy lies outside [0, 1] (a percentage).
    """
    raw, arr = sweep_records(records)
    labels = [plotly_text(display_text(label)) for label in raw]  # hover and annotations render markup
    front = pareto_front(arr)
    x_range, y_range = _x_range(arr[:, 0]), [-0.08, 1.12]
    fig = go.Figure(go.Scatter(
        x=arr[:, 0], y=arr[:, 1], text=labels, mode="markers", name="run",
        marker={"color": OKABE_ITO[0], "size": MARKER_PX},
        hovertemplate="%{text}<br>NFE %{x:.1f}<br>accuracy %{y:.3f}<extra></extra>",
    ))
    fig.add_trace(go.Scatter(
        x=arr[front, 0], y=arr[front, 1], text=[labels[i] for i in front], mode="lines+markers",
        line={"shape": "hv", "color": OKABE_ITO[3], "width": 2}, name="Pareto front",
        marker={"symbol": "circle-open", "size": 14, "color": OKABE_ITO[3]},
        hovertemplate="Pareto: %{text}<br>NFE %{x:.1f}<br>accuracy %{y:.3f}<extra></extra>",
    ))
    hidden = 0
    if show_labels and labels:
        finite = np.flatnonzero(np.isfinite(arr).all(axis=1))
        normed = np.column_stack([(arr[:, 0] - x_range[0]) / (x_range[1] - x_range[0]),
                                  (arr[:, 1] - y_range[0]) / (y_range[1] - y_range[0])])
        on_front = {int(i) for i in front}
        rest = [int(i) for i in finite[np.argsort(arr[finite, 0], kind="stable")] if int(i) not in on_front]
        offsets = place_labels(normed, [label_box_size(t) for t in raw], [int(i) for i in front] + rest)
        hidden = sum(offsets[i] is None for i in finite)
        for i, offset in enumerate(offsets):
            if offset is None:
                continue
            fig.add_annotation(x=arr[i, 0], y=arr[i, 1], text=labels[i], showarrow=False,
                               xshift=offset[0] * PLOT_PX[0], yshift=offset[1] * PLOT_PX[1],
                               xanchor="center", yanchor="middle", font={"size": LABEL_FONT})
    # Accuracy is a fraction: a fixed axis instead of one that autoranges around the labels.
    fig.update_layout(xaxis=axis("NFE (fewer is better)", range=x_range), yaxis=axis("accuracy", range=y_range))
    shown = f"{front.size} of {len(labels)} on the front"
    default = (titled("NFE vs accuracy", shown, f"{hidden} crowded labels on hover") if hidden
               else f"NFE vs accuracy: {shown}")
    return finish_layout(fig, title=title or default, height=SCATTER_HEIGHT)
