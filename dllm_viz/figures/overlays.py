"""Overlays on a positions x steps heatmap, each ONE plotly trace however many events it shows.

Commit events are one marker scatter, token edits another; block boundaries and volatility-band
edges are one `go.Bar` each: thin vertical bars placed with per-bar `offset`, because the
position axis is categorical (one token label per column) and plotly maps a scatter's numeric x
on a category axis to new categories, so only bar offsets can sit on the edge *between* two
columns. Runs of steps with the same edge are merged into one bar. Hundreds of layout shapes are never used.
Marker overlays draw at most MAX_COMMIT_MARKERS / MAX_EDIT_MARKERS markers: past that, one marker
stands for a block of cells (`_pooling.group_cells`) and its legend entry says so.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import plotly.graph_objects as go

from dllm_viz.figures._edits import MAX_HOVER_EDITS, earlier_line, edit_text
from dllm_viz.figures._grid import StepGrid
from dllm_viz.figures._layout import BAND_EDGE_COLOR, COMMIT_COLOR, EDIT_COLOR, FLAG_COLOR, plotly_text
from dllm_viz.figures._pooling import CellGroups, bin_starts, group_cells
from dllm_viz.trace import Trace

EDGE_WIDTH = 0.1  # bar width in column widths; the outline keeps it >= 1 px when columns are thin
BAND = 1  # volatility_region code of the band (0 plateau, 1 band, 2 floor)

Edge = tuple[int, int, int]  # (position edge, first step, last step)
# Most markers an overlay draws (SVG: the browser slows down past a few thousand). A decode commits
# each position about once, so commits stay one marker per cell up to 4000 positions; edits carry
# hover text, so fewer of them.
MAX_COMMIT_MARKERS = 4000
MAX_EDIT_MARKERS = 2000


def grouped_note(groups: CellGroups) -> str:
    """What a thinned marker trace's legend adds: how many heatmap cells one marker stands for."""
    return "" if groups.factor == 1 else f" (one mark per {groups.factor}x{groups.factor} cells)"


def _first_of_groups(groups: CellGroups) -> np.ndarray:
    """Index of the first item of every group (items come in row-major order)."""
    return np.unique(groups.group, return_index=True)[1]


def commit_markers(trace: Trace, grid: StepGrid, *, max_markers: int = MAX_COMMIT_MARKERS) -> go.Scatter:
    """One marker per pooled cell that holds a commit (max-pool of `trace.committed`).

    Past `max_markers` such cells (edits that re-mask positions make recommits), one marker per
    block of cells, on the block's first commit cell; the legend and hover say so.
    """
    rows, cols = np.nonzero(grid.pool(trace.committed, "any"))
    groups = group_cells(rows, cols, max_markers)
    note = grouped_note(groups)
    if groups.factor > 1:
        first = _first_of_groups(groups)
        rows, cols = rows[first], cols[first]
    return go.Scatter(
        x=[grid.labels[c] for c in cols], y=grid.row_centers[rows], mode="markers", name=f"commit{note}",
        marker={"symbol": "square-open", "color": COMMIT_COLOR, "size": 7, "line": {"width": 2}},
        hovertemplate=f"commit at position %{{x}}<br>step %{{y}}{'<br>' + note.strip() if note else ''}"
                      "<extra></extra>",
    )


class CellFlags(NamedTuple):
    """Cells of a trace's [steps x positions] heatmap that an analysis calls out (for example the
    commits another decode of the same prompt did not make: dllm_viz.divergence.parted_cells):
    the legend name, and a boolean [S, L] array."""

    name: str
    cells: np.ndarray


def flag_markers(flags: CellFlags, grid: StepGrid) -> go.Scatter:
    """One large open circle per pooled cell that holds a flagged cell, drawn around the commit
    squares (so both stay visible).

    Raises:
        ValueError: `flags.cells` is not [steps, positions] of the grid's trace.
    """
    shape = (grid.num_steps, grid.gen_length)
    if np.shape(flags.cells) != shape:
        raise ValueError(f"flags {flags.name!r} must be [steps, positions] = {shape}, got {np.shape(flags.cells)}")
    rows, cols = np.nonzero(grid.pool(np.asarray(flags.cells, dtype=bool), "any"))
    name = plotly_text(flags.name)
    return go.Scatter(
        x=[grid.labels[c] for c in cols], y=grid.row_centers[rows], mode="markers", name=name,
        marker={"symbol": "circle-open", "color": FLAG_COLOR, "size": 15, "line": {"width": 3}},
        hovertemplate=f"{name}: position %{{x}}<br>step %{{y}}<extra></extra>",
    )


def edit_markers(trace: Trace, grid: StepGrid, *, max_markers: int = MAX_EDIT_MARKERS) -> go.Scatter:
    """One marker per pooled cell that holds a token edit; its hover names the cell's edits.

    An edited cell is committed (grey), so the marker is a filled purple x, apart from the
    commits' open vermillion squares; hover reads "position p: edited: 'old' → 'new' at step s",
    the last MAX_HOVER_EDITS edits of the cell after a line counting the earlier ones. Past
    `max_markers` edited cells, one marker per block of cells (on its latest edit), its hover
    first counting the block's edits and naming their positions and steps; the legend says so.
    """
    steps, positions = np.nonzero(trace.edited)  # step order, then position order: Trace.edit_events'
    rows, cols = steps // grid.row_factor, positions // grid.col_factor
    groups = group_cells(rows, cols, max_markers)
    order = np.argsort(groups.group, kind="stable")  # each group's edits together, in step order
    starts = np.flatnonzero(np.diff(groups.group[order], prepend=-1))
    ends = np.append(starts[1:], order.size)[: starts.size].astype(np.int64)
    texts = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        members = order[start:end]
        lines = [earlier_line(end - start - MAX_HOVER_EDITS)] if end - start > MAX_HOVER_EDITS else []
        if groups.factor > 1:
            lines.insert(0, f"{end - start} edits at positions {positions[members].min()}-"
                            f"{positions[members].max()}, steps {steps[members].min()}-{steps[members].max()}")
        for i in members[-MAX_HOVER_EDITS:].tolist():
            event = trace.edit_event(int(steps[i]), int(positions[i]))
            lines.append(f"position {event.position}: {plotly_text(edit_text(trace, event))}")
        texts.append("<br>".join(lines))
    latest = order[ends - 1]
    return go.Scatter(
        x=[grid.labels[c] for c in cols[latest]], y=grid.row_centers[rows[latest]], text=texts, mode="markers",
        name=f"edit{grouped_note(groups)}",
        marker={"symbol": "x", "color": EDIT_COLOR, "size": 9, "line": {"color": "#FFFFFF", "width": 1}},
        hovertemplate="%{text}<extra></extra>",
    )


Span = tuple[int, int]  # [start, end) in positions


def merge_runs(keys: list[Span], steps: list[Span]) -> list[tuple[Span, int, int]]:
    """Merge consecutive (key, step range) items with equal keys into (key, first, last)."""
    merged: list[tuple[Span, int, int]] = []
    for key, (lo, hi) in zip(keys, steps, strict=True):
        if merged and merged[-1][0] == key and merged[-1][2] == lo - 1:
            merged[-1] = (key, merged[-1][1], hi)
        else:
            merged.append((key, lo, hi))
    return merged


def window_edges(trace: Trace) -> list[Edge]:
    """Left and right edge of every window, merged over consecutive steps with the same window."""
    keys = [(int(a), int(b)) for a, b in trace.window]
    runs = merge_runs(keys, [(s, s) for s in range(trace.num_steps)])
    return [(edge, lo, hi) for (a, b), lo, hi in runs for edge in (a, b)]


def band_edges(region: np.ndarray, grid: StepGrid) -> list[Edge]:
    """Outer edges of the volatility band per pooled row, merged over equal consecutive rows."""
    band = grid.pool(np.isclose(np.nan_to_num(region, nan=-1.0), BAND), "any")
    starts = bin_starts(grid.num_steps, grid.row_factor)
    keys: list[Span] = []
    steps: list[tuple[int, int]] = []
    for row, start in enumerate(starts):
        cols = np.flatnonzero(band[row])
        if cols.size == 0:
            continue
        left = int(cols[0]) * grid.col_factor
        right = min((int(cols[-1]) + 1) * grid.col_factor, grid.gen_length)
        keys.append((left, right))
        steps.append((int(start), int(min(start + grid.row_factor, grid.num_steps) - 1)))
    return [(edge, lo, hi) for (a, b), lo, hi in merge_runs(keys, steps) for edge in (a, b)]


def edge_bars(grid: StepGrid, edges: list[Edge], *, name: str, color: str, outline: str) -> go.Bar:
    """One go.Bar drawing each (edge, first step, last step) as a thin vertical bar."""
    placed = [grid.edge_offset(edge) for edge, _, _ in edges]
    return go.Bar(
        x=[grid.labels[col] for col, _ in placed] if grid.labels else [],
        y=[hi - lo + 1 for _, lo, hi in edges], base=[lo - 0.5 for _, lo, _ in edges],
        offset=[off - EDGE_WIDTH / 2 for _, off in placed], width=[EDGE_WIDTH] * len(edges),
        customdata=[[edge, lo, hi] for edge, lo, hi in edges], name=name, orientation="v",
        marker={"color": color, "line": {"color": outline, "width": 1}},
        hovertemplate=f"{name}: edge before position %{{customdata[0]}}<br>"
                      "steps %{customdata[1]}-%{customdata[2]}<extra></extra>",
    )


def block_boundaries(trace: Trace, grid: StepGrid, *, outline: str = "#FFFFFF") -> go.Bar:
    """The window [start, end) of every step as one bar trace of edges (its legend entry: edge_legend).

    Black with a white outline shows on the dark end of Viridis; on light backgrounds (the
    volatility view's regions) pass outline="#000000", where a white outline read as no line.
    """
    bars = edge_bars(grid, window_edges(trace), name="block boundary", color="#000000", outline=outline)
    return bars.update(showlegend=False, legendgroup="block boundary")


def edge_legend(name: str, color: str) -> go.Scatter:
    """A legend-only line for an edge trace: the legend shows a line, as the edges are drawn, not a square."""
    return go.Scatter(x=[None], y=[None], mode="lines", name=name, legendgroup=name,
                      hovertemplate=f"{name}<extra></extra>", line={"color": color, "width": 3})


def volatility_band_edges(region: np.ndarray, grid: StepGrid) -> go.Bar:
    """The outer edges of the volatility band at every step as one bar trace."""
    bars = edge_bars(grid, band_edges(region, grid), name="volatility band edge", color=BAND_EDGE_COLOR,
                     outline="#000000")
    return bars.update(showlegend=False, legendgroup="volatility band edge")
