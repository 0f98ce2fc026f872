"""Compare: 2-4 policy configurations against LLaDA's dense baseline, on one prompt or a prompt set.

One prompt: outputs side by side with the words that differ from dense highlighted, NFE, time
and speedup, and heatmaps on one shared step axis. Prompt set: `dllm_viz.bench` over the
held-out problems, with accuracy, mean NFE, speedups and the NFE-vs-accuracy front.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import streamlit as st

from app_ui.common import (
    COMPARE_MODES,
    CONFIG_COUNTS,
    MAX_PROBLEMS,
    TASK_HELP,
    WALL_SPEEDUP,
    answer_mark,
    canvas_limit,
    check_prompt,
    comparison_rows,
    current_model,
    decode_config,
    decode_with_bar,
    diff_html,
    other_model,
    prompt_input,
    require_app_frame,
    warn_if_cut_off,
)
from app_ui.live_chart import live_chart
from app_ui.sweep import run_sweep, summary_table, sweep_rows
from app_ui.widgets import gen_length_input, policy_form
from dllm_viz import figures
from dllm_viz.bench import summarize_bench
from dllm_viz.evaluation import heldout_problems
from dllm_viz.models import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.policies.defaults import dense_baseline
from dllm_viz.tasks import GENERATED_TASKS

DEFAULT_RULES = ("threshold", "cora", "factor", "fixed_steps")

require_app_frame()
st.title("Compare")
st.caption("Several policies on the same prompt and seed, each against the dense baseline (one token per step).")

mode = st.segmented_control("Compare on", list(COMPARE_MODES), default="one prompt", required=True,
                            key="cmp_mode", bind="query-params")
adapter = current_model()
if adapter is not None and adapter.info.block_length is not None:
    st.caption(f"On this block-diffusion model dense commits one token a pass over aligned blocks of "
               f"{adapter.info.block_length}, the model's own, as its configurations start.")
if mode == "one prompt":  # the prompt, with the canvas and count beside it
    left, right = st.columns([3, 1])
    with left:
        prompt = prompt_input("cmp_", bind=True)
    gen_box = count_box = right
else:  # no prompt: the two side by side (the slider sat alone in a right column beside an empty one)
    prompt = None
    gen_box, count_box = st.columns(2)
gen_length = gen_length_input("cmp_gen", default=64, bind=True, container=gen_box,
                              limit=canvas_limit(adapter, prompt))
count = int(count_box.segmented_control("Configurations", list(CONFIG_COUNTS), default=2, required=True,
                                        key="cmp_n", bind="query-params") or 2)
specs = []
for i, tab in enumerate(st.tabs([f"Configuration {i + 1}" for i in range(count)])):
    with tab:
        specs.append(policy_form(f"c{i + 1}_", bind=True, default_rule=DEFAULT_RULES[i], adapter=adapter,
                                 gen_length=gen_length))


def pipelines() -> dict[str, Pipeline] | None:
    """Label -> Pipeline for every configuration, or None after showing what is wrong."""
    try:
        built = {}
        for i, spec in enumerate(specs):
            pipe = spec.pipeline()
            pipe.validate(gen_length)
            if adapter is not None:  # a controller of another model: said before dense runs, not after
                pipe.validate_model(adapter.info)
            built[f"#{i + 1} {pipe.label}"] = pipe
        return built
    except ValueError as exc:
        st.error(f"Configuration {i + 1}: {exc}")
        return None


def compare_one(adapter: ModelAdapter, text: str, configs: dict[str, Pipeline]) -> None:
    """Decode dense + every configuration; finished traces are kept even if interrupted."""
    config = decode_config(gen_length)
    results: list = []
    st.session_state["cmp_results"] = results
    # How many runs this comparison has, for the "Interrupted" note: the Configurations picker
    # may change afterwards, and a finished 3-run comparison read as "3 of 5 runs finished".
    st.session_state["cmp_planned"] = len(configs) + 1
    bar = st.progress(0.0, text="dense baseline")
    for label, pipe in {"dense": dense_baseline(adapter.info.block_length, gen_length), **configs}.items():
        trace = decode_with_bar(adapter, text, pipe, config, bar, label)
        trace = replace(trace, meta=trace.meta.replace(label=label))
        results.append(trace)
    bar.empty()


def show_one(results: list) -> None:
    dense, others = results[0], results[1:]
    longest = max(t.nfe for t in results)
    st.dataframe(comparison_rows(dense, others), key="cmp_table", hide_index=True,
                 column_config={c: st.column_config.NumberColumn(format="%.2f")
                                for c in ("NFE speedup", "seconds", WALL_SPEEDUP, "tokens/s", "tokens/step",
                                          "policy overhead %")})
    st.download_button("Replay all on one step axis (HTML, works offline)",
                       lambda: figures.comparison_replay_html(results), file_name="comparison-replay.html",
                       mime="text/html", key="cmp_replay", on_click="ignore",
                       help="a self-contained player (play, pause, scrub) of every run's canvas, plotly.js inline")
    align = st.toggle("Align step axes", key="cmp_align", bind="query-params",
                      help="off: each heatmap fills its own chart (a 5-step policy is readable); on: every chart "
                           f"spans the longest run's {longest} steps, so heights compare")
    for column, trace in zip(st.columns(len(others)), others, strict=False):
        with column:
            st.markdown(f"**{trace.meta.label}**" + answer_mark(trace, ": "))
            st.metric("NFE", trace.nfe, delta=f"{dense.nfe / max(trace.nfe, 1):.2f}x fewer than dense",
                      delta_color="off", border=True)
            warn_if_cut_off(trace)
            st.html(diff_html(dense.meta.answer_text, trace.meta.answer_text))
            heatmap = figures.confidence_heatmap(trace, title=f"NFE {trace.nfe}")
            live_chart(figures.share_step_axis(heatmap, longest) if align else heatmap,
                       key=f"cmp_heat_{trace.meta.label}")
    st.markdown(f"**Dense output** (the reference for the highlighted differences), NFE {dense.nfe}"
                + answer_mark(dense, ": "))
    warn_if_cut_off(dense, "dense")
    st.code(dense.meta.answer_text or " ", language=None, wrap_lines=True)
    series = st.selectbox("Step series", ["committed_fraction", "committed", "mean_confidence", "min_confidence",
                                          "cumulative_cost", "cumulative_seconds", "policy_ms"], key="cmp_series",
                          help="cumulative_seconds: wall time so far; policy_ms: time inside the policy each step")
    axis: Literal["step", "progress"] = st.radio("Step axis", ["step", "progress"], horizontal=True, key="cmp_axis",
                    help="step: raw forward passes; progress: every run resampled onto 0..1")
    a, b = st.columns([3, 2])
    with a:
        live_chart(figures.step_series_lines(results, series=series, x=axis), key="cmp_series_chart")
    with b:
        live_chart(figures.nfe_bar(results), key="cmp_nfe_bar")


if mode == "one prompt":
    if st.button("Compare", type="primary", key="cmp_run", disabled=adapter is None) and adapter is not None:
        try:
            text = check_prompt(prompt)
            if (configs := pipelines()) is not None:
                compare_one(adapter, text, configs)
        except ValueError as exc:
            st.error(f"Cannot compare: {exc}")
    if results := st.session_state.get("cmp_results"):
        recorded = results[0].meta.model.name_or_path if results[0].meta.model is not None else None
        if (models := other_model(recorded, adapter)) is not None:
            st.info(f"These runs were decoded with the model {models[0]!r}, not the loaded {models[1]!r}; "
                    "Compare again to decode them on it.")
        if len(results) < (planned := st.session_state.get("cmp_planned", count + 1)):
            st.warning(f"Interrupted: {len(results)} of {planned} runs finished.")
        if len(results) > 1:
            show_one(results)
else:
    a, b = st.columns(2)
    task = a.selectbox("Task", GENERATED_TASKS, key="cmp_task", bind="query-params",
                        help=TASK_HELP)
    n = b.number_input("Problems", 1, MAX_PROBLEMS, 3, key="cmp_count", bind="query-params",
                       help="first n held-out problems of the task (small n keeps it quick on CPU)")
    run = st.button("Run on the prompt set", type="primary", key="cmp_bench_run", disabled=adapter is None)
    if run and adapter is not None and (configs := pipelines()) is not None:
        configs = {"dense": dense_baseline(adapter.info.block_length, gen_length), **configs}
        run_sweep(adapter, heldout_problems(str(task), int(n)), configs, decode_config(gen_length), key="cmp_bench")
    if (rows := sweep_rows("cmp_bench", adapter)) is not None:
        summary = summarize_bench(rows)
        summary_table(summary, key="cmp_summary")
        records = [(label, r["mean_nfe"], r["accuracy"]) for label, r in summary.iterrows()]
        live_chart(figures.nfe_accuracy_scatter(records), key="cmp_scatter")
        with st.expander("Every completion"):
            st.dataframe(rows)
