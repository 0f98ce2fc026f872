"""Learn: a guided walkthrough of masked diffusion decoding, with live examples on the model.

Six short chapters (masking, confidence, remasking, blocks, NFE, block diffusion), each with a small decode
(64 positions, so the example's answer fits; computed once per server and shared by every
session) and a link that opens the Decode page with the same setting, so every idea points at
the real widget that controls it. Terms link to the glossary (dllm_viz.explain). The chapter
is in the URL.

On a block-causal model (block diffusion: LLaDA2.x, SDAR, Fast-dLLM v2) every example and link
runs on aligned blocks of the model's own length (policies.defaults), the geometry it was trained
to decode with, and a caption under the chapter says so: its chapters decoded fixed windows (one
of the whole canvas, or a slider's 4-32) across the model's attention blocks, which it never runs.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import streamlit as st

from app_ui.chapters import BLOCK_MODEL_NOTES, CHAPTERS
from app_ui.common import (
    ANSWER_MARKS,
    DEFAULT_PROMPT,
    checkable_samples,
    current_model,
    diff_html,
    is_right,
    model_turn,
    require_app_frame,
    sample_prompts,
)
from app_ui.live_chart import live_chart
from dllm_viz import divergence, figures
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.explain import GLOSSARY
from dllm_viz.models import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.policies.defaults import dense_baseline, policy_defaults
from dllm_viz.stepper import Stepper
from dllm_viz.tasks.base import Problem
from dllm_viz.trace import Trace

GEN = 64  # the example prompt's dense answer (about 41 tokens) fits with room for its end-of-text
EDIT_BLOCK = 32  # aligned blocks for chapter 6: its example prompt (48 tokens) ends inside the second one

require_app_frame()
st.title("Learn: how a diffusion LM decodes")
chapter = str(st.segmented_control("Chapter", list(CHAPTERS), default=next(iter(CHAPTERS)), required=True,
                                   key="chapter", bind="query-params"))
adapter = current_model()
SAMPLES = sample_prompts()  # read once a run: the chapters' examples and chapter 6's link come from it
PROMPT = next(iter(SAMPLES.values()), DEFAULT_PROMPT)
# Chapter 6's example: a sample whose answer the bundled model gets right only with editing on (step
# 112000: 2 edits, 7 passes, right; editing off 7 passes, wrong: `1616` where the `#### 16` line goes).
# On the chapters' first sample a sure model keeps all its guesses, so there is no edit to show.
EDIT_SAMPLE = "arith-5"
EDIT_PROMPT = SAMPLES.get(EDIT_SAMPLE, PROMPT)
EDIT_LINK = {"sample": EDIT_SAMPLE} if EDIT_SAMPLE in SAMPLES else {}  # the Decode page opens on it where it exists
CHAPTER_PROMPT = EDIT_PROMPT if chapter.startswith("6") else PROMPT


def own_block(model: ModelAdapter | None) -> int | None:
    """The block length a block-causal model was trained on, else None (a bidirectional model, or none)."""
    own = model.info.block_length if model is not None and model.info.attention == "block_causal" else None
    return int(own) if own else None


OWN_BLOCK = own_block(adapter)
# The block sizer and options the loaded model starts on: a block-causal model's aligned blocks of its
# own length; for a bidirectional one no options, so each chapter keeps its own fixed windows.
NATIVE = policy_defaults(OWN_BLOCK)


@st.cache_resource(show_spinner="Decoding the example…", max_entries=64)
def cached_example(model: str, device: str, config_key: str, steps: int | None, prompt: str, gen: int,
                   _adapter: ModelAdapter, _pipeline: Pipeline) -> Trace:
    """A decode of `prompt` on `gen` positions, shared by every session (the first visitor pays for it).

    `steps` stops after that many forward passes (0 = the initial canvas); None runs to the end.
    The model name, device, the pipeline's repr, the prompt and the canvas key the cache; the
    objects are not hashed.
    """
    config = DecodeConfig(gen_length=gen)
    with model_turn():
        if steps is None:
            return decode(_adapter, _adapter.encode_prompt(prompt), _pipeline, config, prompt_text=prompt)
        stepper = Stepper.start(_adapter, prompt, _pipeline, config, ())
        for _ in range(steps):
            stepper.step()
        return stepper.trace()


def example(pipeline: Pipeline, steps: int | None = None, *, prompt: str = PROMPT, gen: int = GEN) -> Trace | None:
    """The decode of `prompt` (the chapters' example) under `pipeline`, cached across sessions, or
    None without a model."""
    if adapter is None:
        return None
    return cached_example(str(st.session_state.get("model")), str(st.session_state.get("device", "auto")),
                          repr(pipeline), steps, prompt, gen, adapter, pipeline)


def canvas_for(problem: Problem) -> int:
    """Gen length for `problem`: its reference answer, end-of-text and some slack, in whole 32s
    (at least GEN), so one token per step is never wrong for lack of room."""
    need = len(adapter.encode_text(problem.target)) + 9 if adapter is not None else GEN
    return max(GEN, -(-need // 32) * 32)


def parallel_pair(problem: Problem, tau: float) -> tuple[Trace, Trace] | None:
    """`problem` decoded one token per step and by the threshold rule at `tau` (both cached)."""
    gen = canvas_for(problem)
    dense = example(one_per_step(gen), prompt=problem.prompt, gen=gen)
    fast = example(in_model_blocks("threshold", gen, threshold=tau), prompt=problem.prompt, gen=gen)
    return None if dense is None or fast is None else (dense, fast)


def find_break(problems: dict[str, Problem], tau: float) -> str | None:
    """The first example one token per step gets right and the threshold rule at `tau` gets wrong
    (decoding the examples as it goes, with a progress bar), or None if there is none."""
    bar = st.progress(0.0, text="Looking for an answer this τ breaks…")
    try:
        for i, (sample_id, problem) in enumerate(problems.items()):
            bar.progress(i / len(problems), text=f"Looking for an answer τ = {tau:g} breaks: {sample_id}")
            pair = parallel_pair(problem, tau)
            if pair is not None and is_right(problem, pair[0]) and not is_right(problem, pair[1]):
                return sample_id
        return None
    finally:
        bar.empty()


def edit_block(model: ModelAdapter | None) -> int:
    """Chapter 6's block length: a block-causal model's own, else EDIT_BLOCK (the bundled model has none)."""
    return own_block(model) or EDIT_BLOCK


def in_model_blocks(rule: str, block_length: int, **options: Any) -> Pipeline:
    """`rule` with `options` over fixed blocks of `block_length`; on a block-causal model over aligned
    blocks of its own length instead (NATIVE), whatever the chapter's `block_length`: the geometry it
    was trained to decode with, where fixed windows cut across its attention blocks."""
    return Pipeline.from_names(rule, NATIVE.block, **{"block_length": block_length, **options, **NATIVE.options})


def one_per_step(gen: int) -> Pipeline:
    """LLaDA's dense rule on `gen` positions: one block of the whole canvas, or on a block-causal model
    the dense baseline Compare and Tune use on it (its aligned blocks)."""
    return Pipeline.dense(gen) if OWN_BLOCK is None else dense_baseline(OWN_BLOCK, gen)


def remasking_steps() -> int:
    """Chapter 3's step budget: GEN // 2, two tokens a step. LLaDA's schedule must split it evenly over
    the blocks (Pipeline.validate), which it does for every power-of-two block length; on a
    block-causal model of another length, the nearest budget that splits (block 5: 36 steps over 12
    blocks)."""
    for steps in sorted(range(1, GEN + 1), key=lambda s: (abs(s - GEN // 2), s)):
        try:
            in_model_blocks("fixed_steps", GEN, steps=steps).validate(GEN)
        except ValueError:
            continue
        return steps
    return GEN  # one token a step always splits


REMASKING_STEPS = remasking_steps()  # chapter 3 decodes with it, and the block-model notes quote it


def first_steps(count: int) -> Trace | None:
    """The trace after `count` forward passes of the threshold rule (0 = the initial canvas)."""
    return example(in_model_blocks("threshold", GEN), count)


def anchor(term: str) -> str:
    """The HTML id of a glossary entry."""
    return "g-" + re.sub(r"\W+", "-", term.lower()).strip("-")


def linked(text: str) -> str:
    """`text` with the first mention of each glossary term linked to its entry below."""
    for term in sorted(GLOSSARY, key=len, reverse=True):
        text = re.sub(rf"(?<![\w#\[-])(\*\*)?({re.escape(term)}s?)(\*\*)?(?![\w-])",
                      lambda m, t=term: f"[{m.group(2)}](#{anchor(t)})", text, count=1, flags=re.IGNORECASE)
    return text


def try_it(label: str, **query: object) -> None:
    """A link to the Decode page with `query` (gen length GEN unless it says otherwise); on a block-causal
    model with its aligned blocks of its own length, as the chapter's example ran (in_model_blocks)."""
    blocks = {"block": NATIVE.block, **NATIVE.options} if OWN_BLOCK is not None else {}
    st.page_link("pages/decode.py", label=f"Try it on the Decode page: {label}", icon=":material/open_in_new:",
                 query_params={"gen": str(GEN), **{k: str(v) for k, v in {**query, **blocks}.items()}})


st.markdown(linked(CHAPTERS[chapter]))
if OWN_BLOCK is not None and chapter in BLOCK_MODEL_NOTES:  # what the example changed on this model, and why
    st.caption(BLOCK_MODEL_NOTES[chapter].format(block=OWN_BLOCK, gen=GEN, steps=REMASKING_STEPS))
if not chapter.startswith("5"):  # chapter 5 lets the reader pick the example
    st.caption(f"Example prompt: {CHAPTER_PROMPT}")
if chapter.startswith("1"):
    if (trace := first_steps(0)) is not None:
        st.html(figures.token_strip_html(trace))
    try_it(f"gen length {GEN}", rule="threshold", block_length=GEN)
elif chapter.startswith("2"):
    if (trace := first_steps(1)) is not None:
        st.html(figures.token_strip_html(trace, 0))
        live_chart(figures.confidence_heatmap(trace), key="learn_conf")
    try_it("press Step", rule="threshold", block_length=GEN)
elif chapter.startswith("3"):
    steps = REMASKING_STEPS
    if (trace := example(in_model_blocks("fixed_steps", GEN, steps=steps))) is not None:
        live_chart(figures.commit_order_heatmap(trace, tokens_per_row=16), key="learn_order")
        if (position := figures.most_revised_position(trace)) is not None:
            story = " → ".join(f"step {step}: `{text.replace('`', chr(39)) or ' '}`"
                               for step, text in figures.candidate_history(trace, position))
            st.markdown(f"**Remasking, seen:** position {position} stayed masked while its candidate changed — "
                        f"{story} — and was committed at step {int(trace.commit_step[position])}.")
    try_it(f"fixed_steps, {steps} steps", rule="fixed_steps", steps=steps, block_length=GEN)
elif chapter.startswith("4") and OWN_BLOCK is not None:
    # A block-causal model runs only its own aligned blocks, which start at the prompt's first token, not
    # at the canvas's: the commit-order grid's rows would cut across them, the heatmap's window edges do not.
    if (trace := example(one_per_step(GEN))) is not None:
        live_chart(figures.confidence_heatmap(trace), key="learn_aligned_blocks")
    try_it(f"aligned blocks of {OWN_BLOCK}", rule="fixed_steps")
elif chapter.startswith("4"):
    block = int(st.select_slider("Block length", [4, 8, 16, 32], value=8, key="learn_block"))
    pipe = Pipeline.dense(block)
    if (trace := example(pipe)) is not None:
        st.caption("One row per block: the colour is the step at which each position was committed.")
        live_chart(figures.commit_order_heatmap(trace, tokens_per_row=block), key="learn_blocks")
    try_it(f"block length {block}", rule="fixed_steps", block_length=block)
elif chapter.startswith("5"):
    problems = checkable_samples() or {"example": Problem("arith", "example", PROMPT, "", "")}
    if st.session_state.pop("learn_find", False):  # before the picker exists, so it can be set
        found = find_break(problems, float(st.session_state.get("learn_tau", 0.9)))
        if found is None:
            st.session_state["learn_none_broke"] = float(st.session_state.get("learn_tau", 0.9))
        else:
            st.session_state["learn_example"] = found
    left, right = st.columns([2, 3])
    pick = str(left.selectbox("Example", list(problems), key="learn_example",
                              help="a bundled demo problem with a known answer, so each output is marked right "
                                   "or wrong"))
    tau = float(right.slider("Threshold τ", 0.1, 1.0, 0.9, 0.05, key="learn_tau"))
    problem = problems[pick]
    st.caption(f"Example prompt: {problem.prompt}")
    st.button(f"Find an example τ = {tau:g} breaks", key="learn_find_button",
              on_click=lambda: st.session_state.update(learn_find=True),
              help="decode the examples until one token per step is right and this threshold is wrong")
    if (none_broke := st.session_state.pop("learn_none_broke", None)) is not None:
        st.info(f"At τ = {none_broke:g} no example breaks on this model where one token per step is right: it "
                "answers them right (or wrong both ways). Lower τ and look again: a model that is right and sure "
                "of itself in one pass has nothing to break.")
    if (pair := parallel_pair(problem, tau)) is not None:
        dense, fast = pair
        a, b = st.columns(2)
        a.metric("NFE, one token per step", dense.nfe, border=True)
        b.metric(f"NFE, threshold τ = {tau:g}", fast.nfe, delta=f"{fast.nfe - dense.nfe}", delta_color="inverse",
                 border=True)
        live_chart(figures.step_series_lines([dense, fast], x="step"), key="learn_nfe")
        left, right = st.columns(2)  # what the speed costs: the outputs, the words that changed marked
        left.markdown(f"**Output, one token per step**: {ANSWER_MARKS[is_right(problem, dense)]}")
        left.code(figures.output_text(dense) or " ", language=None, wrap_lines=True)
        right.markdown(f"**Output, τ = {tau:g}**: {ANSWER_MARKS[is_right(problem, fast)]} (words that differ from the "
                       "left marked)")
        right.html(diff_html(figures.output_text(dense), figures.output_text(fast)))
        if parted := divergence.parted_commits(dense, fast):
            first = parted[0]
            token, reference = (text.replace("`", chr(39)) or " " for text in (first.token, first.reference))
            where = (f"at step {first.step} it committed `{token}` at position {first.position} with "
                     f"confidence {first.confidence:.2f}, one of {first.crowd} positions committed in that pass"
                     if first.step >= 0 else f"position {first.position} was never committed")
            st.markdown(f"**Where τ = {tau:g} parted from one token per step:** {where}; one token per step wrote "
                        f"`{reference}` there. {len(parted)} position(s) differ in all, ringed on the "
                        "heatmap: every commit in that pass looked confident enough on its own, but they were "
                        "chosen together, each without seeing the others.")
            flags = figures.CellFlags("differs from one token per step", divergence.parted_cells(dense, fast))
            live_chart(figures.confidence_heatmap(fast, flags=flags), key="learn_parted")
        else:
            st.caption(f"Same output as one token per step in {fast.nfe} passes instead of {dense.nfe}.")
    gen = canvas_for(problem)
    try_it(f"threshold {tau:g} on {pick}", rule="threshold", threshold=tau, block_length=gen, gen=gen, sample=pick)

else:
    # A block-diffusion model decodes over aligned blocks of its own length (SDAR's 4, Fast-dLLM v2's 32):
    # blocks of 32 on SDAR ran windows of 8 of its attention blocks and said "the block's 32".
    block = edit_block(adapter)
    if block != EDIT_BLOCK:
        st.caption(f"This model is block-diffusion with block length {block}: the example runs on aligned blocks "
                   f"of {block}, its own, not {EDIT_BLOCK}.")
    editing = st.toggle("Editing on (LLaDA2's editing threshold 0.5)", value=True, key="learn_editing")
    refine, other = (Pipeline.from_names("block_refinement", "aligned", block_length=block, editing_threshold=e)
                     for e in ((0.5, 0.0) if editing else (0.0, 0.5)))
    if (trace := example(refine, prompt=EDIT_PROMPT)) is not None and \
            (contrast := example(other, prompt=EDIT_PROMPT)) is not None:
        events, post = trace.edit_events, trace.post_steps
        a, b, c = st.columns(3)
        a.metric("NFE", trace.nfe, border=True)
        b.metric("Token edits", len(events), border=True)
        c.metric("Post-steps", int(post.sum()), border=True, help="passes over a block that was already full")
        step = int(st.slider("Step", 0, trace.nfe - 1, events[0].step if events else 0, key="learn_edit_step"))
        st.html(figures.token_strip_html(trace, step))
        here = [e for e in events if e.step == step]
        changes = ", ".join(f"position {e.position} {trace.token_text(e.old)!r} → {trace.token_text(e.new)!r}"
                            for e in here) or "none"
        lo, hi = (int(v) for v in trace.window[step])
        prompt_length = len(trace.prompt_ids)
        fed = int(trace.query_len[step])
        if trace.meta.model.context == "prefix":
            rows = (f"This block-causal model fed the pass {fed} rows: the prompt and the canvas up to this block's "
                    f"end, nothing after it; with the exact cache it would compute only the block's {block}.")
        else:
            rows = (f"This model fed the pass {fed} rows (prompt, whole canvas and padding); a block-causal model "
                    f"would feed only the {prompt_length + hi} rows up to this block's end, and with the exact "
                    f"cache compute only the block's {block}.")
        st.markdown(f"**Step {step}** ({'a post-step' if post[step] else 'filling masks'}) works on window "
                    f"[{lo}, {hi}); edits: {changes}. {rows}")
        if events:
            position, times = Counter(e.position for e in events).most_common(1)[0]
            story = [f"step {e.step}: {trace.token_text(e.new)!r}" for e in events if e.position == position]
            shown = " → ".join(story[:8]) + (" → …" if len(story) > 8 else "")
            untrained = ("" if trace.meta.model.attention == "block_causal" else
                         " The bundled tiny model was never trained to edit, so it changes its mind back and forth "
                         "until *max_post_steps* ends the block: edits are only as good as the model making them.")
            st.markdown(f"**Edits, seen:** position {position} was edited {times} times — {shown}.{untrained}")
            with st.expander(f"Every edit ({len(events)})"):
                st.dataframe([{"step": e.step, "position": e.position, "from": trace.token_text(e.old),
                               "to": trace.token_text(e.new), "post-step": bool(post[e.step])} for e in events],
                             key="learn_edits", hide_index=True)
        left, right = st.columns(2)  # what editing changed: the same rule with editing the other way
        left.markdown(f"**Output, editing {'on' if editing else 'off'}** (NFE {trace.nfe})")
        left.code(figures.output_text(trace) or " ", language=None, wrap_lines=True)
        right.markdown(f"**Output, editing {'off' if editing else 'on'}** (NFE {contrast.nfe}; words that differ "
                       "marked)")
        right.html(diff_html(figures.output_text(trace), figures.output_text(contrast)))
    try_it(f"block_refinement on aligned blocks of {block}", rule="block_refinement", block="aligned",
           block_length=block, **({} if editing else {"editing_threshold": 0.0}), **EDIT_LINK)

st.divider()
st.subheader("Glossary")
st.markdown("\n".join(f"- <span id='{anchor(term)}'></span>**{term}**: {text}" for term, text in GLOSSARY.items()),
            unsafe_allow_html=True)

names = list(CHAPTERS)
index = names.index(chapter)
left, right = st.columns(2)
if index > 0:
    left.button("◀ Back", key="learn_back", on_click=lambda: st.session_state.update(chapter=names[index - 1]))
if index < len(names) - 1:
    right.button("Next ▶", key="learn_next", on_click=lambda: st.session_state.update(chapter=names[index + 1]))
