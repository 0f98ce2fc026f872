"""Positions x steps heatmaps of per-position statistics: confidence, entropy, margin, TSPD gate.

A cell is coloured while its position is still masked at that step; once committed it shows
the grey background, so "still deciding" and "already decided" never share a colour. A token
edit (block refinement replacing a committed token) is marked on its grey cell. Large
traces are pooled to screen resolution (min-pool for confidence-like values, so a bin shows its
hardest token) and quantised to uint8 above a size, which keeps a 1024 x 1024 trace near 1 MB.
Overlays (commits, block boundaries, volatility-band edges) are one trace each (overlays.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from dllm_viz.figures._grid import StepGrid, grid_axes, grid_heatmap, step_grid
from dllm_viz.figures._layout import (
    BAND_EDGE_COLOR,
    CONFIDENCE_SCALE,
    NO_DATA_COLOR,
    STEP_SCALE,
    figure,
    masked_before,
    position_labels,
    step_ticks,
    titled,
    trace_label,
)
from dllm_viz.figures._pooling import QUANT_LEVELS, QUANT_NO_DATA, PoolHow, quantize
from dllm_viz.figures.overlays import (
    CellFlags,
    block_boundaries,
    commit_markers,
    edge_legend,
    edit_markers,
    flag_markers,
    volatility_band_edges,
)
from dllm_viz.policies.extras import TSPD_GATE, VOLATILITY_REGION
from dllm_viz.trace import Trace

__all__ = ["confidence_heatmap", "entropy_heatmap", "margin_heatmap", "position_labels",
           "require_extras", "tspd_gate_heatmap"]

QUANTIZE_ABOVE_CELLS = 1 << 17  # pooled grids larger than this go out as uint8 (docs/UX.md §4)
COLORBAR_THICKNESS = 14  # px; plotly's 30 is a tenth of a half-width chart


@dataclass(frozen=True)
class Quantity:
    """How one [S, L] statistic is pooled and coloured."""

    name: str
    pool: PoolHow
    scale: str
    zmin: float = 0.0
    zmax: float | None = 1.0  # None: the largest value shown
    reverse: bool = False  # True when low values are the "good" (bright) end


CONFIDENCE = Quantity("confidence", "min", CONFIDENCE_SCALE)
ENTROPY = Quantity("entropy", "max", CONFIDENCE_SCALE, zmax=None, reverse=True)
MARGIN = Quantity("margin", "min", STEP_SCALE)
GATE = Quantity("TSPD gate", "min", STEP_SCALE)


def require_extras(trace: Trace, names: tuple[str, ...], *, recorded_by: str) -> None:
    """Raise ValueError naming the extras `trace` lacks and which policy records them."""
    missing = [n for n in names if n not in trace.extras]
    if missing:
        raise ValueError(
            f"trace {trace_label(trace)!r} has no extras {missing} (recorded by {recorded_by}); "
            f"decode with that policy or choose another view. Extras present: {sorted(trace.extras)}"
        )


def _quantized_scale(scale: str, reverse: bool) -> list[list[Any]]:
    """`scale` squeezed onto codes 0..100 of a 0..101 range, with code 101 = no-data grey."""
    stops = plotly.colors.get_colorscale(scale)
    if reverse:
        stops = [[1.0 - f, c] for f, c in reversed(stops)]
    top = QUANT_LEVELS / QUANT_NO_DATA
    return [[f * top, c] for f, c in stops] + [[(top + 1.0) / 2, NO_DATA_COLOR], [1.0, NO_DATA_COLOR]]


def _zmax(spec: Quantity, z: np.ndarray) -> float:
    if spec.zmax is not None:
        return spec.zmax
    finite = z[np.isfinite(z)]
    return float(max(finite.max(initial=spec.zmin), spec.zmin + 1e-6))


def _colour_options(spec: Quantity, grid: StepGrid, use_uint8: bool) -> dict[str, Any]:
    """z, colour scale, colour bar and hover template of the heatmap trace."""
    zmax = _zmax(spec, grid.z)
    pooled = "" if grid.row_factor == grid.col_factor == 1 else f" ({spec.pool} of pooled cells)"
    where = "position %{x}<br>step %{y}<br>"
    # A slim bar titled along its side: titled on top, its two lines took ~115 px of a half-width
    # column's ~330 (Tune at 1024 px) and left the 8 position labels running together.
    bar_title = {"text": f"{spec.name}<br><sup>grey: committed or n/a</sup>", "side": "right"}
    if not use_uint8:
        return {"z": grid.z.astype(np.float32), "zmin": spec.zmin, "zmax": zmax, "colorscale": spec.scale,
                "reversescale": spec.reverse, "colorbar": {"title": bar_title, "thickness": COLORBAR_THICKNESS},
                "hovertemplate": f"{where}{spec.name} %{{z:.3f}}{pooled}<extra></extra>"}
    ticks = np.linspace(0, QUANT_LEVELS, 5)
    if spec.zmin == 0.0 and zmax == 1.0:
        value = f"{spec.name} ≈ %{{z}}%"
    else:
        value = f"{spec.name} ≈ %{{z}}% of {spec.zmin:.3g}..{zmax:.3g}"
    return {
        "z": quantize(grid.z, spec.zmin, zmax), "zmin": 0, "zmax": QUANT_NO_DATA,
        "colorscale": _quantized_scale(spec.scale, spec.reverse),
        "colorbar": {"title": bar_title, "thickness": COLORBAR_THICKNESS, "tickvals": ticks.tolist(),
                     "ticktext": [f"{spec.zmin + t / QUANT_LEVELS * (zmax - spec.zmin):.2g}" for t in ticks]},
        "hovertemplate": f"{where}{value}{pooled}<br>({QUANT_NO_DATA} = committed)<extra></extra>",
    }


def quantity_heatmap(trace: Trace, values: np.ndarray, spec: Quantity, *, title: str | None,
                     show_commits: bool, show_blocks: bool, show_bands: bool, max_steps: int,
                     max_positions: int, quantize_z: bool | None, flags: CellFlags | None = None) -> go.Figure:
    """Shared body of every statistic heatmap; `values` is [S, L], shown only while masked."""
    z = np.where(masked_before(trace), values, np.nan).astype(np.float32)
    grid = step_grid(trace, z, how=spec.pool, max_steps=max_steps, max_positions=max_positions)
    use_uint8 = grid.z.size > QUANTIZE_ABOVE_CELLS if quantize_z is None else quantize_z
    traces = [grid_heatmap(grid, name=spec.name, **_colour_options(spec, grid, use_uint8))]
    drawn = trace.num_steps > 0
    bands = show_bands and drawn and VOLATILITY_REGION in trace.extras
    if show_blocks and drawn:
        traces.append(block_boundaries(trace, grid))
    if bands:
        traces.append(volatility_band_edges(trace.extras[VOLATILITY_REGION], grid))
    if show_commits and drawn:
        traces.append(commit_markers(trace, grid))
    if show_commits and trace.edited.any():
        traces.append(edit_markers(trace, grid))
    if flags is not None:
        traces.append(flag_markers(flags, grid))
    if show_blocks and drawn:  # legend entries last, so the drawn traces keep their order
        traces.append(edge_legend("block boundary", "#000000"))
    if bands:
        traces.append(edge_legend("volatility band edge", BAND_EDGE_COLOR))
    default = titled(f"{spec.name.capitalize()} per position over steps", trace_label(trace), f"NFE {trace.nfe}")
    return figure(traces, title=title or default, plot_bgcolor=NO_DATA_COLOR, **grid_axes(grid))


def confidence_heatmap(trace: Trace, *, title: str | None = None, show_commits: bool = True,
                       show_blocks: bool = True, show_bands: bool = True, max_steps: int = 512,
                       max_positions: int = 1024, quantize: bool | None = None,
                       flags: CellFlags | None = None) -> go.Figure:
    """Confidence of each masked position's candidate at each step (Viridis, 0..1).

    Args:
        trace: the decode to draw.
        title: figure title; the default names the trace label and NFE.
        show_commits: overlay one marker trace at every (position, step) commit and, when the
            trace has token edits, one at every edit (hover: "edited: 'old' → 'new' at step s");
            past overlays.MAX_COMMIT_MARKERS / MAX_EDIT_MARKERS marked cells, one marker per
            block of cells, which its legend entry names.
        show_blocks: overlay the window [start, end) of every step as one bar trace of edges.
        show_bands: overlay the volatility-band edges when the trace has extras['volatility_region'].
        max_steps: rows above this are min-pooled in whole bins of steps.
        max_positions: columns above this are min-pooled in whole bins of positions.
        quantize: send z as uint8 percent codes; None = only when the pooled grid exceeds
            QUANTIZE_ABOVE_CELLS cells (hover then shows whole percents).
        flags: cells to ring in black with their own legend entry (e.g. the commits that differ
            from another decode: dllm_viz.divergence.parted_cells); [S, L] like the trace.

    Returns:
        A figure whose first trace is the heatmap (z shape = pooled steps x pooled positions),
        followed by the requested overlays.

    Raises:
        ValueError: `flags` is not [S, L].
    """
    return quantity_heatmap(trace, trace.confidence, CONFIDENCE, title=title, show_commits=show_commits,
                            show_blocks=show_blocks, show_bands=show_bands, max_steps=max_steps,
                            max_positions=max_positions, quantize_z=quantize, flags=flags)


def entropy_heatmap(trace: Trace, *, title: str | None = None, show_commits: bool = True,
                    show_blocks: bool = True, show_bands: bool = True, max_steps: int = 512,
                    max_positions: int = 1024, quantize: bool | None = None) -> go.Figure:
    """Entropy (nats) of each masked position's distribution at each step; low = bright.

    Same axes, pooling (max-pool: a bin shows its most uncertain token) and overlays as
    `confidence_heatmap`; the colour range runs from 0 to the largest entropy shown.
    """
    return quantity_heatmap(trace, trace.entropy, ENTROPY, title=title, show_commits=show_commits,
                            show_blocks=show_blocks, show_bands=show_bands, max_steps=max_steps,
                            max_positions=max_positions, quantize_z=quantize)


def margin_heatmap(trace: Trace, *, title: str | None = None, show_commits: bool = True,
                   show_blocks: bool = True, show_bands: bool = True, max_steps: int = 512,
                   max_positions: int = 1024, quantize: bool | None = None) -> go.Figure:
    """Top-1 minus top-2 probability of each masked position at each step (Cividis, 0..1).

    Same axes, min-pooling and overlays as `confidence_heatmap`.
    """
    return quantity_heatmap(trace, trace.margin, MARGIN, title=title, show_commits=show_commits,
                            show_blocks=show_blocks, show_bands=show_bands, max_steps=max_steps,
                            max_positions=max_positions, quantize_z=quantize)


TSPD_GATE_NEEDS: tuple[str, ...] = (TSPD_GATE,)


def tspd_gate_heatmap(trace: Trace, *, title: str | None = None, show_commits: bool = True,
                      show_blocks: bool = True, max_steps: int = 512, max_positions: int = 1024,
                      quantize: bool | None = None) -> go.Figure:
    """TSPD controller's fix probability (extras['tspd_gate']) per masked position and step.

    Raises:
        ValueError: the trace has no 'tspd_gate' extra (it was not decoded with TSPD).
    """
    require_extras(trace, (TSPD_GATE,), recorded_by="the TSPD commit rule")
    return quantity_heatmap(trace, trace.extras[TSPD_GATE], GATE, title=title, show_commits=show_commits,
                            show_blocks=show_blocks, show_bands=False, max_steps=max_steps,
                            max_positions=max_positions, quantize_z=quantize)


def share_step_axis(fig: go.Figure, num_steps: int) -> go.Figure:
    """Give a step heatmap the y range [0, num_steps) so several share one step axis.

    The ticks follow the shared range, not the figure's own trace: a 5-step heatmap drawn on a
    128-step axis must not keep one tick per step.
    """
    fig.update_yaxes(range=[max(num_steps, 1) - 0.5, -0.5])
    fig.layout.yaxis.dtick = step_ticks(num_steps).get("dtick")
    return fig
