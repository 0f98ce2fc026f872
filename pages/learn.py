"""Learn: a guided walkthrough of masked diffusion decoding, with live examples on the model.

Five short chapters (masking, confidence, remasking, blocks, NFE), each with a small decode
(32 positions, quick on CPU) and a link that opens the Decode page with the same setting, so
every idea points at the real widget that controls it. The chapter is in the URL.
"""

from __future__ import annotations

import streamlit as st

from app_ui.common import current_model, decode_with_bar, model_turn, require_app_frame, sample_prompts
from dllm_viz import figures
from dllm_viz.config import DecodeConfig
from dllm_viz.policies import Pipeline
from dllm_viz.stepper import Stepper
from dllm_viz.trace import Trace

GEN = 32
CHAPTERS = {
    "1 Masking": "A diffusion LM does not write left to right. It starts from a **canvas of mask tokens** after "
                 "the prompt and fills it in over several **steps**. Below: the canvas before any step — every "
                 "position is a mask (grey). On the Decode page, *Gen length* sets how many positions there are.",
    "2 Confidence": "Each step is one **forward pass** over the whole canvas. For every masked position the model "
                    "proposes a **candidate** token with a **confidence** (its probability). Below: the canvas "
                    "after one step — committed tokens are coloured by confidence, drafts are the candidates not "
                    "yet accepted. On the Decode page, press *Step* (→) to run exactly one pass.",
    "3 Remasking": "LLaDA commits a fixed number of positions per step — the most confident ones — and "
                   "**re-masks** the rest, so those positions are predicted again next step with more context. "
                   "Below: the commit order with 2 tokens per step (steps = 16 for 32 positions). On the Decode "
                   "page, pick the *fixed_steps* commit rule and change *steps*.",
    "4 Blocks": "Semi-autoregressive **blocks** split the canvas into windows decoded left to right; inside a "
                "block, the order is free. Move the slider and watch the commit order form bands. On the Decode "
                "page this is *block length* (or *adablock*, which sizes blocks at line breaks).",
    "5 NFE": "**NFE** (number of function evaluations) counts forward passes — the cost. The *threshold* rule "
             "commits every position whose confidence is above τ, so confident stretches go in parallel and "
             "NFE drops below the one-token-per-step baseline. Lower τ: fewer passes, more risk of mistakes.",
}

require_app_frame()
st.title("Learn: how a diffusion LM decodes")
chapter = str(st.segmented_control("Chapter", list(CHAPTERS), default=next(iter(CHAPTERS)), required=True,
                                   key="chapter", bind="query-params"))
adapter = current_model()
samples = sample_prompts()
prompt = next(iter(samples.values()), "Tom has 12 apples. He buys 7 more. How many apples does he have now?")


def example(pipeline: Pipeline, name: str) -> Trace | None:
    """A decode of the example prompt (cached for this session), or None without a model."""
    if adapter is None:
        return None
    cache: dict = st.session_state.setdefault("learn_traces", {})
    key = (st.session_state.get("model"), name)
    if key not in cache:
        bar = st.progress(0.0, text=name)
        cache[key] = decode_with_bar(adapter, prompt, pipeline, DecodeConfig(gen_length=GEN), bar, name)
        bar.empty()
    return cache[key]


def first_steps(count: int) -> Trace | None:
    """The trace after `count` forward passes of the threshold rule (0 = the initial canvas)."""
    if adapter is None:
        return None
    stepper = Stepper.start(adapter, prompt, Pipeline.from_names("threshold"), DecodeConfig(gen_length=GEN), ())
    with model_turn():
        for _ in range(count):
            stepper.step()
    return stepper.trace()


def try_it(label: str, **query: object) -> None:
    st.page_link("pages/decode.py", label=f"Try it on the Decode page: {label}", icon=":material/open_in_new:",
                 query_params={"gen": str(GEN), **{k: str(v) for k, v in query.items()}})


st.markdown(CHAPTERS[chapter])
st.caption(f"Example prompt: {prompt}")
if chapter.startswith("1"):
    if (trace := first_steps(0)) is not None:
        st.html(figures.token_strip_html(trace))
    try_it("gen length 32", rule="threshold")
elif chapter.startswith("2"):
    if (trace := first_steps(1)) is not None:
        st.html(figures.token_strip_html(trace, 0))
        st.plotly_chart(figures.confidence_heatmap(trace), key="learn_conf", theme=None)
    try_it("press Step", rule="threshold")
elif chapter.startswith("3"):
    if (trace := example(Pipeline.from_names("fixed_steps", steps=16, block_length=GEN), "remask")) is not None:
        st.plotly_chart(figures.commit_order_heatmap(trace, tokens_per_row=16), key="learn_order", theme=None)
    try_it("fixed_steps, 16 steps", rule="fixed_steps", steps=16, block_length=GEN)
elif chapter.startswith("4"):
    block = int(st.select_slider("Block length", [4, 8, 16, 32], value=8, key="learn_block"))
    pipe = Pipeline.dense(block)
    if (trace := example(pipe, f"blocks {block}")) is not None:
        st.caption("One row per block: the colour is the step at which each position was committed.")
        st.plotly_chart(figures.commit_order_heatmap(trace, tokens_per_row=block), key="learn_blocks", theme=None)
    try_it(f"block length {block}", rule="fixed_steps", block_length=block)
else:
    tau = float(st.slider("Threshold τ", 0.1, 1.0, 0.9, 0.05, key="learn_tau"))
    dense = example(Pipeline.dense(GEN), "dense")
    fast = example(Pipeline.from_names("threshold", threshold=tau, block_length=GEN), f"threshold {tau}")
    if dense is not None and fast is not None:
        a, b = st.columns(2)
        a.metric("NFE, one token per step", dense.nfe, border=True)
        b.metric(f"NFE, threshold τ = {tau:g}", fast.nfe, delta=f"{fast.nfe - dense.nfe}", delta_color="inverse",
                 border=True)
        st.plotly_chart(figures.step_series_lines([dense, fast], x="step"), key="learn_nfe", theme=None)
    try_it(f"threshold {tau:g}", rule="threshold", threshold=tau, block_length=GEN)

names = list(CHAPTERS)
index = names.index(chapter)
left, right = st.columns(2)
if index > 0:
    left.button("◀ Back", key="learn_back", on_click=lambda: st.session_state.update(chapter=names[index - 1]))
if index < len(names) - 1:
    right.button("Next ▶", key="learn_next", on_click=lambda: st.session_state.update(chapter=names[index + 1]))
