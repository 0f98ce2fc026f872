"""Benchmark probe (not a test): how fast a Decode Step could be if the panel were ONE component.

Issue #23 asks for a Step under 150 ms beyond its forward pass; the Decode page measures
0.15-0.23 s (BENCHMARKS.md). This probe serves a throwaway page whose fragment holds a single
in-page component (a Step button, the confidence heatmap, the per-step summary and the token
strip, drawn with the app's own figure builders and plotly.js), does the pass in the button's
callback so a Step is one fragment rerun, and times click -> both charts drawn in Chromium.
`--heavy` adds a sidebar and a folded settings form outside the fragment (as the Decode page
has); `--widgets` adds the panel's Streamlit widgets (controls row, scrubber, view selector)
inside the fragment. Session 13: 0.12 s beyond the pass alone, 0.14 s with --heavy, 0.16-0.17 s
with --heavy --widgets: the target needs the widgets inside the component too.

    python tests/e2e/one_component_probe.py [--heavy] [--widgets] [--steps 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "e2e")]

from conftest import CHROMIUM_ARGS, serve_app  # noqa: E402

APP = '''
import os, sys
sys.path.insert(0, {root!r})
import plotly.io as pio
import streamlit as st
import torch
from app_ui.static_component import asset_url
from dllm_viz import figures, load
from dllm_viz.config import DecodeConfig
from dllm_viz.policies import FixedBlocks, Pipeline, ThresholdPolicy
from dllm_viz.stepper import Stepper

torch.set_num_threads(1)
st.set_page_config(layout="wide")
model = st.cache_resource(lambda: load("tiny", device="cpu"))()
panel_component = st.components.v2.component("probe.panel", js=open({js!r}).read(), isolate_styles=False)
if "stepper" not in st.session_state:
    st.session_state.stepper = Stepper.start(
        model, "Tom has 12 apples. He buys 7 more. How many apples does he have now?",
        Pipeline(ThresholdPolicy(0.9), FixedBlocks(32)), DecodeConfig(gen_length=128), ())
    st.session_state.n = 0


def on_step():
    stepper = st.session_state.stepper
    if not stepper.done:
        stepper.step()
    trace = stepper.trace()
    st.session_state.n += 1
    st.session_state.payload = {{
        "src": asset_url("plotly.min.js"), "n": st.session_state.n,
        "heat": pio.to_json(figures.confidence_heatmap(trace), validate=False),
        "summ": pio.to_json(figures.step_summary_strip(trace), validate=False),
        "strip": figures.token_strip_html(trace, trace.num_steps - 1),
        "time": f"{{trace.summary()['seconds']:.4f}}"}}


@st.fragment
def panel():
    if os.environ.get("PROBE_WIDGETS"):
        cols = st.columns([1.3, 1, 1.3, 1, 2.4], vertical_alignment="bottom")
        cols[0].button("Run to end", type="primary", key="run")
        cols[1].button("Step", key="step_widget", shortcut="Right")
        cols[2].button("Play", key="play", shortcut="Space")
        cols[3].button("Reset", key="reset")
        cols[4].select_slider("Play speed", ["slow", "normal", "fast"], value="normal", key="speed")
        back, slider, forward = st.columns([1, 12, 1], vertical_alignment="bottom")
        back.button("\u25c0", key="back", shortcut="Left")
        forward.button("\u25b6", key="fwd")
        st.session_state["t"] = st.session_state.n
        if st.session_state.n >= 1:
            slider.slider("Step", 0, max(st.session_state.n, 1), key="t")
        st.segmented_control("More views", ["commit order", "entropy", "margin"], default="margin", key="view")
    panel_component(data=st.session_state.get("payload") or {{"n": 0}}, key="panel", on_step_change=on_step)


if os.environ.get("PROBE_HEAVY"):
    with st.sidebar:
        st.text_input("Model", "tiny")
        st.selectbox("Device", ["auto", "cpu"])
        st.number_input("Seed", value=0)
    with st.expander("Prompt and policy", expanded=False):
        st.text_area("Prompt", "Tom has 12 apples")
        st.slider("gen", 16, 512, 128)
        columns = st.columns(3)
        for i in range(12):
            columns[i % 3].number_input(f"knob {{i}}", value=0.5)
panel()
'''

JS = '''
function loadPlotly(src) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.__probePlotly) window.__probePlotly = new Promise((resolve) => {
    const script = document.createElement("script");
    script.src = src; script.onload = () => resolve(window.Plotly); document.head.appendChild(script);
  });
  return window.__probePlotly;
}
export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let state = parentElement.__probe;
  if (!state) {
    state = { n: -1 };
    parentElement.innerHTML = '<button id="probe-step">Step</button> <span id="probe-time"></span>' +
      '<div style="display:flex"><div id="probe-heat" style="width:50%;height:450px"></div>' +
      '<div id="probe-summ" style="width:50%;height:450px"></div></div><div id="probe-strip"></div>';
    parentElement.querySelector("#probe-step").onclick = () => {
      window.__clicked = performance.now(); setTriggerValue("step", true); };
    parentElement.__probe = state;
  }
  if (data.n === state.n || !data.heat) return;
  state.n = data.n;
  parentElement.querySelector("#probe-time").textContent = data.time;
  parentElement.querySelector("#probe-strip").innerHTML = data.strip;
  loadPlotly(data.src).then((Plotly) => {
    const heat = JSON.parse(data.heat), summ = JSON.parse(data.summ);
    Promise.all([Plotly.react(parentElement.querySelector("#probe-heat"), heat.data, heat.layout),
                 Plotly.react(parentElement.querySelector("#probe-summ"), summ.data, summ.layout)])
      .then(() => { window.__drawn = performance.now(); window.__drawnN = data.n; });
  });
}
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heavy", action="store_true",
                        help="a sidebar and a folded settings form outside the fragment")
    parser.add_argument("--widgets", action="store_true", help="the panel's Streamlit widgets inside the fragment")
    parser.add_argument("--steps", type=int, default=9, help="Steps to time (the first is left out)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp())
    (folder / "panel.js").write_text(JS)
    (folder / "probe_app.py").write_text(APP.format(root=str(ROOT), js=str(folder / "panel.js")))
    env = {**os.environ, **({"PROBE_HEAVY": "1"} if args.heavy else {}),
           **({"PROBE_WIDGETS": "1"} if args.widgets else {})}
    with serve_app(env, "one-component-probe.log", script=str(folder / "probe_app.py")) as url, \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(url)
        page.wait_for_selector("#probe-step", timeout=120_000)
        page.wait_for_timeout(1500)
        drawn, beyond, before = [], [], 0.0
        for _ in range(args.steps):
            seen = page.evaluate("window.__drawnN || 0")
            page.click("#probe-step")
            page.wait_for_function(f"(window.__drawnN || 0) > {seen}", timeout=60_000)
            latency = page.evaluate("window.__drawn - window.__clicked") / 1000
            total = float(page.inner_text("#probe-time"))
            drawn.append(latency)
            beyond.append(latency - (total - before))
            before = total
            page.wait_for_timeout(500)
        browser.close()
    print(f"uptime: {os.popen('uptime').read().strip()}; heavy={args.heavy} widgets={args.widgets}")
    for name, values in (("click to both charts drawn", drawn[1:]), ("beyond its forward pass", beyond[1:])):
        print(f"{name}: median {statistics.median(values):.3f} s [{', '.join(f'{v:.3f}' for v in values)}]")


if __name__ == "__main__":
    main()
