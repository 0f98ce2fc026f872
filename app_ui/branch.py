"""The "Fork this decode" panel: branch a finished decode at a step and diff the two branches.

Layout only: dllm_viz.branching runs the fork through the engine and computes the divergence;
figures.branch_divergence_line draws it. The fork's settings are a step, a commit rule with a
threshold, and optionally a token (typed as text; its first token id) forced at a position.
"""

from __future__ import annotations

import streamlit as st

from app_ui.common import app_roots, diff_html, model_turn
from app_ui.live_chart import live_chart
from dllm_viz import figures
from dllm_viz.branching import Branches, Fork, fork_decode
from dllm_viz.models import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.roots import redact
from dllm_viz.trace import Trace

# block_refinement: a block-diffusion model's own rule (its threshold is the commit threshold).
RULES = ("threshold", "fixed_steps", "cora", "factor", "block_refinement")
THRESHOLD_OF = {"threshold": "threshold", "block_refinement": "commit_threshold"}


def branch_panel(adapter: ModelAdapter, trace: Trace, version: int, prefix: str = "") -> None:
    """Fork controls and, once forked, both branches on one step axis with their outputs diffed.

    `prefix` keeps each page's widgets and held fork apart (Decode and Traces both show the
    panel, and their trace versions count independently, so one page must not show the other's fork).
    """
    with st.expander("Fork this decode (counterfactual branch)"):
        st.caption("Keep the first k forward passes of this decode, then continue under another rule or "
                   "threshold, or with a token forced at a position, and see where the two branches part.")
        a, b, c = st.columns(3)
        at = int(a.number_input("Fork after step k", 0, max(trace.num_steps - 1, 0), min(2, trace.num_steps - 1),
                                key=f"{prefix}fork_step"))
        rule = str(b.selectbox("Continue with", RULES, key=f"{prefix}fork_rule"))
        threshold = float(c.slider("threshold", 0.05, 1.0, 0.5, 0.05, key=f"{prefix}fork_threshold",
                                   disabled=rule not in THRESHOLD_OF,
                                   help="threshold's threshold; block_refinement's commit_threshold (its other "
                                        "settings are the recorded decode's when it ran block_refinement)"))
        d, e = st.columns(2)
        position = d.number_input("Force a position (optional)", 0, trace.gen_length - 1, value=None,
                                  key=f"{prefix}fork_position", placeholder="none")
        text = e.text_input("…to this token (text)", key=f"{prefix}fork_token", disabled=position is None)
        if st.button("Fork", key=f"{prefix}fork_run", type="primary"):
            run_fork(adapter, trace, version, at, rule, threshold, position, text, prefix)
        held = st.session_state.get(f"{prefix}fork_result")
        if held is not None and held[0] == version and held[1].original is trace:
            show_branches(held[1], prefix)


def run_fork(adapter: ModelAdapter, trace: Trace, version: int, at: int, rule: str, threshold: float,
             position: int | None, text: str, prefix: str = "") -> None:
    """Run the fork under the model lock and keep it for this trace version (or show why not).

    The fork keeps the recorded blocks: aligned ones (a block-diffusion model's geometry) stay aligned,
    others become fixed blocks of the recorded length (one block where it does not divide the canvas).
    A fork of an aligned decode used to continue on fixed blocks starting at the prompt's end, across
    the model's attention blocks.
    """
    recorded = trace.meta.pipeline.get("block") or {}
    block = int(recorded.get("block_length") or 32)
    sizer = "aligned" if recorded.get("name") == "aligned" else "fixed"
    if sizer == "fixed" and trace.gen_length % block:
        block = trace.gen_length
    options = {}
    if rule == "block_refinement" and (trace.meta.pipeline.get("rule") or {}).get("name") == rule:
        options = {k: v for k, v in trace.meta.pipeline["rule"].items() if k != "name"}
    if rule in THRESHOLD_OF:
        options[THRESHOLD_OF[rule]] = threshold
    try:
        pipeline = Pipeline.from_names(rule, sizer, block_length=block, **options)
        token = None
        if position is not None:
            ids = adapter.tokenizer.encode(text, add_special_tokens=False) if text else []
            if not ids:
                raise ValueError("type the token to force at that position (or clear the position)")
            token = int(ids[0])
        with model_turn():
            branches = fork_decode(adapter, trace, Fork(at, pipeline, position, token))
    except ValueError as exc:
        st.error(f"Cannot fork: {exc}")
        return
    st.session_state[f"{prefix}fork_result"] = (version, branches)


def show_branches(branches: Branches, prefix: str = "") -> None:
    """NFE of both branches, the divergence over the shared steps and both outputs diffed."""
    first = branches.first_divergence()
    a, b, c = st.columns(3)
    a.metric("NFE, recorded", branches.original.nfe, border=True)
    b.metric("NFE, fork", branches.fork_nfe, delta=f"{branches.fork_nfe - branches.original.nfe:+d}",
             delta_color="inverse", border=True)
    c.metric("Branches part after step", "never" if first is None else first, border=True)
    labels = (branches.original.meta.label, branches.fork.meta.label)
    live_chart(figures.branch_divergence_line(branches.divergence(), fork_step=branches.at,
                                              nfe=(branches.original.nfe, branches.fork_nfe), labels=labels),
               key=f"{prefix}fork_chart")
    left, right = st.columns(2)
    left.markdown(f"**Recorded** · {labels[0]}")
    left.code(figures.output_text(branches.original) or " ", language=None, wrap_lines=True)
    right.markdown(f"**Fork** · {labels[1]} (words that differ highlighted)")
    right.html(diff_html(figures.output_text(branches.original), branches.fork.meta.answer_text))


def fork_elsewhere(adapter: ModelAdapter | None, trace: Trace) -> str | None:
    """Which model to load to fork `trace`, when the app has another one (or none) loaded; None when
    the loaded model recorded it (or the trace names no model)."""
    recorded = trace.meta.model.name_or_path if trace.meta.model is not None else None
    if recorded is None or (adapter is not None and adapter.info.name_or_path == recorded):
        return None
    current = "none" if adapter is None else redact(adapter.info.name_or_path, app_roots())
    return (f"To fork this trace, load its model {redact(recorded, app_roots())!r} in the sidebar "
            f"(the app has {current!r} loaded).")


def saved_trace_branch_panel(adapter: ModelAdapter | None, trace: Trace, version: int) -> None:
    """The fork panel for a trace opened from disk, offered only when the app's model recorded it.

    A fork re-runs the model from the recorded canvas, so continuing with another model would
    mix two models' tokens in one decode; say which model to load instead.
    """
    recorded = trace.meta.model.name_or_path if trace.meta.model is not None else None
    if recorded is None:
        st.info("This trace does not record which model decoded it, so it cannot be forked.")
    elif (note := fork_elsewhere(adapter, trace)) is not None:
        st.info(note)
    elif not trace.is_complete:
        st.info("This decode was stopped before the end; only a finished decode can be forked.")
    else:
        branch_panel(adapter, trace, version, prefix="lib_")
