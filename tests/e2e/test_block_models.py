"""A block-diffusion checkpoint in a real browser: the app started on it decodes with its defaults.

The server runs on a small random block-causal checkpoint (a Llama config with block_size 4) in
its models folder, as an operator would start it; the Decode page must open on block refinement
over aligned blocks of 4, say so in the sidebar, decode, and the Learn chapter on block
diffusion must show that trace's edits. Screenshots land in test-artifacts/e2e/.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from checkpoints import build_block_llama
from test_app_browser import metric, open_page, press, settle, snap

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def block_url(tmp_path_factory: pytest.TempPathFactory, app_env: dict[str, str]) -> Iterator[str]:
    from conftest import serve_app

    root = tmp_path_factory.mktemp("block_models")
    build_block_llama(root / "block", block_length=4, head_scale=60.0)
    env = {**app_env, "DLLM_VIZ_MODEL": str(root / "block"), "DLLM_VIZ_MODELS_DIR": str(root),
           "OMP_NUM_THREADS": "1"}
    with serve_app(env, "streamlit-block.log") as url:
        yield url


def active(page: Any, key: str) -> str:
    """The selected option of the segmented control keyed `key`."""
    return str(page.locator(f".st-key-{key} [role='radio'][aria-checked='true']").first.inner_text())


def test_a_block_model_opens_on_its_defaults_and_decodes(page: Any, block_url: str) -> None:
    from playwright.sync_api import expect

    open_page(page, f"{block_url}/?gen=16", "run")
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar.get_by_text("block-causal attention, block length 4", exact=False)).to_be_visible()
    assert active(page, "rule") == "block_refinement" and active(page, "block") == "aligned"
    assert page.locator(".st-key-block [role='radio']", has_text="adablock").count() == 0
    assert page.locator(".st-key-cache [role='radio']", has_text="exact").count() == 1
    assert page.locator(".st-key-cache [role='radio']", has_text="dual").count() == 0
    assert page.locator(".st-key-block_length input").first.input_value() == "4"
    for key in ("block_steps", "commit_threshold", "editing_threshold", "max_post_steps", "top_k", "top_p"):
        assert page.locator(f".st-key-{key}").count() == 1, key
    press(page, "run")
    expect(metric(page, "NFE")).not_to_have_text("0")
    assert page.get_by_test_id("stException").count() == 0 and page.get_by_test_id("stAlert").filter(
        has_text="Cannot decode").count() == 0
    snap(page, "decode-block-model")


def test_the_learn_chapter_shows_the_edits_of_the_block_model(page: Any, block_url: str) -> None:
    from playwright.sync_api import expect

    open_page(page, f"{block_url}/learn?chapter=6+Block+diffusion", "learn_editing")
    expect(metric(page, "Token edits")).not_to_have_text("0")
    expect(page.get_by_text("Edits, seen:", exact=False)).to_be_visible()
    assert page.get_by_test_id("stException").count() == 0
    snap(page, "learn-block-diffusion")
    assert os.path.getsize(Path(__file__).resolve().parents[2] / "test-artifacts" / "e2e"
                           / "learn-block-diffusion.png") > 0


# Boxes, in page pixels, of a plotly chart's svg, its title lines, y-axis titles and annotations.
TEXT_BOXES = """(chart) => {
  const boxes = (selector) => [...chart.querySelectorAll(selector)].map((e) => {
    const b = e.getBoundingClientRect(); return {left: b.left, right: b.right, top: b.top, bottom: b.bottom,
                                                 text: e.textContent}; });
  return {svg: boxes('.main-svg')[0], title: boxes('.gtitle tspan.line, .gtitle'),
          ytitles: boxes('.ytitle, .y2title, .y3title, .y4title, .y5title'), notes: boxes('.annotation-text')};
}"""


def test_a_block_refinement_decodes_charts_keep_their_text_apart_at_1024_px(browser: Any, block_url: str) -> None:
    """With edits, the per-step summary's first axis title ("commits, edits") ran into the "masked"
    panel's, its edit counts were cut off the title, and the refinement view's note ran past the
    chart's right edge, in the half-width column of a 1024-px window."""
    context = browser.new_context(viewport={"width": 1024, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        open_page(page, f"{block_url}/?gen=32&sample=arith-1&view=refinement", "run")
        press(page, "run")
        summary = page.locator(".st-key-panel .dv-chart-summary .js-plotly-plot").first
        summary.wait_for()
        page.locator(".st-key-panel .dv-chart-view .dllm-live-chart").first.scroll_into_view_if_needed()
        view = page.locator(".st-key-panel .dv-chart-view .js-plotly-plot").first  # drawn once in view
        view.wait_for()
        settle(page, 800)
        parts = summary.evaluate(TEXT_BOXES)
        assert "edits" in " ".join(t["text"] for t in parts["title"]), parts  # an edited decode
        titles = sorted(parts["ytitles"], key=lambda b: b["top"])
        assert len(titles) == 5, titles
        assert all(a["bottom"] <= b["top"] + 1 for a, b in itertools.pairwise(titles)), titles
        assert all(t["right"] <= parts["svg"]["right"] + 1 for t in parts["title"]), parts  # the counts are whole
        parts = view.evaluate(TEXT_BOXES)
        assert parts["notes"] and all(n["right"] <= parts["svg"]["right"] + 1 for n in parts["notes"]), parts
    finally:
        context.close()
