"""Decode: one prompt, one policy; output, NFE, time and the confidence heatmap."""

from __future__ import annotations

import streamlit as st

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.figures import confidence_heatmap
from dllm_viz.policies import Pipeline
from pages.common import current_model, model_lock, sample_prompts

st.title("Decode")
st.caption("Watch a masked diffusion LM fill its canvas: each row of the heatmap is one forward pass.")

samples = sample_prompts()
choice = st.selectbox("Sample prompt", ["(type your own)", *samples], key="sample")
prompt = st.text_area("Prompt", value=samples.get(choice, "Tom has 12 apples. He buys 7 more. How many apples does he have now?"),
                      key=f"prompt_{choice}")

left, mid, right = st.columns(3)
rule = left.segmented_control("Commit rule", ["threshold", "fixed_steps", "factor"], default="threshold",
                              key="rule", bind="query-params")
gen_length = mid.select_slider("Gen length", [32, 64, 128, 256], value=128, key="gen", bind="query-params")
block_length = right.select_slider("Block length", [8, 16, 32, 64, 128, 256], value=32, key="blk",
                                   bind="query-params")
options: dict[str, object] = {"block_length": block_length}
if rule == "threshold":
    options["threshold"] = st.slider("Threshold τ", 0.05, 1.0, 0.9, 0.01, key="thr", bind="query-params")
elif rule == "factor":
    options["factor"] = st.slider("Factor f", 0.1, 4.0, 1.0, 0.1, key="fac", bind="query-params")
else:
    options["steps"] = st.number_input("Steps (total)", 1, 1024, int(gen_length), key="steps")
    options["remasking"] = st.radio("Remasking", ["low_confidence", "random"], horizontal=True, key="remask")

adapter = current_model()
if st.button("Run", type="primary", key="run", disabled=adapter is None) and adapter is not None:
    try:
        pipeline = Pipeline.from_names(rule or "threshold", "fixed", **options)
        config = DecodeConfig(gen_length=int(gen_length), seed=int(st.session_state.get("seed", 0)))
        prompt_ids = adapter.encode_prompt(prompt)
        with st.status("Decoding…", expanded=False) as status, model_lock():
            bar = st.progress(0.0, text="step 0")
            trace = decode(adapter, prompt_ids, pipeline, config, prompt_text=prompt,
                           on_step=lambda r: bar.progress(min(1.0, r.nfe / config.gen_length), text=f"step {r.nfe}"))
            status.update(label=f"Done: {trace.nfe} NFE", state="complete")
        st.session_state["trace"] = trace
    except ValueError as exc:
        st.error(str(exc))

trace = st.session_state.get("trace")
if trace is None:
    st.info("Choose a prompt and a policy, then press Run.")
    st.stop()

st.subheader("Output")
st.code(trace.meta.get("answer_text", ""), language=None)
summary = trace.summary()
c1, c2, c3, c4 = st.columns(4)
c1.metric("NFE", trace.nfe, border=True)
c2.metric("Time", f"{summary['seconds']:.2f} s", border=True)
c3.metric("Tokens/s", f"{summary['tokens_per_second']:.1f}", border=True)
c4.metric("Tokens per step", f"{summary['tokens_per_step']:.2f}", border=True)
st.plotly_chart(confidence_heatmap(trace), key="heatmap", theme=None)
