"""Showing one trace: metrics, output, the step scrubber, token strip, heatmap and policy views.

Shared by Decode (live), Traces (a loaded file) and Learn. The big heatmap is built once per
trace version and never carries the playhead, so scrubbing resends only the small companion
charts (UX.md §4 item 4); the playhead lives in the token strip and the per-step summary.
"""

from __future__ import annotations

import html
from functools import partial

import plotly.graph_objects as go
import streamlit as st

from app_ui.common import cached_figure, metrics_row, warn_if_cut_off
from dllm_viz import figures
from dllm_viz.figures.forecast import MAX_PANELS
from dllm_viz.trace import Trace

PLAYHEAD_COLOR = "#D55E00"


def scrubber(trace: Trace, version: int, prefix: str, *, follow: bool = True) -> int:
    """The step slider; returns the chosen step.

    With `follow`, it jumps to the newest step whenever the trace version changes (a new step
    arrived); otherwise it keeps its step, clamped to the trace.
    """
    key, last = f"{prefix}t", max(trace.num_steps - 1, 0)
    current = int(st.session_state.get(key, last))
    if follow and st.session_state.get(f"{key}_version") != version:
        current = last
    st.session_state[f"{key}_version"] = version
    if trace.num_steps <= 1:
        st.caption(f"Step {last} of {trace.num_steps}")
        return last
    back, slider, forward = st.columns([1, 12, 1], vertical_alignment="bottom")
    if back.button("◀", key=f"{prefix}back", help="previous step (←)", shortcut="Left"):
        current -= 1
    if forward.button("▶", key=f"{prefix}fwd", help="next recorded step"):
        current += 1
    # Written every run: the slider's identity changes with its range, and this keeps its place.
    st.session_state[key] = min(max(current, 0), last)
    return int(slider.slider("Step", 0, last, key=key, help="scrub through the recorded forward passes"))


def with_playhead(fig: go.Figure, step: int) -> go.Figure:
    """A copy of a small step-axis figure with a vertical line at `step` through all its panels.

    One paper-height shape on the shared step axis: add_vline drew one per panel and cost
    twice as much on every Step and scrub.
    """
    line = {"type": "line", "xref": "x", "yref": "paper", "x0": step, "x1": step, "y0": 0, "y1": 1,
            "line": {"dash": "dot", "color": PLAYHEAD_COLOR, "width": 2}}
    return go.Figure(fig).update_layout(shapes=[*fig.layout.shapes, line])


def trace_view(trace: Trace, version: int, *, prefix: str = "", baseline: Trace | None = None) -> None:
    """Everything about one trace; `prefix` keeps widget keys apart between pages."""
    stop = trace.meta.stop_reason
    if not trace.is_complete:
        st.warning(f"Partial trace ({stop}): {trace.nfe} forward passes recorded, "
                   f"{int((trace.commit_step < 0).sum())} positions still masked (▒ in the output).")
    if trace.num_steps == 0:
        metrics_row(trace, baseline=baseline)
        return
    # The heatmap comes first, so the first screen after Run shows it on a 1280x720 laptop; the
    # output sits beside it and the numbers, scrubber and token strip follow.
    heat, side = st.columns(2)
    heat.plotly_chart(cached_figure(f"{prefix}heatmap", version, lambda: figures.confidence_heatmap(trace)),
                      key=f"{prefix}heatmap", theme=None)
    with side:
        warn_if_cut_off(trace)
        st.markdown(f"**Output** · {trace.meta.label}")
        st.code(figures.output_text(trace) or " ", language=None, wrap_lines=True)
        summary_slot = st.empty()  # filled once the scrubber has chosen the step
    metrics_row(trace, baseline=baseline)
    step = scrubber(trace, version, prefix)
    st.html(figures.token_strip_html(trace, step))
    summary = cached_figure(f"{prefix}summary", version, lambda: figures.step_summary_strip(trace))
    summary_slot.plotly_chart(with_playhead(summary, step), key=f"{prefix}summary", theme=None)
    views = {view.name: partial(view.build, trace) for view in figures.views_for(trace)}
    labels = [html.unescape(label) for label in figures.position_labels(trace)]
    if all(name in trace.extras for name in figures.VOLATILITY_NEEDS):
        st.plotly_chart(figures.volatility_profile(trace, step), key=f"{prefix}profile", theme=None)
    choice = st.segmented_control("More views", list(views), default=list(views)[-1], key=f"{prefix}view",
                                  bind="query-params" if not prefix else None)
    if choice is not None:
        build, name = views[choice], f"{prefix}view:{choice}"
        if choice == "Kalman bands":  # the user picks the positions (a heatmap click is not reported)
            picked = st.multiselect("Positions to show", list(range(trace.gen_length)), key=f"{prefix}kalman_pos",
                                    max_selections=MAX_PANELS, format_func=lambda p: labels[p],
                                    placeholder="default: CE's early commits, then spread over the order")
            build, name = (lambda: figures.kalman_forecast_bands(trace, positions=picked or None)), f"{name}:{picked}"
        try:
            fig = cached_figure(name, version, build)
        except ValueError as exc:  # e.g. no position was tracked by CE yet in a partial trace
            st.info(f"The {choice} view has nothing to show yet: {exc}")
        else:
            st.plotly_chart(fig, key=f"{prefix}view_chart", theme=None)
