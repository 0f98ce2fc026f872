"""The app in a real browser: decode, step, scrub, compare, shareable URLs, download, every page.

Runs `streamlit run app.py` on a random tiny checkpoint and drives it with headless Debian
Chromium. Screenshots of every page land in test-artifacts/e2e/ for a human to look at.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from dllm_viz.trace import load_trace

pytestmark = pytest.mark.slow
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "e2e"

IDLE = "[data-testid='stApp'][data-test-connection-state='CONNECTED'][data-test-script-state='notRunning']"
FAST = "gen=32&block_length=8"


def settle(page: Any, pause_ms: int = 300) -> None:
    """Wait until the script run started by the last interaction has finished and rendered."""
    page.wait_for_timeout(pause_ms)
    page.locator(IDLE).wait_for(state="attached")
    page.wait_for_function("() => !document.querySelector('[data-testid=stSkeleton]')")


def open_page(page: Any, url: str, ready_key: str) -> None:
    """Load `url` and wait for the widget keyed `ready_key` to render."""
    page.goto(url)
    page.locator(f".st-key-{ready_key}").first.wait_for()
    settle(page)


def press(page: Any, key: str) -> None:
    """Click the button with widget key `key` and wait for the rerun to finish."""
    page.locator(f".st-key-{key} button:visible").first.click()
    settle(page)


def metric(page: Any, label: str) -> Any:
    """The value element of the first metric labelled exactly `label`: a number of the trace panel
    (Decode, Traces: app_ui/trace_panel.py), else an st.metric."""
    card = page.locator(f".dv-metric[data-label='{label}'] .dv-metric-value")
    labelled = page.get_by_test_id("stMetricLabel").get_by_text(label, exact=True)
    return card.or_(page.get_by_test_id("stMetric").filter(has=labelled).get_by_test_id("stMetricValue")).first


PANEL = ".st-key-panel"  # Decode's trace panel; Traces' is `.st-key-lib_panel`


def step(page: Any) -> None:
    """The trace panel's Step button, then wait for the rerun to finish."""
    page.locator(f"{PANEL} .dv-step").click()
    settle(page)


def shown_step(page: Any) -> str:
    """The step the trace panel's scrubber shows."""
    return str(page.locator(f"{PANEL} .dv-panel").get_attribute("data-step"))


def wait_step(page: Any, value: str, timeout_ms: int = 30_000) -> None:
    """Wait until the panel's scrubber shows step `value` (a rerun may land after `settle`)."""
    deadline = time.monotonic() + timeout_ms / 1000
    while shown_step(page) != value:
        assert time.monotonic() < deadline, f"the scrubber is at {shown_step(page)!r}, not {value!r}"
        page.wait_for_timeout(200)


def slider_value(page: Any, key: str) -> str:
    return str(page.locator(f".st-key-{key} input[type='range']").first.input_value())


def snap(page: Any, name: str) -> Path:
    """A screenshot of the whole page (the viewport grows to the app's scroll height)."""
    height = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": max(int(height), size["height"])})
    page.mouse.move(0, 0)  # no tooltip in the picture
    settle(page, 500)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    page.set_viewport_size(size)
    return path


def test_decode_run_step_keyboard_and_scrub(page: Any, app_url: str) -> None:
    from playwright.sync_api import expect

    open_page(page, f"{app_url}/?{FAST}", "run")
    press(page, "run")
    expect(metric(page, "NFE")).to_have_text("32")
    expect(page.locator(f"{PANEL} .dv-chart-heatmap .js-plotly-plot")).to_have_count(1)
    snap(page, "decode")
    step(page)  # the finished decode is replaced by a fresh one, one forward pass in
    expect(metric(page, "NFE")).to_have_text("1")
    # The keys right after a click on the panel's Step button: the click left no focus on it, so
    # a Space below plays instead of pressing the button again
    page.keyboard.press("ArrowRight")  # the Step button's shortcut
    settle(page)
    expect(metric(page, "NFE")).to_have_text("2")
    wait_step(page, "1")
    strip = page.locator(f"{PANEL} .dllm-token-strip").first
    strip_at_1 = strip.inner_html()
    page.keyboard.press("ArrowLeft")  # scrub one step back
    settle(page)
    wait_step(page, "0")
    settle(page)
    assert strip.inner_html() != strip_at_1
    expect(metric(page, "NFE")).to_have_text("2")  # scrubbing runs no forward pass
    expect(page.locator(f"{PANEL} .dv-step")).not_to_be_focused()
    page.keyboard.press("Space")  # Play: the fragment's timer runs one forward pass per tick
    # at least 5 (a fast machine's ticks can step past any one value between two polls)
    expect(metric(page, "NFE")).to_have_text(re.compile(r"^([5-9]|[1-9][0-9]+)$"), timeout=20_000)
    page.keyboard.press("Space")  # Pause
    # On a busy machine the pause's full rerun can queue behind a few timer ticks: wait for it.
    expect(page.locator(".st-key-play button:visible").first).to_contain_text("Play", timeout=30_000)
    settle(page, 1500)
    paused_at = metric(page, "NFE").inner_text()
    page.wait_for_timeout(1500)
    assert metric(page, "NFE").inner_text() == paused_at and int(paused_at) >= 5


def test_stop_keeps_the_partial_trace_and_run_continues_it(page: Any, app_url: str) -> None:
    from playwright.sync_api import expect

    # a short prompt, so that 256 positions fit the test model's context and the run lasts long enough to stop
    open_page(page, f"{app_url}/?sample=arith-1&gen=256&block_length=32", "run")
    page.locator(".st-key-run button:visible").first.click()
    page.locator(".st-key-stop button:visible").first.click()  # as soon as the run shows its Stop button
    settle(page, 1000)
    expect(page.locator(f"{PANEL} .dv-notice").filter(has_text="Partial trace")).to_have_count(1)
    stopped_at = int(metric(page, "NFE").inner_text())
    assert 0 < stopped_at < 256
    step(page)  # same settings: the stopped decode continues from where it was
    expect(metric(page, "NFE")).to_have_text(str(stopped_at + 1))


def test_a_shareable_url_sets_the_widgets(page: Any, app_url: str) -> None:
    from playwright.sync_api import expect

    open_page(page, f"{app_url}/?rule=cora&delta_p=0.5&m=1&ce=true&{FAST}", "run")
    assert page.locator(".st-key-delta_p input").input_value() == "0.5"
    assert page.locator(".st-key-m input").input_value() == "1"
    expect(page.locator(".st-key-rule [role='radio'][aria-checked='true']")).to_have_text("cora")
    expect(page.locator(".st-key-ce input[type='checkbox']")).to_be_checked()
    press(page, "run")
    expect(metric(page, "NFE")).not_to_have_text("")
    expect(page.locator(f"{PANEL} .dv-views")).to_contain_text("persistence runs")
    expect(page.locator(f"{PANEL} .dv-views")).to_contain_text("Kalman bands")
    snap(page, "decode-cora-ce")


def test_compare_two_policies_against_dense(page: Any, app_url: str) -> None:
    from playwright.sync_api import expect

    query = "cmp_gen=32&c1_block_length=8&c1_threshold=0.01&c2_block_length=8&c2_rule=fixed_steps&c2_steps=16"
    open_page(page, f"{app_url}/compare?{query}", "cmp_run")
    press(page, "cmp_run")
    values = page.get_by_test_id("stMetric").filter(
        has=page.get_by_test_id("stMetricLabel").get_by_text("NFE", exact=True)).get_by_test_id("stMetricValue")
    expect(values).to_have_count(2)
    assert values.nth(1).inner_text() == "16"
    page.locator(".st-key-cmp_series_chart").scroll_into_view_if_needed()  # a live chart draws once in sight
    expect(page.locator(".st-key-cmp_series_chart .js-plotly-plot")).to_have_count(1)
    snap(page, "compare")


def test_save_a_trace_then_open_its_link_and_download_it(page: Any, app_url: str,
                                                         app_dirs: dict[str, Path]) -> None:
    from playwright.sync_api import expect

    open_page(page, f"{app_url}/?{FAST}", "run")
    press(page, "run")
    expect(metric(page, "NFE")).to_have_text("32")
    page.get_by_role("link", name="Traces").click()
    page.locator(".st-key-traces_name input").wait_for()
    settle(page)
    page.locator(".st-key-traces_name input").fill("e2e")
    page.locator(".st-key-traces_name input").press("Enter")
    settle(page)
    press(page, "traces_save")
    assert (app_dirs["traces"] / "e2e.npz").is_file()
    open_page(page, f"{app_url}/traces?file=e2e.npz", "dl_npz")  # a new session: the link alone reopens it
    expect(metric(page, "NFE")).to_have_text("32")
    with page.expect_download() as info:
        page.locator(".st-key-dl_npz button:visible").first.click()
    target = ARTIFACTS / "downloaded-trace.npz"
    info.value.save_as(target)
    assert load_trace(target).nfe == 32
    snap(page, "traces")


@pytest.mark.parametrize(("path", "ready", "action"), [
    ("tune?tune_gen=32&tune_block=8", "tune_record", "tune_record"),
    ("train", "train_run", None),
    ("learn?chapter=4+Blocks", "learn_block", None),
])
def test_every_other_page_renders(page: Any, app_url: str, path: str, ready: str, action: str | None) -> None:
    open_page(page, f"{app_url}/{path}", ready)
    if action is not None:
        press(page, action)
    assert page.get_by_test_id("stException").count() == 0
    snap(page, path.split("?")[0])


def test_a_deep_link_is_the_first_visit_to_a_fresh_server(page: Any, app_env: dict[str, str]) -> None:
    """Streamlit's legacy pages/ mode ran /tune alone (no sidebar, no top navigation, every helper
    module of pages/ listed as a page) until some session had loaded "/"; it must open in the frame."""
    from conftest import serve_app

    with serve_app(app_env, "streamlit-deeplink.log") as url:
        open_page(page, f"{url}/tune?tune_gen=64&tune_rule=cora", "tune_record")
        assert page.get_by_test_id("stTopNavLink").count() == 6
        assert page.get_by_text("Model (tiny, or a checkpoint folder)").count() == 1
        assert page.get_by_test_id("stSidebarNavItems").count() == 0  # no legacy page list
        assert slider_value(page, "tune_gen") == "2"  # the select slider reports its index: 64
        assert page.get_by_test_id("stException").count() == 0
        snap(page, "tune-deep-link")
