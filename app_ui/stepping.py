"""Driving a Stepper from a page: one pass, run to the end with Stop, and publishing its trace.

Kept out of pages/decode.py so the page stays layout only; everything here reads and writes
st.session_state["stepper"] / ["trace"] and takes the model lock for every forward pass.
"""

from __future__ import annotations

import streamlit as st

from app_ui.autosave import AUTOSAVE_EVERY, autosave
from app_ui.common import model_turn, set_trace
from dllm_viz.stepper import Stepper


def show_latest() -> None:
    """Make the session's trace hold the stepper's steps so far, when it has new ones.

    A click during Run stops that run with Streamlit's StopException (runner.fastReruns) at its
    next yield point, after which it can no longer write session state. Its steps live on in
    the stepper, so every run (and every Play tick) starts by building the trace from it.
    """
    stepper: Stepper | None = st.session_state.get("stepper")
    if stepper is None or not stepper.nfe or st.session_state.get("trace_of") == (id(stepper), stepper.nfe):
        return
    with model_turn():  # an interrupted run may still be finishing its last step
        trace = stepper.trace()
    set_trace(trace)
    st.session_state["trace_of"] = (id(stepper), trace.nfe)
    autosave(trace, force=stepper.done)


def advance(stepper: Stepper) -> str | None:
    """One forward pass under the model lock (which also sets this session's thread count: model_turn);
    returns an error message if it failed."""
    try:
        with model_turn():
            stepper.step()
    except ValueError as exc:  # e.g. missing controller weights, prompt too long for the model
        st.session_state.pop("stepper", None)
        return f"Cannot decode: {exc}"
    show_latest()
    return None


def run_to_end(stepper: Stepper) -> None:
    """Decode to the end with a progress bar and a Stop button; a stopped run keeps its steps."""
    stop = st.empty()
    stop.button("Stop", key="stop", help="stop after the current forward pass; the steps so far are kept")
    bar = st.progress(stepper.progress, text=f"NFE {stepper.nfe}")
    try:
        with model_turn():
            while stepper.step() is not None:
                if stepper.nfe % AUTOSAVE_EVERY == 0:  # a reload mid-run keeps the steps so far
                    autosave(stepper.trace())
                bar.progress(stepper.progress, text=f"NFE {stepper.nfe}")  # a yield point: Stop lands here
    except ValueError as exc:
        st.error(f"Cannot decode: {exc}")
        st.session_state.pop("stepper", None)
    show_latest()
    bar.empty()
    stop.empty()
