"""The first screen after Run on a 1280x720 laptop shows the heatmap (settings fold away).

The screenshot lands in test-artifacts/e2e/laptop-after-run.png for a human to look at.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_app_browser import metric, open_page, press

pytestmark = pytest.mark.slow
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "e2e"
LAPTOP = {"width": 1280, "height": 720}


def test_the_heatmap_is_on_the_first_screen_after_run_on_a_laptop(browser: Any, app_url: str) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_page(page, f"{app_url}/?gen=64&block_length=16", "run")
        assert page.locator(".st-key-rule").first.is_visible()  # before a decode the form is open
        press(page, "run")
        expect(metric(page, "NFE")).not_to_have_text("")
        heatmap = page.locator(".st-key-panel .dv-chart-heatmap .js-plotly-plot").first
        heatmap.wait_for()
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "laptop-after-run.png"))
        box = heatmap.bounding_box()
        assert box is not None and box["y"] + box["height"] / 2 < LAPTOP["height"], box  # half of it in view
        assert not page.locator(".st-key-rule").first.is_visible()  # the settings folded away
    finally:
        context.close()
