"""Decode: one prompt under one policy, run to the end, one forward pass per Step, or played live.

Run shows a progress bar and a Stop button; every progress update is a yield point, so Stop
(or any click) ends the run between steps and the steps so far are kept as a partial trace.
Step (→) runs exactly one forward pass; Play/Pause (Space) steps on a timer. The trace panel
(app_ui.trace_panel: Step, the scrubber, charts, numbers, views) is one component in one
fragment, so a Step or a Play tick reruns only it (not the sidebar, the form or the buttons).
Run, Play, Reset and the speed sit above the fragment: each needs a full rerun anyway (Run's
Stop button must lie outside the fragment to interrupt it; Play's timer is fixed when the
fragment is declared). The decode in progress (engine iterator + TraceBuilder) lives in
st.session_state["stepper"].
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_ui.branch import branch_panel, fork_elsewhere
from app_ui.common import (
    canvas_limit,
    check_prompt,
    controller_dir,
    current_model,
    decode_config,
    other_model,
    prompt_input,
    require_app_frame,
)
from app_ui.stepping import advance, run_to_end, show_latest
from app_ui.trace_panel import trace_panel
from app_ui.widgets import controller_choices, gen_length_input, policy_form
from dllm_viz.stepper import Stepper

SPEEDS = {"slow": 1.0, "normal": 0.5, "fast": 0.2}


def settings_label() -> str:
    """One line naming the chosen sample, rule and gen length (the first line in the settings)."""
    chosen = [str(st.session_state.get("sample") or ""), str(st.session_state.get("rule") or "threshold"),
              f"gen {st.session_state.get('gen') or 64}"]
    return " · ".join(c for c in chosen if c)


require_app_frame()
st.title("Decode")
st.caption("Watch a masked diffusion LM fill its canvas. Every setting is in the address bar: copy it to share "
           "this view. Keys: → one step, Space play/pause, ← scrub back.")

adapter = current_model()
# Run, Step and Play fold the settings away (fold_settings writes the expander's state), so on a
# 1280x720 laptop the first screen after Run shows the heatmap, not the form; a click reopens them.
with st.expander("Prompt and policy", expanded=True, key="settings", on_change="rerun"):
    st.caption(settings_label())
    prompt = prompt_input(bind=True)
    gen_length = gen_length_input("gen", default=64, bind=True, limit=canvas_limit(adapter, prompt))
    spec = policy_form(bind=True, weights=controller_choices(controller_dir()), adapter=adapter,
                       gen_length=gen_length)
signature: tuple[Any, ...] = (st.session_state.get("model"), st.session_state.get("device"), prompt, gen_length,
                              st.session_state.get("seed"), st.session_state.get("temperature"), repr(spec))


def ready(*, continue_ok: bool, errors: Any = st) -> Stepper | None:
    """The session's decode for the current settings (new if needed), or None after an error
    (shown in `errors`: in the panel, its errors box, so the panel keeps its place)."""
    current: Stepper | None = st.session_state.get("stepper")
    if continue_ok and current is not None and not current.done and current.signature == signature:
        return current
    if adapter is None:
        return None
    try:
        stepper = Stepper.start(adapter, check_prompt(prompt), spec.pipeline(), decode_config(gen_length), signature)
    except ValueError as exc:
        errors.error(f"Cannot decode: {exc}")
        return None
    st.session_state["stepper"] = stepper
    return stepper


def set_playing(playing: bool) -> None:
    """Play or Pause, as the button showed it when clicked: bound to the label, not a toggle, so a
    click that Streamlit replays into a second run (a Play tick queued behind it) cannot undo itself."""
    st.session_state["playing"] = playing
    fold_settings()


def fold_settings(action: str = "") -> None:
    """Run, Step and Play fold the settings away (the user can reopen them).

    The expander lies outside the panel fragment, so an open one folds only on a full rerun: the
    panel asks for one, and that rerun does the clicked `action` (so its errors stay on screen).
    """
    if st.session_state.get("settings", True):
        st.session_state["folding"] = action
    st.session_state["settings"] = False


def request_run() -> None:
    """Run to end happens in the full rerun this click starts, above the panel: its Stop button
    must lie outside the fragment, since a click inside one never interrupts the run in progress."""
    st.session_state["run_requested"] = True
    st.session_state["settings"] = False


def request_step() -> None:
    """The panel's Step (or →): the pass runs in the fragment's run that follows (its errors show)."""
    st.session_state["step_requested"] = True
    fold_settings("step")


def reset() -> None:
    for key in ("stepper", "trace", "trace_of", "playing"):
        st.session_state.pop(key, None)


def play_interval() -> float | None:
    """Seconds between Play ticks for the current state (None: not playing)."""
    return SPEEDS[st.session_state.get("speed", "normal")] if st.session_state.get("playing") else None


def page_is_stale(step: bool) -> bool:
    """True when this run of the panel must become a full rerun: the Play timer is fixed when the
    fragment is declared (Play, Pause, Reset and the speed change it), or a Step must fold open
    settings."""
    return play_interval() != TICK or (step and "folding" in st.session_state)


def play_tick() -> None:
    """One forward pass per timer tick; at the end (or on an error) stop playing with a full rerun."""
    stepper: Stepper | None = st.session_state.get("stepper")
    error = "" if stepper is None or stepper.done else advance(stepper)
    if error is None and stepper is not None and not stepper.done:
        return
    st.session_state["playing"] = False
    st.session_state["play_error"] = error
    st.rerun()  # a full rerun turns the timer off (and shows any error)


def landing() -> None:
    """What a first-time visitor needs: what this is, three steps to a first decode, where to learn."""
    with st.container(border=True):
        st.markdown(
            "**A masked diffusion language model does not write left to right.** It starts from a canvas of "
            "masks and fills it over a few forward passes, in any order. This page runs the model one pass at "
            "a time and shows what a decoding rule commits at every step.\n\n"
            "1. Pick a sample prompt (or type your own) under *Prompt and policy*.\n"
            "2. Pick a commit rule: *threshold* is Fast-dLLM's, *fixed_steps* is LLaDA's dense baseline.\n"
            "3. Press **Run to end** (or **Step**, → , for one pass) and read the heatmap: one row per pass, "
            "one column per position.")
        st.page_link("pages/learn.py", label="New to diffusion LMs? Start with Learn (6 short chapters)",
                     icon=":material/school:")


playing = bool(st.session_state.get("playing"))
controls = st.columns([1.3, 1.3, 1, 2.4], vertical_alignment="bottom")
controls[0].button("Run to end", type="primary", key="run", disabled=adapter is None, on_click=request_run,
                   help="decode to the end (continues a stepped decode with the same settings)")
controls[1].button("Pause" if playing else "Play", key="play", shortcut="Space", on_click=set_playing,
                   args=(not playing,), disabled=adapter is None, help="step on a timer (Space)")
controls[2].button("Reset", key="reset", on_click=reset, help="forget the decode in progress")
controls[3].select_slider("Play speed", list(SPEEDS), value="normal", key="speed")
if playing and ready(continue_ok=True) is None:
    st.session_state["playing"] = False
if st.session_state.pop("run_requested", False) and (stepper := ready(continue_ok=True)) is not None:
    run_to_end(stepper)
TICK = play_interval()


@st.fragment(run_every=TICK)
def panel() -> None:
    """The trace panel: Step, scrubbing and every Play tick rerun only this fragment (the sidebar,
    the settings form and the buttons above stay as they are, in the server and in the browser)."""
    playing = bool(st.session_state.get("playing"))
    step = st.session_state.pop("step_requested", False)
    if page_is_stale(step):
        st.rerun()
    step = step or st.session_state.pop("folding", None) == "step"  # the Step that asked for this full rerun
    errors = st.container()  # always here, so the panel below keeps its place in the page
    if error := st.session_state.pop("play_error", None):
        errors.error(error)
    notices: list[dict[str, str]] = []
    held: Stepper | None = st.session_state.get("stepper")
    shown = st.session_state.get("trace")
    models = other_model(shown.meta.model.name_or_path if shown is not None and shown.meta.model else None, adapter)
    if models is not None and not (step or playing):  # the sidebar's model changed under this decode
        notices.append({"kind": "info", "text": f"This decode was made with the model {models[0]!r}, not the loaded "
                                                f"{models[1]!r}: Step, Play and Run start a new one on it."})
    elif held is not None and held.signature != signature and not (step or playing):
        notices.append({"kind": "info", "text": "Settings changed since this decode started: Step, Play and Run "
                                                "start a new one."})
    if step and (stepper := ready(continue_ok=True, errors=errors)) is not None and (error := advance(stepper)):
        errors.error(error)
    show_latest()
    if playing:
        play_tick()
    trace = st.session_state.get("trace")
    version = st.session_state.get("trace_version", 0)
    trace_panel(trace, version, on_step=request_step, can_step=adapter is not None, notices=notices)
    if trace is None:
        landing()
    elif adapter is not None and trace.is_complete and not playing and fork_elsewhere(adapter, trace) is None:
        branch_panel(adapter, trace, version)  # not for another model's decode: the fork would be refused


panel()
