"""Exports that return strings: standalone HTML of any figure, and an animated trace replay.

The replay is a plotly animation (client-side frames, play/pause buttons, a step slider) of
the token canvas step by step, downsampled to at most `max_frames` steps and `max_positions`
cells so the file stays small. Nothing here writes files; callers save or serve the string.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import plotly.graph_objects as go

from dllm_viz.figures._layout import finish_layout, finish_options, merged, trace_label
from dllm_viz.figures._pooling import pool_axis, pool_factor
from dllm_viz.figures.tokens import (
    EARLIER,
    MASKED,
    grid_height,
    grid_layout,
    grid_traces,
    grid_width,
    state_colorscale,
    state_legend,
    state_text_colors,
    token_states,
)
from dllm_viz.trace import Trace

PlotlyJs = Literal["inline", "cdn"]
# Pooled cells keep the most eventful state: new commits (low confidence first), then earlier
# commits, then masked. _PRIORITY[state] ranks a state; _FROM_PRIORITY maps the rank back.
_PRIORITY = np.array([0, 4, 3, 2, 1])
_FROM_PRIORITY = np.array([MASKED, EARLIER, 3, 2, 1])


def figure_html(fig: go.Figure, *, plotlyjs: PlotlyJs = "inline", div_id: str = "dllm-viz-figure",
                auto_play: bool = False) -> str:
    """A standalone HTML page showing `fig`.

    Args:
        fig: any plotly figure.
        plotlyjs: 'inline' embeds plotly.js (works offline, ~4.5 MB); 'cdn' links it.
        div_id: id of the figure's <div> (fixed, so the same figure gives the same HTML).
        auto_play: start an animated figure's frames on load.

    Returns:
        The HTML document as a string.

    Raises:
        ValueError: `plotlyjs` is not 'inline' or 'cdn'.
    """
    if plotlyjs not in ("inline", "cdn"):
        raise ValueError(f"`plotlyjs` must be 'inline' or 'cdn', got {plotlyjs!r}")
    page = fig.to_html(full_html=True, include_plotlyjs=True if plotlyjs == "inline" else "cdn",
                       div_id=div_id, auto_play=auto_play, config={"displaylogo": False})
    return str(page)


def frame_steps(num_steps: int, max_frames: int) -> np.ndarray:
    """At most `max_frames` evenly spread steps, always including the last ([-1] if no steps)."""
    if max_frames < 1:
        raise ValueError(f"`max_frames` must be >= 1, got {max_frames}")
    if num_steps == 0:
        return np.array([-1])
    count = min(max_frames, num_steps)
    return np.unique(np.rint(np.linspace(0, num_steps - 1, count)).astype(np.int64))


def _frame_data(trace: Trace, step: int, factor: int, width: int) -> list[go.Heatmap | go.Scatter]:
    """Grid traces of the canvas after `step` (-1 = initial), positions pooled by `factor`."""
    states = token_states(trace, None if step < 0 else step)
    if factor == 1:
        codes, texts, colors = states.state, states.text, state_text_colors(states)
    else:
        codes = _FROM_PRIORITY[pool_axis(_PRIORITY[states.state][None, :], factor, 1, "max")[0]]
        texts, colors = [""] * codes.size, ["#111111"] * codes.size
    return grid_traces(codes, texts, colors, width=width, zmin=-0.5, zmax=4.5,
                       colorscale=state_colorscale(), showscale=False, name="token state")


def _controls(names: list[str], frame_ms: int) -> dict[str, object]:
    """Play/pause buttons and a step slider driving frames named `names`.

    Heatmap frames need `redraw: True` to repaint; pausing only stops the frame loop.
    """
    play = {"frame": {"duration": frame_ms, "redraw": True}, "fromcurrent": True,
            "transition": {"duration": 0}}
    pause = {"frame": {"duration": 0, "redraw": False}, "mode": "immediate", "transition": {"duration": 0}}
    jump = {"frame": {"duration": 0, "redraw": True}, "mode": "immediate", "transition": {"duration": 0}}
    return {
        "updatemenus": [{"type": "buttons", "direction": "left", "x": 0, "y": -0.05, "xanchor": "left",
                         "yanchor": "top", "showactive": False,
                         "buttons": [{"label": "▶ play", "method": "animate", "args": [None, play]},
                                     {"label": "❚❚ pause", "method": "animate", "args": [[None], pause]}]}],
        "sliders": [{"active": 0, "x": 0.2, "len": 0.8, "y": -0.05, "yanchor": "top",
                     "currentvalue": {"prefix": "step "},
                     "steps": [{"label": n, "method": "animate", "args": [[n], jump]} for n in names]}],
    }


def replay_figure(trace: Trace, *, max_frames: int = 64, max_positions: int = 512, tokens_per_row: int = 32,
                  frame_ms: int = 250, title: str | None = None) -> go.Figure:
    """An animated replay of the token canvas, one frame per (sampled) step.

    Args:
        trace: the decode to replay.
        max_frames: most frames; steps are sampled evenly, the last step always included.
        max_positions: most cells per frame; longer canvases are pooled (token text is then
            left out and each cell shows the most eventful state of its positions).
        tokens_per_row: cells per wrapped row.
        frame_ms: milliseconds per frame when playing.
        title: figure title; the default names the trace and the colour legend.

    Returns:
        A figure whose data is the first frame, with `frames` named by step, play/pause buttons
        and a slider. A zero-step trace gives one frame of the initial canvas.
    """
    if max_positions < 1:
        raise ValueError(f"`max_positions` must be >= 1, got {max_positions}")
    factor = pool_factor(trace.gen_length, max_positions)
    cells = -(-trace.gen_length // factor)
    width = grid_width(cells, tokens_per_row)
    steps = frame_steps(trace.num_steps, max_frames)
    names = ["initial" if s < 0 else str(s) for s in steps]
    # Frames as plain dicts of traces validated when made: plotly validated each frame's traces
    # twice more (go.Frame, then the figure), half of a 64-frame replay's build.
    frames = [{"data": [part.to_plotly_json() for part in _frame_data(trace, int(s), factor, width)], "name": n}
              for s, n in zip(steps, names, strict=True)]
    pooled = "" if factor == 1 else f", {factor} positions per cell"
    default = f"Replay: {trace_label(trace)}, NFE {trace.nfe}{pooled}<br><sup>{state_legend()}</sup>"
    layout = merged(grid_layout(), _controls(names, frame_ms),
                    finish_options(title or default, grid_height(cells, width) + 60))
    return go.Figure(data=frames[0]["data"], frames=frames, layout=layout, _validate=False)


def replay_html(trace: Trace, *, max_frames: int = 64, max_positions: int = 512, tokens_per_row: int = 32,
                frame_ms: int = 250, plotlyjs: PlotlyJs = "inline") -> str:
    """`replay_figure` as a self-contained HTML page (plotly.js inline by default).

    Args:
        trace: the decode to replay.
        max_frames: most frames (see replay_figure).
        max_positions: most cells per frame (see replay_figure).
        tokens_per_row: cells per wrapped row.
        frame_ms: milliseconds per frame when playing.
        plotlyjs: 'inline' (offline, self-contained) or 'cdn'.

    Returns:
        The HTML document as a string.
    """
    fig = replay_figure(trace, max_frames=max_frames, max_positions=max_positions,
                        tokens_per_row=tokens_per_row, frame_ms=frame_ms)
    return figure_html(fig, plotlyjs=plotlyjs)


def comparison_replay_figure(traces: list[Trace], *, max_frames: int = 64, max_positions: int = 256,
                             tokens_per_row: int = 32, frame_ms: int = 250) -> go.Figure:
    """Several decodes of one prompt replayed together, one canvas per row, on one step axis.

    Frame s shows every canvas after step s; a decode that has already finished holds its last
    canvas, so a fast policy visibly finishes while dense is still filling. Play / pause and a
    step slider as in replay_figure.

    Raises:
        ValueError: no traces, or gen lengths that differ (one prompt, one canvas size).
    """
    if not traces or len({t.gen_length for t in traces}) != 1:
        raise ValueError(f"give one or more traces of one gen length, got {[t.gen_length for t in traces]}")
    from plotly.subplots import make_subplots

    factor = pool_factor(traces[0].gen_length, max_positions)
    cells = -(-traces[0].gen_length // factor)
    width = grid_width(cells, tokens_per_row)
    longest = max(t.num_steps for t in traces)
    steps = frame_steps(longest, max_frames)
    names = ["initial" if s < 0 else str(s) for s in steps]

    def frame(step: int) -> list[go.Heatmap | go.Scatter]:
        data = []
        for row, trace in enumerate(traces, start=1):
            shown = step if step < 0 else min(step, trace.num_steps - 1)
            axes = {"xaxis": f"x{row}" if row > 1 else "x", "yaxis": f"y{row}" if row > 1 else "y"}
            data += [part.update(**axes) for part in _frame_data(trace, shown, factor, width)]
        return data

    titles = [f"{trace_label(t)}: NFE {t.nfe}" for t in traces]
    fig = make_subplots(rows=len(traces), cols=1, subplot_titles=titles, vertical_spacing=0.3 / len(traces))
    frames = [go.Frame(data=frame(int(s)), name=n) for s, n in zip(steps, names, strict=True)]
    fig.add_traces(frames[0].data)
    fig.frames = frames
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(autorange="reversed", showgrid=False, zeroline=False, showticklabels=False)
    fig.update_layout(plot_bgcolor="#FFFFFF", **_controls(names, frame_ms))
    height = len(traces) * (grid_height(cells, width) - 40) + 120
    return finish_layout(fig, title=f"Replay on one step axis<br><sup>{state_legend()}</sup>", height=height)


def comparison_replay_html(traces: list[Trace], *, plotlyjs: PlotlyJs = "inline", **options: int) -> str:
    """`comparison_replay_figure` as a self-contained HTML page (plotly.js inline: works offline)."""
    return figure_html(comparison_replay_figure(traces, **options), plotlyjs=plotlyjs)
