"""The positions x steps canvas shared by every heatmap: pooled cells, labels and coordinates.

A `StepGrid` holds pooled values plus the geometry overlays need: column categories (one
`index:token` label per position, or `a-b` per pooled bin, sent once per column, never per cell)
and the y axis in real step units (pooled rows are drawn `row_factor` steps tall). Knows nothing
about which quantity is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go

from dllm_viz.figures._layout import axis, plotly_text, step_ticks, token_texts
from dllm_viz.figures._pooling import PooledGrid, PoolHow, bin_starts, pool_2d, pool_grid
from dllm_viz.trace import Trace

_MAX_LABEL_CHARS = 16


@dataclass(frozen=True)
class StepGrid:
    """Pooled [steps x positions] values of one trace with their axis geometry.

    Attributes:
        z: pooled values, [rows, cols].
        labels: category label of each pooled column.
        row_factor: steps per pooled row.
        col_factor: positions per pooled column.
        num_steps: S of the trace.
        gen_length: L of the trace.
    """

    z: np.ndarray
    labels: list[str]
    row_factor: int
    col_factor: int
    num_steps: int
    gen_length: int

    @property
    def row_centers(self) -> np.ndarray:
        """Step coordinate of the middle of each pooled row."""
        starts = bin_starts(self.num_steps, self.row_factor)
        ends = np.minimum(starts + self.row_factor, self.num_steps)
        return np.asarray((starts + ends - 1) / 2.0, dtype=np.float64)

    def pool(self, values: np.ndarray, how: PoolHow) -> np.ndarray:
        """Pool another [S, L] array of the same trace onto this grid's cells."""
        return pool_2d(values, self.row_factor, self.col_factor, how)

    def edge_offset(self, edge: int) -> tuple[int, float]:
        """Column index and offset from its centre (in column widths) of a position edge.

        Edge e is the boundary just before position e (e = L is the right end).
        """
        num_cols = max(len(self.labels), 1)
        col = min(edge // self.col_factor, num_cols - 1)
        start = col * self.col_factor
        width = min(start + self.col_factor, self.gen_length) - start
        return col, (edge - start) / max(width, 1) - 0.5

    def step_range(self) -> list[float]:
        """Reversed y range (step 0 at the top) covering every step."""
        return [max(self.num_steps, 1) - 0.5, -0.5]


def pooled_labels(texts: list[str], factor: int) -> list[str]:
    """Column labels from per-position display texts: `i:text`, or `a-b:joined text` per bin.

    Labels are escaped for plotly and unique (they start with the position range).
    """
    out = []
    for start in range(0, len(texts), factor):
        chunk = texts[start:start + factor]
        text = "".join(chunk)
        if factor > 1 and len(text) > _MAX_LABEL_CHARS:
            text = text[: _MAX_LABEL_CHARS - 1] + "…"
        where = str(start) if factor == 1 else f"{start}-{start + len(chunk) - 1}"
        out.append(f"{where}:{plotly_text(text)}")
    return out


def step_grid(trace: Trace, values: np.ndarray, *, how: PoolHow, max_steps: int,
              max_positions: int) -> StepGrid:
    """Pool a [S, L] array of `trace` to at most `max_steps` x `max_positions` cells."""
    pooled: PooledGrid = pool_grid(values, max_rows=max_steps, max_cols=max_positions, how=how)
    texts = token_texts(trace, trace.final_tokens)
    return StepGrid(z=pooled.z, labels=pooled_labels(texts, pooled.col_factor),
                    row_factor=pooled.row_factor, col_factor=pooled.col_factor,
                    num_steps=trace.num_steps, gen_length=trace.gen_length)


def grid_heatmap(grid: StepGrid, z: np.ndarray, **options: Any) -> go.Heatmap:
    """A go.Heatmap over the grid's columns and real-step rows (uniform bricks, no gaps)."""
    return go.Heatmap(z=z, x=grid.labels, y0=float(grid.row_centers[0]) if grid.num_steps else 0.0,
                      dy=float(grid.row_factor), zsmooth=False, **options)


MAX_POSITION_TICKS = 8  # a half-width heatmap on a 1280-px laptop has ~210 px for its columns
NICE_TICK_STEPS = (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 40, 50, 64, 100, 128, 200, 256, 500, 512, 1000, 1024)


def position_ticks(labels: list[str]) -> dict[str, Any]:
    """Every k-th column labelled by its position only, upright, so labels never overlap.

    k is the first round step (NICE_TICK_STEPS) giving at most MAX_POSITION_TICKS labels: 0, 16,
    32, ... on a 128-position canvas (16 labels piled up on a laptop-width heatmap). The full
    `index:token` label stays the category, so hover still shows the token.
    """
    need = -(-len(labels) // MAX_POSITION_TICKS)
    step = next((k for k in NICE_TICK_STEPS if k >= need), max(need, 1))
    shown = labels[::step]
    return {"tickmode": "array", "tickvals": shown, "ticktext": [label.split(":", 1)[0] for label in shown],
            "tickangle": 0}


def grid_axes(grid: StepGrid) -> dict[str, Any]:
    """Layout of a grid chart: category position axis (one label per column), reversed step axis."""
    step_title = "step" if grid.row_factor == 1 else f"step (rows pooled x{grid.row_factor})"
    position_title = "position" if grid.col_factor == 1 else f"position (pooled x{grid.col_factor})"
    return {
        "xaxis": axis(position_title, type="category", categoryorder="array", categoryarray=grid.labels,
                      range=[-0.5, max(len(grid.labels), 1) - 0.5], showgrid=False, **position_ticks(grid.labels)),
        "yaxis": axis(step_title, range=grid.step_range(), showgrid=False, zeroline=False,
                      **(step_ticks(grid.num_steps) if grid.row_factor == 1 else {})),
        "barmode": "overlay",
    }
