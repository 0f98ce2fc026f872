"""What the trace views share between pages: the Streamlit step scrubber (Tune) and what a click
on the confidence heatmap does (app_ui.trace_panel on Decode and Traces): the scrubber jumps to
the clicked row and, where the trace has Kalman bands, its column is picked for them.
"""

from __future__ import annotations

import streamlit as st

from app_ui.live_chart import Click
from dllm_viz.figures.forecast import MAX_PANELS
from dllm_viz.figures.views import KALMAN_VIEW
from dllm_viz.trace import Trace


def remembered_step(trace: Trace, version: int, prefix: str, *, follow: bool = True) -> int:
    """The step kept under `{prefix}t`, clamped to the trace and written back.

    With `follow`, it jumps to the newest step whenever the trace version changes (a new step
    arrived); otherwise it keeps its step. Shared by the Streamlit slider here (Tune) and the
    trace panel's scrubber (app_ui.trace_panel, Decode and Traces).
    """
    key, last = f"{prefix}t", max(trace.num_steps - 1, 0)
    current = int(st.session_state.get(key, last))
    if follow and st.session_state.get(f"{key}_version") != version:
        current = last
    st.session_state[f"{key}_version"] = version
    st.session_state[key] = min(max(current, 0), last)
    return int(st.session_state[key])


def scrubber(trace: Trace, version: int, prefix: str, *, follow: bool = True) -> int:
    """The step slider; returns the chosen step (`remembered_step`, moved by ◀ ▶ and the slider)."""
    key, last = f"{prefix}t", max(trace.num_steps - 1, 0)
    current = remembered_step(trace, version, prefix, follow=follow)
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
        toggle_kalman(prefix, position)
        st.session_state[f"{prefix}view"] = KALMAN_VIEW


def toggle_kalman(prefix: str, position: int) -> None:
    """Add `position` to the Kalman bands shown (`{prefix}kalman_pos`), or drop it if it is there."""
    key = f"{prefix}kalman_pos"
    st.session_state[key] = toggled(list(st.session_state.get(key, [])), position)
