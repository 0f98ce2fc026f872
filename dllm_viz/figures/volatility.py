"""AdaBlock's three confidence regions per step: plateau, volatility band, low floor (§5.1).

The view reads extras['volatility_region'] (recorded by the AdaBlock sizer every step) and
otherwise classifies the trace itself with `volatility_regions`, the same rule as
`policies.adablock.volatility_region`. It shows the regions as a positions x steps heatmap
with the adaptive windows from trace.window, plus a per-step confidence profile.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from dllm_viz.figures._grid import grid_axes, grid_heatmap, step_grid
from dllm_viz.figures._layout import (
    axis,
    figure,
    masked_before,
    stop_token_ids,
    titled,
    trace_label,
)
from dllm_viz.figures.overlays import block_boundaries, edge_legend
from dllm_viz.figures.tokens import resolve_step
from dllm_viz.policies.extras import VOLATILITY_REGION
from dllm_viz.trace import Trace

PLATEAU, BAND, FLOOR = 0, 1, 2
REGION_NAMES: tuple[str, ...] = ("plateau (committed)", "volatility band", "low floor")
REGION_COLORS: tuple[str, ...] = ("#0072B2", "#E69F00", "#BBBBBB")  # Okabe-Ito blue, orange; grey
# Pooling keeps the most informative region of a bin: band over floor over plateau.
_PRIORITY = np.array([0, 2, 1])  # region code -> priority
_FROM_PRIORITY = np.array([PLATEAU, FLOOR, BAND])


# The band views need the regions a block sizer recorded (AdaBlock's observe); they can derive
# regions for any trace, but only a recorded classification says the decode used them.
VOLATILITY_NEEDS: tuple[str, ...] = (VOLATILITY_REGION,)


def volatility_regions(trace: Trace, *, floor_threshold: float = 0.1) -> np.ndarray:
    """Classify every (step, position) into plateau / band / floor from the trace alone.

    Rule (docs/ALGORITHMS.md §5.1, as `policies.adablock.volatility_region` records it): at step s a
    position already committed before s is plateau (0); a still-masked position whose candidate
    is a stop token (EOS/EoT) or whose confidence is below `floor_threshold` is floor (2); every
    other masked position is in the volatility band (1).

    Args:
        trace: the decode to classify.
        floor_threshold: confidence below which a masked position belongs to the floor.

    Returns:
        [S, L] int8 region codes.

    Raises:
        ValueError: `floor_threshold` is outside [0, 1].
    """
    return _classify(trace, masked_before(trace), trace.candidate, trace.confidence, floor_threshold)


def _classify(trace: Trace, masked: np.ndarray, candidate: np.ndarray, confidence: np.ndarray,
              floor_threshold: float) -> np.ndarray:
    """`volatility_regions`' rule on any slice of the trace's steps (all of them, or one row)."""
    _check_floor(floor_threshold)
    is_stop = np.isin(candidate, stop_token_ids(trace))
    floor = masked & (is_stop | (confidence < floor_threshold))
    return np.where(~masked, PLATEAU, np.where(floor, FLOOR, BAND)).astype(np.int8)


def _check_floor(floor_threshold: float) -> None:
    if not 0.0 <= floor_threshold <= 1.0:
        raise ValueError(f"`floor_threshold` must be in [0, 1], got {floor_threshold}")


def _with_recorded(recorded: np.ndarray, derived: np.ndarray) -> np.ndarray:
    """The recorded codes where defined (rounded, clipped to the three regions), `derived` elsewhere."""
    codes = np.where(np.isfinite(recorded), np.nan_to_num(recorded), derived)
    return np.clip(np.rint(codes), PLATEAU, FLOOR).astype(np.int8)


def trace_regions(trace: Trace, *, floor_threshold: float = 0.1) -> tuple[np.ndarray, str]:
    """Region codes from extras['volatility_region'] when recorded, else `volatility_regions`.

    Returns:
        ([S, L] int8 codes, a word saying where they came from: 'recorded' or 'derived').
    """
    derived = volatility_regions(trace, floor_threshold=floor_threshold)
    if VOLATILITY_REGION in trace.extras:
        return _with_recorded(trace.extras[VOLATILITY_REGION], derived), "recorded"
    return derived, "derived"


def step_regions(trace: Trace, step: int, *, floor_threshold: float = 0.1) -> np.ndarray:
    """[L] region codes at one step: row `step` of `trace_regions`' codes, classifying that row only.

    Why: the profile is redrawn at every scrub, and classifying all S x L cells for one row
    cost ~50 ms on a 1024-position, 2000-step trace.
    """
    derived = _classify(trace, trace.tokens[step] == trace.mask_token_id, trace.candidate[step],
                        trace.confidence[step], floor_threshold)
    if VOLATILITY_REGION in trace.extras:
        return _with_recorded(trace.extras[VOLATILITY_REGION][step], derived)
    return derived


def volatility_band_heatmap(trace: Trace, *, floor_threshold: float = 0.1, show_blocks: bool = True,
                            max_steps: int = 512, max_positions: int = 1024,
                            title: str | None = None) -> go.Figure:
    """Plateau / volatility band / floor of every position at every step, with the windows.

    Args:
        trace: the decode to draw.
        floor_threshold: floor confidence for the fallback classification (no recorded extra).
        show_blocks: overlay the window of every step (the adaptive block boundaries).
        max_steps: rows above this are pooled (a bin shows band over floor over plateau).
        max_positions: columns above this are pooled the same way.
        title: figure title; the default says whether the regions were recorded or derived.

    Returns:
        A figure: one region heatmap (z shape = pooled steps x pooled positions), then the
        block-boundary bar trace when requested.
    """
    regions, source = trace_regions(trace, floor_threshold=floor_threshold)
    grid = step_grid(trace, _PRIORITY[regions].astype(np.int8), how="max", max_steps=max_steps,
                     max_positions=max_positions)
    z = _FROM_PRIORITY[grid.z].astype(np.int8)
    scale = [[f, c] for i, c in enumerate(REGION_COLORS) for f in (i / 3, (i + 1) / 3)]
    traces = [grid_heatmap(
        grid, z=z, zmin=-0.5, zmax=2.5, colorscale=scale, name="region",
        colorbar={"title": {"text": "region"}, "tickvals": [0, 1, 2], "ticktext": list(REGION_NAMES)},
        hovertemplate="position %{x}<br>step %{y}<br>region %{z} (0 plateau, 1 band, 2 floor)<extra></extra>",
    )]
    if show_blocks and trace.num_steps:
        traces.append(block_boundaries(trace, grid, outline="#000000"))  # light regions: a black edge
        traces.append(edge_legend("block boundary", "#000000"))
    default = titled(f"Volatility band ({source}) and adaptive blocks", trace_label(trace), f"NFE {trace.nfe}")
    return figure(traces, title=title or default, **grid_axes(grid))


def volatility_profile(trace: Trace, step: int | None = None, *, floor_threshold: float = 0.1,
                       title: str | None = None) -> go.Figure:
    """Confidence against position at one step, one marker trace per region, window shaded.

    Args:
        trace: the decode to draw.
        step: step index in [0, S-1]; None = the last step.
        floor_threshold: floor confidence for the fallback classification.
        title: figure title; the default names the step.

    Returns:
        Three marker traces (plateau, band, floor; empty ones kept for a stable legend) and one
        filled scatter shading the step's window. A zero-step trace gives empty traces.
    """
    s = resolve_step(trace, step)
    positions = np.arange(trace.gen_length)
    traces = []
    if s >= 0:
        start, end = (int(v) for v in trace.window[s])
        traces.append(go.Scatter(x=[start - 0.5, end - 0.5, end - 0.5, start - 0.5, start - 0.5],
                                 y=[0, 0, 1, 1, 0], fill="toself", mode="lines", name="window",
                                 fillcolor="rgba(0,114,178,0.08)", line={"width": 0},
                                 hovertemplate=f"window [{start}, {end})<extra></extra>"))
    _check_floor(floor_threshold)
    regions = step_regions(trace, s, floor_threshold=floor_threshold) if s >= 0 else None
    for code, (name, color) in enumerate(zip(REGION_NAMES, REGION_COLORS, strict=True)):
        keep = regions == code if regions is not None else np.zeros(trace.gen_length, bool)
        conf = trace.confidence[s][keep] if s >= 0 else np.zeros(0)
        hover = f"position %{{x}}<br>confidence %{{y:.3f}}<extra>{name}</extra>"
        traces.append(go.Scatter(x=positions[keep], y=conf, mode="markers", name=name, hovertemplate=hover,
                                 marker={"color": color, "size": 7, "line": {"width": 0.5, "color": "#333"}}))
    where = "initial canvas" if s < 0 else f"step {s}"
    return figure(traces, title=title or titled(f"Confidence profile at {where}", trace_label(trace)),
                  xaxis=axis("position", range=[-0.5, max(trace.gen_length, 1) - 0.5]),
                  yaxis=axis("confidence", range=[0, 1.02]))
