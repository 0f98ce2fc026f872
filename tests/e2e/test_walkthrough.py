"""Browser regressions for what a walk through the app found that only a browser shows.

Runs `streamlit run app.py` on a random tiny checkpoint (conftest.py) and drives it with headless
Debian Chromium, like test_app_browser.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_app_browser import open_page, settle, slider_value

pytestmark = pytest.mark.slow


def test_browser_back_keeps_the_settings_a_page_was_left_with(page: Any, app_url: str) -> None:
    """Back onto Decode after a visit to another page reached a history entry with a bare address,
    and every setting (here the threshold a link set) silently went back to its default."""
    open_page(page, f"{app_url}/?threshold=0.42&gen=32", "run")
    assert slider_value(page, "threshold") == "0.42"
    page.get_by_test_id("stTopNavLink").filter(has_text="Compare").click()
    page.locator(".st-key-cmp_run").first.wait_for()
    settle(page)
    page.go_back()
    page.locator(".st-key-threshold").first.wait_for()
    settle(page, 1000)
    assert slider_value(page, "threshold") == "0.42"
    assert "threshold=0.42" in page.url and "gen=32" in page.url  # a link copied now still has them
    assert page.get_by_test_id("stException").count() == 0


def test_the_trace_panel_fits_a_phone(browser: Any, app_url: str) -> None:
    """At 390 px the heatmap and the summary shared one row (tick labels ran together, the legend was
    cut) and the number cards ran off the right edge."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_page(page, f"{app_url}/?gen=32&block_length=8", "run")
        page.locator(".st-key-run button:visible").first.click()
        settle(page)
        page.locator(".st-key-panel .dv-metric").first.wait_for()
        width = page.evaluate("() => window.innerWidth")
        rights = page.locator(".st-key-panel .dv-metric").evaluate_all(
            "cards => cards.map(c => c.getBoundingClientRect().right)")
        assert len(rights) >= 4 and max(rights) <= width
        heatmap, summary = (page.locator(".st-key-panel .dv-row").first.locator(":scope > .dv-col")
                            .evaluate_all("cols => cols.map(c => c.getBoundingClientRect().width)"))[:2]
        assert min(heatmap, summary) > 0.7 * width  # stacked, each about the screen's width
    finally:
        context.close()
