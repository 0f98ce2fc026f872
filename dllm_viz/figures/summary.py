"""Per-step summary of one trace: what each forward pass achieved and what it cost.

`step_series` computes the 1-D series (pure numpy, also used by compare.py); the strip draws
them as stacked panels on one shared step axis with a unified hover, small enough to redraw
on every rerun with a playhead (the big heatmap stays byte-identical; docs/UX.md §4). Token edits
and post-steps (block refinement) get their bar and markers only in traces that have them.
"""

from __future__ import annotations

import functools

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dllm_viz.figures._layout import (
    EDIT_COLOR,
    OKABE_ITO,
    axis,
    figure,
    masked_before,
    merged,
    nanstat,
    step_ticks,
    titled,
    trace_label,
)
from dllm_viz.trace import Trace

SERIES_NAMES: tuple[str, ...] = (
    "committed", "edited", "post_step", "masked_remaining", "committed_fraction", "mean_confidence", "min_confidence",
    "cumulative_nfe", "cumulative_cost", "cumulative_seconds", "forward_ms", "policy_ms", "engine_ms",
)


def step_series(trace: Trace) -> dict[str, np.ndarray]:
    """Per-step series of a trace, each of length S.

    Returns:
        committed: positions committed at the step.
        edited: committed tokens replaced at the step (block refinement; 0 for other rules).
        post_step: 1 where the step's window had no masked position when it began (a pass that
            could only edit, `Trace.post_steps`), else 0.
        masked_remaining: positions still masked after the step, counted on the canvas (an edit
            that writes the mask back re-opens a position, so this can rise).
        committed_fraction: fraction of gen_length not masked after the step.
        mean_confidence / min_confidence: over the masked positions of the step's window as the
            step began (NaN when none).
        cumulative_nfe: forward passes so far (step + 1).
        cumulative_cost: query positions processed so far over one full pass (prompt +
            gen_length), so cached partial passes count for less than 1.
        cumulative_seconds: wall time of the decode loop so far.
        forward_ms / policy_ms / engine_ms: the step's wall time split into the forward pass,
            the policy's calls and the loop's own bookkeeping. For traces saved before policy
            time was recorded, policy_ms is NaN and engine_ms holds policy + engine.
    """
    committed = trace.tokens_per_step.astype(np.float64)
    # Counted, not gen_length - cumsum(committed): a position committed, re-opened by an edit and
    # committed again counts twice in `committed`, which drove the count below zero.
    remaining = (trace.tokens[1:] == trace.mask_token_id).sum(axis=1).astype(np.float64)
    open_ = masked_before(trace) & trace.in_window
    full_pass = max(trace.prompt_ids.size + trace.gen_length, 1)
    return {
        "committed": committed,
        "edited": trace.edits_per_step.astype(np.float64),
        "post_step": trace.post_steps.astype(np.float64),
        "masked_remaining": remaining,
        "committed_fraction": 1.0 - remaining / max(trace.gen_length, 1),
        "mean_confidence": nanstat(trace.confidence, open_, "mean"),
        "min_confidence": nanstat(trace.confidence, open_, "min"),
        "cumulative_nfe": np.arange(1, trace.num_steps + 1, dtype=np.float64),
        "cumulative_cost": np.cumsum(trace.query_len.astype(np.float64)) / full_pass,
        "cumulative_seconds": np.cumsum(trace.step_seconds),
        "forward_ms": 1e3 * trace.forward_seconds,
        "policy_ms": 1e3 * trace.policy_seconds,
        "engine_ms": 1e3 * (trace.step_seconds - trace.forward_seconds - np.nan_to_num(trace.policy_seconds)),
    }


LEGEND_ROW = 20  # px of one legend entry where the legend stacks its entries (a narrow column)
TITLE_LINE = 18  # px of one more <sup> line of the title


def _line(steps: np.ndarray, y: np.ndarray, name: str, color: str, fmt: str, **extra: object) -> go.Scatter:
    return go.Scatter(x=steps, y=y, mode="lines+markers", name=name, line={"color": color, "width": 1.5},
                      marker={"size": 4}, hovertemplate=f"{name} %{{y:{fmt}}}<extra></extra>", **extra)


def _edit_traces(steps: np.ndarray, series: dict[str, np.ndarray]) -> list[tuple[int, go.Bar | go.Scatter]]:
    """The first panel's edits bar (stacked on the commits) and post-step markers; none without them."""
    out: list[tuple[int, go.Bar | go.Scatter]] = []
    if series["edited"].any():
        out.append((1, go.Bar(x=steps, y=series["edited"], name="edited this step", marker={"color": EDIT_COLOR},
                              hovertemplate="edited %{y}<extra></extra>")))
    post = series["post_step"] > 0
    if post.any():
        top = (series["committed"] + series["edited"])[post]
        out.append((1, go.Scatter(x=steps[post], y=top, mode="markers", name="post-step (window had no masks)",
                                  marker={"symbol": "triangle-down", "size": 9, "color": OKABE_ITO[7]},
                                  cliponaxis=False, hovertemplate="post-step<extra></extra>")))
    return out


@functools.cache
def _panel_layout() -> dict[str, object]:
    """The layout of the five stacked panels sharing one step axis (as a plain dict)."""
    grid = make_subplots(rows=5, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                         row_heights=[0.24, 0.16, 0.24, 0.16, 0.2])
    layout = dict(grid.layout.to_plotly_json())
    layout.pop("template", None)  # the figure's own (finish_options) applies
    return layout


def _axis_name(kind: str, row: int) -> str:
    """Plotly's name of row `row`'s axis: x, x2, ... (yaxis, yaxis2, ... for layout keys)."""
    return kind if row == 1 else f"{kind}{row}"


def step_summary_strip(trace: Trace, *, title: str | None = None, height: int = 620) -> go.Figure:
    """Tokens committed per step, masked remaining, window confidence, cumulative NFE and step time.

    Args:
        trace: the decode to draw.
        title: figure title; the default names the trace, NFE and tokens per step.
        height: figure height in pixels.

    Returns:
        Five stacked panels sharing the step axis (hovermode 'x unified'): a bar of commits per
        step (with edits per step stacked on it and a marker on every post-step, in traces
        that have them; the title then counts both); masked remaining; mean and minimum
        confidence in the window; cumulative NFE and cumulative cost in full-pass equivalents;
        each step's wall time stacked as forward pass, policy and engine bookkeeping (ms).
    """
    series = step_series(trace)
    steps = np.arange(trace.num_steps)
    edit_traces = _edit_traces(steps, series)
    traces = [(1, go.Bar(x=steps, y=series["committed"], name="committed this step", marker={"color": OKABE_ITO[0]},
                         hovertemplate="committed %{y}<extra></extra>")),
              *edit_traces,
              (2, _line(steps, series["masked_remaining"], "masked remaining", OKABE_ITO[7], ".0f")),
              (3, _line(steps, series["mean_confidence"], "mean confidence in window", OKABE_ITO[2], ".3f")),
              (3, _line(steps, series["min_confidence"], "min confidence in window", OKABE_ITO[3], ".3f")),
              (4, _line(steps, series["cumulative_nfe"], "cumulative NFE", OKABE_ITO[4], ".0f")),
              (4, _line(steps, series["cumulative_cost"], "cumulative cost (full passes)", OKABE_ITO[1], ".2f",
                        visible="legendonly"))]
    policy_known = bool(np.isfinite(series["policy_ms"]).all())
    for key, name, color in (("forward_ms", "forward pass ms", OKABE_ITO[5]),
                             ("policy_ms", "policy ms", OKABE_ITO[6]),
                             ("engine_ms", "engine ms" if policy_known else "policy + engine ms", OKABE_ITO[7])):
        if key == "policy_ms" and not policy_known:
            continue  # an older trace: policy time was not recorded apart from the engine's
        traces.append((5, go.Bar(x=steps, y=series[key], name=name, marker={"color": color},
                                 hovertemplate=f"{name} %{{y:.2f}}<extra></extra>")))
    # The five-panel grid is the same for every trace: made once (make_subplots is most of the
    # build time, which every Step paid), then each trace names its panel's axes itself.
    edits, posts = int(series["edited"].sum()), int(series["post_step"].sum())
    panels = {f"{_axis_name('yaxis', row)}": axis(name) for row, name in
              # two short lines: "commits, edits" ran down into the masked panel's title at 1024 px
              enumerate(("commits<br>+ edits" if edits else "commits", "masked", "confidence", "NFE", "time (ms)"),
                        start=1)}
    panels["yaxis3"]["range"] = [0, 1.02]
    panels["xaxis5"] = axis("step", range=[-0.5, max(trace.num_steps, 1) - 0.5], **step_ticks(trace.num_steps))
    tps = f"{trace.summary()['tokens_per_step']:.2f} tokens/step"
    default = titled("Per-step summary", trace_label(trace), f"NFE {trace.nfe}", tps)
    top = {}
    if edits or posts:
        # A block-refinement trace: its longer label, then its counts on a line of their own. On one line
        # the counts were cut off a half-width chart (at 1024 px, after "0.68 token").
        counts = " · ".join(c for c in (tps, f"{edits} edits" if edits else "", f"{posts} post-steps" if posts else "")
                            if c)
        default = titled("Per-step summary", trace_label(trace), f"NFE {trace.nfe}") + f"<br><sup>{counts}</sup>"
        top = {"margin": {"t": 80 + TITLE_LINE}}
    # Each legend entry the edits add takes a row in a narrow column: the panels keep their height (they
    # shrank until the axis titles ran into each other).
    extra = LEGEND_ROW * len(edit_traces) + (TITLE_LINE if top else 0)
    return figure([t.update(xaxis=_axis_name("x", row), yaxis=_axis_name("y", row)) for row, t in traces],
                  title=title or default, height=height + extra, hovermode="x unified", bargap=0.1, barmode="stack",
                  **merged(_panel_layout(), panels, top))
