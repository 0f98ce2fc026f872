"""Tune: thresholds by eye on a recorded dense trace (instant), or swept over a prompt set.

By eye: record one dense decode, then every slider move (a fragment rerun) replays the rule (and
CE) over its per-step statistics (dllm_viz/replay.py) and shows which tokens it would accept and when, the
estimated NFE and whether the output matches the dense endpoint; Verify runs it for real.
Sweep: a grid of one or two field values over held-out problems, plotted as NFE vs accuracy
with the Pareto front.
"""

from __future__ import annotations

import streamlit as st

from app_ui.common import (
    MAX_PROBLEMS,
    TASK_HELP,
    TUNE_MODES,
    cached_figure,
    canvas_limit,
    check_prompt,
    confine_weights,
    current_model,
    decode_config,
    decode_with_bar,
    diff_html,
    metric_row,
    metrics_row,
    other_model,
    prompt_input,
    require_app_frame,
    sample_verdict,
    set_trace,
    warn_if_cut_off,
)
from app_ui.live_chart import live_chart
from app_ui.sweep import (
    NO_SECOND_FIELD,
    TUNE_DEFAULT_RULE,
    TUNE_RULES,
    parse_values,
    run_sweep,
    summary_table,
    sweep_configs,
    sweep_rows,
    sweepable,
)
from app_ui.views import scrubber
from app_ui.widgets import block_length_problem, block_length_start, component_fields, gen_length_input
from dllm_viz import figures
from dllm_viz.bench import summarize_bench
from dllm_viz.evaluation import heldout_problems
from dllm_viz.policies import BLOCKS, EXTRAPOLATORS, RULES, Pipeline
from dllm_viz.policies.defaults import dense_baseline, policy_defaults
from dllm_viz.replay import agreement, not_replayable_reason, replay, replay_signature
from dllm_viz.tasks import GENERATED_TASKS

REPLAY_CARD_WIDTH = 220  # px: "Matches the dense endpoint" whole

require_app_frame()
st.title("Tune")
mode = st.segmented_control("Mode", list(TUNE_MODES), default="by eye", required=True, key="tune_mode",
                            bind="query-params")
adapter = current_model()
prompt = prompt_input("tune_", bind=True) if mode == "by eye" else None
# The rule picker has a row of its own: in a half-width column it scrolled its 7 names sideways, cut
# ('ra' for 'cora' at 1400 px, '…ed_steps' at 1024 px).
rule = st.segmented_control("Commit rule", list(TUNE_RULES), default=TUNE_DEFAULT_RULE, required=True,
                         key="tune_rule", bind="query-params")
# The rules a dense trace cannot replay are named with why: on a block-diffusion model the missing one
# is its own default rule, and nothing said where it went.
for cls in (cls for name, cls in RULES.items() if name not in TUNE_RULES):
    st.caption(f"Not offered here: {not_replayable_reason(cls)}.")
mid, right, _ = st.columns([1, 1, 2])
gen_length = gen_length_input("tune_gen", default=64, bind=True, container=mid, limit=canvas_limit(adapter, prompt))
# A block-causal model decodes over aligned blocks of its own length (policies.defaults), so the dense
# recording, the replayed rule, Verify and the sweep run over those; a bidirectional one over fixed blocks of 32.
native = policy_defaults(adapter.info.block_length if adapter else None)
natural_block, sizer = native.options.get("block_length", 32), native.block
# The length follows the gen length until the user sets one (as Decode's form does).
followed: set[str] = set()
block_start = block_length_start(BLOCKS[sizer], "tune_block", natural_block, gen_length, followed)
block_length = int(right.number_input("Block length", 1, 1024, step=1, key="tune_block", bind="query-params",
                                      help=f"the {sizer} block sizer's block length"
                                           + (" (this block-diffusion model's own is "
                                              f"{natural_block})" if sizer == "aligned" else ""),
                                      **({} if "tune_block" in followed else {"value": block_start})))
if (block_problem := block_length_problem(BLOCKS[sizer], block_length, gen_length)) is not None:
    st.error(block_problem)
ce = st.toggle("Confidence extrapolation (CE, Kalman)", key="tune_ce", bind="query-params")


# Why the replay's NFE can sit far from a real run's (a cold demo notices: hard/breadth-1, gen 32,
# threshold 0.9 replayed 23 passes where the real run took 10).
REPLAY_HELP = ("Read from the dense run's confidences, which rise as dense commits one token a pass. A real run "
               "commits several tokens at once, so its model sees them sooner and grows confident (or not) on "
               "its own schedule: its NFE can differ a lot. On a block-diffusion model, the passes dense spent "
               "filling only the padding of its aligned blocks (past the answer) are not replayed either. Verify "
               "runs it for real.")


def pipeline(options: dict, length: int) -> Pipeline | None:
    """The chosen rule (+ CE) in the model's blocks (`sizer`), checked against the `length` positions it
    will decode (the recorded dense trace's, which the Gen length slider no longer changes), or None
    after showing why the values are invalid."""
    try:
        pipe = Pipeline.from_names(str(rule), sizer, "kalman" if ce else None, block_length=block_length,
                                   **confine_weights(options))
        pipe.validate(length)
        return pipe
    except ValueError as exc:
        st.error(f"Invalid setting: {exc}")
        return None


def by_eye() -> None:
    record = st.button("Record dense trace", key="tune_record", disabled=adapter is None,
                       help="decode once with LLaDA's dense rule (one token per step); the sliders replay it")
    if record and adapter is not None:
        try:
            dense_pipe = Pipeline.dense(block_length) if sizer == "fixed" else dense_baseline(block_length, gen_length)
            dense_pipe.validate(gen_length)
            bar = st.progress(0.0, text="dense")
            set_trace(decode_with_bar(adapter, check_prompt(prompt), dense_pipe, decode_config(gen_length), bar,
                                      "dense"), key="tune_dense")
            bar.empty()
        except ValueError as exc:
            st.error(f"Cannot record: {exc}")
    replay_view()


@st.fragment
def replay_view() -> None:
    """The rule's sliders and the replay they drive: a slider move reruns only this fragment.

    The figures are kept per replay (replay_signature), so a move that replays alike redraws nothing
    and sends each chart as the same bytes, which the browser does not redraw either.
    """
    dense = st.session_state.get("tune_dense")
    options = component_fields(RULES[rule], "tune_", bind=True)
    if ce:
        with st.expander("CE settings", expanded=True):
            options |= component_fields(EXTRAPOLATORS["kalman"], "tune_", bind=True, columns=4)
    if dense is None:
        st.info("Record a dense trace first; then every slider replays it instantly.")
        return
    recorded = dense.meta.model.name_or_path if dense.meta.model is not None else None
    if (models := other_model(recorded, adapter)) is not None:  # its ids mean nothing to the loaded tokenizer
        st.info(f"The recorded dense trace was decoded with the model {models[0]!r}, not the loaded {models[1]!r}: "
                "record again to tune on it.")
        return
    if dense.gen_length != gen_length:
        st.info(f"The recorded dense trace has {dense.gen_length} positions; the replay and Verify use them. "
                f"Record again to use Gen length {gen_length}.")
    if (pipe := pipeline(options, dense.gen_length)) is None:
        return
    virtual = replay(dense, pipe, seed=int(st.session_state.get("seed", 0)),
                     answer_text=adapter.answer_text if adapter else None)
    drawn = (st.session_state.get("tune_dense_version", 0), virtual.meta.label, replay_signature(virtual))
    st.subheader(f"Replay of {pipe.label} over the dense trace")
    same = agreement(virtual, dense)
    verdict = sample_verdict(virtual)  # on a bundled sample: is the replayed answer right?
    # Cards of a fixed width in a wrapping row (metric_row): in st.columns(4) a 1024-px window cut
    # them to "Matches the d…" and "wro…"; wide enough for the longest label, four to a 1400-px row.
    row, width = metric_row("tune_replay_cards"), REPLAY_CARD_WIDTH
    row.metric("Estimated NFE", virtual.nfe, delta=f"{virtual.nfe - dense.nfe:+d} vs dense", delta_color="inverse",
               border=True, width=width, help=REPLAY_HELP)
    row.metric("Matches the dense endpoint", f"{same}/{dense.gen_length}",
               delta="identical" if same == dense.gen_length else "differs", delta_color="off", border=True,
               width=width)
    row.metric("Tokens per step", f"{virtual.summary()['tokens_per_step']:.2f}", border=True, width=width)
    if verdict is not None:
        row.metric("Answer", str(verdict), delta=f"dense: {sample_verdict(dense)}", delta_color="off",
                   delta_arrow="off", border=True, help="the replayed answer marked by the sample's task scorer",
                   width=width)
    with st.expander(f"Dense output (NFE {dense.nfe}), the reference for the highlighted differences", expanded=True):
        st.code(dense.meta.answer_text or " ", language=None, wrap_lines=True)
    warn_if_cut_off(dense, "dense")
    st.html(diff_html(dense.meta.answer_text, virtual.meta.answer_text))
    step = scrubber(virtual, st.session_state.get("tune_dense_version", 0), "tune_", follow=False)
    st.html(figures.token_strip_html(virtual, step))
    st.caption(f"Replayed step {step} reads dense step {virtual.meta.dense_steps[step] if virtual.nfe else 0}.")
    x, y = st.columns(2)  # live charts: a slider move redraws them in place (app_ui.live_chart)
    with x:
        live_chart(cached_figure("tune_heat", drawn, lambda: figures.confidence_heatmap(
            virtual, title="Replayed commits<br><sup>over the dense statistics</sup>")), key="tune_heat")
    with y:
        live_chart(cached_figure("tune_series", drawn, lambda: figures.step_series_lines(
            [dense, virtual], series="committed_fraction", x="step")), key="tune_series")
    live_chart(cached_figure("tune_order", drawn, lambda: figures.commit_order_heatmap(
        virtual, tokens_per_row=16, title="When the rule would commit each position")), key="tune_order")
    verify = st.button("Verify with a real run", type="primary", key="tune_verify", disabled=adapter is None)
    if verify and adapter is not None:
        bar = st.progress(0.0, text="verify")
        try:  # the sidebar's model may have changed since the recording (e.g. a shorter context)
            real = decode_with_bar(adapter, (dense.meta.prompt_text or ""), pipe,
                                   decode_config(dense.gen_length), bar, "real run")
        except ValueError as exc:
            st.error(f"Cannot verify: {exc}")
            return
        finally:
            bar.empty()
        real_verdict = sample_verdict(real)
        st.markdown(f"**Real run:** NFE {real.nfe} (replay estimated {virtual.nfe}), "
                    f"{agreement(real, dense)}/{dense.gen_length} positions match the dense endpoint"
                    + ("." if real_verdict is None else f"; its answer is {real_verdict}."))
        metrics_row(real, baseline=dense, key="tune_verify_cards")  # its deltas wrap (metric_row)
        warn_if_cut_off(real, "real run")
        st.html(diff_html(dense.meta.answer_text, real.meta.answer_text))


def sweep() -> None:
    numeric = sweepable(str(rule))
    if not numeric:
        st.info(f"{rule} has no numeric field to sweep; pick another rule.")
        return
    names = [s.name for s in numeric]
    a, b = st.columns(2)
    first = a.selectbox("Sweep", names, key="tune_f1", bind="query-params")
    values1 = a.text_input("Values", "0.5, 0.7, 0.9" if first == "threshold" else "", key="tune_v1",
                           bind="query-params", help="comma-separated values of the field")
    second = b.selectbox("and (optional)", [NO_SECOND_FIELD, *[n for n in names if n != first]], key="tune_f2",
                         bind="query-params")
    values2 = b.text_input("Values ", "", key="tune_v2", bind="query-params", disabled=second == NO_SECOND_FIELD)
    task = a.selectbox("Task", GENERATED_TASKS, key="tune_task", bind="query-params",
                        help=TASK_HELP)
    n = b.number_input("Problems", 1, MAX_PROBLEMS, 3, key="tune_n", bind="query-params")
    if st.button("Run sweep", type="primary", key="tune_sweep", disabled=adapter is None) and adapter is not None:
        try:
            grid = {str(first): parse_values(str(first), values1 or "", numeric)}
            if second != NO_SECOND_FIELD:
                grid[str(second)] = parse_values(str(second), values2 or "", numeric)
            configs = sweep_configs(str(rule), "kalman" if ce else None, block_length, gen_length, grid,
                                    block=sizer, dense=dense_baseline(native.options.get("block_length"),
                                                                      gen_length))
        except ValueError as exc:
            st.error(f"Cannot sweep: {exc}")
        else:
            run_sweep(adapter, heldout_problems(str(task), int(n)), configs, decode_config(gen_length),
                      key="tune_rows")
    if (rows := sweep_rows("tune_rows", adapter)) is not None:
        summary = summarize_bench(rows)
        records = [(label, r["mean_nfe"], r["accuracy"]) for label, r in summary.iterrows()]
        live_chart(figures.nfe_accuracy_scatter(records), key="tune_scatter")
        summary_table(summary, key="tune_summary")


if mode == "by eye":
    by_eye()
else:
    sweep()
