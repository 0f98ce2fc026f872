"""Showing one trace: metrics, output, the step scrubber, token strip, heatmap and policy views.

Shared by Decode (live) and Traces (a loaded file). Every chart is built once per trace version
and drawn by app_ui.live_chart, which keeps it mounted: a Step redraws each chart once (diffed),
scrubbing only moves the summary's playhead; the big heatmap never carries the playhead
(UX.md §4 item 4). A click on a heatmap cell moves the scrubber to its step and, where the
trace has Kalman bands, picks its column for them.
"""

from __future__ import annotations

import html
from functools import partial

import streamlit as st

from app_ui.common import cached_figure, metrics_row, warn_if_cut_off
from app_ui.live_chart import Click, live_chart
from app_ui.live_html import live_html
from dllm_viz import figures
from dllm_viz.figures.forecast import MAX_PANELS
from dllm_viz.figures.views import KALMAN_VIEW
from dllm_viz.trace import Trace


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


def clicked_cell(click: Click, trace: Trace) -> tuple[int, int] | None:
    """(position, step) of a click on the confidence heatmap, or None if it names no cell.

    Columns are `index:token` labels (`a-b:...` when pooled: the bin's first position); rows are
    real step units (a pooled row's centre), clamped to the trace.
    """
    head = click.x.split(":", 1)[0].split("-", 1)[0]
    if not head.isdigit() or click.y is None or trace.num_steps == 0:
        return None
    position = min(int(head), trace.gen_length - 1)
    return position, min(max(round(click.y), 0), trace.num_steps - 1)


def toggled(picked: list[int], position: int, limit: int = MAX_PANELS) -> list[int]:
    """`picked` with `position` removed if it was there, else added last (the oldest dropped past `limit`)."""
    if position in picked:
        return [p for p in picked if p != position]
    return [*picked, position][-limit:]


def follow_click(click: Click | None, trace: Trace, prefix: str, has_kalman: bool) -> None:
    """A heatmap click moves the scrubber to the clicked step; with Kalman bands on offer it also
    adds the clicked position to the bands shown (a second click on it removes it)."""
    cell = None if click is None else clicked_cell(click, trace)
    if cell is None:
        return
    position, step = cell
    st.session_state[f"{prefix}t"] = step
    if has_kalman:
        st.session_state[f"{prefix}kalman_pos"] = toggled(list(st.session_state.get(f"{prefix}kalman_pos", [])),
                                                          position)
        st.session_state[f"{prefix}view"] = KALMAN_VIEW


def trace_view(trace: Trace, version: int, *, prefix: str = "", baseline: Trace | None = None) -> None:
    """Everything about one trace; `prefix` keeps widget keys apart between pages."""
    stop = trace.meta.stop_reason
    # Every element keeps its place from one Step to the next (a notice that comes and goes sits
    # in its own container), so the live charts below are never remounted.
    notice = st.container()
    if not trace.is_complete:
        notice.warning(f"Partial trace ({stop}): {trace.nfe} forward passes recorded, "
                       f"{int((trace.commit_step < 0).sum())} positions still masked (▒ in the output).")
    if trace.num_steps == 0:
        metrics_row(trace, baseline=baseline)
        return
    # The heatmap comes first, so the first screen after Run shows it on a 1280x720 laptop; the
    # output sits beside it and the numbers, scrubber and token strip follow.
    views = {view.name: partial(view.build, trace) for view in figures.views_for(trace)}
    heat, side = st.columns(2)
    with heat:
        click = live_chart(cached_figure(f"{prefix}heatmap", version, lambda: figures.confidence_heatmap(trace)),
                           key=f"{prefix}heatmap", clickable=True)
        st.caption("Click a cell: the step scrubber jumps to its row" + (
            "; its column joins the Kalman bands (click again to drop it)." if KALMAN_VIEW in views else "."))
    follow_click(click, trace, prefix, KALMAN_VIEW in views)
    with side:
        with st.container():  # the cut-off warning comes and goes in its own place
            warn_if_cut_off(trace)
        st.markdown(f"**Output** · {trace.meta.label}")
        st.code(figures.output_text(trace) or " ", language=None, wrap_lines=True)
        summary_box = st.container()  # filled once the scrubber has chosen the step
    metrics_row(trace, baseline=baseline)
    step = scrubber(trace, version, prefix)
    live_html(figures.token_strip_html(trace, step), key=f"{prefix}token_strip")
    with summary_box:
        live_chart(cached_figure(f"{prefix}summary", version, lambda: figures.step_summary_strip(trace)),
                   key=f"{prefix}summary", playhead=step)
    if all(name in trace.extras for name in figures.VOLATILITY_NEEDS):
        live_chart(figures.volatility_profile(trace, step), key=f"{prefix}profile")
    choice = st.segmented_control("More views", list(views), default=list(views)[-1], key=f"{prefix}view",
                                  bind="query-params" if not prefix else None)
    if choice is not None:
        build, name = views[choice], f"{prefix}view:{choice}"
        if choice == KALMAN_VIEW:  # the user picks the positions: here, or by clicking a heatmap column
            labels = [html.unescape(label) for label in figures.position_labels(trace)]
            picked = st.multiselect("Positions to show", list(range(trace.gen_length)), key=f"{prefix}kalman_pos",
                                    max_selections=MAX_PANELS, format_func=lambda p: labels[p],
                                    placeholder="click heatmap columns, or default: CE's early commits, "
                                                "then spread over the order")
            build, name = (lambda: figures.kalman_forecast_bands(trace, positions=picked or None)), f"{name}:{picked}"
        try:
            fig = cached_figure(name, version, build)
        except ValueError as exc:  # e.g. no position was tracked by CE yet in a partial trace
            st.info(f"The {choice} view has nothing to show yet: {exc}")
        else:
            live_chart(fig, key=f"{prefix}view_chart")
